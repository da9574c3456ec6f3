// Checks of the eai-sandbox Helm chart without Helm (ctest label helm):
//  - values.yaml (and override sets) against values.schema.json with ajv;
//  - the chart rendered by tests/helm/render (Go text/template + sprig, as
//    Helm) for several value sets; every manifest against the official
//    Kubernetes schema of its kind (kubernetes-models), unknown fields refused;
//  - the security controls and cross-references a reviewer would check.
// HELM_RENDER names the renderer binary (tests/helm/run.sh builds it).
"use strict";

const { test } = require("node:test");
const assert = require("node:assert/strict");
const { execFileSync } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");
const Ajv = require("ajv");

const ROOT = path.resolve(__dirname, "../../..");
const CHART = path.join(ROOT, "deploy/helm/eai-sandbox");
const RENDER = process.env.HELM_RENDER;
const CALLS = JSON.parse(fs.readFileSync(path.join(ROOT, "plugins/k8s/api-calls.json"), "utf8"));

function render(args = [], opts = {}) {
  if (!RENDER) throw new Error("HELM_RENDER is not set (run tests/helm/run.sh)");
  try {
    const out = execFileSync(RENDER, ["--chart", CHART, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    return JSON.parse(out);
  } catch (e) {
    if (opts.expectFail) return { error: String(e.stderr) };
    throw new Error(`render ${args.join(" ")} failed: ${e.stderr}`);
  }
}

// ---------------------------------------------------------------- schema
const schema = JSON.parse(fs.readFileSync(path.join(CHART, "values.schema.json"), "utf8"));
const ajv = new Ajv({ allErrors: true, strict: false });
const validateValues = ajv.compile(schema);

// ---------------------------------------------------------------- k8s schemas
function modelFor(apiVersion, kind) {
  const mod = apiVersion === "v1" ? "kubernetes-models/v1" : `kubernetes-models/${apiVersion}`;
  const m = require(mod)[kind];
  if (!m) throw new Error(`no model for ${apiVersion} ${kind}`);
  return m;
}
// Unknown fields: record which properties the official validator reads.
function track(obj, p, touched) {
  if (obj === null || typeof obj !== "object") return obj;
  const cache = new Map();
  let seen = touched.get(p);
  if (!seen) { seen = new Set(); touched.set(p, seen); }
  return new Proxy(obj, {
    get(t, k, r) {
      const v = Reflect.get(t, k, r);
      if (typeof k !== "string" || !Object.prototype.hasOwnProperty.call(t, k)) return v;
      seen.add(k);
      if (v && typeof v === "object") {
        if (!cache.has(k)) cache.set(k, track(v, p + "/" + k, touched));
        return cache.get(k);
      }
      return v;
    },
    ownKeys(t) { const ks = Reflect.ownKeys(t); for (const k of ks) if (typeof k === "string") seen.add(k); return ks; },
  });
}
function unknownFields(obj, p, touched, out) {
  if (obj === null || typeof obj !== "object") return out;
  const seen = touched.get(p) || new Set();
  for (const k of Object.keys(obj)) {
    if (!Array.isArray(obj) && !seen.has(k)) out.push(p + "/" + k);
    else unknownFields(obj[k], p + "/" + k, touched, out);
  }
  return out;
}
function validateManifest(obj, source) {
  const M = modelFor(obj.apiVersion, obj.kind);
  const touched = new Map();
  try { M.prototype.validate.call(track(obj, "", touched)); } catch (e) {
    assert.fail(`${source} ${obj.kind}/${obj.metadata && obj.metadata.name}: ${e.message}`);
  }
  const unk = unknownFields(obj, "", touched, []);
  assert.deepEqual(unk, [], `${source} ${obj.kind}: unknown fields`);
  const name = obj.metadata.name;
  assert.ok(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(name) && name.length <= 253, `bad name ${name}`);
  if (["Service", "Namespace"].includes(obj.kind)) assert.ok(name.length <= 63, `${name} longer than 63`);
  for (const [k, v] of Object.entries(obj.metadata.labels || {}))
    assert.ok(typeof v === "string" && v.length <= 63 && /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/.test(v), `label ${k}=${v}`);
}

function byKind(r, kind) { return r.manifests.filter((m) => m.object.kind === kind).map((m) => m.object); }
function one(r, kind) { const l = byKind(r, kind); assert.equal(l.length, 1, `one ${kind}`); return l[0]; }
function matches(selector, labels) { return Object.entries(selector).every(([k, v]) => labels[k] === v); }

function checkAll(r) {
  assert.ok(validateValues(r.values), "merged values: " + JSON.stringify(validateValues.errors));
  const keys = new Set();
  for (const m of r.manifests) {
    validateManifest(m.object, m.source);
    const key = `${m.object.kind}/${m.object.metadata.name}`;
    assert.ok(!keys.has(key), `duplicate ${key}`);
    keys.add(key);
    assert.equal(m.object.metadata.namespace, undefined, "the release namespace is Helm's to set");
  }
  // every Secret/ConfigMap a pod refers to is rendered (or named by the user)
  const secrets = new Set(byKind(r, "Secret").map((s) => s.metadata.name));
  const cms = new Set(byKind(r, "ConfigMap").map((s) => s.metadata.name));
  const external = [r.values.postgresql.existingSecret, r.values.controlPlane.pepperSecret].filter(Boolean);
  for (const w of [...byKind(r, "Deployment"), ...byKind(r, "StatefulSet")]) {
    const spec = w.spec.template.spec;
    assert.ok(matches(w.spec.selector.matchLabels, w.spec.template.metadata.labels), `${w.metadata.name} selector`);
    const vols = new Set((spec.volumes || []).map((v) => v.name));
    for (const c of spec.containers) {
      for (const vm of c.volumeMounts || []) assert.ok(vols.has(vm.name) || (w.spec.volumeClaimTemplates || []).some((t) => t.metadata.name === vm.name), `mount ${vm.name}`);
      for (const e of c.env || []) {
        const ref = e.valueFrom && e.valueFrom.secretKeyRef;
        if (ref) assert.ok(secrets.has(ref.name) || external.includes(ref.name), `secret ${ref.name}`);
      }
    }
    for (const v of spec.volumes || []) {
      if (v.secret) assert.ok(secrets.has(v.secret.secretName) || external.includes(v.secret.secretName), `secret ${v.secret.secretName}`);
      if (v.configMap) assert.ok(cms.has(v.configMap.name), `configmap ${v.configMap.name}`);
    }
  }
}

function restrictedContainer(c, where) {
  const sc = c.securityContext || {};
  assert.equal(sc.runAsNonRoot, true, where + " runAsNonRoot");
  assert.equal(sc.readOnlyRootFilesystem, true, where + " readOnlyRootFilesystem");
  assert.equal(sc.allowPrivilegeEscalation, false, where + " allowPrivilegeEscalation");
  assert.notEqual(sc.privileged, true, where + " privileged");
  assert.deepEqual(sc.capabilities, { drop: ["ALL"] }, where + " capabilities");
  assert.equal((sc.seccompProfile || {}).type, "RuntimeDefault", where + " seccomp");
  assert.ok(c.resources && c.resources.limits && c.resources.limits.memory && c.resources.limits.cpu, where + " limits");
}

// ---------------------------------------------------------------- tests
test("values.yaml validates against values.schema.json and has the seed's keys", () => {
  const r = render();
  assert.ok(validateValues(r.values), JSON.stringify(validateValues.errors));
  assert.equal(typeof r.values.sandbox.enabled, "boolean");
  assert.equal(typeof r.values.sandbox.runtimeClass, "string");
  assert.ok(Array.isArray(r.values.sandbox.networkPolicy.egress));
  assert.equal(r.values.controlPlane.enabled, true);
  assert.equal(typeof r.values.postgresql.enabled, "boolean");
});

test("values.schema.json rejects bad values", () => {
  const base = render().values;
  const bad = [
    ["sandbox.runtimeClass", "GVisor!"],
    ["sandbox.namespacePrefix", "a-very-long-prefix-for-namespaces-"],
    ["sandbox.namespacePrefix", "Upper-"],
    ["sandbox.networkPolicy.egress", ["not a host"]],
    ["sandbox.networkPolicy.egress", ["example.org"]],
    ["sandbox.enabled", "yes"],
    ["controlPlane.bogus", 1],
    ["controlPlane.port", 80],
    ["postgresql.enabled", false],             // no url nor existingSecret
    ["postgresql.url", "mysql://x"],
    ["sandbox.defaults.timeoutSeconds", 0],
    ["sandbox.defaults.memory", "12 MB"],
    ["sandbox.images", { registries: ["not a registry"] }],
    ["sandbox.images", { registries: ["python"] }],
    ["sandbox.images", { requireDigest: "yes" }],
    ["sandbox.admissionPolicy", "on"],
  ];
  for (const [k, v] of bad) {
    const vals = structuredClone(base);
    const parts = k.split(".");
    let o = vals;
    for (const p of parts.slice(0, -1)) o = o[p];
    o[parts[parts.length - 1]] = v;
    assert.equal(validateValues(vals), false, `${k}=${JSON.stringify(v)} should be refused`);
  }
  const good = structuredClone(base);
  good.sandbox.networkPolicy.egress = ["example.org:443", "10.0.0.0/8:5432", "192.0.2.10:80"];
  good.postgresql = { ...good.postgresql, enabled: false, url: "postgres://u:p@db:5432/eai" };
  assert.ok(validateValues(good), JSON.stringify(validateValues.errors));
});

test("minimal deployment: control plane, bundled PostgreSQL, sandbox pods", () => {
  const r = render();
  checkAll(r);
  const d = one(r, "Deployment");
  const pod = d.spec.template.spec;
  const c = pod.containers[0];
  restrictedContainer(c, "eaid");
  assert.equal(pod.securityContext.runAsNonRoot, true);
  assert.ok(pod.securityContext.runAsUser > 0);
  assert.equal(pod.enableServiceLinks, false);
  assert.equal(pod.automountServiceAccountToken, true, "eaid needs its token to create pods");
  assert.equal(c.livenessProbe.httpGet.path, "/healthz");
  assert.equal(c.readinessProbe.httpGet.path, "/readyz");
  const ann = d.spec.template.metadata.annotations;
  assert.equal(ann["prometheus.io/scrape"], "true");
  assert.equal(ann["prometheus.io/path"], "/metrics");
  assert.equal(ann["prometheus.io/port"], String(c.ports[0].containerPort));
  assert.ok((c.volumeMounts || []).some((m) => m.mountPath === "/tmp"), "writable /tmp on a read-only root");
  assert.ok(c.env.some((e) => e.name === "EAI_DATABASE_URL" && e.valueFrom.secretKeyRef));
  assert.ok(!c.env.some((e) => e.value && /postgres:\/\//.test(e.value)), "no credentials in plain env");
  // what the first real install showed (docs/helm.md "Real cluster"): eaid opens its config
  // and pepper with O_NOFOLLOW (the files, not the kubelet's ..data links: subPath), the
  // image's EAI_DATA_DIR is overridden by a 0700 subdirectory of the emptyDir, and the
  // pepper is 64 lowercase hex characters
  for (const f of ["/etc/eai/config/eaid.yaml", "/etc/eai/pepper/pepper"]) {
    const m = c.volumeMounts.find((x) => x.mountPath === f);
    assert.ok(m && m.subPath && m.readOnly, `${f} mounted as a file (subPath)`);
  }
  assert.equal(c.env.find((e) => e.name === "EAI_DATA_DIR").value, "/var/lib/eai/data");
  const pep = byKind(r, "Secret").find((x) => x.data && x.data.pepper);
  assert.match(Buffer.from(pep.data.pepper, "base64").toString(), /^[0-9a-f]{64}$/);

  const svc = byKind(r, "Service").find((s) => s.metadata.name === d.metadata.name);
  assert.ok(matches(svc.spec.selector, d.spec.template.metadata.labels));
  const sa = one(r, "ServiceAccount");
  assert.equal(pod.serviceAccountName, sa.metadata.name);
  assert.equal(sa.automountServiceAccountToken, false);

  // RBAC: exactly the calls the plugin makes (plugins/k8s/api-calls.json),
  // split by scope: the tenant role is bound only inside tenant namespaces
  // (by eaid's RoleBindings), never cluster-wide (issue 16, item 8)
  const roles = byKind(r, "ClusterRole");
  assert.equal(roles.length, 2);
  const tenantRole = roles.find((x) => x.metadata.name === `${d.metadata.name}-sandbox-tenant`);
  const clusterRole = roles.find((x) => x.metadata.name === `${d.metadata.name}-sandbox`);
  assert.ok(tenantRole && clusterRole, "a tenant role and a cluster role");
  const flat = (role) => role.rules.filter((x) => !x.verbs.includes("bind"))
    .flatMap((rule) => rule.apiGroups.flatMap((g) => rule.resources.map((res) => `${g}|${res}|${[...rule.verbs].sort().join(",")}`))).sort();
  const wantScope = (scope) => CALLS.rules.filter((c2) => c2.scope === scope)
    .map((c2) => `${c2.group}|${c2.resource}|${[...c2.verbs].sort().join(",")}`).sort();
  assert.deepEqual(flat(tenantRole), wantScope("tenant"));
  assert.deepEqual(flat(clusterRole), wantScope("cluster"));
  const bind = clusterRole.rules.filter((x) => x.verbs.includes("bind"));
  assert.deepEqual(bind, [{ apiGroups: ["rbac.authorization.k8s.io"], resources: ["clusterroles"], verbs: ["bind"],
    resourceNames: [tenantRole.metadata.name] }], "bind on the tenant role only");
  for (const role of roles) {
    for (const rule of role.rules) assert.ok(!rule.verbs.includes("*") && !rule.resources.includes("*"), "no wildcards");
    assert.ok(!role.rules.some((x) => x.resources.includes("secrets") && x.verbs.some((v) => ["get", "list", "watch"].includes(v))), "secrets are never read");
  }
  assert.ok(!clusterRole.rules.some((x) => ["pods", "secrets", "networkpolicies", "pods/log"].some((res) => x.resources.includes(res))),
    "no pod, secret or policy rights cluster-wide");
  const binding = one(r, "ClusterRoleBinding");
  assert.equal(binding.roleRef.name, clusterRole.metadata.name);
  assert.deepEqual(binding.subjects, [{ kind: "ServiceAccount", name: sa.metadata.name, namespace: "eai-system" }]);
  assert.equal(byKind(r, "RoleBinding").length, 0, "RoleBindings are eaid's, per tenant namespace");
  // the admission policy confining eaid's namespaces and RoleBindings
  const vap = one(r, "ValidatingAdmissionPolicy");
  assert.equal(vap.spec.failurePolicy, "Fail");
  assert.deepEqual(vap.spec.matchConditions.map((m) => m.expression),
    [`request.userInfo.username == "system:serviceaccount:eai-system:${sa.metadata.name}"`]);
  const exprs = vap.spec.validations.map((v) => v.expression).join("\n");
  assert.match(exprs, /object\.metadata\.name\.startsWith\("eai-sbx-"\)/);
  assert.match(exprs, /namespaceObject\.metadata\.labels\["app\.kubernetes\.io\/managed-by"\] == "eai-sandbox"/);
  assert.ok(exprs.includes(`object.roleRef.name == "${tenantRole.metadata.name}"`));
  const vapb = one(r, "ValidatingAdmissionPolicyBinding");
  assert.equal(vapb.spec.policyName, vap.metadata.name);
  assert.deepEqual(vapb.spec.validationActions, ["Deny"]);

  // the control plane's NetworkPolicy selects eaid, both directions
  const nps = byKind(r, "NetworkPolicy");
  const cpnp = nps.find((n) => matches(n.spec.podSelector.matchLabels, d.spec.template.metadata.labels));
  assert.ok(cpnp, "a NetworkPolicy selects the eaid pods");
  assert.deepEqual([...cpnp.spec.policyTypes].sort(), ["Egress", "Ingress"]);
  assert.ok(cpnp.spec.egress.some((e) => (e.ports || []).some((p) => p.port === 443)), "egress to the API server");
  assert.ok(cpnp.spec.egress.some((e) => (e.ports || []).some((p) => p.port === 5432)), "egress to PostgreSQL");
  assert.ok(cpnp.spec.egress.some((e) => (e.ports || []).some((p) => p.port === 53 && p.protocol === "UDP")), "DNS");

  // bundled PostgreSQL: restricted container, reachable only from eaid
  const sts = one(r, "StatefulSet");
  restrictedContainer(sts.spec.template.spec.containers[0], "postgresql");
  assert.equal(sts.spec.template.spec.automountServiceAccountToken, false);
  const pgnp = nps.find((n) => matches(n.spec.podSelector.matchLabels, sts.spec.template.metadata.labels));
  assert.ok(pgnp && pgnp.spec.ingress.length === 1 && matches(pgnp.spec.ingress[0].from[0].podSelector.matchLabels, d.spec.template.metadata.labels));
  assert.deepEqual(pgnp.spec.policyTypes.sort(), ["Egress", "Ingress"]);
  const hs = byKind(r, "Service").find((s) => s.metadata.name === sts.spec.serviceName);
  assert.ok(hs && hs.spec.clusterIP === "None");
  const db = byKind(r, "Secret").find((s) => s.data && s.data.url);
  const url = Buffer.from(db.data.url, "base64").toString();
  // eaid serves as the application role (RLS applies), the owner only migrates
  assert.match(url, new RegExp(`^postgres://eai_app:[A-Za-z0-9]{32}@${sts.metadata.name}:5432/eai`));
  assert.equal(Buffer.from(db.data.appPassword, "base64").toString(), url.split(":")[2].split("@")[0]);
  const murl = Buffer.from(db.data.migrateUrl, "base64").toString();
  assert.match(murl, new RegExp(`^postgres://eai:[A-Za-z0-9]{32}@${sts.metadata.name}:5432/eai`));
  assert.equal(Buffer.from(db.data.password, "base64").toString(), murl.split(":")[2].split("@")[0]);
  assert.notEqual(db.data.password, db.data.appPassword);

  // the eaid config: k8s backend, namespace prefix, same profile names as on one host
  const cfg = r.embedded[`${d.metadata.name}-config/eaid.yaml`];
  assert.equal(cfg.isolation.k8s.namespace_prefix, "eai-sbx-");
  assert.equal(cfg.isolation.k8s.in_cluster, true);
  assert.equal(cfg.isolation.k8s.runtime_class, "gvisor");
  assert.equal(cfg.isolation.k8s.tenant_role, tenantRole.metadata.name);
  assert.equal(cfg.isolation.k8s.service_account, `eai-system/${sa.metadata.name}`);
  assert.equal(cfg.isolation.k8s.images, undefined, "no image policy unless asked");
  assert.equal(cfg.profiles.gvisor.backend, "k8s");
  assert.equal(cfg.profiles.gvisor.runtime_class, "gvisor");
  assert.equal(cfg.profiles.kata.runtime_class, "kata");
  assert.equal(cfg.server.listen, `0.0.0.0:${c.ports[0].containerPort}`);
  assert.equal(byKind(r, "RuntimeClass").length, 0, "RuntimeClasses only on request");
});

test("sandbox values reach the config: runtime class, egress allow list, prefix", () => {
  const r = render(["--set", "sandbox.runtimeClass=kata", "--set", "sandbox.namespacePrefix=tenants-",
    "--set-json", 'sandbox.networkPolicy.egress=["pypi.org:443","10.1.2.3:5432"]']);
  checkAll(r);
  const d = one(r, "Deployment");
  const cfg = r.embedded[`${d.metadata.name}-config/eaid.yaml`];
  assert.equal(cfg.isolation.k8s.runtime_class, "kata");
  assert.equal(cfg.isolation.k8s.namespace_prefix, "tenants-");
  assert.deepEqual(cfg.profiles.gvisor.egress_allow, ["pypi.org:443", "10.1.2.3:5432"]);
  assert.ok(d.spec.template.spec.containers[0].env.some((e) => e.name === "EAI_SANDBOX_NAMESPACE_PREFIX" && e.value === "tenants-"));
});

test("drain: terminationGracePeriodSeconds is server.drain_s + 15 and eaid gets EAI_DRAIN_S", () => {
  for (const [args, drain] of [[[], 30], [["--set", "controlPlane.drainSeconds=120"], 120], [["--set", "controlPlane.drainSeconds=0"], 0]]) {
    const r = render(args);
    checkAll(r);
    const spec = one(r, "Deployment").spec.template.spec;
    assert.equal(spec.terminationGracePeriodSeconds, drain + 15);
    const env = spec.containers[0].env.find((e) => e.name === "EAI_DRAIN_S");
    assert.ok(env, "EAI_DRAIN_S is set");
    assert.equal(env.value, String(drain));
  }
  const vals = structuredClone(render().values);
  vals.controlPlane.drainSeconds = -1;
  assert.equal(validateValues(vals), false);
  vals.controlPlane.drainSeconds = "30";
  assert.equal(validateValues(vals), false);
});

test("image policy reaches the config; admission policy can be turned off", () => {
  let r = render(["--set-json", 'sandbox.images={"registries":["registry.example.com/eai"],"requireDigest":true}']);
  checkAll(r);
  const d = one(r, "Deployment");
  const cfg = r.embedded[`${d.metadata.name}-config/eaid.yaml`];
  assert.deepEqual(cfg.isolation.k8s.images, { registries: ["registry.example.com/eai"], require_digest: true });
  r = render(["--set", "sandbox.admissionPolicy=false"]);
  checkAll(r);
  assert.equal(byKind(r, "ValidatingAdmissionPolicy").length, 0);
  assert.equal(byKind(r, "ValidatingAdmissionPolicyBinding").length, 0);
  assert.equal(byKind(r, "ClusterRole").length, 2);
});

test("optional RuntimeClass objects", () => {
  const r = render(["--set", "sandbox.createRuntimeClasses=true"]);
  checkAll(r);
  const rcs = byKind(r, "RuntimeClass");
  assert.deepEqual(rcs.map((x) => [x.metadata.name, x.handler]).sort(), [["gvisor", "runsc"], ["kata", "kata"]]);
});

test("external PostgreSQL: no bundled database, URL in a Secret or an existing Secret", () => {
  let r = render(["--set", "postgresql.enabled=false", "--set", "postgresql.url=postgres://u:p@db.example:5432/eai?sslmode=require"]);
  checkAll(r);
  assert.equal(byKind(r, "StatefulSet").length, 0);
  const d = one(r, "Deployment");
  const ref = d.spec.template.spec.containers[0].env.find((e) => e.name === "EAI_DATABASE_URL").valueFrom.secretKeyRef;
  const s = byKind(r, "Secret").find((x) => x.metadata.name === ref.name);
  assert.equal(Buffer.from(s.data[ref.key], "base64").toString(), "postgres://u:p@db.example:5432/eai?sslmode=require");
  r = render(["--set", "postgresql.enabled=false", "--set", "postgresql.existingSecret=my-db", "--set", "postgresql.existingSecretKey=dsn"]);
  checkAll(r);
  const ref2 = one(r, "Deployment").spec.template.spec.containers[0].env.find((e) => e.name === "EAI_DATABASE_URL").valueFrom.secretKeyRef;
  assert.deepEqual(ref2, { name: "my-db", key: "dsn" });
  const fail = render(["--set", "postgresql.enabled=false"], { expectFail: true });
  assert.match(fail.error, /postgresql.url or postgresql.existingSecret is required/);
});

test("sandbox disabled: no RBAC, no API token, no API server egress", () => {
  const r = render(["--set", "sandbox.enabled=false"]);
  checkAll(r);
  assert.equal(byKind(r, "ClusterRole").length, 0);
  assert.equal(byKind(r, "ClusterRoleBinding").length, 0);
  assert.equal(byKind(r, "ValidatingAdmissionPolicy").length, 0);
  const d = one(r, "Deployment");
  assert.equal(d.spec.template.spec.automountServiceAccountToken, false);
  // no isolation backend: /readyz would stay 503 for ever; eaid still serves the API
  assert.equal(d.spec.template.spec.containers[0].readinessProbe.httpGet.path, "/healthz");
  const np = byKind(r, "NetworkPolicy").find((n) => matches(n.spec.podSelector.matchLabels, d.spec.template.metadata.labels));
  assert.ok(!np.spec.egress.some((e) => (e.ports || []).some((p) => p.port === 443)));
});

test("controlPlane disabled renders no control plane", () => {
  const r = render(["--set", "controlPlane.enabled=false", "--set", "postgresql.enabled=false", "--set", "sandbox.createRuntimeClasses=true"]);
  checkAll(r);
  assert.deepEqual(r.manifests.map((m) => m.object.kind).sort(), ["RuntimeClass", "RuntimeClass"]);
});

test("the renderer refuses what Helm refuses", () => {
  const r = render(["--kube-version", "v1.20.0"], { expectFail: true });
  assert.match(r.error, /incompatible with Kubernetes/);
});

// ---------------------------------------------------------------- issue 14
const HOOK = "helm.sh/hook";
const WEIGHT = "helm.sh/hook-weight";
function hooks(o) { return ((o.metadata.annotations || {})[HOOK] || "").split(",").filter(Boolean).sort(); }
function weight(o) { return Number((o.metadata.annotations || {})[WEIGHT] || 0); }
function secretValue(r, ref) {
  const s = byKind(r, "Secret").find((x) => x.metadata.name === ref.name);
  assert.ok(s, `secret ${ref.name} rendered`);
  assert.ok(s.data[ref.key], `secret ${ref.name} has key ${ref.key}`);
  return Buffer.from(s.data[ref.key], "base64").toString();
}
function envRef(c, name) { const e = c.env.find((x) => x.name === name); return e && e.valueFrom && e.valueFrom.secretKeyRef; }
const CI_DIRS = fs.readdirSync(path.join(ROOT, "deploy/helm")).map((d) => path.join(ROOT, "deploy/helm", d, "ci")).filter((d) => fs.existsSync(d));

test("every values file in deploy/helm/*/ci renders and validates against the Kubernetes schemas", () => {
  const files = CI_DIRS.flatMap((d) => fs.readdirSync(d).filter((f) => /\.ya?ml$/.test(f)).map((f) => path.join(d, f)));
  assert.ok(files.length >= 3, `ci values files: ${files}`);
  for (const f of files) {
    const r = render(["-f", f]);
    checkAll(r);
    if (r.values.controlPlane.enabled && r.values.migration.enabled) one(r, "Job");
  }
});

test("seed minimal deployment: the schema is applied before eaid starts, at install and before every upgrade", () => {
  const r = render(["-f", path.join(CHART, "ci/minimal-values.yaml")]);
  checkAll(r);
  const job = one(r, "Job");
  const d = one(r, "Deployment");
  // the bundled PostgreSQL belongs to the release, so the Job can only run before upgrades
  assert.deepEqual(hooks(job), ["pre-upgrade"]);
  assert.deepEqual(job.metadata.annotations["helm.sh/hook-delete-policy"].split(",").sort(), ["before-hook-creation", "hook-succeeded"]);
  const pod = job.spec.template.spec;
  const c = pod.containers[0];
  assert.deepEqual(c.args, ["migrate", "--app-role", "eai_app"]);
  assert.equal(c.image, d.spec.template.spec.containers[0].image, "the same eaid image as the server");
  restrictedContainer(c, "migrate");
  assert.equal(pod.restartPolicy, "Never");
  assert.equal(pod.automountServiceAccountToken, false);
  assert.equal(pod.serviceAccountName, undefined, "the Job needs no API access");
  assert.ok(job.spec.backoffLimit >= 3, "retries while PostgreSQL starts");
  assert.ok(job.spec.activeDeadlineSeconds > 0);
  assert.ok(c.volumeMounts.some((m) => m.mountPath === "/tmp"));
  // at install: eaid's pods migrate in an init container that waits for the database
  const inits = d.spec.template.spec.initContainers || [];
  assert.equal(inits.length, 1, "one init container");
  const ic = inits[0];
  assert.equal(ic.name, "migrate");
  assert.deepEqual(ic.args, ["migrate", "--app-role", "eai_app", "--wait", "300"]);
  assert.equal(ic.image, d.spec.template.spec.containers[0].image);
  restrictedContainer(ic, "migrate (init)");
  assert.ok(ic.volumeMounts.some((m) => m.mountPath === "/tmp"));
  // the Job and the init container connect as the owner; the server as the application role
  const jref = envRef(c, "EAI_DATABASE_URL");
  const sref = envRef(d.spec.template.spec.containers[0], "EAI_DATABASE_URL");
  assert.deepEqual(envRef(ic, "EAI_DATABASE_URL"), jref);
  assert.match(secretValue(r, jref), /^postgres:\/\/eai:/);
  assert.match(secretValue(r, sref), /^postgres:\/\/eai_app:/);
  assert.equal(envRef(d.spec.template.spec.containers[0], "EAI_DATABASE_URL").key, "url", "the server never gets the owner's URL");
  // PostgreSQL, its Secret and the migration policy are objects of the release (helm uninstall deletes them)
  const sec = byKind(r, "Secret").find((x) => x.metadata.name === jref.name);
  const sts = one(r, "StatefulSet");
  const pgsvc = byKind(r, "Service").find((x) => x.metadata.name === sts.spec.serviceName);
  const init = byKind(r, "ConfigMap").find((x) => x.metadata.name.endsWith("-init"));
  for (const o of [sec, sts, pgsvc, init, d]) {
    assert.deepEqual(hooks(o), [], `${o.kind} ${o.metadata.name} is not a hook`);
  }
  // its data volume goes with it, unless asked to stay
  assert.deepEqual(sts.spec.persistentVolumeClaimRetentionPolicy, { whenDeleted: "Delete", whenScaled: "Retain" });
  assert.equal(one(render(["--set", "postgresql.storage.deleteOnUninstall=false"]), "StatefulSet").spec.persistentVolumeClaimRetentionPolicy, undefined);
  // an upgrade of the chart alone does not restart the database: no chart version in its pod template
  assert.ok(!JSON.stringify(sts.spec.template).includes("helm.sh/chart"), "chart label in PostgreSQL's pod template");
  // the bundled instance creates the application role, least privilege
  const script = Object.values(init.data)[0];
  assert.match(script, /CREATE ROLE :"app" LOGIN NOSUPERUSER NOBYPASSRLS/);
  const pgc = sts.spec.template.spec.containers[0];
  assert.equal(pgc.env.find((e) => e.name === "EAI_APP_ROLE").value, "eai_app");
  assert.deepEqual(envRef(pgc, "EAI_APP_PASSWORD"), { name: sec.metadata.name, key: "appPassword" });
  assert.ok(pgc.volumeMounts.some((m) => m.mountPath === "/docker-entrypoint-initdb.d"));
  // network: the migration pod reaches PostgreSQL and PostgreSQL admits it
  const nps = byKind(r, "NetworkPolicy");
  const jobLabels = pod.metadata ? pod.metadata.labels : job.spec.template.metadata.labels;
  const mnp = nps.find((n) => matches(n.spec.podSelector.matchLabels, job.spec.template.metadata.labels));
  assert.ok(mnp, "a NetworkPolicy selects the migration pod");
  assert.deepEqual(hooks(mnp), [], "exists before the pre-upgrade Job: an object of the release");
  assert.equal(mnp.spec.ingress, undefined, "no ingress to the migration pod");
  assert.ok(mnp.spec.egress.some((e) => (e.ports || []).some((p) => p.port === 5432)));
  const pgnp = nps.find((n) => matches(n.spec.podSelector.matchLabels, sts.spec.template.metadata.labels));
  assert.ok(pgnp.spec.ingress[0].from.some((f) => matches(f.podSelector.matchLabels, job.spec.template.metadata.labels)));
  assert.ok(jobLabels);
  // in-process fallbacks: no FinOps / audit / OTLP URL in the config
  const cfg = r.embedded[`${d.metadata.name}-config/eaid.yaml`];
  assert.equal(cfg.finops, undefined);
  assert.equal(cfg.audit, undefined);
  assert.equal(cfg.telemetry, undefined);
  // NOTES tell the truth about all of this
  assert.match(r.notes, /runs in the init container of eaid's pods at\s+install, and in the Job eai-eai-sandbox-migrate before every upgrade/);
  assert.match(r.notes, /eaid --config \/etc\/eai\/config\/eaid.yaml tenants create/);
  assert.match(r.notes, /gvisor-small: runtimeClassName gvisor/);
  assert.match(r.notes, /RuntimeClasses gvisor,kata must exist/);
  assert.match(r.notes, /helm uninstall` deletes it and its data volume/);
  assert.match(r.notes, /pepper Secret eai-eai-sandbox-pepper is kept by `helm uninstall`/);
});

test("external database: the Job uses the owner's URL, the server the application role's", () => {
  let r = render(["-f", path.join(CHART, "ci/external-db-values.yaml")]);
  checkAll(r);
  const job = one(r, "Job");
  assert.equal(byKind(r, "StatefulSet").length, 0);
  assert.match(secretValue(r, envRef(job.spec.template.spec.containers[0], "EAI_DATABASE_URL")), /^postgres:\/\/eai_owner:/);
  assert.match(secretValue(r, envRef(one(r, "Deployment").spec.template.spec.containers[0], "EAI_DATABASE_URL")), /^postgres:\/\/eai_app:/);
  const sec = byKind(r, "Secret").find((x) => x.data && x.data.migrateUrl);
  assert.deepEqual(hooks(sec), ["pre-install", "pre-upgrade"], "the Secret exists when the pre-install Job runs");
  assert.deepEqual(hooks(job), ["pre-install", "pre-upgrade"], "an external database is migrated before install");
  assert.equal(one(r, "Deployment").spec.template.spec.initContainers, undefined, "no init container with an external database");
  assert.match(r.notes, /ran `eaid migrate --app-role eai_app`\s+before this release's pods/);
  // without migrateUrl the Job falls back to the same URL
  r = render(["--set", "postgresql.enabled=false", "--set", "postgresql.url=postgres://u:p@db:5432/eai"]);
  assert.deepEqual(envRef(one(r, "Job").spec.template.spec.containers[0], "EAI_DATABASE_URL").key, "url");
  // an existing Secret: its migrate key
  r = render(["-f", path.join(CHART, "ci/custom-runtimeclass-values.yaml")]);
  assert.deepEqual(envRef(one(r, "Job").spec.template.spec.containers[0], "EAI_DATABASE_URL"), { name: "eai-database", key: "ownerUrl" });
  // migration disabled: no Job, and NOTES say to run it by hand
  r = render(["--set", "migration.enabled=false"]);
  checkAll(r);
  assert.equal(byKind(r, "Job").length, 0);
  assert.match(r.notes, /migration.enabled=false: run `eaid migrate --app-role eai_app`/);
});

test("profiles take sandbox.runtimeClass; gvisor-small exists and admits the seed's request", () => {
  let r = render();
  const cfgOf = (x) => x.embedded[`${one(x, "Deployment").metadata.name}-config/eaid.yaml`];
  let cfg = cfgOf(r);
  assert.deepEqual(Object.keys(cfg.profiles).sort(), ["gvisor", "gvisor-small", "kata"]);
  assert.equal(cfg.profiles["gvisor-small"].backend, "k8s");
  assert.equal(cfg.profiles["gvisor-small"].runtime_class, "gvisor");
  const small = cfg.profiles["gvisor-small"];
  assert.deepEqual(small.defaults, { cpu: "500m", memory: "256Mi", timeout_s: 30, disk: "64Mi" });
  assert.deepEqual(small.max, { cpu: "1", memory: "512Mi", timeout_s: 60, disk: "256Mi" });
  // the seed's request: cpu 500m, memory 256Mi, timeout_s 30 fits gvisor-small
  assert.ok(500 <= 1000 && 256 <= 512 && 30 <= small.max.timeout_s);
  // sandbox.runtimeClass changes every profile that names no class of its own
  r = render(["--set", "sandbox.runtimeClass=gvisor-gke"]);
  checkAll(r);
  cfg = cfgOf(r);
  assert.equal(cfg.isolation.k8s.runtime_class, "gvisor-gke");
  assert.equal(cfg.profiles.gvisor.runtime_class, "gvisor-gke");
  assert.equal(cfg.profiles["gvisor-small"].runtime_class, "gvisor-gke");
  assert.equal(cfg.profiles.kata.runtime_class, "kata", "kata names its own class");
  assert.match(r.notes, /gvisor-small: runtimeClassName gvisor-gke/);
  // a profile's own class, its own limits, removal
  r = render(["--set", "sandbox.profiles.gvisor-small.runtimeClass=kata", "--set", "sandbox.profiles.kata=null",
    "--set-json", 'sandbox.profiles.big={"maxima":{"cpu":"4","memory":"4Gi","timeoutSeconds":600,"disk":"2Gi"}}']);
  checkAll(r);
  cfg = cfgOf(r);
  assert.deepEqual(Object.keys(cfg.profiles).sort(), ["big", "gvisor", "gvisor-small"]);
  assert.equal(cfg.profiles["gvisor-small"].runtime_class, "kata");
  assert.equal(cfg.profiles.big.runtime_class, "gvisor");
  assert.equal(cfg.profiles.big.max.cpu, "4");
  assert.deepEqual(cfg.profiles.big.defaults, { cpu: "500m", memory: "256Mi", timeout_s: 30, disk: "64Mi" }, "sandbox.defaults");
  // the schema refuses a bad class name on a profile
  const vals = structuredClone(render().values);
  vals.sandbox.profiles["gvisor-small"].runtimeClass = "Not_A_Class";
  assert.equal(validateValues(vals), false);
});

test("runtime classes: one per class the profiles use, with its handler", () => {
  let r = render(["-f", path.join(CHART, "ci/custom-runtimeclass-values.yaml")]);
  checkAll(r);
  assert.deepEqual(byKind(r, "RuntimeClass").map((x) => [x.metadata.name, x.handler]), [["gvisor-runsc", "runsc"]]);
  const cfg = r.embedded[`${one(r, "Deployment").metadata.name}-config/eaid.yaml`];
  assert.deepEqual(Object.keys(cfg.profiles).sort(), ["gvisor", "gvisor-small"]);
  for (const p of Object.values(cfg.profiles)) assert.equal(p.runtime_class, "gvisor-runsc");
  r = render(["-f", path.join(CHART, "ci/external-db-values.yaml")]);
  assert.deepEqual(byKind(r, "RuntimeClass").map((x) => [x.metadata.name, x.handler]).sort(), [["gvisor", "runsc"], ["kata", "kata"]]);
  assert.match(r.notes, /created the RuntimeClass objects gvisor,kata/);
  const fail = render(["--set", "sandbox.createRuntimeClasses=true", "--set", "sandbox.runtimeClass=nohandler"], { expectFail: true });
  assert.match(fail.error, /sandbox.runtimeClasses.nohandler.handler is needed/);
});

test("the chart's default image is what scripts/image.sh builds", () => {
  const r = render();
  const script = fs.readFileSync(path.join(ROOT, "scripts/image.sh"), "utf8");
  const repo = script.match(/^repo=\$\{EAI_IMAGE_REPOSITORY:-([^}]+)\}/m)[1];
  const version = fs.readFileSync(path.join(ROOT, "CMakeLists.txt"), "utf8").match(/project\([^)]*VERSION ([0-9.]+)/)[1];
  const chart = fs.readFileSync(path.join(CHART, "Chart.yaml"), "utf8");
  assert.equal(chart.match(/^appVersion: "([^"]+)"/m)[1], version, "Chart appVersion = project version");
  const image = one(r, "Deployment").spec.template.spec.containers[0].image;
  assert.equal(image, `${repo}:${version}`);
  assert.equal(one(r, "Job").spec.template.spec.containers[0].image, image);
  // the image's user is the pods' user
  assert.match(script, /"User": "10001:10001"/);
  assert.equal(one(r, "Deployment").spec.template.spec.securityContext.runAsUser, 10001);
});
