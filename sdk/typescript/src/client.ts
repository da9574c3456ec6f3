import { AgentView } from "./agent.js";
import {
  APIConnectionError, APIError, EnterpriseAIError, RateLimitError, WaitTimeoutError, errorFromResponse,
} from "./errors.js";
import {
  Execution, ExecuteRequest, ExecutionEvent, InputFile, ListOptions, ManifestResult, StdinWritten, TERMINAL_STATUSES,
  ValidationResult,
} from "./types.js";
import { Sessions } from "./sessions.js";
import { Volumes } from "./volumes.js";

export const VERSION = "0.1.0";
const DEFAULT_BASE_URL = "http://127.0.0.1:8080";
const MAX_WAIT_S = 60;
const MAX_RETRY_AFTER_MS = 60_000;
const RETRY_STATUSES = new Set([429, 503]);

export interface ClientOptions {
  /** Default: `EAI_URL`, else http://127.0.0.1:8080. */
  baseUrl?: string;
  /** Default: `EAI_API_KEY`. */
  apiKey?: string;
  /** Sent as `Accept-Language` (`en`, `fr`). */
  language?: string;
  /** Timeout of one request in ms (a long-poll adds its wait). Default 30000. */
  timeoutMs?: number;
  /** Retries of connection errors, 429 and 503. Default 5. */
  maxRetries?: number;
  /** Total time budget of one call's retries in ms. Default 60000. */
  retryMaxElapsedMs?: number;
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  headers?: Record<string, string>;
  /** For tests: replaces the wait between retries. */
  sleep?: (ms: number) => Promise<void>;
}

export interface ExecuteOptions {
  /** Overall timeout of `execute` in ms (default 600000; 0 or Infinity: none). */
  timeoutMs?: number;
  idempotencyKey?: string;
}

type Json = Record<string, unknown>;

function env(name: string): string | undefined {
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return p?.env?.[name];
}

function uuid4(): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string; getRandomValues?: (a: Uint8Array) => Uint8Array } }).crypto;
  if (c?.randomUUID) return c.randomUUID();
  const b = new Uint8Array(16);
  if (c?.getRandomValues) c.getRandomValues(b);
  else for (let i = 0; i < 16; i++) b[i] = Math.floor(Math.random() * 256);
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

export function base64Encode(b: Uint8Array): string {
  let s = "";
  for (let i = 0; i < b.length; i += 3) {
    const n = (b[i] << 16) | ((b[i + 1] ?? 0) << 8) | (b[i + 2] ?? 0);
    s += B64[(n >> 18) & 63] + B64[(n >> 12) & 63] + (i + 1 < b.length ? B64[(n >> 6) & 63] : "=") + (i + 2 < b.length ? B64[n & 63] : "=");
  }
  return s;
}

export function base64Decode(s: string): Uint8Array {
  const clean = s.replace(/[\r\n]/g, "");
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(clean) || clean.length % 4 === 1) throw new Error("bad base64");
  const out: number[] = [];
  let buf = 0, bits = 0;
  for (const ch of clean) {
    if (ch === "=") break;
    buf = (buf << 6) | B64.indexOf(ch);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push((buf >> bits) & 0xff);
    }
  }
  return Uint8Array.from(out);
}

const utf8 = new TextEncoder();
function text(b: Uint8Array): string {
  return new TextDecoder("utf-8", { fatal: false }).decode(b);
}

function decodeStream(v: unknown, encoding: unknown): Uint8Array {
  if (typeof v !== "string") return new Uint8Array(0);
  if (encoding === "base64") {
    try {
      return base64Decode(v);
    } catch {
      return utf8.encode(v);
    }
  }
  return utf8.encode(v);
}

/** The typed view of one execution's JSON (base64 output decoded). */
export function toExecution(raw: Json): Execution {
  const so = decodeStream(raw.stdout, raw.stdout_encoding);
  const se = decodeStream(raw.stderr, raw.stderr_encoding);
  const ex = { ...raw } as Execution;
  Object.defineProperty(ex, "raw", { value: raw, enumerable: false });
  Object.defineProperty(ex, "stdoutBytes", { value: so, enumerable: false });
  Object.defineProperty(ex, "stderrBytes", { value: se, enumerable: false });
  ex.id = String(raw.id ?? "");
  ex.status = String(raw.status ?? "");
  ex.stdout = text(so);
  ex.stderr = text(se);
  return ex;
}

function retryAfterMs(v: string | null): number | undefined {
  if (!v) return undefined;
  const s = v.trim();
  if (/^\d+$/.test(s)) return Math.min(Number(s), 86400) * 1000;
  const t = Date.parse(s);
  return Number.isNaN(t) ? undefined : Math.max(0, t - Date.now());
}

export function q(s: string): string {
  return encodeURIComponent(s);
}

export interface Answer {
  status: number;
  headers: Headers;
  body: Uint8Array;
}

/** HTTP with bounded retries (connection errors, 429, 503; backoff with jitter; Retry-After). */
export class Transport {
  readonly baseUrl: string;
  readonly language?: string;
  readonly #key: string;
  readonly #o: Required<Pick<ClientOptions, "timeoutMs" | "maxRetries" | "retryMaxElapsedMs" | "backoffBaseMs" | "backoffMaxMs">>;
  readonly #headers: Record<string, string>;
  readonly #sleep: (ms: number) => Promise<void>;

  constructor(baseUrl: string, key: string, o: ClientOptions) {
    this.baseUrl = baseUrl;
    this.language = o.language;
    this.#key = key;
    this.#o = {
      timeoutMs: o.timeoutMs ?? 30_000,
      maxRetries: Math.max(0, o.maxRetries ?? 5),
      retryMaxElapsedMs: Math.max(0, o.retryMaxElapsedMs ?? 60_000),
      backoffBaseMs: o.backoffBaseMs ?? 250,
      backoffMaxMs: o.backoffMaxMs ?? 8_000,
    };
    this.#headers = { ...(o.headers ?? {}) };
    this.#sleep = o.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
  }

  get timeoutMs(): number {
    return this.#o.timeoutMs;
  }

  get maxRetries(): number {
    return this.#o.maxRetries;
  }

  get retryMaxElapsedMs(): number {
    return this.#o.retryMaxElapsedMs;
  }

  sleep(ms: number): Promise<void> {
    return this.#sleep(ms);
  }

  headers(extra?: Record<string, string>): Record<string, string> {
    const h: Record<string, string> = {
      Authorization: `Bearer ${this.#key}`, Accept: "application/json", "User-Agent": `enterprise-ai-typescript/${VERSION}`,
    };
    if (this.language) h["Accept-Language"] = this.language;
    return { ...h, ...this.#headers, ...(extra ?? {}) };
  }

  /** Full jitter in [cap/2, cap], cap = min(max, base * 2^attempt). */
  backoff(attempt: number): number {
    const cap = Math.min(this.#o.backoffMaxMs, this.#o.backoffBaseMs * 2 ** attempt);
    return cap / 2 + Math.random() * (cap / 2);
  }

  async #once(method: string, path: string, body: string | Uint8Array | undefined, h: Record<string, string>,
              timeoutMs: number, stream: boolean): Promise<{ res: Response; body: Uint8Array }> {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), timeoutMs);
    try {
      const res = await fetch(this.baseUrl + path, { method, headers: h, body: body as BodyInit | undefined, signal: ac.signal, redirect: "manual" });
      if (stream && (res.status === 200 || res.status === 204)) {
        clearTimeout(timer);
        return { res, body: new Uint8Array(0) };
      }
      const buf = new Uint8Array(await res.arrayBuffer());
      return { res, body: buf };
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * One call with its retries; `stream` returns the 200 response unread.
   * `idempotent: false` (a POST without Idempotency-Key): a connection error is not
   * retried (the request may have been done); 429 and 503 are.
   */
  async call(method: string, path: string, opts: { json?: unknown; raw?: string | Uint8Array; contentType?: string;
    headers?: Record<string, string>; timeoutMs?: number; stream?: boolean; idempotent?: boolean;
    /** error codes thrown at once, not retried here (the caller retries them its own way, e.g. stdin_busy) */
    callerCodes?: string[] } = {}): Promise<{ answer: Answer; res: Response }> {
    const h = this.headers(opts.headers);
    let body: string | Uint8Array | undefined;
    if (opts.json !== undefined) {
      body = JSON.stringify(opts.json);
      h["Content-Type"] = "application/json";
    } else if (opts.raw !== undefined) {
      body = opts.raw;
      h["Content-Type"] = opts.contentType ?? "application/json";
    }
    const t0 = Date.now();
    for (let attempt = 0; ; attempt++) {
      let got: { res: Response; body: Uint8Array } | undefined;
      let err: unknown;
      try {
        got = await this.#once(method, path, body, h, opts.timeoutMs ?? this.#o.timeoutMs, !!opts.stream);
      } catch (e) {
        err = e;
        if (opts.idempotent === false) {
          const c = e as { cause?: { code?: string } };
          if (c?.cause?.code !== "ECONNREFUSED") {
            throw new APIConnectionError(`${method} ${path.split("?")[0]}: the connection to ${this.baseUrl} broke; not retried: the request may have been done`, e);
          }
        }
      }
      if (got && got.res.status < 400) {
        return { answer: { status: got.res.status, headers: got.res.headers, body: got.body }, res: got.res };
      }
      let ra: number | undefined;
      if (got) {
        ra = retryAfterMs(got.res.headers.get("retry-after"));
        if (!RETRY_STATUSES.has(got.res.status)) throw this.#error(got, ra);
        if (opts.callerCodes?.length) {
          const e = this.#error(got, ra);
          if (opts.callerCodes.includes(e.code)) throw e;
        }
      }
      const delay = ra !== undefined ? Math.min(ra, MAX_RETRY_AFTER_MS) : this.backoff(attempt);
      if (attempt >= this.#o.maxRetries || Date.now() - t0 + delay > this.#o.retryMaxElapsedMs) {
        if (got) throw this.#error(got, ra);
        const cause = err as { message?: string; cause?: { code?: string; message?: string } };
        const why = cause?.cause?.code ?? cause?.cause?.message ?? cause?.message ?? String(err);
        throw new APIConnectionError(`${method} ${path.split("?")[0]}: no answer from ${this.baseUrl} after ${attempt + 1} attempt(s): ${why}`);
      }
      await this.#sleep(delay);
    }
  }

  #error(got: { res: Response; body: Uint8Array }, ra: number | undefined): APIError {
    return errorFromResponse(got.res.status, text(got.body), got.res.headers.get("x-request-id"),
      ra === undefined ? undefined : ra / 1000);
  }

  async json(method: string, path: string, opts: Parameters<Transport["call"]>[2] = {}): Promise<Json> {
    const { answer } = await this.call(method, path, opts);
    const t = text(answer.body);
    if (!t) return {};
    try {
      return JSON.parse(t) as Json;
    } catch (e) {
      throw new APIConnectionError(`the server answered ${answer.status} with a body that is not JSON`, e);
    }
  }

  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return `Transport { baseUrl: '${this.baseUrl}', apiKey: '***' }`;
  }

  toJSON(): Json {
    return { baseUrl: this.baseUrl, apiKey: "***" };
  }
}

export function filesArg(files: ExecuteRequest["files"]): InputFile[] | undefined {
  if (files === undefined || Array.isArray(files)) return files as InputFile[] | undefined;
  return Object.entries(files).map(([path, v]) =>
    typeof v === "string" ? { path, content: v } : { path, content_b64: base64Encode(v) });
}

/** `client.sandbox`: executions. */
export class Sandbox {
  readonly #t: Transport;
  /** Sessions: one sandbox kept across several executions (docs/sessions.md). */
  readonly sessions: Sessions;
  constructor(t: Transport) {
    this.#t = t;
    this.sessions = new Sessions(t, this);
  }

  /**
   * Submit an execution (202 `{id, status}`). Always sends an `Idempotency-Key`
   * (a fresh UUID unless given), the same across this call's retries, so a retry
   * after a lost answer returns the first execution instead of running twice.
   */
  async create(request: ExecuteRequest, options: { idempotencyKey?: string } = {}): Promise<Execution> {
    const body: Json = { ...request };
    if (request.files !== undefined) body.files = filesArg(request.files);
    const key = options.idempotencyKey ?? uuid4();
    return toExecution(await this.#t.json("POST", "/v1/sandbox/executions", { json: body, headers: { "Idempotency-Key": key } }));
  }

  async get(id: string): Promise<Execution> {
    return toExecution(await this.#t.json("GET", `/v1/sandbox/executions/${q(id)}`));
  }

  /**
   * Wait for the terminal status with the server's long-poll (`wait_s` up to 60 s
   * per request; never a tight loop). `timeoutMs` (default none) throws WaitTimeoutError.
   */
  async wait(id: string, options: { timeoutMs?: number } = {}): Promise<Execution> {
    const tm = options.timeoutMs;
    const deadline = tm === undefined || tm === 0 || tm === Infinity ? undefined : Date.now() + tm;
    let last: Execution | undefined;
    for (;;) {
      let waitS = MAX_WAIT_S;
      if (deadline !== undefined) {
        const left = deadline - Date.now();
        if (left <= 0) {
          throw new WaitTimeoutError(`execution ${id} not finished within ${tm} ms (last status ${last?.status ?? "?"})`, id, last);
        }
        waitS = Math.max(1, Math.min(MAX_WAIT_S, Math.ceil(left / 1000)));
      }
      last = toExecution(await this.#t.json("GET", `/v1/sandbox/executions/${q(id)}?wait_s=${waitS}`,
        { timeoutMs: waitS * 1000 + this.#t.timeoutMs }));
      if ((TERMINAL_STATUSES as readonly string[]).includes(last.status)) return last;
    }
  }

  /**
   * Create and wait; resolves with the finished execution (a non-zero exit is
   * `status: "failed"`, not an exception). `timeoutMs` bounds the whole call
   * (default 600000): then WaitTimeoutError, and the execution keeps running.
   */
  async execute(request: ExecuteRequest, options: ExecuteOptions = {}): Promise<Execution> {
    const t0 = Date.now();
    const tm = options.timeoutMs ?? 600_000;
    const ex = await this.create(request, { idempotencyKey: options.idempotencyKey });
    const unbounded = tm === 0 || tm === Infinity;
    return this.wait(ex.id, { timeoutMs: unbounded ? undefined : Math.max(1, tm - (Date.now() - t0)) });
  }

  /** Every execution, newest first, following the cursor page by page (items carry no output). */
  async *list(options: ListOptions = {}): AsyncGenerator<Execution, void, undefined> {
    let after: string | undefined;
    for (;;) {
      const p = new URLSearchParams();
      if (options.status !== undefined) p.set("status", options.status);
      if (options.run_id !== undefined) p.set("run_id", options.run_id);
      if (options.limit !== undefined) p.set("limit", String(options.limit));
      if (after !== undefined) p.set("after", after);
      const qs = p.toString();
      const page = await this.#t.json("GET", "/v1/sandbox/executions" + (qs ? "?" + qs : ""));
      const items = Array.isArray(page.items) ? (page.items as Json[]) : [];
      for (const it of items) yield toExecution(it);
      if (!page.next || !items.length) return;
      after = String(page.next);
    }
  }

  /** Cancel (202 with the current status); a finished one throws ConflictError (already_finished). */
  async cancel(id: string): Promise<Execution> {
    return toExecution(await this.#t.json("POST", `/v1/sandbox/executions/${q(id)}/cancel`));
  }

  /**
   * Send bytes (a string is UTF-8) to the stdin of a running execution created with
   * `stdin_mode: "stream"`; `eof: true` closes it after them (at most 1 MiB a call).
   * `stdin_busy` (429: the program is not reading yet or 1 MiB waits; nothing was
   * taken) is retried until `timeoutMs` (default 60000) has passed; a broken
   * connection is not retried (the bytes may have reached the program).
   */
  async writeStdin(id: string, data: string | Uint8Array,
    options: { eof?: boolean; timeoutMs?: number } = {}): Promise<StdinWritten> {
    const raw = typeof data === "string" ? new TextEncoder().encode(data) : data;
    const path = `/v1/sandbox/executions/${q(id)}/stdin${options.eof ? "?eof=true" : ""}`;
    const deadline = Date.now() + (options.timeoutMs ?? 60_000);
    let delay = 20;
    for (;;) {
      try {
        const r = await this.#t.json("POST", path, { raw, contentType: "application/octet-stream", idempotent: false,
          callerCodes: ["stdin_busy"] });
        return r as unknown as StdinWritten;
      } catch (e) {
        if (!(e instanceof RateLimitError) || e.code !== "stdin_busy" || Date.now() + delay > deadline) throw e;
      }
      await new Promise((res) => setTimeout(res, delay));
      delay = Math.min(delay * 2, 500);
    }
  }

  /** Close the stdin of a running execution created with `stdin_mode: "stream"`. */
  async closeStdin(id: string, options: { timeoutMs?: number } = {}): Promise<StdinWritten> {
    return this.writeStdin(id, new Uint8Array(0), { eof: true, timeoutMs: options.timeoutMs });
  }

  /** The bytes of one collected file, by its path inside the sandbox (`/tmp/outputs/x`). */
  async downloadFile(id: string, path: string): Promise<Uint8Array> {
    const p = path.split("/").filter((s) => s).map(q).join("/");
    const { answer } = await this.#t.call("GET", `/v1/sandbox/executions/${q(id)}/files/${p}`);
    return answer.body;
  }

  /**
   * The execution's events as they come; ends after the terminal status (or at once
   * when the server has nothing after `lastEventId`: `204`).
   *
   * Resumable: the iterator remembers the last `id:` and, when the connection breaks
   * before the terminal status, reconnects with `Last-Event-ID`, so each event is seen
   * exactly once. Reconnects back off like retries, at most `maxRetries` in a row
   * without a new event (and `retryMaxElapsedMs`); then APIConnectionError.
   */
  async *stream(id: string, options: { lastEventId?: string } = {}): AsyncGenerator<ExecutionEvent, void, undefined> {
    let last = options.lastEventId;
    let fails = 0;
    let tFail: number | undefined;
    for (;;) {
      let broke: unknown;
      let progressed = false;
      const st = { noContent: false };
      try {
        for await (const e of this.#streamOnce(id, last, st)) {
          if (e.id !== undefined) last = e.id;
          progressed = true;
          yield e;
          if (e.type === "status" && e.status && (TERMINAL_STATUSES as readonly string[]).includes(e.status)) return;
        }
        if (st.noContent) return;
      } catch (e) {
        if (!(e instanceof APIConnectionError)) throw e;
        broke = e;
      }
      if (last === undefined) { // no id seen: a resume would replay from the start
        if (broke) throw broke;
        if (progressed) throw new APIConnectionError(`event stream of ${id} ended before the terminal status`);
        return;
      }
      if (progressed) {
        fails = 0;
        tFail = undefined;
      }
      if (tFail === undefined) tFail = Date.now();
      const delay = this.#t.backoff(fails);
      if (fails >= this.#t.maxRetries || Date.now() - tFail + delay > this.#t.retryMaxElapsedMs) {
        if (broke) throw broke;
        throw new APIConnectionError(`event stream of ${id} ended before the terminal status`);
      }
      await this.#t.sleep(delay);
      fails++;
    }
  }

  async *#streamOnce(id: string, lastId: string | undefined, st: { noContent: boolean }): AsyncGenerator<ExecutionEvent, void, undefined> {
    const headers: Record<string, string> = { Accept: "text/event-stream" };
    if (lastId !== undefined) headers["Last-Event-ID"] = lastId;
    const { res } = await this.#t.call("GET", `/v1/sandbox/executions/${q(id)}/events`, { headers, stream: true });
    if (res.status === 204) {
      st.noContent = true;
      res.body?.cancel().catch(() => undefined);
      return;
    }
    if (!res.body) return;
    const reader = res.body.getReader();
    const dec = new TextDecoder("utf-8");
    let buf = "";
    let ev: string | undefined;
    let eid: string | undefined;
    let data: string[] = [];
    try {
      for (;;) {
        let chunk: ReadableStreamReadResult<Uint8Array>;
        try {
          chunk = await reader.read();
        } catch (e) {
          throw new APIConnectionError(`event stream of ${id} broke`, e);
        }
        if (chunk.done) return;
        buf += dec.decode(chunk.value, { stream: true });
        let nl: number;
        while ((nl = buf.search(/\r?\n/)) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + (buf[nl] === "\r" ? 2 : 1));
          if (line === "") {
            if (ev !== undefined || data.length) yield toEvent(ev ?? "message", data.join("\n"), eid);
            ev = undefined;
            eid = undefined;
            data = [];
          } else if (!line.startsWith(":")) { // ": ping" heartbeats and other comments are skipped
            const i = line.indexOf(":");
            const name = i < 0 ? line : line.slice(0, i);
            let value = i < 0 ? "" : line.slice(i + 1);
            if (value.startsWith(" ")) value = value.slice(1);
            if (name === "event") ev = value;
            else if (name === "data") data.push(value);
            else if (name === "id" && !value.includes("\0")) eid = value;
          }
        }
      }
    } finally {
      reader.cancel().catch(() => undefined);
    }
  }

  async profiles(): Promise<Json[]> {
    const r = await this.#t.json("GET", "/v1/sandbox/profiles");
    return Array.isArray(r.profiles) ? (r.profiles as Json[]) : [];
  }
}

function toEvent(type: string, data: string, id?: string): ExecutionEvent {
  let d: Json;
  try {
    const v = data ? JSON.parse(data) : {};
    d = v && typeof v === "object" && !Array.isArray(v) ? (v as Json) : { data: v };
  } catch {
    d = { data };
  }
  if (type === "stdout" || type === "stderr") {
    const b = decodeStream(d.data, d.encoding);
    return { type, data: d, bytes: b, text: text(b), id };
  }
  return { type, data: d, status: typeof d.status === "string" ? d.status : undefined, id };
}

/** A JSON object is sent as JSON; a string as YAML (JSON is valid YAML). */
function docOpts(doc: Json | string): { json?: unknown; raw?: string; contentType?: string } {
  return typeof doc === "string" ? { raw: doc, contentType: "application/yaml" } : { json: doc };
}

export class Contracts {
  readonly #t: Transport;
  constructor(t: Transport) {
    this.#t = t;
  }
  async validate(name: string, document: Json | string): Promise<ValidationResult> {
    const r = await this.#t.json("POST", `/v1/contracts/${q(name)}/validate`, docOpts(document));
    return { valid: r.valid === true, errors: Array.isArray(r.errors) ? (r.errors as ValidationResult["errors"]) : [], raw: r };
  }
}

export class Manifests {
  readonly #t: Transport;
  constructor(t: Transport) {
    this.#t = t;
  }
  async apply(manifest: Json | string): Promise<ManifestResult> {
    const r = await this.#t.json("POST", "/v1/manifests/apply", docOpts(manifest));
    return { kind: String(r.kind ?? ""), name: String(r.name ?? ""), result: String(r.result ?? ""),
             manifest: r.manifest as Json | undefined, raw: r };
  }
  async get(kind: string, name: string): Promise<Json> {
    return this.#t.json("GET", `/v1/manifests/${q(kind)}/${q(name)}`);
  }
  async delete(kind: string, name: string): Promise<Json> {
    return this.#t.json("DELETE", `/v1/manifests/${q(kind)}/${q(name)}`);
  }
}

/**
 * Client of the eai-sandbox API.
 *
 *     const client = new EnterpriseAI({ baseUrl: "http://127.0.0.1:8080", apiKey: process.env.EAI_API_KEY });
 *     const ex = await client.sandbox.execute({ image: "python:3.11-slim", profile: "gvisor-small", command: ["python3", "-c", "print(1)"] });
 */
export class EnterpriseAI {
  readonly sandbox: Sandbox;
  readonly contracts: Contracts;
  readonly manifests: Manifests;
  /** The tenant's volumes (volumes.ts, docs/volumes.md). */
  readonly volumes: Volumes;
  /** The agent view: `agents`, `runs`, `sessions` (agent.ts). */
  readonly agent: AgentView;
  readonly #t: Transport;
  readonly #options: ClientOptions;

  constructor(options: ClientOptions = {}) {
    const base = (options.baseUrl || env("EAI_URL") || DEFAULT_BASE_URL).replace(/\/+$/, "");
    if (!/^https?:\/\/[^/]/.test(base)) throw new EnterpriseAIError(`baseUrl must be an http:// or https:// URL, got ${JSON.stringify(base)}`);
    const key = options.apiKey ?? env("EAI_API_KEY");
    if (!key) throw new EnterpriseAIError("no API key: pass apiKey or set EAI_API_KEY");
    if (/[\r\n\0]/.test(key) || /[^\x20-\x7e]/.test(key)) throw new EnterpriseAIError("the API key holds characters a header cannot carry");
    this.#options = { ...options, apiKey: key, baseUrl: base };
    this.#t = new Transport(base, key, options);
    this.sandbox = new Sandbox(this.#t);
    this.contracts = new Contracts(this.#t);
    this.manifests = new Manifests(this.#t);
    this.volumes = new Volumes(this.#t);
    this.agent = new AgentView(this.#t, this.sandbox);
  }

  get baseUrl(): string {
    return this.#t.baseUrl;
  }

  get language(): string | undefined {
    return this.#t.language;
  }

  /** A client with this one's settings and another `Accept-Language`. */
  withLanguage(language: string | undefined): EnterpriseAI {
    return new EnterpriseAI({ ...this.#options, language });
  }

  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return `EnterpriseAI { baseUrl: '${this.baseUrl}', apiKey: '***', language: ${this.language === undefined ? "undefined" : `'${this.language}'`} }`;
  }

  toJSON(): Json {
    return { baseUrl: this.baseUrl, apiKey: "***", language: this.language };
  }

  toString(): string {
    return `EnterpriseAI(${this.baseUrl})`;
  }
}
