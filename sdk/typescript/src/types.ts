/** Request and response shapes of the API (field names as on the wire). */

export type ExecutionStatus = "queued" | "running" | "succeeded" | "failed" | "timeout" | "oom_killed" | "cancelled" | "error";
export const TERMINAL_STATUSES: readonly ExecutionStatus[] = ["succeeded", "failed", "timeout", "oom_killed", "cancelled", "error"];

export interface Limits {
  cpu?: string;
  memory?: string | number;
  timeout_s?: number;
  pids?: number;
  output_bytes?: number;
  disk?: string | number;
  [k: string]: unknown;
}

export interface InputFile {
  path: string;
  content?: string;
  content_b64?: string;
}

export interface ExecuteRequest {
  image?: string;
  profile?: string;
  command?: string[];
  limits?: Limits;
  env?: Record<string, string>;
  stdin?: string;
  /** `"stream"`: stdin stays open, fed by `sandbox.writeStdin(id, ...)` until `closeStdin(id)` (`stdin` must then be absent). */
  stdin_mode?: "data" | "stream";
  /** A list as the API takes it, or `{path: string | Uint8Array}` (bytes are sent as content_b64). */
  files?: InputFile[] | Record<string, string | Uint8Array>;
  collect?: string[];
  network?: { egress?: string[] };
  tool?: string;
  project_id?: string;
  agent_id?: string;
  run_id?: string;
  /** Completion callback: eaid POSTs the summary to `url` once terminal, signed with `secret`. */
  callback?: { url: string; secret: string };
  /** the tenant's volumes to mount (docs/volumes.md) */
  volumes?: VolumeMount[];
  [k: string]: unknown;
}

/** The `callback` view of an execution (the secret is never shown). */
export interface CallbackView {
  url: string;
  attempts?: number;
  last_status?: number | string | null;
  delivered_at?: string | null;
}

export interface FileInfo {
  path: string;
  size?: number;
  sha256?: string;
}

export interface Usage {
  cpu_seconds?: number;
  memory_mb_seconds?: number;
  duration_s?: number;
}

/**
 * One execution. `stdout`/`stderr` are text (base64 output already decoded, invalid
 * UTF-8 replaced); `stdoutBytes`/`stderrBytes` hold the exact bytes; `raw` is the JSON.
 */
export interface Execution {
  id: string;
  status: ExecutionStatus | string;
  profile?: string;
  backend?: string;
  image?: string;
  command?: string[];
  tool?: string | null;
  limits?: Limits;
  exit_code?: number | null;
  signal?: number | null;
  stdout: string;
  stderr: string;
  stdoutBytes: Uint8Array;
  stderrBytes: Uint8Array;
  stdout_encoding?: string;
  stderr_encoding?: string;
  stdout_truncated?: boolean;
  stderr_truncated?: boolean;
  files?: FileInfo[];
  usage?: Usage | null;
  error?: { code: string; message: string } | null;
  project_id?: string | null;
  agent_id?: string | null;
  run_id?: string | null;
  trace_id?: string | null;
  created_at?: string;
  started_at?: string | null;
  finished_at?: string | null;
  callback?: CallbackView | null;
  session_id?: string | null;
  raw: Record<string, unknown>;
  [k: string]: unknown;
}

/** One Server-Sent Event: `stdout`/`stderr` chunks (decoded in `bytes`/`text`) or `status`. */
export interface ExecutionEvent {
  type: "stdout" | "stderr" | "status" | string;
  data: Record<string, unknown>;
  bytes?: Uint8Array;
  text?: string;
  status?: string;
  /** The event's `id:` (one sequence per execution; resume point). */
  id?: string;
}

export interface ValidationResult {
  valid: boolean;
  errors: { path?: string; message?: string }[];
  raw: Record<string, unknown>;
}

export interface ManifestResult {
  kind: string;
  name: string;
  result: "created" | "updated" | string;
  manifest?: Record<string, unknown>;
  raw: Record<string, unknown>;
}

export interface ListOptions {
  status?: string;
  run_id?: string;
  /** Page size (1..100); iteration follows the cursor through every page. */
  limit?: number;
}

/** A volume mounted by an execution or a session (docs/volumes.md "Mounting"). */
export interface VolumeMount {
  /** the volume's name or id */
  name: string;
  /** absolute, under /mnt */
  path: string;
  read_only?: boolean;
}

/** A volume as the server describes it (docs/volumes.md); `used_bytes`/`free_bytes` come with `get`. */
export interface VolumeInfo {
  id: string;
  name: string;
  size_bytes: number;
  status: "creating" | "ready" | "deleting" | "deleted" | string;
  created_at?: string;
  attached?: { writer: string | null; readers: number };
  usage?: { gb_hours?: number; [k: string]: unknown };
  used_bytes?: number;
  free_bytes?: number;
  [k: string]: unknown;
}

export interface SessionCreateRequest {
  image: string;
  profile?: string;
  limits?: Limits;
  env?: Record<string, string>;
  idle_timeout_s?: number;
  ttl_s?: number;
  max_concurrent_executions?: number;
  auto_resume?: boolean;
  /** the idle timeout pauses it (default true) instead of ending it */
  auto_pause?: boolean;
  paused_ttl_s?: number;
  network?: { egress?: string[] };
  /** mounted for the session's whole life */
  volumes?: VolumeMount[];
  [k: string]: unknown;
}

/** GET .../network: the session's allow list and network log. */
export interface SessionNetwork {
  session_id: string;
  egress: string[];
  log: { entries: Record<string, unknown>[]; [k: string]: unknown } | null;
  summary: Record<string, number> | null;
}

/** A session as the server describes it (docs/sessions.md). */
export interface SessionInfo {
  id: string;
  status: "starting" | "running" | "pausing" | "paused" | "resuming" | "ending" | "ended" | "failed" |
    "interrupted" | string;
  profile?: string;
  image?: string;
  limits?: Limits;
  idle_timeout_s?: number;
  ttl_s?: number;
  max_concurrent_executions?: number;
  created_at?: string;
  expires_at?: string;
  last_used_at?: string | null;
  ended_at?: string | null;
  end_reason?: string | null;
  executions?: number;
  usage?: Usage | null;
  auto_pause?: boolean;
  paused_ttl_s?: number;
  paused_at?: string | null;
  /** while paused: "user", "idle" or "drain" (a call resumes "idle" and "drain" ones) */
  paused_by?: "user" | "idle" | "drain" | null;
  network?: { egress: string[]; summary?: Record<string, number> };
  /** a fork: the snapshot it was restored from */
  from_snapshot?: string | null;
  [k: string]: unknown;
}

/** A snapshot of a session (docs/sessions.md "Snapshots and forks"). */
export interface SnapshotInfo {
  id: string;
  session_id: string;
  status: "creating" | "ready" | "deleting" | "deleted" | string;
  size_bytes: number;
  created_at?: string;
  expires_at?: string;
  profile?: string;
  image?: string;
  forks?: number;
  [k: string]: unknown;
}

/** POST /v1/sandbox/sessions with from_snapshot: the fork's own network and lifetimes. */
export interface ForkOptions {
  network?: { egress: string[] };
  idle_timeout_s?: number;
  ttl_s?: number;
  project_id?: string;
  agent_id?: string;
  run_id?: string;
  timeoutMs?: number;
}

/** An execution inside a session: the session gives profile, image and limits. */
export interface SessionExecRequest {
  command: string[];
  stdin?: string;
  /** "stream": the input is sent while it runs (`writeStdin` / `closeStdin`). */
  stdin_mode?: "data" | "stream";
  env?: Record<string, string>;
  timeout_s?: number;
  output_bytes?: number;
  files?: InputFile[] | Record<string, string | Uint8Array>;
  collect?: string[];
  project_id?: string;
  agent_id?: string;
  run_id?: string;
  [k: string]: unknown;
}

export interface SessionFileInfo {
  path: string;
  size?: number;
  type?: "file" | "dir" | "symlink" | string;
}

/** The answer of `POST /v1/sandbox/executions/{id}/stdin`. */
export interface StdinWritten {
  id: string;
  written: number;
  eof: boolean;
  /** bytes the program has not read yet */
  pending: number;
}
