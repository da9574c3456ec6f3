/**
 * The agent view (docs/api.md "Runs and agents"): what an agent platform reads.
 *
 *   const run = await client.agent.runs.get("run-42");          // executions, sessions, counts, usage, trace ids
 *   for await (const a of client.agent.agents.list()) console.log(a.agent_id, a.runs);
 *   const s = await client.agent.sessions.create({ image: "python:3.11-slim", profile: "gvisor", run_id: "run-42" });
 *
 * `AgentsClient`, `RunsClient` and `SessionsClient` (the names of the Python module
 * `enterprise_ai.agent`) are what `client.agent.agents`, `.runs` and `.sessions` hold.
 */
import type { Sandbox, Transport } from "./client.js";
import { q } from "./client.js";
import { NotFoundError } from "./errors.js";
import type { Session, Sessions } from "./sessions.js";
import type { SessionCreateRequest, SessionInfo, Usage } from "./types.js";

type Json = Record<string, unknown>;

/** One execution of a run (no output: read it with `client.sandbox.get(id)`). */
export interface RunExecution {
  id: string;
  status: string;
  profile: string | null;
  session_id: string | null;
  trace_id: string | null;
  created_at: string | null;
  started_at: string | null;
  finished_at: string | null;
  usage: Usage | null;
  [k: string]: unknown;
}

/** `GET /v1/runs/{run_id}`. */
export interface Run {
  run_id: string;
  agent_id: string | null;
  project_id: string | null;
  executions: RunExecution[];
  truncated: boolean;
  total: number;
  counts: Record<string, number>;
  usage: Usage;
  trace_ids: string[];
  first_at: string | null;
  last_at: string | null;
  sessions: SessionInfo[];
  sessions_truncated: boolean;
  sessions_scope: "node" | string;
  [k: string]: unknown;
}

/** One item of `GET /v1/runs`. */
export interface RunSummary {
  run_id: string;
  agent_id: string | null;
  project_id: string | null;
  executions: number;
  first_at: string | null;
  last_at: string | null;
}

/** An agent's usage on one profile. */
export interface ProfileUsage {
  profile: string | null;
  executions: number;
  cpu_seconds: number;
  memory_mb_seconds: number;
  duration_s: number;
  last_seen: string | null;
}

/** `GET /v1/agents/{agent_id}`. */
export interface Agent {
  agent_id: string;
  executions: number;
  runs: number;
  newest_run: string | null;
  last_seen: string | null;
  usage: ProfileUsage[];
}

/** One item of `GET /v1/agents`. */
export interface AgentSummary {
  agent_id: string;
  executions: number;
  runs: number;
  last_seen: string | null;
}

export interface Page<T> {
  items: T[];
  next: string | null;
}

async function page<T>(t: Transport, path: string, params: Record<string, string | number | undefined>): Promise<Page<T>> {
  const sp = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) sp.set(k, String(v));
  const qs = sp.toString();
  const r = await t.json("GET", path + (qs ? "?" + qs : ""));
  const items = Array.isArray(r.items) ? (r.items as T[]) : [];
  return { items, next: typeof r.next === "string" && r.next ? r.next : null };
}

async function* every<T>(t: Transport, path: string, params: Record<string, string | number | undefined>): AsyncGenerator<T> {
  let after: string | undefined;
  for (;;) {
    const p = await page<T>(t, path, { ...params, after });
    yield* p.items;
    if (!p.next || p.items.length === 0) return;
    after = p.next;
  }
}

export interface RunListOptions {
  agentId?: string;
  projectId?: string;
  /** page size, 1..100 */
  limit?: number;
}

/** `client.agent.runs`. */
export class RunsClient {
  readonly #t: Transport;
  constructor(t: Transport) {
    this.#t = t;
  }

  /** The run; `limit` (1..1000) caps the executions listed. A run this tenant lacks rejects with NotFoundError. */
  async get(runId: string, options: { limit?: number } = {}): Promise<Run> {
    const qs = options.limit !== undefined ? `?limit=${options.limit}` : "";
    return (await this.#t.json("GET", `/v1/runs/${q(runId)}${qs}`)) as unknown as Run;
  }

  /** Every run (by run_id), page after page. */
  list(options: RunListOptions = {}): AsyncGenerator<RunSummary> {
    return every<RunSummary>(this.#t, "/v1/runs", { agent_id: options.agentId, project_id: options.projectId, limit: options.limit });
  }

  /** One page and its `next` cursor. */
  page(options: RunListOptions & { after?: string } = {}): Promise<Page<RunSummary>> {
    return page<RunSummary>(this.#t, "/v1/runs", {
      agent_id: options.agentId, project_id: options.projectId, limit: options.limit, after: options.after,
    });
  }
}

/** `client.agent.agents`. */
export class AgentsClient {
  readonly #t: Transport;
  constructor(t: Transport) {
    this.#t = t;
  }

  /** Every agent of the tenant (by agent_id), page after page. */
  list(options: { limit?: number } = {}): AsyncGenerator<AgentSummary> {
    return every<AgentSummary>(this.#t, "/v1/agents", { limit: options.limit });
  }

  async get(agentId: string): Promise<Agent> {
    return (await this.#t.json("GET", `/v1/agents/${q(agentId)}`)) as unknown as Agent;
  }

  /** The agent's runs (`GET /v1/runs?agent_id=`). */
  runs(agentId: string, options: { projectId?: string; limit?: number } = {}): AsyncGenerator<RunSummary> {
    return every<RunSummary>(this.#t, "/v1/runs", { agent_id: agentId, project_id: options.projectId, limit: options.limit });
  }
}

/** `client.agent.sessions`: `client.sandbox.sessions` whose `create` takes project_id, agent_id, run_id
 * (its executions inherit them), plus `forRun`. Sessions live on the node that runs them. */
export class SessionsClient {
  readonly #t: Transport;
  readonly #s: Sessions;
  constructor(t: Transport, sandbox: Sandbox) {
    this.#t = t;
    this.#s = sandbox.sessions;
  }

  create(request: SessionCreateRequest & { project_id?: string; agent_id?: string; run_id?: string },
    options: { timeoutMs?: number } = {}): Promise<Session> {
    return this.#s.create(request, options);
  }

  get(id: string): Promise<Session> {
    return this.#s.get(id);
  }

  list(options: { status?: string } = {}): Promise<SessionInfo[]> {
    return this.#s.list(options);
  }

  close(id: string): Promise<SessionInfo> {
    return this.#s.close(id);
  }

  /** This node's sessions created with `runId` (empty when the run has none). */
  async forRun(runId: string): Promise<SessionInfo[]> {
    try {
      return (await new RunsClient(this.#t).get(runId, { limit: 1 })).sessions ?? [];
    } catch (e) {
      if (e instanceof NotFoundError) return [];
      throw e;
    }
  }
}

/** `client.agent`. */
export class AgentView {
  readonly agents: AgentsClient;
  readonly runs: RunsClient;
  readonly sessions: SessionsClient;
  constructor(t: Transport, sandbox: Sandbox) {
    this.agents = new AgentsClient(t);
    this.runs = new RunsClient(t);
    this.sessions = new SessionsClient(t, sandbox);
  }
}

export type { Json as AgentJson };
