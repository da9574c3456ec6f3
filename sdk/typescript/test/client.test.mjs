// Unit tests of the TypeScript SDK against a scripted local node:http server:
// retries, 429/503 with Retry-After, dropped connections and idempotency,
// errors, language, base64 output, long-poll, SSE, paging, key never shown.
import { test, describe, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { inspect } from "node:util";
import { createRequire } from "node:module";
import * as sdk from "../dist/esm/index.js";

const KEY = "eai_0123456789abcdef_" + "5ec7e7".repeat(10) + "abcd";
const SECRET = KEY.split("_")[2];
const EID = "sbx_11111111-2222-3333-4444-555555555555";
const RUNNING = { id: EID, status: "running" };
const DONE = { id: EID, status: "succeeded", exit_code: 0, signal: null, stdout: "4\n", stderr: "", stdout_encoding: "utf-8",
  files: [{ path: "/tmp/outputs/r.json", size: 2, sha256: "x" }], limits: { timeout_s: 30 } };

const envelope = (code, en, fr, lang = "en", details = []) =>
  ({ error: { code, message: lang === "fr" ? fr : en, message_i18n: { en, fr }, request_id: "req-1", details } });

class Mock {
  constructor() {
    this.requests = [];
    this.script = [];
    this.default = [500, envelope("internal", "Internal error", "Erreur interne")];
    this.server = http.createServer((req, res) => {
      const chunks = [];
      req.on("data", (c) => chunks.push(c));
      req.on("end", () => {
        const r = { method: req.method, path: req.url, headers: req.headers, body: Buffer.concat(chunks) };
        this.requests.push(r);
        const act = this.script.length ? this.script.shift() : this.default;
        if (typeof act === "function") return act(req, res, r);
        if (act === "drop") return req.socket.destroy();
        Mock.reply(res, act[0], act[1], act[2]);
      });
    });
  }
  static reply(res, status, payload, headers = {}) {
    const data = Buffer.isBuffer(payload) ? payload : Buffer.from(JSON.stringify(payload));
    res.writeHead(status, { "Content-Type": "application/json", "Content-Length": data.length, "X-Request-Id": "req-1", ...headers });
    res.end(data);
  }
  async start() {
    await new Promise((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${this.server.address().port}`;
  }
  async close() {
    this.server.closeAllConnections?.();
    await new Promise((r) => this.server.close(r));
  }
}

let m, sleeps;
const client = (o = {}) => new sdk.EnterpriseAI({ baseUrl: m.url, apiKey: KEY, maxRetries: 4, sleep: async (ms) => { sleeps.push(ms); }, ...o });

beforeEach(async () => {
  m = new Mock();
  sleeps = [];
  await m.start();
});
afterEach(async () => {
  await m.close();
});

describe("retries", () => {
  test("503 with Retry-After is honoured, then success; one Idempotency-Key for all attempts", async () => {
    const busy = [503, envelope("sandbox_unavailable", "No sandbox", "Aucun"), { "Retry-After": "2" }];
    m.script = [busy, busy, [202, { id: EID, status: "queued" }]];
    const ex = await client().sandbox.create({ image: "i", profile: "p", command: ["true"] });
    assert.equal(ex.id, EID);
    assert.equal(m.requests.length, 3);
    assert.deepEqual(sleeps, [2000, 2000]);
    assert.equal(new Set(m.requests.map((r) => r.headers["idempotency-key"])).size, 1);
  });

  test("429 retried with jittered exponential backoff", async () => {
    const rl = [429, envelope("rate_limited", "Too many", "Trop")];
    m.script = [rl, rl, rl, [200, DONE]];
    const ex = await client({ backoffBaseMs: 500, backoffMaxMs: 100000 }).sandbox.get(EID);
    assert.equal(ex.status, "succeeded");
    assert.equal(sleeps.length, 3);
    sleeps.forEach((s, i) => {
      const cap = 500 * 2 ** i;
      assert.ok(s >= cap / 2 && s <= cap, `sleep ${i} = ${s}`);
    });
  });

  test("retries are bounded in count", async () => {
    m.default = [503, envelope("storage_unavailable", "Storage down", "Stockage indisponible")];
    await assert.rejects(client({ maxRetries: 3 }).sandbox.get(EID), (e) => {
      assert.ok(e instanceof sdk.UnavailableError);
      assert.equal(e.status, 503);
      assert.equal(e.code, "storage_unavailable");
      assert.equal(e.requestId, "req-1");
      return true;
    });
    assert.equal(m.requests.length, 4);
  });

  test("retries are bounded in time: a Retry-After beyond the budget is not waited for", async () => {
    m.default = [503, envelope("sandbox_unavailable", "x", "y"), { "Retry-After": "30" }];
    await assert.rejects(client({ retryMaxElapsedMs: 5000 }).sandbox.get(EID), (e) => e instanceof sdk.UnavailableError && e.retryAfter === 30);
    assert.equal(m.requests.length, 1);
    assert.deepEqual(sleeps, []);
  });

  test("no retry on 4xx and 500", async () => {
    m.script = [[500, envelope("internal", "Internal error", "Erreur interne")],
      [422, envelope("validation_failed", "bad", "mauvais", "en", [{ path: "/limits/memory", message: "bad quantity" }])]];
    await assert.rejects(client().sandbox.get(EID), sdk.ServerError);
    await assert.rejects(client().sandbox.create({ image: "i", profile: "p", command: ["x"], limits: { memory: "12Qi" } }), (e) => {
      assert.ok(e instanceof sdk.ValidationError);
      assert.equal(e.details[0].path, "/limits/memory");
      assert.match(e.message, /\/limits\/memory/);
      return true;
    });
    assert.equal(m.requests.length, 2);
  });

  test("a dropped connection after the create is retried with the same key: the code runs once", async () => {
    const created = new Map();
    m.default = (req, res) => {
      const k = req.headers["idempotency-key"];
      const first = !created.has(k);
      if (first) created.set(k, `sbx_${String(created.size).padStart(8, "0")}-0000-0000-0000-000000000000`);
      if (first) return req.socket.destroy(); // stored, answer lost
      Mock.reply(res, 200, { id: created.get(k), status: "queued" });
    };
    const ex = await client().sandbox.create({ image: "i", profile: "p", command: ["python3", "-c", "print(1)"] });
    assert.equal(created.size, 1, "the code would have run twice");
    assert.equal(ex.id, [...created.values()][0]);
    assert.equal(m.requests.length, 2);
    assert.equal(sleeps.length, 1);
  });

  test("given Idempotency-Key is sent; a new create gets a new one", async () => {
    m.script = [[202, { id: EID, status: "queued" }], [202, { id: EID, status: "queued" }], [202, { id: EID, status: "queued" }]];
    const c = client();
    await c.sandbox.create({ image: "i", command: ["x"] }, { idempotencyKey: "my-key-1" });
    await c.sandbox.create({ image: "i", command: ["x"] });
    await c.sandbox.create({ image: "i", command: ["x"] });
    assert.equal(m.requests[0].headers["idempotency-key"], "my-key-1");
    const [k1, k2] = m.requests.slice(1).map((r) => r.headers["idempotency-key"]);
    assert.notEqual(k1, k2);
    assert.match(k1, /^[0-9a-f-]{36}$/);
  });

  test("connection refused becomes APIConnectionError after the retries", async () => {
    const port = m.server.address().port;
    await m.close();
    const c = new sdk.EnterpriseAI({ baseUrl: `http://127.0.0.1:${port}`, apiKey: KEY, maxRetries: 2, sleep: async (ms) => { sleeps.push(ms); } });
    await assert.rejects(c.sandbox.get(EID), (e) => {
      assert.ok(e instanceof sdk.APIConnectionError);
      assert.ok(!String(e).includes(SECRET) && !inspect(e).includes(SECRET));
      return true;
    });
    assert.equal(sleeps.length, 2);
    m = new Mock();
    await m.start();
  });
});

describe("errors and language", () => {
  test("one error class per status family", async () => {
    const cases = [[401, sdk.AuthenticationError], [403, sdk.AuthenticationError], [404, sdk.NotFoundError],
      [400, sdk.ValidationError], [413, sdk.ValidationError], [415, sdk.ValidationError], [409, sdk.ConflictError],
      [500, sdk.ServerError], [502, sdk.ServerError]];
    for (const [st, Cls] of cases) {
      m.script = [[st, envelope(`c${st}`, "m", "n")]];
      await assert.rejects(client().sandbox.get(EID), (e) => e instanceof Cls && e instanceof sdk.APIError && e.status === st);
    }
  });

  test("language is sent as Accept-Language; the French message comes back in message", async () => {
    m.default = (req, res) => Mock.reply(res, 404, envelope("not_found", "Execution not found", "Exécution introuvable",
      (req.headers["accept-language"] ?? "").startsWith("fr") ? "fr" : "en"));
    await assert.rejects(client({ language: "fr" }).sandbox.get(EID), (e) => {
      assert.ok(e instanceof sdk.NotFoundError);
      assert.equal(e.errorMessage, "Exécution introuvable");
      assert.deepEqual(e.messageI18n, { en: "Execution not found", fr: "Exécution introuvable" });
      assert.equal(e.code, "not_found");
      assert.equal(e.requestId, "req-1");
      return true;
    });
    assert.equal(m.requests[0].headers["accept-language"], "fr");
    await assert.rejects(client().sandbox.get(EID), (e) => e.errorMessage === "Execution not found");
    assert.ok([undefined, "*"].includes(m.requests[1].headers["accept-language"]), "no language asked: English (undici sends *)");
    await assert.rejects(client().withLanguage("fr").sandbox.get(EID), (e) => e.errorMessage === "Exécution introuvable");
  });

  test("a non-JSON error body still gives a typed error", async () => {
    m.script = [[502, Buffer.from("<html>bad gateway</html>")]];
    await assert.rejects(client().sandbox.get(EID), (e) => e instanceof sdk.ServerError && e.code === "http_502");
  });

  test("the key never appears in inspect, JSON, String or errors", async () => {
    const c = client();
    for (const t of [inspect(c, { showHidden: true, depth: 5 }), JSON.stringify(c), String(c), inspect(c.sandbox, { showHidden: true, depth: 5 })]) {
      assert.ok(!t.includes(SECRET), t);
    }
    m.script = [[401, envelope("unauthenticated", "Missing or invalid API key", "Clé d'API absente ou invalide")]];
    await assert.rejects(c.sandbox.get(EID), (e) => {
      assert.ok(e instanceof sdk.AuthenticationError);
      assert.ok(!String(e).includes(SECRET) && !inspect(e, { showHidden: true, depth: 5 }).includes(SECRET) && !JSON.stringify(e).includes(SECRET));
      return true;
    });
    assert.equal(m.requests[0].headers.authorization, "Bearer " + KEY);
    assert.throws(() => new sdk.EnterpriseAI({ baseUrl: m.url, apiKey: KEY + "\r\nX: y" }), (e) => !String(e).includes(SECRET));
  });

  test("baseUrl and apiKey default from EAI_URL and EAI_API_KEY", async () => {
    const saved = { ...process.env };
    try {
      process.env.EAI_URL = m.url;
      process.env.EAI_API_KEY = KEY;
      m.script = [[200, DONE]];
      const c = new sdk.EnterpriseAI();
      assert.equal(c.baseUrl, m.url);
      await c.sandbox.get(EID);
      assert.equal(m.requests[0].headers.authorization, "Bearer " + KEY);
      delete process.env.EAI_API_KEY;
      assert.throws(() => new sdk.EnterpriseAI({ baseUrl: m.url }), sdk.EnterpriseAIError);
    } finally {
      process.env = saved;
    }
  });
});

describe("executions", () => {
  test("base64 output is decoded to the exact bytes", async () => {
    const raw = Buffer.from([0x6f, 0x6b, 0xff, 0xfe, 0x80, 0x0a]);
    m.script = [[200, { ...DONE, stdout: raw.toString("base64"), stdout_encoding: "base64" }]];
    const ex = await client().sandbox.get(EID);
    assert.deepEqual(Buffer.from(ex.stdoutBytes), raw);
    assert.equal(ex.stdout, new TextDecoder().decode(raw));
    assert.equal(ex.raw.stdout_encoding, "base64");
    assert.equal(ex.files[0].path, "/tmp/outputs/r.json");
  });

  test("wait uses the long-poll, never a tight loop", async () => {
    m.script = [[200, RUNNING], [200, RUNNING], [200, DONE]];
    const c = client();
    assert.equal((await c.sandbox.wait(EID)).status, "succeeded");
    assert.equal(m.requests.length, 3);
    for (const r of m.requests) assert.ok(r.path.endsWith("?wait_s=60"), r.path);
    m.requests.length = 0;
    m.script = [[200, RUNNING], [200, DONE]];
    await c.sandbox.wait(EID, { timeoutMs: 7200 });
    assert.ok(m.requests[0].path.endsWith("?wait_s=8"), m.requests[0].path);
  });

  test("wait timeout throws WaitTimeoutError", async () => {
    m.default = (req, res) => setTimeout(() => Mock.reply(res, 200, RUNNING), 300);
    const t0 = Date.now();
    await assert.rejects(client().sandbox.wait(EID, { timeoutMs: 500 }), (e) => e instanceof sdk.WaitTimeoutError && e.executionId === EID);
    assert.ok(Date.now() - t0 < 3000);
    assert.ok(m.requests.length <= 3, "no tight loop");
  });

  test("execute creates then waits, sends the API body", async () => {
    m.script = [[202, { id: EID, status: "queued" }], [200, DONE]];
    const ex = await client().sandbox.execute({ image: "python:3.11-slim", profile: "gvisor-small", command: ["python3", "-c", "print(2+2)"],
      limits: { timeout_s: 30 }, env: { A: "b" }, stdin: "in", files: { "/tmp/in/a.txt": "text", "/tmp/in/b.bin": new Uint8Array([0, 1]) },
      collect: ["/tmp/outputs"], network: { egress: ["example.org:443"] }, run_id: "r1" });
    assert.equal(ex.status, "succeeded");
    assert.equal(ex.stdout, "4\n");
    assert.deepEqual(JSON.parse(m.requests[0].body), { image: "python:3.11-slim", profile: "gvisor-small", command: ["python3", "-c", "print(2+2)"],
      limits: { timeout_s: 30 }, env: { A: "b" }, stdin: "in",
      files: [{ path: "/tmp/in/a.txt", content: "text" }, { path: "/tmp/in/b.bin", content_b64: "AAE=" }],
      collect: ["/tmp/outputs"], network: { egress: ["example.org:443"] }, run_id: "r1" });
    assert.equal(m.requests[0].headers["content-type"], "application/json");
    assert.match(m.requests[1].path, /wait_s=/);
  });

  test("list follows the cursor through every page", async () => {
    m.script = [[200, { items: [{ id: "a", status: "succeeded" }, { id: "b", status: "failed" }], next: "CUR1" }],
      [200, { items: [{ id: "c", status: "succeeded" }], next: null }]];
    const ids = [];
    for await (const e of client().sandbox.list({ run_id: "r 1", limit: 2 })) ids.push(e.id);
    assert.deepEqual(ids, ["a", "b", "c"]);
    assert.equal(m.requests[0].path, "/v1/sandbox/executions?run_id=r+1&limit=2");
    assert.equal(m.requests[1].path, "/v1/sandbox/executions?run_id=r+1&limit=2&after=CUR1");
  });

  test("downloadFile returns bytes; cancel; a finished cancel is a ConflictError", async () => {
    m.script = [[200, Buffer.from([0, 0xff, 0x64])], [202, { id: EID, status: "running" }], [409, envelope("already_finished", "done", "fini")]];
    const c = client();
    assert.deepEqual(Buffer.from(await c.sandbox.downloadFile(EID, "/tmp/outputs/a b.bin")), Buffer.from([0, 0xff, 0x64]));
    assert.equal(m.requests[0].path, `/v1/sandbox/executions/${EID}/files/tmp/outputs/a%20b.bin`);
    assert.equal((await c.sandbox.cancel(EID)).status, "running");
    await assert.rejects(c.sandbox.cancel(EID), sdk.ConflictError);
  });

  test("stream yields the events until the terminal status", async () => {
    const sse = Buffer.from(": hello\n\nevent: status\ndata: {\"status\": \"running\"}\n\n" +
      "event: stdout\ndata: {\"data\": \"one\\n\"}\n\n" +
      "event: stdout\r\ndata: {\"data\": \"/w==\", \"encoding\": \"base64\"}\r\n\r\n" +
      "event: stderr\ndata: {\"data\": \"e\"}\n\n" +
      "event: status\ndata: {\"status\": \"succeeded\", \"exit_code\": 0}\n\n");
    m.script = [[503, envelope("storage_unavailable", "x", "y")], async (req, res) => {
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      for (let i = 0; i < sse.length; i += 7) {
        res.write(sse.subarray(i, i + 7));
        await new Promise((r) => setImmediate(r));
      }
      setTimeout(() => res.end(), 5000); // the SDK must stop at the terminal status, not at the end of the body
    }];
    const evs = [];
    const t0 = Date.now();
    for await (const e of client().sandbox.stream(EID)) evs.push(e);
    assert.ok(Date.now() - t0 < 3000, "the stream ends at the terminal status");
    assert.deepEqual(evs.map((e) => e.type), ["status", "stdout", "stdout", "stderr", "status"]);
    assert.deepEqual(Buffer.concat(evs.filter((e) => e.type === "stdout").map((e) => Buffer.from(e.bytes))), Buffer.from([0x6f, 0x6e, 0x65, 0x0a, 0xff]));
    assert.equal(evs.at(-1).status, "succeeded");
    assert.equal(evs.at(-1).data.exit_code, 0);
    assert.equal(m.requests[1].headers.accept, "text/event-stream");
  });

  test("contracts and manifests", async () => {
    m.script = [[200, { valid: false, errors: [{ path: "/spec/x", message: "m" }] }],
      [201, { kind: "tool", name: "t", result: "created", manifest: { a: 1 } }],
      [200, { kind: "tool", name: "t", result: "updated", manifest: { a: 1 } }],
      [200, { apiVersion: "eai.dev/v1" }], [200, { kind: "tool", name: "t", result: "deleted" }]];
    const c = client();
    const v = await c.contracts.validate("tool-manifest", { kind: "Tool" });
    assert.equal(v.valid, false);
    assert.equal(v.errors[0].path, "/spec/x");
    assert.equal((await c.manifests.apply({ kind: "Tool" })).result, "created");
    assert.equal((await c.manifests.apply("kind: Tool\n")).result, "updated");
    assert.equal(m.requests[2].headers["content-type"], "application/yaml");
    assert.equal(m.requests[2].body.toString(), "kind: Tool\n");
    assert.deepEqual(await c.manifests.get("tool", "t"), { apiVersion: "eai.dev/v1" });
    assert.equal((await c.manifests.delete("tool", "t")).result, "deleted");
    assert.equal(m.requests[4].method, "DELETE");
  });
});

test("the CommonJS build exposes the same API with type declarations", async () => {
  const require = createRequire(import.meta.url);
  const cjs = require("../dist/cjs/index.js");
  assert.equal(typeof cjs.EnterpriseAI, "function");
  assert.equal(typeof cjs.NotFoundError, "function");
  const { readFileSync } = await import("node:fs");
  const dts = readFileSync(new URL("../dist/types/index.d.ts", import.meta.url), "utf8");
  assert.match(dts, /EnterpriseAI/);
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  assert.deepEqual(pkg.dependencies ?? {}, {}, "no run-time dependency");
});

// ---------------------------------------------------------------- resumable streams, callbacks, sessions
const SES = "ses_11111111-2222-3333-4444-555555555555";
function sseEvents(first, last, terminal) {
  let out = "";
  for (let i = first; i <= last; i++) {
    if (i === 0) out += 'id: 0\nevent: status\ndata: {"status":"queued"}\n\n';
    else if (i === 1) out += 'id: 1\nevent: status\ndata: {"status":"running"}\n\n: ping\n\n';
    else out += `id: ${i}\nevent: stdout\ndata: {"data":"line${i}\\n"}\n\n`;
  }
  if (terminal) out += `id: ${last + 1}\nevent: status\ndata: {"status":"succeeded","exit_code":0}\n\n`;
  return out;
}
// end=false: the connection is destroyed after the payload (a dropped stream)
const streamer = (payload, end) => (req, res) => {
  res.writeHead(200, { "Content-Type": "text/event-stream" });
  if (payload) res.write(payload);
  else res.flushHeaders();
  if (end) res.end();
  else setTimeout(() => res.socket.destroy(), 20);
};
const noContent = (req, res) => { res.writeHead(204); res.end(); };
const collect = async (it) => { const out = []; for await (const e of it) out.push(e); return out; };

describe("resumable event stream", () => {
  test("a dropped stream resumes with Last-Event-ID; each event exactly once", async () => {
    m.script = [streamer(sseEvents(0, 3, false), false), streamer(sseEvents(4, 6, true), true)];
    const evs = await collect(client().sandbox.stream(EID));
    assert.deepEqual(evs.map((e) => e.id), ["0", "1", "2", "3", "4", "5", "6", "7"]);
    assert.equal(evs.at(-1).status, "succeeded");
    assert.deepEqual(evs.filter((e) => e.type === "stdout").map((e) => e.text), [2, 3, 4, 5, 6].map((i) => `line${i}\n`));
    assert.equal(m.requests.length, 2);
    assert.equal(m.requests[0].headers["last-event-id"], undefined);
    assert.equal(m.requests[1].headers["last-event-id"], "3");
    assert.equal(sleeps.length, 1);
  });

  test("a clean end before the terminal status resumes too", async () => {
    m.script = [streamer(sseEvents(0, 2, false), true), streamer(sseEvents(3, 3, true), true)];
    const evs = await collect(client().sandbox.stream(EID));
    assert.deepEqual(evs.map((e) => e.id), ["0", "1", "2", "3", "4"]);
    assert.equal(m.requests[1].headers["last-event-id"], "2");
  });

  test("204 ends the stream", async () => {
    m.script = [noContent];
    assert.deepEqual(await collect(client().sandbox.stream(EID, { lastEventId: "9" })), []);
    assert.equal(m.requests[0].headers["last-event-id"], "9");
    m.script = [streamer(sseEvents(0, 1, false), false), noContent];
    assert.deepEqual((await collect(client().sandbox.stream(EID))).map((e) => e.id), ["0", "1"]);
  });

  test("reconnects are bounded when no new event comes", async () => {
    m.script = [streamer(sseEvents(0, 0, false), false)];
    m.default = streamer("", false);
    await assert.rejects(collect(client().sandbox.stream(EID)), sdk.APIConnectionError);
    assert.equal(m.requests.length, 1 + 4);
    assert.equal(sleeps.length, 4);
    assert.ok(m.requests.slice(1).every((r) => r.headers["last-event-id"] === "0"));
  });

  test("no id seen: a break is an error, not a replay", async () => {
    m.script = [streamer('event: status\ndata: {"status":"running"}\n\n', false)];
    await assert.rejects(collect(client().sandbox.stream(EID)), sdk.APIConnectionError);
    assert.equal(m.requests.length, 1);
  });
});

// computed by the server's code (core/obs/callback.c eai_cb_sign + core/base/util.c eai_hmac_sha256_hex)
const VEC = { secret: "whsec_0123456789abcdef", t: 1764650000,
  body: '{"id":"evt_1","type":"execution.finished","execution":{"id":"sbx_1","status":"succeeded"}}',
  sig: "t=1764650000,v1=1fc37c80235f300c0066ef359feaa4b03278d5959b94192d0d77bea83aeb1841" };

describe("completion callbacks", () => {
  test("known vector signs and verifies", async () => {
    assert.equal(await sdk.sign(VEC.secret, VEC.t, VEC.body), VEC.sig);
    assert.equal(await sdk.verifySignature(VEC.secret, VEC.sig, VEC.body, { nowS: VEC.t + 10 }), true);
    assert.equal(await sdk.verifySignature(new TextEncoder().encode(VEC.secret), VEC.sig,
      new TextEncoder().encode(VEC.body), { nowS: VEC.t }), true);
  });

  test("refusals: body, secret, time window, malformed headers", async () => {
    const v = (s, h, b, o) => sdk.verifySignature(s, h, b, o);
    assert.equal(await v(VEC.secret, VEC.sig, VEC.body + " ", { nowS: VEC.t }), false);
    assert.equal(await v(VEC.secret + "x", VEC.sig, VEC.body, { nowS: VEC.t }), false);
    assert.equal(await v(VEC.secret, VEC.sig, VEC.body, { nowS: VEC.t + 301 }), false);
    assert.equal(await v(VEC.secret, VEC.sig, VEC.body, { nowS: VEC.t - 301 }), false);
    assert.equal(await v(VEC.secret, VEC.sig, VEC.body, { nowS: VEC.t + 500, toleranceS: 600 }), true);
    assert.equal(await v(VEC.secret, VEC.sig.replace("t=1764650000", "t=1764650001"), VEC.body, { nowS: VEC.t }), false);
    for (const bad of ["", "garbage", "t=abc,v1=00", "v1=" + "0".repeat(64), "t=1764650000", null, undefined]) {
      assert.equal(await v(VEC.secret, bad, VEC.body, { nowS: VEC.t }), false, String(bad));
    }
  });

  test("create sends callback; the view carries it", async () => {
    const cb = { url: "https://hooks.example.com/eai", secret: "s".repeat(20) };
    const view = { ...DONE, callback: { url: cb.url, attempts: 1, last_status: 200, delivered_at: "x" } };
    m.script = [[202, { id: EID, status: "queued" }], [200, view]];
    const ex = await client().sandbox.execute({ image: "i", command: ["true"], callback: cb });
    assert.deepEqual(JSON.parse(m.requests[0].body).callback, cb);
    assert.deepEqual(ex.callback, view.callback);
  });
});

describe("sessions", () => {
  test("create, files, run, delete file, close", async () => {
    const s0 = { id: SES, status: "running", profile: "gvisor-small", image: "python:3.11-slim", executions: 0, usage: null };
    m.script = [
      [201, s0, { Location: "/v1/sandbox/sessions/" + SES }],
      [200, { path: "/tmp/a b.py", size: 10 }],
      [200, Buffer.from("print(6*7)")],
      [200, { path: "/tmp", items: [{ path: "/tmp/a b.py", size: 10, type: "file" }] }],
      [202, { id: EID, status: "queued" }],
      [200, { ...DONE, session_id: SES, stdout: "42\n" }],
      [200, {}],
      [200, { ...s0, status: "ended", end_reason: "deleted", usage: { cpu_seconds: 0.5 } }],
    ];
    const c = client();
    const s = await c.sandbox.sessions.create({ image: "python:3.11-slim", profile: "gvisor-small", idle_timeout_s: 60 });
    assert.equal(s.id, SES);
    assert.equal(s.status, "running");
    await s.files.write("/tmp/a b.py", "print(6*7)");
    assert.equal(Buffer.from(await s.files.read("/tmp/a b.py")).toString(), "print(6*7)");
    assert.deepEqual(await s.files.list(), [{ path: "/tmp/a b.py", size: 10, type: "file" }]);
    const ex = await s.run(["python3", "/tmp/a b.py"], { timeoutMs: 30000 });
    assert.equal(ex.stdout, "42\n");
    assert.equal(ex.session_id, SES);
    await s.files.delete("/tmp/a b.py");
    const end = await s.close();
    assert.equal(end.end_reason, "deleted");
    assert.equal(s.status, "ended");
    assert.deepEqual(m.requests.map((r) => [r.method, r.path.split("?")[0]]), [
      ["POST", "/v1/sandbox/sessions"],
      ["PUT", `/v1/sandbox/sessions/${SES}/files/tmp/a%20b.py`],
      ["GET", `/v1/sandbox/sessions/${SES}/files/tmp/a%20b.py`],
      ["GET", `/v1/sandbox/sessions/${SES}/files`],
      ["POST", `/v1/sandbox/sessions/${SES}/executions`],
      ["GET", `/v1/sandbox/executions/${EID}`],
      ["DELETE", `/v1/sandbox/sessions/${SES}/files/tmp/a%20b.py`],
      ["DELETE", `/v1/sandbox/sessions/${SES}`],
    ]);
    assert.deepEqual(JSON.parse(m.requests[0].body), { image: "python:3.11-slim", profile: "gvisor-small", idle_timeout_s: 60 });
    assert.equal(m.requests[1].body.toString(), "print(6*7)");
    assert.equal(m.requests[1].headers["content-type"], "application/octet-stream");
    assert.deepEqual(JSON.parse(m.requests[4].body), { command: ["python3", "/tmp/a b.py"] });
    assert.match(m.requests[5].path, /wait_s=/);
  });

  test("create is not retried after a lost answer; 503 is", async () => {
    m.script = ["drop"];
    await assert.rejects(client().sandbox.sessions.create({ image: "i" }), sdk.APIConnectionError);
    assert.equal(m.requests.length, 1);
    m.script = [[503, envelope("sandbox_unavailable", "x", "y"), { "Retry-After": "1" }], [201, { id: SES, status: "running" }]];
    assert.equal((await client().sandbox.sessions.create({ image: "i" })).id, SES);
    assert.equal(m.requests.length, 3);
  });

  test("list, get, and an ended session's 409", async () => {
    m.script = [[200, { items: [{ id: SES, status: "running" }] }], [200, { id: SES, status: "ended" }],
      [409, envelope("session_ended", "Session ended", "Session terminée")]];
    const c = client();
    assert.deepEqual((await c.sandbox.sessions.list({ status: "live" })).map((s) => s.id), [SES]);
    assert.equal(m.requests[0].path, "/v1/sandbox/sessions?status=live");
    const s = await c.sandbox.sessions.get(SES);
    await assert.rejects(s.run(["true"]), (e) => e instanceof sdk.ConflictError && e.code === "session_ended");
  });
});

describe("volumes", () => {
  const VOL = "vol_11111111-2222-3333-4444-555555555555";
  const v0 = { id: VOL, name: "notes", size_bytes: 67108864, status: "ready", attached: { writer: null, readers: 0 } };
  test("create, mount in an execution and a session, files, list, get, delete", async () => {
    m.script = [
      [201, v0],
      [202, { id: EID, status: "queued" }],
      [200, { ...DONE, stdout: "written\n" }],
      [201, { id: SES, status: "running" }],
      [200, { path: "a b.txt", size: 5 }],
      [200, Buffer.from("kept\n")],
      [200, { path: "/", items: [{ path: "/a b.txt", size: 5, type: "file" }] }],
      [200, {}],
      [200, { items: [v0] }],
      [200, { ...v0, used_bytes: 1000, free_bytes: 2000 }],
      [200, { id: VOL, status: "deleted", usage: { gb_hours: 0.001 } }],
    ];
    const c = client();
    const v = await c.volumes.create("notes", "64Mi");
    assert.equal(v.id, VOL);
    assert.equal(v.size_bytes, 67108864);
    const ex = await c.sandbox.execute({ image: "python:3.11-slim", command: ["sh", "-c", "echo kept > /mnt/notes/a.txt"],
      volumes: [{ name: "notes", path: "/mnt/notes" }] }, { timeoutMs: 30000 });
    assert.equal(ex.status, "succeeded");
    await c.sandbox.sessions.create({ image: "python:3.11-slim", volumes: [{ name: "notes", path: "/mnt/in", read_only: true }] });
    const f = c.volumes.files("notes");
    assert.deepEqual(await f.write("a b.txt", "kept\n"), { path: "a b.txt", size: 5 });
    assert.equal(Buffer.from(await f.read("a b.txt")).toString(), "kept\n");
    assert.deepEqual(await f.list(), [{ path: "/a b.txt", size: 5, type: "file" }]);
    await f.delete("a b.txt");
    assert.deepEqual((await c.volumes.list()).map((x) => x.id), [VOL]);
    const g = await c.volumes.get("notes");
    assert.equal(g.free_bytes, 2000);
    assert.equal((await c.volumes.delete(VOL)).status, "deleted");
    assert.deepEqual(m.requests.map((r) => [r.method, r.path.split("?")[0]]), [
      ["POST", "/v1/volumes"],
      ["POST", "/v1/sandbox/executions"],
      ["GET", `/v1/sandbox/executions/${EID}`],
      ["POST", "/v1/sandbox/sessions"],
      ["PUT", "/v1/volumes/notes/files/a%20b.txt"],
      ["GET", "/v1/volumes/notes/files/a%20b.txt"],
      ["GET", "/v1/volumes/notes/files"],
      ["DELETE", "/v1/volumes/notes/files/a%20b.txt"],
      ["GET", "/v1/volumes"],
      ["GET", "/v1/volumes/notes"],
      ["DELETE", `/v1/volumes/${VOL}`],
    ]);
    assert.deepEqual(JSON.parse(m.requests[0].body), { name: "notes", size_bytes: "64Mi" });
    assert.deepEqual(JSON.parse(m.requests[1].body).volumes, [{ name: "notes", path: "/mnt/notes" }]);
    assert.deepEqual(JSON.parse(m.requests[3].body).volumes, [{ name: "notes", path: "/mnt/in", read_only: true }]);
  });

  test("create is not retried after a lost answer; a held volume's delete is a ConflictError", async () => {
    m.script = ["drop", [409, envelope("volume_in_use", "held", "tenu")]];
    const c = client();
    await assert.rejects(c.volumes.create("n", 16 << 20), sdk.APIConnectionError);
    assert.equal(m.requests.length, 1);
    await assert.rejects(c.volumes.delete("n"), (e) => e instanceof sdk.ConflictError && e.code === "volume_in_use");
  });
});

describe("stdin", () => {
  test("create with stdin_mode stream, writeStdin raw bytes, closeStdin with eof", async () => {
    const ok = { id: EID, written: 6, eof: false, pending: 0 };
    m.script = [[202, { id: EID, status: "queued" }], [200, ok], [200, { id: EID, written: 0, eof: true, pending: 0 }]];
    const c = client();
    await c.sandbox.create({ image: "i", profile: "p", command: ["python3", "-i"], stdin_mode: "stream" });
    assert.equal(JSON.parse(m.requests[0].body.toString()).stdin_mode, "stream");
    assert.deepEqual(await c.sandbox.writeStdin(EID, "x = 1\n"), ok);
    assert.equal((await c.sandbox.closeStdin(EID)).eof, true);
    assert.equal(m.requests[1].path, `/v1/sandbox/executions/${EID}/stdin`);
    assert.equal(m.requests[1].headers["content-type"], "application/octet-stream");
    assert.equal(m.requests[1].body.toString(), "x = 1\n");
    assert.equal(m.requests[2].path, `/v1/sandbox/executions/${EID}/stdin?eof=true`);
    assert.equal(m.requests[2].body.length, 0);
  });

  test("stdin_busy retried until taken, the same bytes each time; stdin_closed is a ConflictError", async () => {
    const busy = [429, envelope("stdin_busy", "busy", "occupé"), { "Retry-After": "1" }];
    m.script = [busy, busy, busy, busy, busy, busy, [200, { id: EID, written: 2, eof: false, pending: 2 }],
      [409, envelope("stdin_closed", "closed", "fermée")]];
    const c = client();
    assert.equal((await c.sandbox.writeStdin(EID, new Uint8Array([0, 255]))).written, 2);
    assert.equal(m.requests.length, 7);
    assert.ok(m.requests.every((r) => r.body.equals(Buffer.from([0, 255]))));
    await assert.rejects(c.sandbox.writeStdin(EID, "a"), (e) => e instanceof sdk.ConflictError && e.code === "stdin_closed");
  });

  test("stdin_busy bounded by timeoutMs", async () => {
    m.default = [429, envelope("stdin_busy", "busy", "occupé"), { "Retry-After": "1" }];
    await assert.rejects(client({ maxRetries: 0 }).sandbox.writeStdin(EID, "a", { timeoutMs: 0 }),
      (e) => e instanceof sdk.RateLimitError && e.code === "stdin_busy");
  });
});
