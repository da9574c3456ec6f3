package eai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// SandboxService is c.Sandbox: executions.
type SandboxService struct {
	c *Client
	// Sessions: one sandbox kept across several executions (docs/sessions.md).
	Sessions *SessionService
}

// CallOption tunes one call.
type CallOption func(*callOpts)

type callOpts struct {
	idemKey string
	timeout time.Duration
	waitS   int
	lastID  string
}

// WithLastEventID makes Stream start after that event id (sent as
// Last-Event-ID): only the events after it come.
func WithLastEventID(id string) CallOption { return func(o *callOpts) { o.lastID = id } }

// WithIdempotencyKey sets the Idempotency-Key of Create/Execute (default: a
// fresh UUID per call, reused by that call's retries).
func WithIdempotencyKey(k string) CallOption { return func(o *callOpts) { o.idemKey = k } }

// WithTimeout is the overall timeout of Execute or Wait (Execute default: the
// client's WithExecuteTimeout; Wait default: none beyond the context).
func WithTimeout(d time.Duration) CallOption { return func(o *callOpts) { o.timeout = d } }

// WithWaitSeconds sets the long-poll length of each GET of Wait (1..60,
// default 30).
func WithWaitSeconds(s int) CallOption { return func(o *callOpts) { o.waitS = s } }

func collect(opts []CallOption) callOpts {
	o := callOpts{waitS: 30}
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	if o.waitS < 1 {
		o.waitS = 1
	}
	if o.waitS > 60 {
		o.waitS = 60
	}
	return o
}

// executionBody encodes req: a map[string]any (as in the seed), an
// ExecuteRequest or *ExecuteRequest, json.RawMessage, or any value that
// marshals to a JSON object.
func executionBody(req any) ([]byte, string, error) {
	var key string
	switch r := req.(type) {
	case nil:
		return nil, "", errors.New("eai: nil execution request")
	case ExecuteRequest:
		key = r.IdempotencyKey
	case *ExecuteRequest:
		if r == nil {
			return nil, "", errors.New("eai: nil execution request")
		}
		key = r.IdempotencyKey
	case json.RawMessage:
		b := []byte(r)
		if !json.Valid(b) || len(strings.TrimSpace(string(b))) == 0 || strings.TrimSpace(string(b))[0] != '{' {
			return nil, "", errors.New("eai: execution request must be a JSON object")
		}
		return b, "", nil
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, "", fmt.Errorf("eai: cannot encode execution request: %w", err)
	}
	if len(b) == 0 || b[0] != '{' {
		return nil, "", errors.New("eai: execution request must encode to a JSON object")
	}
	return b, key, nil
}

func execPath(id string, rest ...string) (string, error) {
	if id == "" {
		return "", errors.New("eai: empty execution id")
	}
	p := "/v1/sandbox/executions/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p, nil
}

// Create submits an execution and returns at once (status queued or running).
// It always sends an Idempotency-Key, so its retries never run the code twice.
func (s *SandboxService) Create(ctx context.Context, req any, opts ...CallOption) (*Execution, error) {
	body, key, err := executionBody(req)
	if err != nil {
		return nil, err
	}
	o := collect(opts)
	if o.idemKey != "" {
		key = o.idemKey
	}
	if key == "" {
		key = NewIdempotencyKey()
	}
	var ex Execution
	err = s.c.getJSON(ctx, &request{method: "POST", path: "/v1/sandbox/executions", body: body, idemKey: key}, &ex)
	if err != nil {
		return nil, err
	}
	return &ex, nil
}

// Get reads one execution.
func (s *SandboxService) Get(ctx context.Context, id string) (*Execution, error) {
	p, err := execPath(id)
	if err != nil {
		return nil, err
	}
	var ex Execution
	if err := s.c.getJSON(ctx, &request{method: "GET", path: p}, &ex); err != nil {
		return nil, err
	}
	return &ex, nil
}

// Wait returns the execution once it is terminal, with the server's long-poll
// (GET ?wait_s=30 repeatedly), never a tight loop.  It stops when ctx is done
// (ctx.Err()) or, with WithTimeout, after that time (*TimeoutError).
func (s *SandboxService) Wait(ctx context.Context, id string, opts ...CallOption) (*Execution, error) {
	o := collect(opts)
	if o.timeout > 0 {
		tctx, cancel := context.WithTimeout(ctx, o.timeout)
		defer cancel()
		ex, last, err := s.wait(tctx, id, o.waitS)
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, &TimeoutError{ExecutionID: id, After: o.timeout, LastStatus: last}
		}
		return ex, err
	}
	ex, _, err := s.wait(ctx, id, o.waitS)
	return ex, err
}

func (s *SandboxService) wait(ctx context.Context, id string, waitS int) (*Execution, string, error) {
	p, err := execPath(id)
	if err != nil {
		return nil, "", err
	}
	last := ""
	for {
		w := waitS
		if dl, ok := ctx.Deadline(); ok {
			left := int(time.Until(dl) / time.Second)
			if left < w {
				w = left
			}
			if w < 1 {
				w = 1
			}
		}
		began := time.Now()
		var ex Execution
		err := s.c.getJSON(ctx, &request{method: "GET", path: p,
			query: url.Values{"wait_s": {strconv.Itoa(w)}}, extra: time.Duration(w) * time.Second}, &ex)
		if err != nil {
			return nil, last, err
		}
		last = ex.Status
		if ex.Terminal() {
			return &ex, last, nil
		}
		// A long-poll that came back at once without a terminal status (a
		// proxy, an older server): do not spin.
		if time.Since(began) < 200*time.Millisecond {
			if err := s.c.sleep(ctx, 500*time.Millisecond); err != nil {
				return nil, last, err
			}
		}
	}
}

// Execute creates the execution and waits for its end: the seed's call.
// req is a map[string]any, an ExecuteRequest or *ExecuteRequest.  The whole
// call is bounded by WithTimeout (default the client's execute timeout, 10
// min) and ctx.  When the timeout passes first, Execute returns *TimeoutError
// carrying the execution id; the execution is not cancelled (the caller
// decides: Cancel, or Wait again).  When ctx ends first, its error is
// returned, wrapped with the id.  A finished execution is returned whatever
// its status (failed, timeout, oom_killed...): check Status and ExitCode.
func (s *SandboxService) Execute(ctx context.Context, req any, opts ...CallOption) (*Execution, error) {
	o := collect(opts)
	timeout := o.timeout
	if timeout <= 0 {
		timeout = s.c.executeTimeout
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	created, err := s.Create(tctx, req, opts...)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, &TimeoutError{After: timeout}
		}
		return nil, err
	}
	ex, last, err := s.wait(tctx, created.ID, o.waitS)
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
	return nil, err // an API or connection error while waiting
}

// Cancel asks the server to stop an execution: queued ones become cancelled
// at once, running ones end cancelled soon after (Wait for it).  A terminal
// one answers *ConflictError (already_finished).
func (s *SandboxService) Cancel(ctx context.Context, id string) (*Execution, error) {
	p, err := execPath(id, "cancel")
	if err != nil {
		return nil, err
	}
	var ex Execution
	if err := s.c.getJSON(ctx, &request{method: "POST", path: p}, &ex); err != nil {
		return nil, err
	}
	return &ex, nil
}

// WriteStdin sends data to the stdin of a running execution created with
// StdinMode "stream"; eof closes it after them (at most 1 MiB a call).
// stdin_busy (429: the program is not reading yet, or 1 MiB waits; nothing
// was taken) is retried until ctx ends; a broken connection is not retried
// (the bytes may have reached the program).
func (s *SandboxService) WriteStdin(ctx context.Context, id string, data []byte, eof bool) (*StdinWritten, error) {
	p, err := execPath(id, "stdin")
	if err != nil {
		return nil, err
	}
	var q url.Values
	if eof {
		q = url.Values{"eof": {"true"}}
	}
	delay := 20 * time.Millisecond
	for {
		var out StdinWritten
		err := s.c.getJSON(ctx, &request{method: "POST", path: p, query: q, body: data,
			ctype: "application/octet-stream", noLostRetry: true, callerCodes: []string{"stdin_busy"}}, &out)
		if err == nil {
			return &out, nil
		}
		var ae *APIError
		if !errors.As(err, &ae) || ae.Code != "stdin_busy" {
			return nil, err
		}
		if serr := s.c.sleep(ctx, delay); serr != nil {
			return nil, err
		}
		if delay *= 2; delay > 500*time.Millisecond {
			delay = 500 * time.Millisecond
		}
	}
}

// CloseStdin closes the stdin of a running execution created with StdinMode
// "stream" (the program reads EOF).
func (s *SandboxService) CloseStdin(ctx context.Context, id string) (*StdinWritten, error) {
	return s.WriteStdin(ctx, id, nil, true)
}

// ListPage reads one page (newest first).
func (s *SandboxService) ListPage(ctx context.Context, p ListParams) (*Page, error) {
	q := url.Values{}
	if p.Status != "" {
		q.Set("status", p.Status)
	}
	if p.RunID != "" {
		q.Set("run_id", p.RunID)
	}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.After != "" {
		q.Set("after", p.After)
	}
	var page Page
	if err := s.c.getJSON(ctx, &request{method: "GET", path: "/v1/sandbox/executions", query: q}, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// List iterates over every execution matching p, page after page:
//
//	it := c.Sandbox.List(ctx, eai.ListParams{RunID: "r1"})
//	for it.Next() { ex := it.Execution() ... }
//	if err := it.Err(); err != nil { ... }
func (s *SandboxService) List(ctx context.Context, p ListParams) *ListIterator {
	return &ListIterator{s: s, ctx: ctx, p: p}
}

// ListIterator pages through List lazily.
type ListIterator struct {
	s     *SandboxService
	ctx   context.Context
	p     ListParams
	items []*Execution
	cur   *Execution
	done  bool
	err   error
	pages int
}

// Next advances; false at the end or on error (see Err).
func (it *ListIterator) Next() bool {
	for len(it.items) == 0 {
		if it.done || it.err != nil {
			return false
		}
		page, err := it.s.ListPage(it.ctx, it.p)
		if err != nil {
			it.err = err
			return false
		}
		it.pages++
		it.items = page.Items
		if page.Next == nil || *page.Next == "" || *page.Next == it.p.After {
			it.done = true
		} else {
			it.p.After = *page.Next
		}
	}
	it.cur, it.items = it.items[0], it.items[1:]
	return true
}

// Execution is the current item.
func (it *ListIterator) Execution() *Execution { return it.cur }

// Err is the error that stopped the iteration, if any.
func (it *ListIterator) Err() error { return it.err }

// Pages is how many pages were fetched so far.
func (it *ListIterator) Pages() int { return it.pages }

// DownloadFile returns the bytes of one collected file, by its path in the
// sandbox (e.g. "/tmp/outputs/result.json").
func (s *SandboxService) DownloadFile(ctx context.Context, id, path string) ([]byte, error) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if path == "" || len(segs) == 0 || segs[0] == "" {
		return nil, errors.New("eai: empty file path")
	}
	for i, sgm := range segs {
		segs[i] = url.PathEscape(sgm)
	}
	p, err := execPath(id, "files", strings.Join(segs, "/"))
	if err != nil {
		return nil, err
	}
	resp, err := s.c.do(ctx, &request{method: "GET", path: p, accept: "*/*"})
	if err != nil {
		return nil, err
	}
	return resp.body, nil
}

// Profile is one entry of Profiles.
type Profile struct {
	Name         string   `json:"name"`
	Backend      string   `json:"backend"`
	RuntimeClass string   `json:"runtime_class"`
	Defaults     Limits   `json:"defaults"`
	Max          Limits   `json:"max"`
	EgressAllow  []string `json:"egress_allow"`
	Available    bool     `json:"available"`
	// Egress: whether the profile's backend can carry a granted egress on
	// this server (else such executions are refused, 422 egress_unsupported).
	Egress bool `json:"egress"`
}

// Profiles lists the profiles this tenant may use.
func (s *SandboxService) Profiles(ctx context.Context) ([]Profile, error) {
	var out struct {
		Profiles []Profile `json:"profiles"`
	}
	if err := s.c.getJSON(ctx, &request{method: "GET", path: "/v1/sandbox/profiles"}, &out); err != nil {
		return nil, err
	}
	return out.Profiles, nil
}
