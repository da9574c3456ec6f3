// Unit tests of the agent view (AgentsClient, RunsClient, SessionsClient as
// client.agent.*) against a scripted local node:http server.
import { test, describe, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import * as sdk from "../dist/esm/index.js";

const KEY = "eai_0123456789abcdef_" + "5ec7e7".repeat(10) + "abcd";
const envelope = (code, en, fr, lang = "en") =>
  ({ error: { code, message: lang === "fr" ? fr : en, message_i18n: { en, fr }, request_id: "req-1", details: [] } });
const RUN = { run_id: "r 1", agent_id: "a1", project_id: "p1", truncated: true, total: 3,
  executions: [{ id: "sbx_1", status: "succeeded", profile: "gvisor", trace_id: "t1", usage: { cpu_seconds: 0.5 } }],
  counts: { succeeded: 2, failed: 1 }, usage: { cpu_seconds: 1.5, memory_mb_seconds: 3, duration_s: 2.1 },
  trace_ids: ["t1"], first_at: "a", last_at: "b", sessions: [{ id: "ses_1", status: "running" }],
  sessions_truncated: false, sessions_scope: "node" };

let m;
class Mock {
  constructor() {
    this.requests = [];
    this.script = [];
    this.server = http.createServer((req, res) => {
      const chunks = [];
      req.on("data", (c) => chunks.push(c));
      req.on("end", () => {
        this.requests.push({ method: req.method, path: req.url, headers: req.headers, body: Buffer.concat(chunks) });
        const [status, payload] = this.script.shift() ?? [500, envelope("internal", "Internal error", "Erreur interne")];
        const data = Buffer.from(JSON.stringify(payload));
        res.writeHead(status, { "Content-Type": "application/json", "Content-Length": data.length });
        res.end(data);
      });
    });
  }
}
const client = (o = {}) => new sdk.EnterpriseAI({ baseUrl: m.url, apiKey: KEY, maxRetries: 0, ...o });
beforeEach(async () => {
  m = new Mock();
  await new Promise((r) => m.server.listen(0, "127.0.0.1", r));
  m.url = `http://127.0.0.1:${m.server.address().port}`;
});
afterEach(async () => {
  m.server.closeAllConnections?.();
  await new Promise((r) => m.server.close(r));
});

describe("agent view", () => {
  test("the classes are exported and client.agent holds them", () => {
    const c = client();
    assert.ok(c.agent.runs instanceof sdk.RunsClient);
    assert.ok(c.agent.agents instanceof sdk.AgentsClient);
    assert.ok(c.agent.sessions instanceof sdk.SessionsClient);
  });

  test("runs.get quotes the id and returns the run", async () => {
    m.script = [[200, RUN]];
    const run = await client().agent.runs.get("r 1", { limit: 1 });
    assert.equal(m.requests[0].path, "/v1/runs/r%201?limit=1");
    assert.equal(run.total, 3);
    assert.equal(run.truncated, true);
    assert.deepEqual(run.counts, { succeeded: 2, failed: 1 });
    assert.equal(run.executions[0].id, "sbx_1");
    assert.equal(run.sessions[0].id, "ses_1");
  });

  test("a missing run rejects with NotFoundError, in French when asked", async () => {
    m.script = [[404, envelope("not_found", "Run not found", "Run introuvable", "fr")]];
    await assert.rejects(client({ language: "fr" }).agent.runs.get("x"), (e) => {
      assert.ok(e instanceof sdk.NotFoundError);
      assert.equal(e.errorMessage, "Run introuvable");
      return true;
    });
    assert.equal(m.requests[0].headers["accept-language"], "fr");
  });

  test("runs.list follows next", async () => {
    m.script = [[200, { items: [{ run_id: "r1" }], next: "r1" }], [200, { items: [{ run_id: "r2" }], next: null }]];
    const got = [];
    for await (const r of client().agent.runs.list({ agentId: "a1", limit: 1 })) got.push(r.run_id);
    assert.deepEqual(got, ["r1", "r2"]);
    assert.equal(m.requests[0].path, "/v1/runs?agent_id=a1&limit=1");
    assert.equal(m.requests[1].path, "/v1/runs?agent_id=a1&limit=1&after=r1");
  });

  test("agents.get, agents.list, agents.runs", async () => {
    m.script = [[200, { agent_id: "a1", runs: 2, executions: 4, newest_run: "r2", usage: [{ profile: "gvisor", cpu_seconds: 2 }] }],
      [200, { items: [{ agent_id: "a1" }], next: null }], [200, { items: [{ run_id: "r1" }], next: null }]];
    const c = client();
    const a = await c.agent.agents.get("a1");
    assert.equal(a.runs, 2);
    assert.equal(a.usage[0].profile, "gvisor");
    const ids = [];
    for await (const x of c.agent.agents.list()) ids.push(x.agent_id);
    assert.deepEqual(ids, ["a1"]);
    const runs = [];
    for await (const r of c.agent.agents.runs("a b")) runs.push(r.run_id);
    assert.deepEqual(runs, ["r1"]);
    assert.equal(m.requests[2].path, "/v1/runs?agent_id=a+b");
  });

  test("sessions.create carries the ids; forRun", async () => {
    m.script = [[201, { id: "ses_1", status: "running", run_id: "r1" }], [200, RUN],
      [404, envelope("not_found", "Run not found", "Run introuvable")]];
    const c = client();
    const s = await c.agent.sessions.create({ image: "img", profile: "gvisor", agent_id: "a1", run_id: "r1" });
    assert.equal(s.id, "ses_1");
    const body = JSON.parse(m.requests[0].body.toString());
    assert.equal(body.run_id, "r1");
    assert.equal(body.agent_id, "a1");
    assert.deepEqual((await c.agent.sessions.forRun("r 1")).map((x) => x.id), ["ses_1"]);
    assert.deepEqual(await c.agent.sessions.forRun("none"), []);
  });
});
