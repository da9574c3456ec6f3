#!/usr/bin/env node
// Kubernetes API stand-in for eai-sandbox's tests.  NOT a Kubernetes API
// server: it serves only the routes plugins/k8s calls, validates what it
// receives against the official schemas (see validate.js) and simulates pod
// phases (see sim.js).  README.md lists what it does not check.
//
//   node server.js [--host 127.0.0.1] [--port 0] [--token-file F]
//                  [--runtime-classes gvisor,kata] [--start-delay-ms 30]
//                  [--tls-cert F --tls-key F] [--url-file F]
// Prints "STANDIN_URL=<url>" on stdout once listening.
"use strict";

const http = require("node:http");
const https = require("node:https");
const fs = require("node:fs");
const crypto = require("node:crypto");
const V = require("./validate.js");
const { PodRun, nowIso } = require("./sim.js");

const { ApiError } = V;

// ---------------------------------------------------------------- routes
// kind -> {group path prefix, plural, namespaced}
const RESOURCES = {
  namespaces: { kind: "Namespace", prefix: "/api/v1", namespaced: false, list: "NamespaceList" },
  pods: { kind: "Pod", prefix: "/api/v1", namespaced: true, list: "PodList" },
  secrets: { kind: "Secret", prefix: "/api/v1", namespaced: true, list: "SecretList" },
  configmaps: { kind: "ConfigMap", prefix: "/api/v1", namespaced: true, list: "ConfigMapList" },
  networkpolicies: { kind: "NetworkPolicy", prefix: "/apis/networking.k8s.io/v1", namespaced: true, list: "NetworkPolicyList", apiVersion: "networking.k8s.io/v1" },
  rolebindings: { kind: "RoleBinding", prefix: "/apis/rbac.authorization.k8s.io/v1", namespaced: true, list: "RoleBindingList", apiVersion: "rbac.authorization.k8s.io/v1" },
};

function parseRoute(pathname) {
  // returns {res, ns, name, sub} or null
  let m;
  if ((m = /^\/api\/v1\/namespaces(?:\/([^/]+))?$/.exec(pathname))) return { res: "namespaces", name: m[1] };
  if ((m = /^\/api\/v1\/namespaces\/([^/]+)\/(pods|secrets|configmaps)(?:\/([^/]+)(?:\/(log))?)?$/.exec(pathname)))
    return { res: m[2], ns: m[1], name: m[3], sub: m[4] };
  if ((m = /^\/apis\/networking\.k8s\.io\/v1\/namespaces\/([^/]+)\/networkpolicies(?:\/([^/]+))?$/.exec(pathname)))
    return { res: "networkpolicies", ns: m[1], name: m[2] };
  if ((m = /^\/apis\/rbac\.authorization\.k8s\.io\/v1\/namespaces\/([^/]+)\/rolebindings(?:\/([^/]+))?$/.exec(pathname)))
    return { res: "rolebindings", ns: m[1], name: m[2] };
  if ((m = /^\/api\/v1\/(pods|secrets|configmaps)$/.exec(pathname))) return { res: m[1], all: true };
  if ((m = /^\/apis\/networking\.k8s\.io\/v1\/networkpolicies$/.exec(pathname))) return { res: "networkpolicies", all: true };
  if ((m = /^\/apis\/node\.k8s\.io\/v1\/runtimeclasses(?:\/([^/]+))?$/.exec(pathname))) return { res: "runtimeclasses", name: m[1] };
  return null;
}

// ---------------------------------------------------------------- selectors
function splitTerms(s) {
  const out = []; let depth = 0, cur = "";
  for (const ch of s) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (ch === "," && depth === 0) { out.push(cur); cur = ""; } else cur += ch;
  }
  if (cur) out.push(cur);
  return out.map((t) => t.trim()).filter(Boolean);
}

function labelSelector(sel) {
  if (!sel) return () => true;
  const preds = splitTerms(sel).map((t) => {
    let m;
    if ((m = /^(\S+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(t))) {
      const vals = m[3].split(",").map((x) => x.trim());
      return m[2] === "in" ? (l) => m[1] in l && vals.includes(l[m[1]]) : (l) => !(m[1] in l) || !vals.includes(l[m[1]]);
    }
    if ((m = /^([^!=\s]+)\s*!=\s*(\S*)$/.exec(t))) return (l) => l[m[1]] !== m[2];
    if ((m = /^([^!=\s]+)\s*==?\s*(\S*)$/.exec(t))) return (l) => l[m[1]] === m[2];
    if ((m = /^!(\S+)$/.exec(t))) return (l) => !(m[1] in l);
    if ((m = /^(\S+)$/.exec(t))) return (l) => m[1] in l;
    throw new ApiError(400, "BadRequest", `unable to parse requirement: ${t}`);
  });
  return (labels) => preds.every((p) => p(labels || {}));
}

function fieldSelector(sel) {
  if (!sel) return () => true;
  const get = (o, f) => f.split(".").reduce((a, k) => (a ? a[k] : undefined), o);
  const preds = splitTerms(sel).map((t) => {
    const m = /^([a-zA-Z.]+)\s*(!=|==|=)\s*(.*)$/.exec(t);
    if (!m || !["metadata.name", "metadata.namespace", "status.phase", "spec.nodeName"].includes(m[1]))
      throw new ApiError(400, "BadRequest", `field label not supported: ${t.split(/[=!]/)[0]}`);
    return m[2] === "!=" ? (o) => (get(o, m[1]) || "") !== m[3] : (o) => (get(o, m[1]) || "") === m[3];
  });
  return (o) => preds.every((p) => p(o));
}

// ---------------------------------------------------------------- the server
class StandIn {
  constructor(opts) {
    this.opts = Object.assign({ startDelayMs: 30, runtimeClasses: ["gvisor", "kata"], tokenFile: null }, opts || {});
    this.reset();
  }

  reset() {
    for (const r of (this.runs || new Map()).values()) r.stop();
    this.objects = new Map();     // "Kind/ns/name" -> object
    this.runs = new Map();        // pod uid -> PodRun
    this.requests = [];
    this.deleted = [];            // {kind, namespace, name, by, time}
    this.faults = [];
    this.rv = 1000;
    this.runtimeClasses = new Map(this.opts.runtimeClasses.map((h) => [h, {
      apiVersion: "node.k8s.io/v1", kind: "RuntimeClass", handler: h === "gvisor" ? "runsc" : h,
      metadata: { name: h, uid: crypto.randomUUID(), resourceVersion: "1", creationTimestamp: nowIso() } }]));
  }

  key(kind, ns, name) { return `${kind}/${ns || ""}/${name}`; }
  get(kind, ns, name) { return this.objects.get(this.key(kind, ns, name)) || null; }
  touch(obj) { obj.metadata.resourceVersion = String(++this.rv); }

  remove(obj, by) {
    const k = this.key(obj.kind, obj.metadata.namespace, obj.metadata.name);
    if (!this.objects.has(k)) return;
    this.objects.delete(k);
    this.deleted.push({ kind: obj.kind, namespace: obj.metadata.namespace || "", name: obj.metadata.name, by, time: Date.now() });
    if (obj.kind === "Pod") {
      const run = this.runs.get(obj.metadata.uid);
      if (run) { run.stop(); for (const l of run.listeners) l.end(); this.runs.delete(obj.metadata.uid); }
    }
    this.collectGarbage();
  }

  // The garbage collector: dependents whose owners (by uid) are gone.
  collectGarbage() {
    const uids = new Set([...this.objects.values()].map((o) => o.metadata.uid));
    for (const o of [...this.objects.values()]) {
      const owners = o.metadata.ownerReferences || [];
      if (owners.length && owners.every((r) => !uids.has(r.uid)) && !o._orphaned) this.remove(o, "gc");
    }
  }

  // ------------------------------------------------------------ HTTP
  async handle(req, res) {
    const url = new URL(req.url, "http://standin");
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const raw = Buffer.concat(chunks);
    const rec = { time: Date.now(), method: req.method, path: url.pathname, query: Object.fromEntries(url.searchParams),
      headers: { authorization: req.headers.authorization || null, "content-type": req.headers["content-type"] || null,
        accept: req.headers.accept || null, "user-agent": req.headers["user-agent"] || null },
      body: null, status: 0 };
    if (raw.length) { try { rec.body = JSON.parse(raw.toString()); } catch { rec.body = raw.toString(); } }
    const send = (code, obj, headers) => {
      rec.status = code;
      const text = typeof obj === "string" ? obj : JSON.stringify(obj);
      res.writeHead(code, Object.assign({ "Content-Type": typeof obj === "string" ? "text/plain" : "application/json",
        "Content-Length": Buffer.byteLength(text) }, headers || {}));
      res.end(text);
    };
    if (url.pathname.startsWith("/_standin/")) return this.control(req, url, raw, send);
    this.requests.push(rec);
    try {
      const fault = this.matchFault(req.method, url.pathname);
      if (fault) {
        if (fault.delayMs) await new Promise((r) => setTimeout(r, fault.delayMs));
        if (fault.hang) { rec.status = -1; return; } // never answered: the client must time out
        if (fault.raw !== undefined) return send(fault.status, fault.raw);
        throw new ApiError(fault.status, fault.reason || "InternalError", fault.message || "injected fault");
      }
      this.authenticate(req);
      this.authorize(req, url, raw);
      const r = await this.route(req, url, raw, rec, res);
      if (r === undefined) return; // streamed
      send(r.code, r.body, r.headers);
    } catch (e) {
      if (!(e instanceof ApiError)) {
        console.error(e);
        e = new ApiError(500, "InternalError", "stand-in internal error: " + e.message);
      }
      const st = { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: e.message, reason: e.reason, code: e.code };
      if (e.details) st.details = e.details;
      send(e.code, st);
    }
  }

  matchFault(method, path) {
    for (const f of this.faults) {
      if (f.times === 0) continue;
      if (f.method && f.method !== method) continue;
      if (f.path && !new RegExp(f.path).test(path)) continue;
      if (f.times > 0) f.times--;
      return f;
    }
    return null;
  }

  authenticate(req) {
    if (!this.opts.tokenFile) return;
    let want;
    try { want = fs.readFileSync(this.opts.tokenFile, "utf8").trim(); } catch { want = null; }
    const got = req.headers.authorization || "";
    if (!want || got !== "Bearer " + want) throw new ApiError(401, "Unauthorized", "Unauthorized");
  }

  // --namespaced-rbac NS/SA:ROLE: the client is service account NS/SA, bound
  // cluster-wide only to what the chart's "-sandbox" ClusterRole grants
  // (namespaces create/list, runtimeclasses get, rolebindings create with
  // bind on ROLE only), plus ROLE in each namespace holding a RoleBinding of
  // ROLE to it.  The chart's ValidatingAdmissionPolicy is applied too: its
  // namespaces must carry our label, its RoleBindings land only in them.
  authorize(req, url, raw) {
    const spec = this.opts.namespacedRbac;
    if (!spec) return;
    // the test harness acts as a cluster admin; only the plugin is confined
    if (!(req.headers["user-agent"] || "").startsWith("eai-sandbox-k8s/")) return;
    const [sa, role] = spec.split(":");
    const [saNs, saName] = sa.split("/");
    const user = `system:serviceaccount:${saNs}:${saName}`;
    const r = parseRoute(url.pathname);
    if (!r || r.res === "runtimeclasses") return;
    const verb = req.method === "POST" ? "create" : req.method === "DELETE" ? "delete" : r.name ? "get" : "list";
    const R = RESOURCES[r.res];
    const group = R.apiVersion ? R.apiVersion.split("/")[0] : "";
    const res = r.res + (r.sub ? "/" + r.sub : "");
    const deny = (where) => {
      throw new ApiError(403, "Forbidden", `${res}${group ? "." + group : ""} is forbidden: User "${user}" cannot ${verb} resource "${res}" in API group "${group}" ${where}`,
        { kind: r.res, group: group || undefined, name: r.name });
    };
    if (r.res === "namespaces") {
      if (verb === "list" || verb === "get") return;
      if (verb !== "create") deny("at the cluster scope");
      let body = {};
      try { body = JSON.parse(raw.toString()); } catch { /* decoding answers it */ }
      const labels = (body.metadata || {}).labels || {};
      if (labels["app.kubernetes.io/managed-by"] !== "eai-sandbox")
        throw new ApiError(403, "Forbidden", `namespaces is forbidden: ValidatingAdmissionPolicy 'eai-sandbox' denied request: eaid creates only namespaces labelled app.kubernetes.io/managed-by=eai-sandbox`);
      return;
    }
    if (r.all) deny("at the cluster scope");
    const ns = this.get("Namespace", "", r.ns);
    const ours = ns && (ns.metadata.labels || {})["app.kubernetes.io/managed-by"] === "eai-sandbox";
    if (r.res === "rolebindings") {
      if (verb !== "create") deny(`in the namespace "${r.ns}"`);
      if (!ours)
        throw new ApiError(403, "Forbidden", `rolebindings.rbac.authorization.k8s.io is forbidden: ValidatingAdmissionPolicy 'eai-sandbox' denied request: namespace "${r.ns}" is not managed by eai-sandbox`);
      let body = {};
      try { body = JSON.parse(raw.toString()); } catch { /* decoding answers it */ }
      const ref = body.roleRef || {};
      if (ref.kind !== "ClusterRole" || ref.name !== role)
        throw new ApiError(403, "Forbidden", `rolebindings.rbac.authorization.k8s.io "${(body.metadata || {}).name}" is forbidden: user "${user}" is attempting to grant RBAC permissions not currently held (no bind on ${ref.kind} ${ref.name})`);
      return;
    }
    const bound = [...this.objects.values()].some((o) => o.kind === "RoleBinding" && o.metadata.namespace === r.ns
      && o.roleRef && o.roleRef.kind === "ClusterRole" && o.roleRef.name === role
      && (o.subjects || []).some((s) => s.kind === "ServiceAccount" && s.name === saName && s.namespace === saNs));
    if (!bound || !ours) deny(`in the namespace "${r.ns}"`);
  }

  control(req, url, raw, send) {
    const p = url.pathname;
    if (p === "/_standin/requests") return send(200, this.requests);
    if (p === "/_standin/objects") return send(200, [...this.objects.values()]);
    if (p === "/_standin/deleted") return send(200, this.deleted);
    if (p === "/_standin/reset" && req.method === "POST") { this.reset(); return send(200, { ok: true }); }
    if (p === "/_standin/faults" && req.method === "POST") {
      const f = JSON.parse(raw.toString() || "{}");
      if (f.times === undefined) f.times = 1;
      this.faults.push(f);
      return send(200, { ok: true });
    }
    if (p === "/_standin/faults" && req.method === "DELETE") { this.faults = []; return send(200, { ok: true }); }
    let m;
    if ((m = /^\/_standin\/streams\/([^/]+)\/([^/]+)$/.exec(p))) {
      const pod = this.get("Pod", m[1], m[2]);
      const run = pod && this.runs.get(pod.metadata.uid);
      if (!run) return send(404, { error: "no such pod" });
      return send(200, { stdout: run.stdout, stderr: run.stderr, log: run.log });
    }
    return send(404, { error: "unknown control route" });
  }

  async route(req, url, raw, rec, res) {
    const r = parseRoute(url.pathname);
    const q = url.searchParams;
    if (url.pathname === "/version" && req.method === "GET")
      return { code: 200, body: { major: "1", minor: "29", gitVersion: "v1.29.0-eai-standin", platform: "linux/amd64" } };
    if (!r) throw new ApiError(404, "NotFound", "the server could not find the requested resource");
    if (q.get("watch") === "true" || q.get("watch") === "1")
      throw new ApiError(400, "BadRequest", "watch is not supported by the stand-in (see README)");
    if (r.res === "runtimeclasses") {
      if (req.method !== "GET") throw new ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
      if (!r.name) return { code: 200, body: { kind: "RuntimeClassList", apiVersion: "node.k8s.io/v1", metadata: { resourceVersion: String(this.rv) }, items: [...this.runtimeClasses.values()] } };
      const rc = this.runtimeClasses.get(r.name);
      if (!rc) throw new ApiError(404, "NotFound", `runtimeclasses.node.k8s.io "${r.name}" not found`);
      return { code: 200, body: rc };
    }
    const R = RESOURCES[r.res];
    if (r.sub === "log") {
      if (req.method !== "GET") throw new ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
      return this.podLog(r, q, res, rec);
    }
    switch (req.method) {
      case "GET": return r.name ? this.getOne(R, r) : this.list(R, r, q);
      case "POST":
        if (r.name || r.all) throw new ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
        return this.create(R, r, q, req, raw, rec);
      case "DELETE":
        if (r.all) throw new ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
        return r.name ? this.deleteOne(R, r, q, raw) : this.deleteCollection(R, r, q);
      default:
        throw new ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
    }
  }

  nsOrThrow(ns) {
    const n = this.get("Namespace", "", ns);
    if (!n) throw new ApiError(404, "NotFound", `namespaces "${ns}" not found`, { name: ns, kind: "namespaces" });
    return n;
  }

  notFound(R, name) {
    const plural = Object.keys(RESOURCES).find((k) => RESOURCES[k] === R);
    const group = R.apiVersion ? R.apiVersion.split("/")[0] : "";
    return new ApiError(404, "NotFound", `${plural}${group ? "." + group : ""} "${name}" not found`, { name, group: group || undefined, kind: plural });
  }

  getOne(R, r) {
    const o = this.get(R.kind, r.ns, r.name);
    if (!o) throw this.notFound(R, r.name);
    return { code: 200, body: o };
  }

  list(R, r, q) {
    const ls = labelSelector(q.get("labelSelector"));
    const fsel = fieldSelector(q.get("fieldSelector"));
    const items = [...this.objects.values()].filter((o) => o.kind === R.kind
      && (r.all || !R.namespaced || o.metadata.namespace === r.ns) && ls(o.metadata.labels) && fsel(o))
      .map((o) => { const { kind, apiVersion, ...rest } = o; return rest; });
    return { code: 200, body: { kind: R.list, apiVersion: R.apiVersion || "v1", metadata: { resourceVersion: String(this.rv) }, items } };
  }

  create(R, r, q, req, raw, rec) {
    const ct = (req.headers["content-type"] || "").split(";")[0].trim();
    if (ct !== "application/json")
      throw new ApiError(415, "UnsupportedMediaType", `the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf`);
    let body;
    try { body = JSON.parse(raw.toString()); } catch (e) {
      throw new ApiError(400, "BadRequest", "error decoding body: " + e.message);
    }
    if (!body || typeof body !== "object" || Array.isArray(body))
      throw new ApiError(400, "BadRequest", "Object 'Kind' is missing in the request body");
    const want = R.apiVersion || "v1";
    if (body.kind !== R.kind)
      throw new ApiError(400, "BadRequest", body.kind ? `the kind in the data (${body.kind}) does not match the expected kind (${R.kind})` : "Object 'Kind' is missing in the request body");
    if (body.apiVersion !== want)
      throw new ApiError(400, "BadRequest", `the API version in the data (${body.apiVersion}) does not match the expected API version (${want})`);
    const fv = q.get("fieldValidation") || "Warn";
    if (!["Strict", "Warn", "Ignore"].includes(fv))
      throw new ApiError(400, "BadRequest", `fieldValidation must be one of "Ignore", "Warn", or "Strict"`);
    const name = (body.metadata || {}).name;
    if (R.kind === "Secret" || R.kind === "ConfigMap") V.decodeBytes(R.kind, body);
    const { warnings } = V.schemaCheck(R.kind, body, fv, name);
    if (body.status !== undefined) delete body.status; // status is ignored on create
    const meta = body.metadata = body.metadata || {};
    if (R.namespaced) {
      if (meta.namespace && meta.namespace !== r.ns)
        throw new ApiError(400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request");
      meta.namespace = r.ns;
    }
    const causes = [];
    V.checkMeta(R.kind, meta, causes, !R.namespaced);
    if (R.kind === "Pod") V.checkPod(body, causes);
    if (R.kind === "Secret" || R.kind === "ConfigMap") V.checkSecretLike(R.kind, body, causes);
    if (R.kind === "NetworkPolicy") V.checkNetworkPolicy(body, causes);
    if (causes.length) throw V.invalid(R.kind, name, causes);
    if (!meta.name) meta.name = meta.generateName + crypto.randomBytes(3).toString("hex").slice(0, 5);
    if (R.namespaced) {
      const ns = this.nsOrThrow(r.ns);
      if (ns.status.phase === "Terminating")
        throw new ApiError(403, "Forbidden", `${Object.keys(RESOURCES).find((k) => RESOURCES[k] === R)} "${meta.name}" is forbidden: unable to create new content in namespace ${r.ns} because it is being terminated`);
      if (R.kind === "Pod") this.admitPod(body, ns);
    }
    if (this.get(R.kind, meta.namespace, meta.name)) {
      const plural = Object.keys(RESOURCES).find((k) => RESOURCES[k] === R);
      throw new ApiError(409, "AlreadyExists", `${plural} "${meta.name}" already exists`, { name: meta.name, kind: plural });
    }
    meta.uid = crypto.randomUUID();
    meta.resourceVersion = String(++this.rv);
    meta.creationTimestamp = nowIso();
    if (R.kind === "Namespace") {
      meta.labels = Object.assign({}, meta.labels, { "kubernetes.io/metadata.name": meta.name });
      body.spec = { finalizers: ["kubernetes"] };
      body.status = { phase: "Active" };
    }
    if (R.kind === "Secret" && !body.type) body.type = "Opaque";
    if (R.kind === "Secret" && body.stringData) {
      body.data = body.data || {};
      for (const [k, v] of Object.entries(body.stringData)) body.data[k] = Buffer.from(v).toString("base64");
      delete body.stringData;
    }
    if (R.kind === "Pod") this.defaultPod(body);
    this.objects.set(this.key(R.kind, meta.namespace, meta.name), body);
    if (R.kind === "Pod") {
      const run = new PodRun(this, body, { startDelayMs: this.opts.startDelayMs });
      this.runs.set(meta.uid, run);
      run.begin();
    }
    this.collectGarbage();
    const headers = warnings.length ? { Warning: warnings.map((w) => `299 - "${w.replace(/"/g, "'")}"`).join(", ") } : undefined;
    rec.warnings = warnings;
    return { code: 201, body, headers };
  }

  // Admission: RuntimeClass (rejects unknown classes) and Pod Security.
  admitPod(pod, ns) {
    const rcn = pod.spec.runtimeClassName;
    if (rcn && !this.runtimeClasses.has(rcn))
      throw new ApiError(403, "Forbidden", `pods "${pod.metadata.name}" is forbidden: pod rejected: RuntimeClass "${rcn}" not found`);
    const level = (ns.metadata.labels || {})["pod-security.kubernetes.io/enforce"];
    if (level === "restricted") {
      const v = V.podSecurityRestricted(pod);
      if (v.length)
        throw new ApiError(403, "Forbidden", `pods "${pod.metadata.name}" is forbidden: violates PodSecurity "restricted:latest": ${v.join(", ")}`);
    }
  }

  defaultPod(pod) {
    const s = pod.spec;
    if (!s.restartPolicy) s.restartPolicy = "Always";
    if (s.terminationGracePeriodSeconds === undefined) s.terminationGracePeriodSeconds = 30;
    if (!s.dnsPolicy) s.dnsPolicy = "ClusterFirst";
    if (!s.serviceAccountName) s.serviceAccountName = "default";
    if (!s.schedulerName) s.schedulerName = "default-scheduler";
    s.nodeName = "standin-node";
    for (const c of s.containers) {
      if (!c.terminationMessagePath) c.terminationMessagePath = "/dev/termination-log";
      if (!c.terminationMessagePolicy) c.terminationMessagePolicy = "File";
      if (!c.imagePullPolicy) c.imagePullPolicy = /:latest$|^[^:]+$/.test(c.image) ? "Always" : "IfNotPresent";
    }
  }

  deleteOptions(q, raw) {
    let opts = {};
    if (raw.length) {
      try { opts = JSON.parse(raw.toString()); } catch (e) { throw new ApiError(400, "BadRequest", "error decoding body: " + e.message); }
      try { V.MODELS.DeleteOptions.model.prototype.validate.call(opts); } catch (e) {
        throw new ApiError(400, "BadRequest", "invalid DeleteOptions: " + e.message);
      }
    }
    if (q.has("gracePeriodSeconds")) opts.gracePeriodSeconds = parseInt(q.get("gracePeriodSeconds"), 10);
    if (q.has("propagationPolicy")) opts.propagationPolicy = q.get("propagationPolicy");
    if (opts.propagationPolicy && !["Orphan", "Background", "Foreground"].includes(opts.propagationPolicy))
      throw new ApiError(400, "BadRequest", `unsupported propagationPolicy "${opts.propagationPolicy}"`);
    return opts;
  }

  deleteOne(R, r, q, raw) {
    const opts = this.deleteOptions(q, raw);
    const o = this.get(R.kind, r.ns, r.name);
    if (!o) throw this.notFound(R, r.name);
    this.deleteObject(o, opts);
    return { code: 200, body: o };
  }

  deleteCollection(R, r, q) {
    if (!R.namespaced) throw new ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
    const lst = this.list(R, r, q).body;
    for (const item of lst.items) {
      const o = this.get(R.kind, r.ns, item.metadata.name);
      if (o) this.deleteObject(o, {});
    }
    return { code: 200, body: lst };
  }

  deleteObject(o, opts) {
    if (opts.propagationPolicy === "Orphan") {
      for (const d of this.objects.values())
        if ((d.metadata.ownerReferences || []).some((x) => x.uid === o.metadata.uid)) d._orphaned = true;
    }
    if (o.kind === "Namespace") {
      if (o.status.phase === "Terminating") return;
      o.status.phase = "Terminating";
      o.metadata.deletionTimestamp = nowIso();
      this.touch(o);
      setTimeout(() => {
        for (const x of [...this.objects.values()]) if (x.metadata.namespace === o.metadata.name) this.remove(x, "namespace");
        this.remove(o, "api");
      }, 100);
      return;
    }
    if (o.kind === "Pod") {
      const run = this.runs.get(o.metadata.uid);
      const grace = opts.gracePeriodSeconds !== undefined ? opts.gracePeriodSeconds : o.spec.terminationGracePeriodSeconds;
      if (o.metadata.deletionTimestamp) return;
      o.metadata.deletionTimestamp = nowIso();
      o.metadata.deletionGracePeriodSeconds = grace;
      this.touch(o);
      if (run) run.terminate();
      if (grace > 0 && run && run.started) { setTimeout(() => this.remove(o, "api"), 100); return; }
    }
    this.remove(o, "api");
  }

  podLog(r, q, res, rec) {
    const pod = this.get("Pod", r.ns, r.name);
    if (!pod) throw this.notFound(RESOURCES.pods, r.name);
    const names = pod.spec.containers.map((c) => c.name);
    let cname = q.get("container");
    if (!cname) {
      if (names.length > 1) throw new ApiError(400, "BadRequest", `a container name must be specified for pod ${r.name}, choose one of: [${names.join(" ")}]`);
      cname = names[0];
    }
    if (!names.includes(cname)) throw new ApiError(400, "BadRequest", `container ${cname} is not valid for pod ${r.name}`);
    const run = this.runs.get(pod.metadata.uid);
    if (!run || !run.started) {
      const w = run ? run.waitingReason : "ContainerCreating";
      throw new ApiError(400, "BadRequest", `container "${cname}" in pod "${r.name}" is waiting to start: ${w}`);
    }
    let text = run.log;
    if (q.has("tailLines")) {
      const n = parseInt(q.get("tailLines"), 10);
      const lines = text.split(/(?<=\n)/);
      text = lines.slice(Math.max(0, lines.length - n)).join("");
    }
    let limit = q.has("limitBytes") ? parseInt(q.get("limitBytes"), 10) : Infinity;
    if (q.has("limitBytes") && !(limit > 0)) throw new ApiError(422, "Invalid", "PodLogOptions \"\" is invalid: limitBytes: Invalid value: must be greater than 0");
    const buf = Buffer.from(text);
    if (q.get("follow") !== "true" || run.terminated) {
      return { code: 200, body: buf.subarray(0, Math.min(buf.length, limit)).toString() };
    }
    // follow: stream until the container ends or limitBytes is reached
    rec.status = 200;
    res.writeHead(200, { "Content-Type": "text/plain", "Transfer-Encoding": "chunked" });
    let sent = 0;
    const write = (t) => {
      const b = Buffer.from(t);
      const n = Math.min(b.length, limit - sent);
      if (n > 0) { res.write(b.subarray(0, n)); sent += n; }
      if (sent >= limit) finish();
    };
    const l = { data: write, end: () => finish() };
    const finish = () => { run.listeners.delete(l); res.end(); };
    run.listeners.add(l);
    res.on("close", () => run.listeners.delete(l));
    write(text);
    return undefined;
  }
}

// ---------------------------------------------------------------- main
function parseArgs(argv) {
  const o = { host: "127.0.0.1", port: 0 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i], v = () => argv[++i];
    if (a === "--host") o.host = v();
    else if (a === "--port") o.port = parseInt(v(), 10);
    else if (a === "--token-file") o.tokenFile = v();
    else if (a === "--runtime-classes") o.runtimeClasses = v().split(",").filter(Boolean);
    else if (a === "--start-delay-ms") o.startDelayMs = parseInt(v(), 10);
    else if (a === "--tls-cert") o.tlsCert = v();
    else if (a === "--tls-key") o.tlsKey = v();
    else if (a === "--url-file") o.urlFile = v();
    else if (a === "--namespaced-rbac") o.namespacedRbac = v();
    else { console.error(`unknown option ${a}`); process.exit(2); }
  }
  if (o.host !== "127.0.0.1" && o.host !== "::1" && o.host !== "localhost") {
    console.error("the stand-in listens on loopback only"); process.exit(2);
  }
  return o;
}

function start(o) {
  const s = new StandIn(o);
  const handler = (req, res) => { s.handle(req, res).catch((e) => { console.error(e); res.destroy(); }); };
  const server = o.tlsCert
    ? https.createServer({ cert: fs.readFileSync(o.tlsCert), key: fs.readFileSync(o.tlsKey) }, handler)
    : http.createServer(handler);
  return new Promise((resolve) => {
    server.listen(o.port || 0, o.host, () => {
      const addr = server.address();
      const host = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
      const url = `${o.tlsCert ? "https" : "http"}://${host}:${addr.port}`;
      resolve({ standin: s, server, url });
    });
  });
}

if (require.main === module) {
  const o = parseArgs(process.argv.slice(2));
  start(o).then(({ url }) => {
    if (o.urlFile) fs.writeFileSync(o.urlFile + ".tmp", url + "\n"), fs.renameSync(o.urlFile + ".tmp", o.urlFile);
    process.stdout.write(`STANDIN_URL=${url}\n`);
  });
  // The test harness ends us by closing our stdin or with SIGTERM.
  process.stdin.on("end", () => process.exit(0));
  process.stdin.resume();
  process.on("SIGTERM", () => process.exit(0));
}

module.exports = { StandIn, start, labelSelector };
