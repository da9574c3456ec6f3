export { EnterpriseAI, Sandbox, Contracts, Manifests, VERSION, toExecution } from "./client.js";
export type { ClientOptions, ExecuteOptions } from "./client.js";
export {
  EnterpriseAIError, APIError, APIConnectionError, WaitTimeoutError, AuthenticationError, NotFoundError,
  ValidationError, ConflictError, RateLimitError, UnavailableError, ServerError,
} from "./errors.js";
export type { ErrorDetail } from "./errors.js";
export { TERMINAL_STATUSES } from "./types.js";
export { Sessions, Session, SessionFiles } from "./sessions.js";
export { Volumes } from "./volumes.js";
export { verifySignature, sign, SIGNATURE_HEADER, EVENT_ID_HEADER } from "./webhooks.js";
export type {
  Execution, ExecutionEvent, ExecutionStatus, ExecuteRequest, FileInfo, InputFile, Limits, ListOptions,
  ManifestResult, Usage, ValidationResult, CallbackView, SessionCreateRequest, SessionInfo, SessionNetwork, SessionExecRequest, SnapshotInfo, ForkOptions,
  SessionFileInfo, StdinWritten, VolumeInfo, VolumeMount,
} from "./types.js";
export { AgentsClient, RunsClient, SessionsClient, AgentView } from "./agent.js";
export type { Agent, AgentSummary, Page, ProfileUsage, Run, RunExecution, RunListOptions, RunSummary } from "./agent.js";
