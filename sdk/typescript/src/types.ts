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
  /** A list as the API takes it, or `{path: string | Uint8Array}` (bytes are sent as content_b64). */
  files?: InputFile[] | Record<string, string | Uint8Array>;
  collect?: string[];
  network?: { egress?: string[] };
  tool?: string;
  project_id?: string;
  agent_id?: string;
  run_id?: string;
  [k: string]: unknown;
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
