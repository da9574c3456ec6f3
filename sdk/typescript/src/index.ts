export { EnterpriseAI, Sandbox, Contracts, Manifests, VERSION, toExecution } from "./client.js";
export type { ClientOptions, ExecuteOptions } from "./client.js";
export {
  EnterpriseAIError, APIError, APIConnectionError, WaitTimeoutError, AuthenticationError, NotFoundError,
  ValidationError, ConflictError, RateLimitError, UnavailableError, ServerError,
} from "./errors.js";
export type { ErrorDetail } from "./errors.js";
export { TERMINAL_STATUSES } from "./types.js";
export type {
  Execution, ExecutionEvent, ExecutionStatus, ExecuteRequest, FileInfo, InputFile, Limits, ListOptions,
  ManifestResult, Usage, ValidationResult,
} from "./types.js";
