package eai

import (
	"fmt"
	"time"
)

// ErrorDetail is one entry of the envelope's details: a JSON pointer into the
// request (query parameters are /query/<name>) and what is wrong there.
type ErrorDetail struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// APIError is every non-2xx answer of the server: the error envelope plus the
// HTTP status.  The concrete error returned is one of the class types below
// (each wraps an *APIError), so callers can use errors.As with the class they
// handle, or with *APIError for all of them.
type APIError struct {
	Status      int               // HTTP status
	Code        string            // stable code, docs/errors.md
	Message     string            // in the negotiated language (WithLanguage)
	MessageI18n map[string]string // always "en" and "fr"
	RequestID   string
	Details     []ErrorDetail
	RetryAfter  time.Duration // from Retry-After, 0 when absent
	Body        []byte        // the raw answer
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("eai: %d %s: %s", e.Status, e.Code, e.Message)
	for i, d := range e.Details {
		if i == 5 {
			s += fmt.Sprintf(" (+%d more)", len(e.Details)-5)
			break
		}
		s += fmt.Sprintf("; %s: %s", d.Path, d.Message)
	}
	if e.RequestID != "" {
		s += " (request " + e.RequestID + ")"
	}
	return s
}

// AuthError: 401 unauthenticated, 403 forbidden.  Fix the key.
type AuthError struct{ *APIError }

// NotFoundError: 404 (also another tenant's resource).
type NotFoundError struct{ *APIError }

// ValidationError: the request itself is wrong (400, 413, 415, 422); Details
// says where.  Retrying the same request cannot help.
type ValidationError struct{ *APIError }

// ConflictError: 409 already_finished, idempotency_conflict, conflict.
type ConflictError struct{ *APIError }

// RateLimitedError: 429 after the retries were used up; RetryAfter says when.
type RateLimitedError struct{ *APIError }

// UnavailableError: 503 (sandbox_unavailable, storage_unavailable) after the
// retries were used up.  A sandbox_unavailable create never ran the code.
type UnavailableError struct{ *APIError }

// ServerError: any other 5xx.
type ServerError struct{ *APIError }

func (e *AuthError) Unwrap() error        { return e.APIError }
func (e *NotFoundError) Unwrap() error    { return e.APIError }
func (e *ValidationError) Unwrap() error  { return e.APIError }
func (e *ConflictError) Unwrap() error    { return e.APIError }
func (e *RateLimitedError) Unwrap() error { return e.APIError }
func (e *UnavailableError) Unwrap() error { return e.APIError }
func (e *ServerError) Unwrap() error      { return e.APIError }

// classify wraps an envelope in the type of its class.
func classify(e *APIError) error {
	switch {
	case e.Status == 401 || e.Status == 403:
		return &AuthError{e}
	case e.Status == 404:
		return &NotFoundError{e}
	case e.Status == 400 || e.Status == 413 || e.Status == 415 || e.Status == 422:
		return &ValidationError{e}
	case e.Status == 409:
		return &ConflictError{e}
	case e.Status == 429:
		return &RateLimitedError{e}
	case e.Status == 503:
		return &UnavailableError{e}
	case e.Status >= 500:
		return &ServerError{e}
	}
	return e
}

// ConnectionError: the server could not be reached or the connection broke
// before a complete answer, after the retries were used up.  Err is the
// transport's error (it never holds the API key).
type ConnectionError struct {
	Method, Path string
	Attempts     int
	Err          error
}

func (e *ConnectionError) Error() string {
	return fmt.Sprintf("eai: %s %s: connection failed after %d attempt(s): %v", e.Method, e.Path, e.Attempts, e.Err)
}
func (e *ConnectionError) Unwrap() error { return e.Err }

// TimeoutError: Execute (or Wait) passed its overall timeout before the
// execution reached a terminal status.  ExecutionID names it (empty when the
// create itself did not finish in time); it was not cancelled.
type TimeoutError struct {
	ExecutionID string
	After       time.Duration
	LastStatus  string
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("eai: execution %s not finished after %s (last status %q)", e.ExecutionID, e.After, e.LastStatus)
}

// Timeout reports true, as net.Error does.
func (e *TimeoutError) Timeout() bool { return true }

// TooLargeError: an answer passed WithMaxResponseBytes; not retried.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("eai: answer larger than %d bytes (WithMaxResponseBytes)", e.Limit)
}
