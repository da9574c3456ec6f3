package eai

import (
	"encoding/base64"
	"encoding/json"
	"time"
	"unicode/utf8"
)

// Limits of one execution; zero values are left out (the profile's defaults).
type Limits struct {
	CPU         string `json:"cpu,omitempty"`    // Kubernetes quantity: "500m", "1"
	Memory      string `json:"memory,omitempty"` // "256Mi", "1Gi", plain bytes
	TimeoutS    int    `json:"timeout_s,omitempty"`
	Pids        int    `json:"pids,omitempty"`
	OutputBytes int64  `json:"output_bytes,omitempty"`
	Disk        string `json:"disk,omitempty"`
}

// File is an input file written under /tmp before the command starts.
// Set Content (text) or Data (bytes: sent as content_b64 unless it is UTF-8
// text without NUL).
type File struct {
	Path    string
	Content string
	Data    []byte
}

// MarshalJSON picks content or content_b64.
func (f File) MarshalJSON() ([]byte, error) {
	m := map[string]string{"path": f.Path}
	switch {
	case f.Data != nil && utf8.Valid(f.Data) && !containsNUL(f.Data):
		m["content"] = string(f.Data)
	case f.Data != nil:
		m["content_b64"] = base64.StdEncoding.EncodeToString(f.Data)
	default:
		m["content"] = f.Content
	}
	return json.Marshal(m)
}

func containsNUL(b []byte) bool {
	for _, c := range b {
		if c == 0 {
			return true
		}
	}
	return false
}

// Network asks for egress; it must be a subset of the profile's allow list.
type Network struct {
	Egress []string `json:"egress"`
}

// ExecuteRequest is the typed body of POST /v1/sandbox/executions.  Image is
// required, and Profile unless Tool names a tool manifest that gives one;
// without Command the image's own command runs (docs/images.md).
type ExecuteRequest struct {
	Profile string            `json:"profile,omitempty"`
	Image   string            `json:"image,omitempty"`
	Command []string          `json:"command,omitempty"`
	Limits  *Limits           `json:"limits,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Stdin   *string           `json:"stdin,omitempty"`
	// StdinMode "stream" keeps the program's stdin open: feed it with
	// Sandbox.WriteStdin, end it with CloseStdin (Stdin must then be nil).
	StdinMode string   `json:"stdin_mode,omitempty"`
	Files     []File   `json:"files,omitempty"`
	Collect   []string `json:"collect,omitempty"`
	Network   *Network `json:"network,omitempty"`
	Tool      string   `json:"tool,omitempty"`
	ProjectID string   `json:"project_id,omitempty"`
	AgentID   string   `json:"agent_id,omitempty"`
	RunID     string   `json:"run_id,omitempty"`
	// Callback asks eaid to POST the summary to Callback.URL once terminal.
	Callback *Callback `json:"callback,omitempty"`
	// Volumes are the tenant's volumes to mount (docs/volumes.md).
	Volumes []VolumeMount `json:"volumes,omitempty"`

	// IdempotencyKey is sent as the Idempotency-Key header (a fresh UUID when
	// empty).  Reuse it to make a repeated create return the first execution.
	IdempotencyKey string `json:"-"`
}

// String returns s as a pointer, for ExecuteRequest.Stdin.
func String(s string) *string { return &s }

// Terminal statuses.
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusTimeout   = "timeout"
	StatusOOMKilled = "oom_killed"
	StatusCancelled = "cancelled"
	StatusError     = "error"
)

// IsTerminal reports whether a status never changes again.
func IsTerminal(status string) bool {
	switch status {
	case StatusSucceeded, StatusFailed, StatusTimeout, StatusOOMKilled, StatusCancelled, StatusError:
		return true
	}
	return false
}

// FileInfo is a collected output file; DownloadFile fetches its bytes.
type FileInfo struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Usage of a finished execution.
type Usage struct {
	CPUSeconds      float64 `json:"cpu_seconds"`
	MemoryMBSeconds float64 `json:"memory_mb_seconds"`
	DurationS       float64 `json:"duration_s"`
}

// ExecError is set when status is "error": the platform could not run it.
type ExecError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Execution is one execution as the server reports it.  Stdout and Stderr are
// the program's bytes: base64 answers (stdout_encoding "base64", for output
// that is not UTF-8) are decoded.  Raw is the whole JSON object as sent.
type Execution struct {
	ID              string          `json:"id"`
	Status          string          `json:"status"`
	Profile         string          `json:"profile"`
	Backend         string          `json:"backend"`
	Image           string          `json:"image"`
	Command         []string        `json:"command"`
	Limits          Limits          `json:"limits"`
	ExitCode        *int            `json:"exit_code"`
	Signal          *int            `json:"signal"`
	Stdout          []byte          `json:"-"`
	Stderr          []byte          `json:"-"`
	StdoutEncoding  string          `json:"stdout_encoding"`
	StderrEncoding  string          `json:"stderr_encoding"`
	StdoutTruncated bool            `json:"stdout_truncated"`
	StderrTruncated bool            `json:"stderr_truncated"`
	Files           []FileInfo      `json:"files"`
	FilesTruncated  bool            `json:"files_truncated"`
	Usage           *Usage          `json:"usage"`
	Error           *ExecError      `json:"error"`
	Tool            string          `json:"tool"`
	ProjectID       string          `json:"project_id"`
	AgentID         string          `json:"agent_id"`
	RunID           string          `json:"run_id"`
	TraceID         string          `json:"trace_id"`
	CreatedAt       *time.Time      `json:"created_at"`
	StartedAt       *time.Time      `json:"started_at"`
	FinishedAt      *time.Time      `json:"finished_at"`
	Callback        *CallbackStatus `json:"callback"`
	SessionID       string          `json:"session_id"`
	Raw             map[string]any  `json:"-"`
}

// Terminal reports whether the execution has ended.
func (e *Execution) Terminal() bool { return IsTerminal(e.Status) }

// StdoutText is Stdout as a string.
func (e *Execution) StdoutText() string { return string(e.Stdout) }

// StderrText is Stderr as a string.
func (e *Execution) StderrText() string { return string(e.Stderr) }

// UnmarshalJSON fills the typed fields, decodes base64 output and keeps Raw.
func (e *Execution) UnmarshalJSON(b []byte) error {
	type plain Execution
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	var out struct {
		Stdout *string `json:"stdout"`
		Stderr *string `json:"stderr"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return err
	}
	*e = Execution(p)
	e.Raw = raw
	var err error
	if e.Stdout, err = decodeStream(out.Stdout, e.StdoutEncoding); err != nil {
		return err
	}
	if e.Stderr, err = decodeStream(out.Stderr, e.StderrEncoding); err != nil {
		return err
	}
	return nil
}

// MarshalJSON writes Raw back (what the server sent).
func (e Execution) MarshalJSON() ([]byte, error) {
	if e.Raw != nil {
		return json.Marshal(e.Raw)
	}
	type plain Execution
	return json.Marshal(plain(e))
}

func decodeStream(s *string, enc string) ([]byte, error) {
	if s == nil {
		return nil, nil
	}
	if enc == "base64" {
		return base64.StdEncoding.DecodeString(*s)
	}
	return []byte(*s), nil
}

// Page is one page of List.
type Page struct {
	Items []*Execution `json:"items"`
	Next  *string      `json:"next"`
}

// ListParams filters List; zero values are left out.
type ListParams struct {
	Status string
	RunID  string
	Limit  int    // 1..100, server default 20
	After  string // cursor from Page.Next
}

// Event is one Server-Sent Event of Stream: Type is "status", "stdout" or
// "stderr"; Data holds the chunk's bytes (decoded when base64), Status the
// status of a status event, Raw its JSON data.
type Event struct {
	Type   string
	ID     string
	Data   []byte
	Status string
	Raw    map[string]any
}

// Terminal reports whether this is the final status event.
func (ev *Event) Terminal() bool { return ev.Type == "status" && IsTerminal(ev.Status) }

// StdinWritten is the answer of POST /v1/sandbox/executions/{id}/stdin.
type StdinWritten struct {
	ID      string `json:"id"`
	Written int64  `json:"written"`
	EOF     bool   `json:"eof"`
	Pending int64  `json:"pending"` // bytes the program has not read yet
}
