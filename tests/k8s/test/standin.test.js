// Self-tests of the Kubernetes API stand-in (node --test).  They pin what
// the stand-in rejects and how it simulates pods, so the plugin's
// integration tests can trust it.
"use strict";

const { test, before, after } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { start } = require("../standin/server.js");
const { Status } = require("@kubernetes-models/apimachinery/apis/meta/v1/Status");

let S, server, base;
const tokenFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "standin-")), "token");

before(async () => {
  fs.writeFileSync(tokenFile, "tok-1\n");
  ({ standin: S, server, url: base } = await start({ host: "127.0.0.1", port: 0, tokenFile, startDelayMs: 5 }));
});
after(() => server.close());

async function api(method, p, body, opts = {}) {
  const headers = { Authorization: "Bearer " + (opts.token || "tok-1") };
  if (body !== undefined) headers["Content-Type"] = opts.ct || "application/json";
  const r = await fetch(base + p, { method, headers, body: body === undefined ? undefined : (typeof body === "string" ? body : JSON.stringify(body)) });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* logs are text */ }
  if (json && json.kind === "Status") new Status(json).validate(); // our errors follow the official schema
  return { status: r.status, json, text, headers: r.headers };
}

async function waitFor(fn, ms = 3000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 20));
  }
}

const RESTRICTED = { "pod-security.kubernetes.io/enforce": "restricted" };
function ns(name, labels) { return { apiVersion: "v1", kind: "Namespace", metadata: { name, labels } }; }
function pod(name, argv, extra = {}) {
  return {
    apiVersion: "v1", kind: "Pod", metadata: { name, labels: { app: "t" } },
    spec: Object.assign({
      restartPolicy: "Never", automountServiceAccountToken: false,
      securityContext: { runAsNonRoot: true, runAsUser: 65534, seccompProfile: { type: "RuntimeDefault" } },
      containers: [Object.assign({ name: "sandbox", image: "debian:12", command: argv,
        securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
        resources: { limits: { cpu: "500m", memory: "64Mi" }, requests: { cpu: "500m", memory: "64Mi" } },
        volumeMounts: [{ name: "tmp", mountPath: "/tmp" }] }, extra.container || {})],
      volumes: [{ name: "tmp", emptyDir: { sizeLimit: "1Mi" } }],
    }, extra.spec || {}),
  };
}
async function finished(nsn, name) {
  return waitFor(async () => {
    const r = await api("GET", `/api/v1/namespaces/${nsn}/pods/${name}`);
    return ["Succeeded", "Failed"].includes(r.json.status.phase) ? r.json : null;
  });
}

test("authentication: wrong or missing token is 401, rotated token is honoured", async () => {
  assert.equal((await api("GET", "/api/v1/namespaces", undefined, { token: "nope" })).status, 401);
  fs.writeFileSync(tokenFile, "tok-2\n");
  assert.equal((await api("GET", "/api/v1/namespaces")).status, 401);
  assert.equal((await api("GET", "/api/v1/namespaces", undefined, { token: "tok-2" })).status, 200);
  fs.writeFileSync(tokenFile, "tok-1\n");
});

test("namespaces: create, duplicate 409, label added, missing namespace 404", async () => {
  const r = await api("POST", "/api/v1/namespaces", ns("t1", RESTRICTED));
  assert.equal(r.status, 201);
  assert.equal(r.json.metadata.labels["kubernetes.io/metadata.name"], "t1");
  const d = await api("POST", "/api/v1/namespaces", ns("t1"));
  assert.equal(d.status, 409);
  assert.equal(d.json.reason, "AlreadyExists");
  const m = await api("POST", "/api/v1/namespaces/nope/pods", pod("p", ["true"]));
  assert.equal(m.status, 404);
  assert.match(m.json.message, /namespaces "nope" not found/);
  assert.equal((await api("POST", "/api/v1/namespaces", ns("Bad_Name"))).status, 422);
});

test("decoding: bad JSON 400, wrong kind 400, wrong content type 415", async () => {
  assert.equal((await api("POST", "/api/v1/namespaces/t1/pods", "{nope")).status, 400);
  const k = await api("POST", "/api/v1/namespaces/t1/pods", { ...pod("p", ["true"]), kind: "Secret" });
  assert.equal(k.status, 400);
  assert.equal((await api("POST", "/api/v1/namespaces/t1/pods", pod("p", ["true"]), { ct: "text/plain" })).status, 415);
  const v = await api("POST", "/api/v1/namespaces/t1/pods", { ...pod("p", ["true"]), apiVersion: "v2" });
  assert.equal(v.status, 400);
});

test("schema: official schema errors are 422 Invalid with causes", async () => {
  const p = pod("p-schema", ["true"]);
  delete p.spec.containers;
  const r = await api("POST", "/api/v1/namespaces/t1/pods", p);
  assert.equal(r.status, 422);
  assert.equal(r.json.reason, "Invalid");
  assert.ok(r.json.details.causes.some((c) => c.field === "spec.containers"));
  const q = pod("p-q", ["true"], { container: { resources: { limits: { memory: "12 MB" } } } });
  assert.equal((await api("POST", "/api/v1/namespaces/t1/pods", q)).status, 422);
  const t = pod("p-t", ["true"], { spec: { activeDeadlineSeconds: "5" } });
  assert.equal((await api("POST", "/api/v1/namespaces/t1/pods", t)).status, 422);
});

test("unknown fields: Strict rejects, Warn drops with a Warning header", async () => {
  const p = pod("p-unk", ["true"], { container: { bogusField: 1 } });
  const s = await api("POST", "/api/v1/namespaces/t1/pods?fieldValidation=Strict", p);
  assert.equal(s.status, 400);
  assert.match(s.json.message, /unknown field "spec.containers\[0\].bogusField"/);
  const w = await api("POST", "/api/v1/namespaces/t1/pods", p);
  assert.equal(w.status, 201);
  assert.match(w.headers.get("warning"), /bogusField/);
  assert.equal(w.json.spec.containers[0].bogusField, undefined);
  // labels and resource maps are maps, not unknown fields
  const ok = pod("p-maps", ["true"]);
  ok.metadata.labels = { "eai-sandbox.dev/tenant": "x", a: "b" };
  assert.equal((await api("POST", "/api/v1/namespaces/t1/pods?fieldValidation=Strict", ok)).status, 201);
});

test("apiserver rules: names, labels, mounts, requests over limits", async () => {
  const bad = [
    pod("sbx_underscore", ["true"]),
    Object.assign(pod("p-l", ["true"]), { metadata: { name: "p-l", labels: { a: "-bad-" } } }),
    pod("p-m", ["true"], { container: { volumeMounts: [{ name: "nope", mountPath: "/x" }] } }),
    pod("p-r", ["true"], { container: { resources: { limits: { memory: "64Mi" }, requests: { memory: "128Mi" } } } }),
    pod("p-rp", ["true"], { spec: { restartPolicy: "Sometimes" } }),
  ];
  for (const p of bad) {
    const r = await api("POST", "/api/v1/namespaces/t1/pods?fieldValidation=Strict", p);
    assert.equal(r.status, 422, JSON.stringify(r.json));
  }
  const sec = { apiVersion: "v1", kind: "Secret", metadata: { name: "s-bad" }, data: { "bad key": "AAAA" } };
  assert.equal((await api("POST", "/api/v1/namespaces/t1/secrets", sec)).status, 422);
  const sec64 = { apiVersion: "v1", kind: "Secret", metadata: { name: "s-bad" }, data: { k: "not base64!" } };
  assert.equal((await api("POST", "/api/v1/namespaces/t1/secrets", sec64)).status, 400);
  const np = { apiVersion: "networking.k8s.io/v1", kind: "NetworkPolicy", metadata: { name: "n" },
    spec: { podSelector: {}, policyTypes: ["Egress"], egress: [{ to: [{ ipBlock: { cidr: "10.0.0.300/32" } }] }] } };
  assert.equal((await api("POST", "/apis/networking.k8s.io/v1/namespaces/t1/networkpolicies", np)).status, 422);
});

test("admission: unknown RuntimeClass and Pod Security restricted are 403", async () => {
  const rc = await api("POST", "/api/v1/namespaces/t1/pods", pod("p-rc", ["true"], { spec: { runtimeClassName: "nope" } }));
  assert.equal(rc.status, 403);
  assert.match(rc.json.message, /RuntimeClass "nope" not found/);
  const priv = pod("p-psa", ["true"], { container: { securityContext: { capabilities: { drop: ["NET_RAW"] } } } });
  const r = await api("POST", "/api/v1/namespaces/t1/pods", priv);
  assert.equal(r.status, 403);
  assert.match(r.json.message, /violates PodSecurity "restricted:latest"/);
  assert.match(r.json.message, /allowPrivilegeEscalation != false/);
  assert.equal((await api("POST", "/api/v1/namespaces/t1/pods", pod("p-ok", ["true"], { spec: { runtimeClassName: "gvisor" } }))).status, 201);
});

test("simulation: success, exit code, logs, OOMKilled, deadline, image pull", async () => {
  await api("POST", "/api/v1/namespaces/t1/pods", pod("s-ok", ["eai-sim", "--stdout", "out\n", "--stderr", "err\n"]));
  let p = await finished("t1", "s-ok");
  assert.equal(p.status.phase, "Succeeded");
  assert.equal(p.status.containerStatuses[0].state.terminated.exitCode, 0);
  const log = await api("GET", "/api/v1/namespaces/t1/pods/s-ok/log?container=sandbox");
  assert.equal(log.text, "out\nerr\n");
  assert.equal((await api("GET", "/api/v1/namespaces/t1/pods/s-ok/log?limitBytes=2")).text, "ou");

  await api("POST", "/api/v1/namespaces/t1/pods", pod("s-exit", ["eai-sim", "--exit", "3"]));
  p = await finished("t1", "s-exit");
  assert.equal(p.status.phase, "Failed");
  assert.equal(p.status.containerStatuses[0].state.terminated.exitCode, 3);

  await api("POST", "/api/v1/namespaces/t1/pods", pod("s-oom", ["eai-sim", "--alloc", "100Mi"]));
  p = await finished("t1", "s-oom");
  assert.equal(p.status.containerStatuses[0].state.terminated.reason, "OOMKilled");
  await api("POST", "/api/v1/namespaces/t1/pods", pod("s-nooom", ["eai-sim", "--alloc", "32Mi"]));
  assert.equal((await finished("t1", "s-nooom")).status.phase, "Succeeded");

  await api("POST", "/api/v1/namespaces/t1/pods", pod("s-dl", ["eai-sim", "--sleep-ms", "5000"], { spec: { activeDeadlineSeconds: 1 } }));
  p = await finished("t1", "s-dl");
  assert.equal(p.status.reason, "DeadlineExceeded");

  await api("POST", "/api/v1/namespaces/t1/pods", pod("s-img", ["true"], { container: { image: "registry.test/missing:1" } }));
  p = await waitFor(async () => {
    const r = await api("GET", "/api/v1/namespaces/t1/pods/s-img");
    const w = r.json.status.containerStatuses && r.json.status.containerStatuses[0].state.waiting;
    return w && w.reason === "ErrImagePull" ? r.json : null;
  });
  assert.equal(p.status.phase, "Pending");
  assert.equal((await api("GET", "/api/v1/namespaces/t1/pods/s-img/log")).status, 400);
});

test("simulation: files and env from an owned Secret, read-only root, no token, emptyDir limit", async () => {
  const argv = ["eai-sim", "--cat", "/tmp/in/a.txt", "--env", "K", "--write", "/tmp/o", "x",
    "--cat", "/var/run/secrets/kubernetes.io/serviceaccount/token"];
  const p = pod("s-files", argv, { container: {
    env: [{ name: "K", valueFrom: { secretKeyRef: { name: "s-files", key: "env-0" } } }],
    volumeMounts: [{ name: "tmp", mountPath: "/tmp" }, { name: "in", mountPath: "/tmp/in/a.txt", subPath: "f0", readOnly: true }] },
  spec: { volumes: [{ name: "tmp", emptyDir: { sizeLimit: "1Mi" } }, { name: "in", secret: { secretName: "s-files", items: [{ key: "f0", path: "f0" }] } }] } });
  const cp = await api("POST", "/api/v1/namespaces/t1/pods?fieldValidation=Strict", p);
  assert.equal(cp.status, 201);
  await new Promise((r) => setTimeout(r, 60)); // pod waits for its secret
  let g = await api("GET", "/api/v1/namespaces/t1/pods/s-files");
  assert.equal(g.json.status.phase, "Pending");
  const sec = { apiVersion: "v1", kind: "Secret", metadata: { name: "s-files",
    ownerReferences: [{ apiVersion: "v1", kind: "Pod", name: "s-files", uid: cp.json.metadata.uid }] },
    data: { f0: Buffer.from("hello\n").toString("base64"), "env-0": Buffer.from("V").toString("base64") } };
  assert.equal((await api("POST", "/api/v1/namespaces/t1/secrets?fieldValidation=Strict", sec)).status, 201);
  const done = await finished("t1", "s-files");
  assert.equal(done.status.phase, "Failed"); // the token is not there
  const log = (await api("GET", "/api/v1/namespaces/t1/pods/s-files/log")).text;
  assert.equal(log, "hello\nV\ncat: /var/run/secrets/kubernetes.io/serviceaccount/token: No such file or directory\n");

  await api("POST", "/api/v1/namespaces/t1/pods", pod("s-ro", ["eai-sim", "--write", "/etc/x", "y"]));
  assert.equal((await finished("t1", "s-ro")).status.phase, "Failed");
  assert.match((await api("GET", "/api/v1/namespaces/t1/pods/s-ro/log")).text, /Read-only file system/);

  await api("POST", "/api/v1/namespaces/t1/pods", pod("s-disk", ["eai-sim", "--write-bytes", "/tmp/big", "2Mi"]));
  const ev = await finished("t1", "s-disk");
  assert.equal(ev.status.reason, "Evicted");

  // deleting the pod collects the secret it owns
  const del = await api("DELETE", "/api/v1/namespaces/t1/pods/s-files", { apiVersion: "v1", kind: "DeleteOptions", gracePeriodSeconds: 0, propagationPolicy: "Background" });
  assert.equal(del.status, 200);
  assert.equal((await api("GET", "/api/v1/namespaces/t1/pods/s-files")).status, 404);
  assert.equal((await api("GET", "/api/v1/namespaces/t1/secrets/s-files")).status, 404);
  assert.ok(S.deleted.some((d) => d.kind === "Secret" && d.name === "s-files" && d.by === "gc"));
  assert.equal((await api("DELETE", "/api/v1/namespaces/t1/pods/s-files")).status, 404);
});

test("lists: label and field selectors, cluster-wide pods", async () => {
  const lp = pod("l-1", ["true"]);
  lp.metadata.labels = { "eai-sandbox.dev/execution-id": "sbx_1", "app.kubernetes.io/managed-by": "eai-sandbox" };
  await api("POST", "/api/v1/namespaces/t1/pods", lp);
  let r = await api("GET", "/api/v1/pods?labelSelector=" + encodeURIComponent("app.kubernetes.io/managed-by=eai-sandbox,eai-sandbox.dev/execution-id in (sbx_1,sbx_2)"));
  assert.equal(r.json.kind, "PodList");
  assert.deepEqual(r.json.items.map((i) => i.metadata.name), ["l-1"]);
  r = await api("GET", "/api/v1/namespaces/t1/pods?labelSelector=" + encodeURIComponent("eai-sandbox.dev/execution-id notin (sbx_1)"));
  assert.ok(!r.json.items.some((i) => i.metadata.name === "l-1"));
  r = await api("GET", "/api/v1/namespaces/t1/pods?fieldSelector=metadata.name%3Dl-1");
  assert.equal(r.json.items.length, 1);
  assert.equal((await api("GET", "/api/v1/namespaces/t1/pods?watch=true")).status, 400);
});

test("faults: injected statuses and a hanging request", async () => {
  await fetch(base + "/_standin/faults", { method: "POST", body: JSON.stringify({ method: "POST", path: "/pods$", status: 503, reason: "ServiceUnavailable", message: "etcd down" }) });
  const r = await api("POST", "/api/v1/namespaces/t1/pods", pod("f-1", ["true"]));
  assert.equal(r.status, 503);
  assert.equal(r.json.message, "etcd down");
  assert.equal((await api("POST", "/api/v1/namespaces/t1/pods", pod("f-1", ["true"]))).status, 201);
  await fetch(base + "/_standin/faults", { method: "POST", body: JSON.stringify({ path: "/hang-me", hang: true }) });
  const ac = new AbortController();
  const t = setTimeout(() => ac.abort(), 200);
  await assert.rejects(fetch(base + "/api/v1/namespaces/t1/pods/hang-me", { signal: ac.signal, headers: { Authorization: "Bearer tok-1" } }));
  clearTimeout(t);
});
