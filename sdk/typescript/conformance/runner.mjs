#!/usr/bin/env node
// Conformance runner of the TypeScript SDK: runs sdk/conformance/scenarios.json
// (format: sdk/conformance/README.md) against the eaid EAI_URL names, with
// EAI_API_KEY (tenant A) and EAI_API_KEY_B (tenant B); started by
// sdk/conformance/run.sh after `npm run build`.  Last line `N passed, M failed`.
import { readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import path from "node:path";
import { isDeepStrictEqual, inspect } from "node:util";
import * as sdk from "../dist/esm/index.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const SCENARIOS = process.env.EAI_CONFORMANCE_SCENARIOS || path.join(here, "..", "..", "conformance", "scenarios.json");
const INVALID_KEY = "eai_0000000000000000_" + "0".repeat(64);
const ERROR_CLASS = {
  auth: sdk.AuthenticationError, not_found: sdk.NotFoundError, validation: sdk.ValidationError,
  conflict: sdk.ConflictError, rate_limited: sdk.RateLimitError, unavailable: sdk.UnavailableError,
  server: sdk.ServerError, timeout: sdk.WaitTimeoutError, connection: sdk.APIConnectionError,
};

class Fail extends Error {}
const MISSING = Symbol("missing");
const VAR = /\$\{([A-Za-z0-9_]+)\}/g;
const VAR_WHOLE = /^\$\{([A-Za-z0-9_]+)\}$/;

function subst(v, vars) {
  if (typeof v === "string") {
    const m = VAR_WHOLE.exec(v);
    if (m) {
      if (!(m[1] in vars)) throw new Fail(`unknown variable ${m[1]}`);
      return vars[m[1]];
    }
    return v.replace(VAR, (_, n) => {
      if (!(n in vars)) throw new Fail(`unknown variable ${n}`);
      return typeof vars[n] === "string" ? vars[n] : JSON.stringify(vars[n]);
    });
  }
  if (Array.isArray(v)) return v.map((x) => subst(x, vars));
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, subst(x, vars)]));
  return v;
}

function at(raw, p) {
  let cur = raw;
  for (const seg of p.split(".")) {
    if (Array.isArray(cur) && /^\d+$/.test(seg)) {
      const i = Number(seg);
      if (i >= cur.length) return MISSING;
      cur = cur[i];
    } else if (cur && typeof cur === "object" && !Array.isArray(cur)) {
      if (!(seg in cur)) return MISSING;
      cur = cur[seg];
    } else return MISSING;
  }
  return cur;
}

const b64 = (u8) => Buffer.from(u8 ?? new Uint8Array(0)).toString("base64");
const concat = (arrs) => Buffer.concat(arrs.map((a) => Buffer.from(a)));
const show = (v) => inspect(v, { depth: 4, maxStringLength: 300 });

const doc = JSON.parse(readFileSync(SCENARIOS, "utf8"));
const baseVars = { ...(doc.variables ?? {}) };
if (process.env.EAI_CONFORMANCE_IMAGE) baseVars.image = process.env.EAI_CONFORMANCE_IMAGE;
if (process.env.EAI_CONFORMANCE_PROFILE) baseVars.profile = process.env.EAI_CONFORMANCE_PROFILE;
const keys = { a: process.env.EAI_API_KEY, b: process.env.EAI_API_KEY_B ?? "", invalid: INVALID_KEY };
const clients = new Map();

function client(spec = {}) {
  const k = `${spec.key ?? "a"}|${spec.language ?? ""}`;
  if (!clients.has(k)) {
    clients.set(k, new sdk.EnterpriseAI({ baseUrl: process.env.EAI_URL, apiKey: keys[spec.key ?? "a"], language: spec.language }));
  }
  return clients.get(k);
}

async function call(c, name, a) {
  const sb = c.sandbox;
  const ms = (s) => (s === undefined ? undefined : s * 1000);
  switch (name) {
    case "execute": { const ex = await sb.execute(a.request, { timeoutMs: ms(a.timeout_s ?? 600) }); return { raw: ex.raw, exec: ex }; }
    case "create": { const ex = await sb.create(a.request, { idempotencyKey: a.idempotency_key }); return { raw: ex.raw, exec: ex }; }
    case "get": { const ex = await sb.get(a.id); return { raw: ex.raw, exec: ex }; }
    case "wait": { const ex = await sb.wait(a.id, { timeoutMs: ms(a.timeout_s) }); return { raw: ex.raw, exec: ex }; }
    case "cancel": { const ex = await sb.cancel(a.id); return { raw: ex.raw, exec: ex }; }
    case "list": {
      const items = [];
      for await (const it of sb.list({ status: a.status, run_id: a.run_id, limit: a.limit })) items.push(it);
      return { raw: items.map((i) => i.raw), items };
    }
    case "download_file": return { raw: null, bytes: await sb.downloadFile(a.id, a.path) };
    case "stream": {
      const events = [];
      for await (const e of sb.stream(a.id)) events.push(e);
      return { raw: events.map((e) => e.data), events };
    }
    case "contracts_validate": return { raw: (await c.contracts.validate(a.name, a.document)).raw };
    case "manifests_apply": return { raw: (await c.manifests.apply(a.manifest)).raw };
    case "manifests_get": return { raw: await c.manifests.get(a.kind, a.name) };
    case "manifests_delete": return { raw: await c.manifests.delete(a.kind, a.name) };
    case "runs_get": return { raw: await c.agent.runs.get(a.run_id, { limit: a.limit }) };
    case "runs_list": {
      const out = [];
      for await (const r of c.agent.runs.list({ agentId: a.agent_id, projectId: a.project_id, limit: a.limit })) out.push(r);
      return { raw: out };
    }
    case "agents_get": return { raw: await c.agent.agents.get(a.agent_id) };
    case "agents_list": {
      const out = [];
      for await (const x of c.agent.agents.list({ limit: a.limit })) out.push(x);
      return { raw: out };
    }
    default: throw new Fail(`unknown call ${name}`);
  }
}

function checkError(exp, err) {
  const Cls = ERROR_CLASS[exp.class];
  if (!Cls) throw new Fail(`unknown error class ${exp.class}`);
  if (!(err instanceof Cls)) throw new Fail(`want ${exp.class} error, got ${err?.name}: ${err?.message}`);
  if (err instanceof sdk.APIError) {
    for (const [k, got] of [["code", err.code], ["http_status", err.status], ["message", err.errorMessage]]) {
      if (k in exp && got !== exp[k]) throw new Fail(`error ${k} ${show(got)}, want ${show(exp[k])}`);
    }
    for (const [lang, msg] of Object.entries(exp.message_i18n ?? {})) {
      if (err.messageI18n[lang] !== msg) throw new Fail(`message_i18n.${lang} ${show(err.messageI18n[lang])}, want ${show(msg)}`);
    }
    const paths = err.details.map((d) => d.path);
    for (const p of exp.details_paths ?? []) if (!paths.includes(p)) throw new Fail(`details paths ${show(paths)} lack ${p}`);
    if (exp.request_id && !err.requestId) throw new Fail("no request_id on the error");
    if (String(err).includes(keys.a) || inspect(err).includes(keys.a)) throw new Fail("the API key appears in the error");
  } else if (["code", "http_status", "message"].some((k) => k in exp)) {
    throw new Fail(`error ${err.name} carries no envelope`);
  }
}

function check(exp, res) {
  const raw = res.raw;
  for (const [p, want] of Object.entries(exp.fields ?? {})) {
    const got = at(raw, p);
    if (want === null && got === MISSING) continue;
    if (got === MISSING || !isDeepStrictEqual(got, want)) throw new Fail(`${p} = ${show(got === MISSING ? undefined : got)}, want ${show(want)}`);
  }
  for (const [p, wants] of Object.entries(exp.one_of ?? {})) {
    const got = at(raw, p);
    if (!wants.some((w) => isDeepStrictEqual(w, got))) throw new Fail(`${p} = ${show(got)}, want one of ${show(wants)}`);
  }
  for (const [p, rx] of Object.entries(exp.match ?? {})) {
    const got = at(raw, p);
    if (typeof got !== "string" || !new RegExp(rx).test(got)) throw new Fail(`${p} = ${show(got)} does not match ${rx}`);
  }
  let out, err;
  if (res.exec) {
    out = Buffer.from(res.exec.stdoutBytes);
    err = Buffer.from(res.exec.stderrBytes);
  } else if (res.events) {
    out = concat(res.events.filter((e) => e.type === "stdout").map((e) => e.bytes));
    err = concat(res.events.filter((e) => e.type === "stderr").map((e) => e.bytes));
  }
  for (const [k, v] of [["stdout", out], ["stderr", err]]) {
    if (k in exp) {
      if (!v) throw new Fail(`${k} expected on a result without output`);
      if (!v.equals(Buffer.from(exp[k], "utf8"))) throw new Fail(`${k} ${show(v.toString("utf8"))}, want ${show(exp[k])}`);
    }
  }
  if ("stdout_contains" in exp && !(out && out.includes(Buffer.from(exp.stdout_contains, "utf8")))) {
    throw new Fail(`stdout ${show(out?.toString())} lacks ${show(exp.stdout_contains)}`);
  }
  if ("stdout_b64" in exp && b64(out) !== exp.stdout_b64) throw new Fail(`stdout base64 ${b64(out)}, want ${exp.stdout_b64}`);
  if ("files_include" in exp) {
    const have = (res.exec?.files ?? []).map((f) => f.path);
    for (const p of exp.files_include) if (!have.includes(p)) throw new Fail(`files ${show(have)} lack ${p}`);
  }
  if ("ids" in exp || "count" in exp) {
    const ids = (res.items ?? []).map((i) => i.id);
    if ("ids" in exp && !isDeepStrictEqual(ids, exp.ids)) throw new Fail(`ids ${show(ids)}, want ${show(exp.ids)}`);
    if ("count" in exp && ids.length !== exp.count) throw new Fail(`${ids.length} items, want ${exp.count}`);
  }
  if ("text" in exp && !Buffer.from(res.bytes ?? []).equals(Buffer.from(exp.text, "utf8"))) {
    throw new Fail(`file ${show(Buffer.from(res.bytes ?? []).toString())}, want ${show(exp.text)}`);
  }
  if ("bytes_b64" in exp && b64(res.bytes) !== exp.bytes_b64) throw new Fail(`file base64 ${b64(res.bytes)}, want ${exp.bytes_b64}`);
  if ("last_status" in exp) {
    const last = res.events?.[res.events.length - 1];
    if (!last || last.type !== "status" || last.status !== exp.last_status) throw new Fail(`last event ${show(last)}, want status ${exp.last_status}`);
  }
}

async function step(st, vars) {
  const args = subst(st.args ?? {}, vars);
  const exp = subst(st.expect ?? {}, vars);
  let res;
  try {
    res = await call(client(st.client), st.call, args);
  } catch (e) {
    if (e instanceof Fail) throw e;
    if (!(e instanceof sdk.EnterpriseAIError)) throw e;
    if (!("error" in exp)) throw new Fail(`unexpected ${e.name}: ${e.message}`);
    checkError(exp.error, e);
    return;
  }
  if ("error" in exp) throw new Fail(`want a ${exp.error.class} error, the call succeeded: ${show(res.raw)}`);
  check(exp, res);
  for (const [v, p] of Object.entries(st.save ?? {})) {
    const got = at(res.raw, p);
    if (got === MISSING) throw new Fail(`cannot save ${v}: no ${p} in ${show(res.raw)}`);
    vars[v] = got;
  }
}

const only = (process.env.EAI_CONFORMANCE_ONLY ?? "").split(",").filter(Boolean);
let pass = 0, fail = 0;
for (const sc of doc.scenarios) {
  if (only.length && !only.includes(sc.name)) continue;
  const vars = { ...baseVars, unique: randomBytes(6).toString("hex") };
  const t0 = Date.now();
  const secs = () => ((Date.now() - t0) / 1000).toFixed(2).padStart(6);
  try {
    for (let i = 0; i < sc.steps.length; i++) {
      try {
        await step(sc.steps[i], vars);
      } catch (e) {
        const why = e instanceof Fail ? e.message : `${e?.name}: ${e?.message}\n${e?.stack ?? ""}`;
        throw new Fail(`step ${i + 1} (${sc.steps[i].call}): ${why}`);
      }
    }
    pass++;
    console.log(`PASS ${secs()}s ${sc.name}`);
  } catch (e) {
    fail++;
    console.log(`FAIL ${secs()}s ${sc.name}: ${e.message}`);
  }
}
console.log(`typescript: ${pass} passed, ${fail} failed`);
process.exitCode = fail ? 1 : 0;
