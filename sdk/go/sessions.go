package eai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// SessionService is c.Sandbox.Sessions: a session is one sandbox that lives
// across several executions (docs/sessions.md).
//
//	s, err := c.Sandbox.Sessions.Create(ctx, eai.SessionRequest{Image: "python:3.11-slim", Profile: "gvisor-small"})
//	defer s.Close(ctx)
//	s.WriteFile(ctx, "/tmp/a.py", []byte("print(6*7)"))
//	ex, err := s.Run(ctx, []string{"python3", "/tmp/a.py"})
//
// Session routes take no Idempotency-Key: a POST whose answer was lost is
// not retried (it could be done twice); 429 and 503 are.
type SessionService struct{ s *SandboxService }

// SessionRequest is the body of POST /v1/sandbox/sessions.
type SessionRequest struct {
	Profile                 string            `json:"profile,omitempty"`
	Image                   string            `json:"image"`
	Limits                  *Limits           `json:"limits,omitempty"`
	Env                     map[string]string `json:"env,omitempty"`
	IdleTimeoutS            int               `json:"idle_timeout_s,omitempty"`
	TTLS                    int               `json:"ttl_s,omitempty"`
	MaxConcurrentExecutions int               `json:"max_concurrent_executions,omitempty"`
	AutoResume              *bool             `json:"auto_resume,omitempty"`
	// AutoPause: the idle timeout pauses the session (the server's default,
	// true) instead of ending it; false ends it.
	AutoPause  *bool           `json:"auto_pause,omitempty"`
	PausedTTLS int             `json:"paused_ttl_s,omitempty"`
	Network    *SessionNetSpec `json:"network,omitempty"`
	// Volumes are mounted for the session's whole life (docs/volumes.md).
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// The agent's ids: its executions inherit them (docs/sessions.md).
	ProjectID string `json:"project_id,omitempty"`
	AgentID   string `json:"agent_id,omitempty"`
	RunID     string `json:"run_id,omitempty"`
}

// SessionInfo is a session as the server reports it.
type SessionInfo struct {
	ID                      string     `json:"id"`
	Status                  string     `json:"status"`
	Profile                 string     `json:"profile"`
	Image                   string     `json:"image"`
	Limits                  Limits     `json:"limits"`
	IdleTimeoutS            int        `json:"idle_timeout_s"`
	TTLS                    int        `json:"ttl_s"`
	MaxConcurrentExecutions int        `json:"max_concurrent_executions"`
	CreatedAt               *time.Time `json:"created_at"`
	ExpiresAt               *time.Time `json:"expires_at"`
	LastUsedAt              *time.Time `json:"last_used_at"`
	EndedAt                 *time.Time `json:"ended_at"`
	EndReason               string     `json:"end_reason"`
	Executions              int        `json:"executions"`
	Usage                   *Usage     `json:"usage"`
	ProjectID               *string    `json:"project_id"`
	AgentID                 *string    `json:"agent_id"`
	RunID                   *string    `json:"run_id"`
	AutoPause               bool       `json:"auto_pause"`
	PausedTTLS              int        `json:"paused_ttl_s"`
	PausedAt                *time.Time `json:"paused_at"`
	// PausedBy while paused: "user", "idle" or "drain" (a call resumes the
	// last two); Status may also be "interrupted" (its eaid died, kill -9).
	PausedBy *string         `json:"paused_by"`
	Network  *SessionNetSpec `json:"network"`
	// FromSnapshot: a fork, the snapshot it was restored from.
	FromSnapshot *string `json:"from_snapshot"`
}

// SessionNetSpec is a session's network: its egress allow list ("host:port").
type SessionNetSpec struct {
	Egress  []string           `json:"egress"`
	Summary map[string]float64 `json:"summary,omitempty"`
}

// SessionNetwork is GET .../network: the allow list and the network log.
type SessionNetwork struct {
	SessionID string          `json:"session_id"`
	Egress    []string        `json:"egress"`
	Log       json.RawMessage `json:"log"`
	Summary   json.RawMessage `json:"summary"`
}

// Live reports whether the session can still run anything (not ended,
// failed or interrupted).
func (i *SessionInfo) Live() bool {
	return i.Status != "ended" && i.Status != "failed" && i.Status != "interrupted"
}

// SessionExecRequest is an execution inside a session (the session gives the
// profile, image and limits).
type SessionExecRequest struct {
	Command []string `json:"command"`
	Stdin   *string  `json:"stdin,omitempty"`
	// StdinMode "stream": the program's input is sent while it runs
	// (WriteStdin / CloseStdin with the execution's id).
	StdinMode   string            `json:"stdin_mode,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	TimeoutS    int               `json:"timeout_s,omitempty"`
	OutputBytes int64             `json:"output_bytes,omitempty"`
	Files       []File            `json:"files,omitempty"`
	Collect     []string          `json:"collect,omitempty"`
	ProjectID   string            `json:"project_id,omitempty"`
	AgentID     string            `json:"agent_id,omitempty"`
	RunID       string            `json:"run_id,omitempty"`
}

// SessionFile is one entry of ListFiles.
type SessionFile struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	Type string `json:"type"`
}

// Session is a live session; Info is its last known view.
type Session struct {
	ID   string
	Info SessionInfo
	svc  *SessionService
}

func sessionPath(id string, rest ...string) (string, error) {
	if id == "" || strings.ContainsAny(id, "/?#") {
		return "", fmt.Errorf("eai: bad session id %q", id)
	}
	return "/v1/sandbox/sessions/" + url.PathEscape(id) + strings.Join(rest, ""), nil
}

func filePathEscaped(p string) string {
	var segs []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			segs = append(segs, url.PathEscape(s))
		}
	}
	return strings.Join(segs, "/")
}

// Create starts a session; it answers once the sandbox is ready.
func (ss *SessionService) Create(ctx context.Context, req SessionRequest) (*Session, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var info SessionInfo
	if err := ss.s.c.getJSON(ctx, &request{method: "POST", path: "/v1/sandbox/sessions", body: b,
		extra: 90 * time.Second, noLostRetry: true}, &info); err != nil {
		return nil, err
	}
	return &Session{ID: info.ID, Info: info, svc: ss}, nil
}

// Get returns a session by id.
func (ss *SessionService) Get(ctx context.Context, id string) (*Session, error) {
	p, err := sessionPath(id)
	if err != nil {
		return nil, err
	}
	var info SessionInfo
	if err := ss.s.c.getJSON(ctx, &request{method: "GET", path: p}, &info); err != nil {
		return nil, err
	}
	return &Session{ID: info.ID, Info: info, svc: ss}, nil
}

// List returns this tenant's sessions, newest first (status "" for all, "live", or a status).
func (ss *SessionService) List(ctx context.Context, status string) ([]SessionInfo, error) {
	var q url.Values
	if status != "" {
		q = url.Values{"status": {status}}
	}
	var page struct {
		Items []SessionInfo `json:"items"`
	}
	if err := ss.s.c.getJSON(ctx, &request{method: "GET", path: "/v1/sandbox/sessions", query: q}, &page); err != nil {
		return nil, err
	}
	return page.Items, nil
}

// Submit posts an execution in the session (202 {id, status}) without waiting.
func (s *Session) Submit(ctx context.Context, req SessionExecRequest) (*Execution, error) {
	p, err := sessionPath(s.ID, "/executions")
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var ex Execution
	if err := s.svc.s.c.getJSON(ctx, &request{method: "POST", path: p, body: b, noLostRetry: true}, &ex); err != nil {
		return nil, err
	}
	return &ex, nil
}

// Run is an execution inside the session, waited for like Execute (WithTimeout
// overall, default the client's execute timeout).  command is a []string or a
// SessionExecRequest.
func (s *Session) Run(ctx context.Context, command any, opts ...CallOption) (*Execution, error) {
	var req SessionExecRequest
	switch c := command.(type) {
	case []string:
		req.Command = c
	case SessionExecRequest:
		req = c
	case *SessionExecRequest:
		req = *c
	default:
		return nil, fmt.Errorf("eai: Run takes []string or SessionExecRequest, not %T", command)
	}
	o := collect(opts)
	timeout := o.timeout
	if timeout <= 0 {
		timeout = s.svc.s.c.executeTimeout
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	created, err := s.Submit(tctx, req)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, &TimeoutError{After: timeout}
		}
		return nil, err
	}
	ex, last, err := s.svc.s.wait(tctx, created.ID, o.waitS)
	if err == nil {
		return ex, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("eai: execution %s: %w", created.ID, ctx.Err())
	}
	if tctx.Err() != nil {
		if last == "" {
			last = created.Status
		}
		return nil, &TimeoutError{ExecutionID: created.ID, After: timeout, LastStatus: last}
	}
	return nil, err
}

// WriteFile puts data at path (under /tmp) in the session.
func (s *Session) WriteFile(ctx context.Context, path string, data []byte) error {
	p, err := sessionPath(s.ID)
	if err != nil {
		return err
	}
	return s.svc.s.c.writeFileAt(ctx, p, path, data)
}

// ReadFile returns the bytes of a file of the session.
func (s *Session) ReadFile(ctx context.Context, path string) ([]byte, error) {
	p, err := sessionPath(s.ID)
	if err != nil {
		return nil, err
	}
	return s.svc.s.c.readFileAt(ctx, p, path)
}

// ListFiles lists the files under dir (default /tmp), recursively, at most 1000.
func (s *Session) ListFiles(ctx context.Context, dir string) ([]SessionFile, error) {
	p, err := sessionPath(s.ID)
	if err != nil {
		return nil, err
	}
	return s.svc.s.c.listFilesAt(ctx, p, dir)
}

// DeleteFile removes a file, a symlink or an empty directory.
func (s *Session) DeleteFile(ctx context.Context, path string) error {
	p, err := sessionPath(s.ID)
	if err != nil {
		return err
	}
	return s.svc.s.c.deleteFileAt(ctx, p, path)
}

// Refresh reads the session again into Info.
func (s *Session) Refresh(ctx context.Context) (*SessionInfo, error) {
	n, err := s.svc.Get(ctx, s.ID)
	if err != nil {
		return nil, err
	}
	s.Info = n.Info
	return &s.Info, nil
}

// Pause checkpoints the session's sandbox to disk (runsc checkpoint): files
// and processes are kept, memory is freed.
func (s *Session) Pause(ctx context.Context) (*SessionInfo, error) { return s.state(ctx, "/pause") }

// Resume brings a paused session back (runsc restore).
func (s *Session) Resume(ctx context.Context) (*SessionInfo, error) { return s.state(ctx, "/resume") }

func (s *Session) state(ctx context.Context, what string) (*SessionInfo, error) {
	p, err := sessionPath(s.ID)
	if err != nil {
		return nil, err
	}
	var info SessionInfo
	if err := s.svc.s.c.getJSON(ctx, &request{method: "POST", path: p + what, body: []byte("{}"), noLostRetry: true,
		extra: 30 * time.Second}, &info); err != nil {
		return nil, err
	}
	s.Info = info
	return &s.Info, nil
}

// Network reads the session's allow list and network log (GET .../network).
func (s *Session) Network(ctx context.Context) (*SessionNetwork, error) {
	p, err := sessionPath(s.ID, "/network")
	if err != nil {
		return nil, err
	}
	var n SessionNetwork
	if err := s.svc.s.c.getJSON(ctx, &request{method: "GET", path: p}, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// SetEgress replaces the allow list of the live session (PUT .../network;
// checked against the profile's, effective for the next connection).
func (s *Session) SetEgress(ctx context.Context, egress []string) ([]string, error) {
	p, err := sessionPath(s.ID, "/network")
	if err != nil {
		return nil, err
	}
	if egress == nil {
		egress = []string{}
	}
	body, err := json.Marshal(map[string][]string{"egress": egress})
	if err != nil {
		return nil, err
	}
	var out struct {
		Egress []string `json:"egress"`
	}
	if err := s.svc.s.c.getJSON(ctx, &request{method: "PUT", path: p, body: body}, &out); err != nil {
		return nil, err
	}
	s.Info.Network = &SessionNetSpec{Egress: out.Egress}
	return out.Egress, nil
}

// Close ends the session (DELETE) and returns the ended view with its usage.
func (s *Session) Close(ctx context.Context) (*SessionInfo, error) {
	p, err := sessionPath(s.ID)
	if err != nil {
		return nil, err
	}
	var info SessionInfo
	if err := s.svc.s.c.getJSON(ctx, &request{method: "DELETE", path: p, extra: 30 * time.Second}, &info); err != nil {
		return nil, err
	}
	s.Info = info
	return &s.Info, nil
}

// ---- snapshots and forks (docs/sessions.md "Snapshots and forks")

// SnapshotInfo is a snapshot of a session as the server reports it.
type SnapshotInfo struct {
	ID        string     `json:"id"`
	SessionID string     `json:"session_id"`
	Status    string     `json:"status"`
	SizeBytes int64      `json:"size_bytes"`
	CreatedAt *time.Time `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"`
	Profile   string     `json:"profile"`
	Image     string     `json:"image"`
	Forks     int        `json:"forks"`
}

// ForkRequest is the body of POST /v1/sandbox/sessions with from_snapshot:
// Count 0 forks one session, else Count (1..10 by default); Network is the
// forks' own allow list (never the parent's).
type ForkRequest struct {
	FromSnapshot string          `json:"from_snapshot"`
	Count        int             `json:"count,omitempty"`
	Network      *SessionNetSpec `json:"network,omitempty"`
	IdleTimeoutS int             `json:"idle_timeout_s,omitempty"`
	TTLS         int             `json:"ttl_s,omitempty"`
	ProjectID    string          `json:"project_id,omitempty"`
	AgentID      string          `json:"agent_id,omitempty"`
	RunID        string          `json:"run_id,omitempty"`
}

// Snapshot takes a snapshot of the running session (its processes, memory
// and /tmp), which keeps running; ttlS 0 keeps the server's default.
func (s *Session) Snapshot(ctx context.Context, ttlS int) (*SnapshotInfo, error) {
	p, err := sessionPath(s.ID, "/snapshots")
	if err != nil {
		return nil, err
	}
	body := []byte("{}")
	if ttlS > 0 {
		body = []byte(fmt.Sprintf(`{"ttl_s":%d}`, ttlS))
	}
	var info SnapshotInfo
	if err := s.svc.s.c.getJSON(ctx, &request{method: "POST", path: p, body: body, noLostRetry: true,
		extra: 90 * time.Second}, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// Fork creates sessions restored from a snapshot, each with its own id,
// sandbox and copy of /tmp, and answers once they run.
func (ss *SessionService) Fork(ctx context.Context, req ForkRequest) ([]*Session, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err := ss.s.c.getJSON(ctx, &request{method: "POST", path: "/v1/sandbox/sessions", body: b,
		extra: 150 * time.Second, noLostRetry: true}, &raw); err != nil {
		return nil, err
	}
	var many struct {
		Items []SessionInfo `json:"items"`
	}
	if req.Count == 0 {
		var one SessionInfo
		if err := json.Unmarshal(raw, &one); err != nil {
			return nil, err
		}
		many.Items = []SessionInfo{one}
	} else if err := json.Unmarshal(raw, &many); err != nil {
		return nil, err
	}
	out := make([]*Session, 0, len(many.Items))
	for _, i := range many.Items {
		if i.ID != "" {
			out = append(out, &Session{ID: i.ID, Info: i, svc: ss})
		}
	}
	return out, nil
}

func snapshotPath(id string) (string, error) {
	if id == "" || strings.ContainsAny(id, "/?#") {
		return "", fmt.Errorf("eai: bad snapshot id %q", id)
	}
	return "/v1/sandbox/snapshots/" + url.PathEscape(id), nil
}

// Snapshots lists this tenant's snapshots on the node (sessionID "" for all).
func (ss *SessionService) Snapshots(ctx context.Context, sessionID string) ([]SnapshotInfo, error) {
	var q url.Values
	if sessionID != "" {
		q = url.Values{"session_id": {sessionID}}
	}
	var page struct {
		Items []SnapshotInfo `json:"items"`
	}
	if err := ss.s.c.getJSON(ctx, &request{method: "GET", path: "/v1/sandbox/snapshots", query: q}, &page); err != nil {
		return nil, err
	}
	return page.Items, nil
}

// GetSnapshot returns one snapshot.
func (ss *SessionService) GetSnapshot(ctx context.Context, id string) (*SnapshotInfo, error) {
	p, err := snapshotPath(id)
	if err != nil {
		return nil, err
	}
	var info SnapshotInfo
	if err := ss.s.c.getJSON(ctx, &request{method: "GET", path: p}, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// DeleteSnapshot removes a snapshot (its image and /tmp copy); the sessions
// forked from it live on.
func (ss *SessionService) DeleteSnapshot(ctx context.Context, id string) (*SnapshotInfo, error) {
	p, err := snapshotPath(id)
	if err != nil {
		return nil, err
	}
	var info SnapshotInfo
	if err := ss.s.c.getJSON(ctx, &request{method: "DELETE", path: p, extra: 30 * time.Second}, &info); err != nil {
		return nil, err
	}
	return &info, nil
}
