/**
 * Errors of the SDK: one class per kind of failure a caller handles differently.
 * Every non-2xx answer becomes an {@link APIError} subclass carrying the server's
 * envelope. The API key is never part of an error.
 */

export interface ErrorDetail {
  path?: string;
  message?: string;
  [k: string]: unknown;
}

/** Base class of every error the SDK throws. */
export class EnterpriseAIError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** No usable answer from the server (refused, reset, dropped) after the retries. */
export class APIConnectionError extends EnterpriseAIError {
  readonly cause?: unknown;
  constructor(message: string, cause?: unknown) {
    super(message);
    this.cause = cause;
  }
}

/** The SDK's own overall timeout of `execute`/`wait` passed; the execution keeps running. */
export class WaitTimeoutError extends EnterpriseAIError {
  readonly executionId?: string;
  readonly last?: unknown;
  constructor(message: string, executionId?: string, last?: unknown) {
    super(message);
    this.executionId = executionId;
    this.last = last;
  }
}

export interface APIErrorInit {
  status: number;
  code: string;
  message: string;
  messageI18n?: Record<string, string>;
  requestId?: string;
  details?: ErrorDetail[];
  body?: unknown;
  retryAfter?: number;
}

/** An error answer of the API. */
export class APIError extends EnterpriseAIError {
  readonly status: number;
  readonly code: string;
  /** The message in the negotiated language (`Accept-Language`). */
  readonly errorMessage: string;
  readonly messageI18n: Record<string, string>;
  readonly requestId?: string;
  readonly details: ErrorDetail[];
  readonly body?: unknown;
  /** Seconds from `Retry-After`, when the answer had one. */
  readonly retryAfter?: number;

  constructor(init: APIErrorInit) {
    let text = `${init.status} ${init.code}: ${init.message}`;
    const det = init.details ?? [];
    if (det.length) text += " [" + det.slice(0, 5).map((d) => `${d.path ?? ""}: ${d.message ?? ""}`).join("; ") + "]";
    if (init.requestId) text += ` (request_id ${init.requestId})`;
    super(text);
    this.status = init.status;
    this.code = init.code;
    this.errorMessage = init.message;
    this.messageI18n = { ...(init.messageI18n ?? {}) };
    this.requestId = init.requestId;
    this.details = det;
    this.body = init.body;
    this.retryAfter = init.retryAfter;
  }

  get httpStatus(): number {
    return this.status;
  }
}

/** 401 unauthenticated, 403 forbidden. */
export class AuthenticationError extends APIError {}
/** 404: missing, or another tenant's (indistinguishable by design). */
export class NotFoundError extends APIError {}
/** 400, 413, 415, 422: the request is wrong; `details` names the fields. */
export class ValidationError extends APIError {}
/** 409: already_finished, idempotency_conflict, conflict. */
export class ConflictError extends APIError {}
/** 429 rate_limited (retried first, honouring Retry-After). */
export class RateLimitError extends APIError {}
/** 503 sandbox_unavailable / storage_unavailable (retried first). */
export class UnavailableError extends APIError {}
/** 500 and every other 5xx. */
export class ServerError extends APIError {}

export function errorClassFor(status: number): typeof APIError {
  if (status === 401 || status === 403) return AuthenticationError;
  if (status === 404) return NotFoundError;
  if (status === 400 || status === 413 || status === 415 || status === 422) return ValidationError;
  if (status === 409) return ConflictError;
  if (status === 429) return RateLimitError;
  if (status === 503) return UnavailableError;
  if (status >= 500) return ServerError;
  return APIError;
}

export function errorFromResponse(status: number, text: string, requestIdHeader: string | null,
                                  retryAfter: number | undefined): APIError {
  const Cls = errorClassFor(status);
  let env: unknown;
  try {
    env = text ? JSON.parse(text) : undefined;
  } catch {
    env = undefined;
  }
  const err = env && typeof env === "object" ? (env as Record<string, unknown>).error : undefined;
  if (err && typeof err === "object") {
    const e = err as Record<string, unknown>;
    return new Cls({
      status,
      code: typeof e.code === "string" ? e.code : `http_${status}`,
      message: typeof e.message === "string" ? e.message : "",
      messageI18n: e.message_i18n && typeof e.message_i18n === "object" ? (e.message_i18n as Record<string, string>) : {},
      requestId: typeof e.request_id === "string" ? e.request_id : requestIdHeader ?? undefined,
      details: Array.isArray(e.details) ? (e.details as ErrorDetail[]) : [],
      body: env,
      retryAfter,
    });
  }
  return new Cls({ status, code: `http_${status}`, message: text.slice(0, 200) || `HTTP ${status}`,
                   requestId: requestIdHeader ?? undefined, retryAfter });
}
