/**
 * Sessions (docs/sessions.md): one sandbox kept across several executions.
 *
 *   const s = await client.sandbox.sessions.create({ image: "python:3.11-slim", profile: "gvisor-small" });
 *   await s.files.write("/tmp/a.py", "print(6*7)");
 *   const ex = await s.run(["python3", "/tmp/a.py"]);   // waits like execute
 *   await s.close();
 */
import type { Sandbox, Transport } from "./client.js";
import { filesArg, q, toExecution } from "./client.js";
import type {
  Execution, ForkOptions, SessionCreateRequest, SessionExecRequest, SessionFileInfo, SessionInfo, SessionNetwork,
  SnapshotInfo,
} from "./types.js";

type Json = Record<string, unknown>;

function filePath(p: string): string {
  return p.split("/").filter((s) => s).map(q).join("/");
}

function toSession(raw: Json): SessionInfo {
  return { ...raw, id: String(raw.id ?? ""), status: String(raw.status ?? "") } as SessionInfo;
}

/** `session.files`: the session's /tmp, raw bytes both ways. */
export class SessionFiles {
  readonly #t: Transport;
  readonly #base: string;
  /** `base`: another owner of files, `/v1/volumes/{ref}` for `client.volumes.files(ref)`. */
  constructor(t: Transport, id: string, base?: string) {
    this.#t = t;
    this.#base = base ?? `/v1/sandbox/sessions/${q(id)}`;
  }

  #url(path: string): string {
    return `${this.#base}/files/${filePath(path)}`;
  }

  /** PUT the file (a string as UTF-8); resolves with `{path, size}`. */
  async write(path: string, data: string | Uint8Array): Promise<{ path: string; size: number }> {
    const raw = typeof data === "string" ? new TextEncoder().encode(data) : data;
    return (await this.#t.json("PUT", this.#url(path), { raw, contentType: "application/octet-stream" })) as
      { path: string; size: number };
  }

  async read(path: string): Promise<Uint8Array> {
    const { answer } = await this.#t.call("GET", this.#url(path), { headers: { Accept: "application/octet-stream" } });
    return answer.body;
  }

  /** Every file under `path` (a session: default /tmp, at most 1000; a volume: its root, at most 10000), recursive. */
  async list(path?: string): Promise<SessionFileInfo[]> {
    const qs = path ? "?" + new URLSearchParams({ path }).toString() : "";
    const r = await this.#t.json("GET", `${this.#base}/files${qs}`);
    return Array.isArray(r.items) ? (r.items as SessionFileInfo[]) : [];
  }

  /** A file, a symlink or an empty directory. */
  async delete(path: string): Promise<void> {
    await this.#t.call("DELETE", this.#url(path));
  }
}

/** A live session: `run`, `submit`, `files`, `refresh`, `pause`, `resume`, `close`; `info` is the last view. */
export class Session {
  readonly #t: Transport;
  readonly #sandbox: Sandbox;
  readonly id: string;
  readonly files: SessionFiles;
  info: SessionInfo;

  constructor(t: Transport, sandbox: Sandbox, info: SessionInfo) {
    this.#t = t;
    this.#sandbox = sandbox;
    this.id = info.id;
    this.info = info;
    this.files = new SessionFiles(t, info.id);
  }

  get status(): string {
    return this.info.status;
  }

  /** POST an execution in the session (202 `{id, status}`), not waiting. No Idempotency-Key on this
   * route: a lost answer is not retried (it could run twice); 429/503 are. */
  async submit(request: SessionExecRequest): Promise<Execution> {
    const body: Json = { ...request };
    if (request.files !== undefined) body.files = filesArg(request.files);
    return toExecution(await this.#t.json("POST", `/v1/sandbox/sessions/${q(this.id)}/executions`,
      { json: body, idempotent: false }));
  }

  /** An execution inside the session, waited for like `sandbox.execute` (`timeoutMs` overall, default 600000). */
  async run(command: string[] | SessionExecRequest, options: { timeoutMs?: number } = {}): Promise<Execution> {
    const t0 = Date.now();
    const tm = options.timeoutMs ?? 600_000;
    const ex = await this.submit(Array.isArray(command) ? { command } : command);
    const unbounded = tm === 0 || tm === Infinity;
    return this.#sandbox.wait(ex.id, { timeoutMs: unbounded ? undefined : Math.max(1, tm - (Date.now() - t0)) });
  }

  async refresh(): Promise<SessionInfo> {
    this.info = toSession(await this.#t.json("GET", `/v1/sandbox/sessions/${q(this.id)}`));
    return this.info;
  }

  /** `runsc checkpoint` of its sandbox to disk (files and processes kept). */
  async pause(): Promise<SessionInfo> {
    return this.#state("pause");
  }

  /** Brings a paused session back (`runsc restore`). */
  async resume(): Promise<SessionInfo> {
    return this.#state("resume");
  }

  async #state(what: "pause" | "resume"): Promise<SessionInfo> {
    this.info = toSession(await this.#t.json("POST", `/v1/sandbox/sessions/${q(this.id)}/${what}`,
      { json: {}, idempotent: false, timeoutMs: Math.max(this.#t.timeoutMs, 60_000) }));
    return this.info;
  }

  /** POST .../snapshots: a snapshot of the running session (processes, memory, /tmp), which keeps
   * running; kept `ttl_s` seconds (default: the server's, 7 days). Fork it with `sessions.fork(snap.id)`. */
  async snapshot(options: { ttl_s?: number } = {}): Promise<SnapshotInfo> {
    return (await this.#t.json("POST", `/v1/sandbox/sessions/${q(this.id)}/snapshots`,
      { json: options.ttl_s !== undefined ? { ttl_s: options.ttl_s } : {}, idempotent: false,
        timeoutMs: Math.max(this.#t.timeoutMs, 120_000) })) as unknown as SnapshotInfo;
  }

  /** GET .../network: its allow list and network log. */
  async network(): Promise<SessionNetwork> {
    return (await this.#t.json("GET", `/v1/sandbox/sessions/${q(this.id)}/network`)) as unknown as SessionNetwork;
  }

  /** PUT .../network: replaces the allow list of the live session (checked against the
   * profile's; effective for the next connection). Resolves with the new list. */
  async setEgress(egress: string[]): Promise<string[]> {
    const d = (await this.#t.json("PUT", `/v1/sandbox/sessions/${q(this.id)}/network`, { json: { egress } })) as
      { egress?: string[] };
    this.info = { ...this.info, network: { egress: d.egress ?? [] } };
    return d.egress ?? [];
  }

  /** DELETE: ends the session; resolves with the ended view (its usage). */
  async close(): Promise<SessionInfo> {
    this.info = toSession(await this.#t.json("DELETE", `/v1/sandbox/sessions/${q(this.id)}`,
      { timeoutMs: Math.max(this.#t.timeoutMs, 60_000) }));
    return this.info;
  }

  toJSON(): SessionInfo {
    return this.info;
  }
}

/** `client.sandbox.sessions`. */
export class Sessions {
  readonly #t: Transport;
  readonly #sandbox: Sandbox;
  constructor(t: Transport, sandbox: Sandbox) {
    this.#t = t;
    this.#sandbox = sandbox;
  }

  /** POST a session; resolves once its sandbox is ready (`timeoutMs`, default 120000). Sessions have no
   * Idempotency-Key: a lost answer is not retried (429/503 are). */
  async create(request: SessionCreateRequest, options: { timeoutMs?: number } = {}): Promise<Session> {
    const r = await this.#t.json("POST", "/v1/sandbox/sessions",
      { json: request, idempotent: false, timeoutMs: options.timeoutMs ?? 120_000 });
    return new Session(this.#t, this.#sandbox, toSession(r));
  }

  async get(id: string): Promise<Session> {
    return new Session(this.#t, this.#sandbox, toSession(await this.#t.json("GET", `/v1/sandbox/sessions/${q(id)}`)));
  }

  async list(options: { status?: string } = {}): Promise<SessionInfo[]> {
    const qs = options.status ? "?" + new URLSearchParams({ status: options.status }).toString() : "";
    const r = await this.#t.json("GET", "/v1/sandbox/sessions" + qs);
    return Array.isArray(r.items) ? (r.items as Json[]).map(toSession) : [];
  }

  async close(id: string): Promise<SessionInfo> {
    return toSession(await this.#t.json("DELETE", `/v1/sandbox/sessions/${q(id)}`,
      { timeoutMs: Math.max(this.#t.timeoutMs, 60_000) }));
  }

  /** One new session restored from a snapshot (its own id, sandbox and copy of /tmp). */
  async fork(snapshotId: string, options: ForkOptions = {}): Promise<Session> {
    const r = await this.#fork(snapshotId, undefined, options);
    return new Session(this.#t, this.#sandbox, toSession(r));
  }

  /** `count` new sessions restored from a snapshot (1..10 by default), each running. */
  async forkMany(snapshotId: string, count: number, options: ForkOptions = {}): Promise<Session[]> {
    const r = await this.#fork(snapshotId, count, options);
    const items = Array.isArray(r.items) ? (r.items as Json[]) : [];
    return items.filter((i) => i.id).map((i) => new Session(this.#t, this.#sandbox, toSession(i)));
  }

  async #fork(snapshotId: string, count: number | undefined, options: ForkOptions): Promise<Json> {
    const { timeoutMs, ...rest } = options;
    const body: Json = { from_snapshot: snapshotId, ...rest };
    if (count !== undefined) body.count = count;
    return this.#t.json("POST", "/v1/sandbox/sessions", { json: body, idempotent: false, timeoutMs: timeoutMs ?? 180_000 });
  }

  /** This tenant's snapshots on the node (`sessionId`: of that session only). */
  async snapshots(options: { sessionId?: string } = {}): Promise<SnapshotInfo[]> {
    const qs = options.sessionId ? "?" + new URLSearchParams({ session_id: options.sessionId }).toString() : "";
    const r = await this.#t.json("GET", "/v1/sandbox/snapshots" + qs);
    return Array.isArray(r.items) ? (r.items as unknown as SnapshotInfo[]) : [];
  }

  async getSnapshot(id: string): Promise<SnapshotInfo> {
    return (await this.#t.json("GET", `/v1/sandbox/snapshots/${q(id)}`)) as unknown as SnapshotInfo;
  }

  /** DELETE: its image and /tmp copy removed; the sessions forked from it live on. */
  async deleteSnapshot(id: string): Promise<SnapshotInfo> {
    return (await this.#t.json("DELETE", `/v1/sandbox/snapshots/${q(id)}`,
      { timeoutMs: Math.max(this.#t.timeoutMs, 60_000) })) as unknown as SnapshotInfo;
  }
}
