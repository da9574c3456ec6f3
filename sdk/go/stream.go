package eai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
)

// maxEventBytes bounds one SSE event (the server sends output in chunks far
// smaller than this).
const maxEventBytes = 16 << 20

// EventStream reads the Server-Sent Events of one execution.
//
//	st, err := c.Sandbox.Stream(ctx, id)
//	defer st.Close()
//	for st.Next() { ev := st.Event(); ... }
//	if err := st.Err(); err != nil { ... }
//
// Next returns false after the terminal status event, when ctx is done, or on
// an error.  The stream is resumable: it remembers the last event id and, when
// the connection breaks (or ends) before the terminal status, reconnects with
// Last-Event-ID, so each event is seen exactly once.  Reconnects back off like
// retries, at most the client's max retries in a row without a new event (and
// its retry time budget); then Err is a *ConnectionError.  A stream whose
// events carry no id is not resumed (a reconnect would replay it).  ": ping"
// comments are skipped; a 204 (nothing after the given id) ends the stream.
type EventStream struct {
	ctx    context.Context
	svc    *SandboxService
	rc     io.ReadCloser
	cancel context.CancelFunc
	sc     *bufio.Scanner
	ev     *Event
	err    error
	done   bool
	path   string
	lastID string
	fails  int
	tFail  time.Time
}

// Stream opens GET /v1/sandbox/executions/{id}/events (WithLastEventID to
// start after an id).  Opening is retried like any request; the open stream
// is bound by ctx only.
func (s *SandboxService) Stream(ctx context.Context, id string, opts ...CallOption) (*EventStream, error) {
	p, err := execPath(id, "events")
	if err != nil {
		return nil, err
	}
	o := collect(opts)
	st := &EventStream{ctx: ctx, svc: s, path: p, lastID: o.lastID}
	if err := st.open(); err != nil {
		return nil, err
	}
	return st, nil
}

func (st *EventStream) open() error {
	resp, err := st.svc.c.do(st.ctx, &request{method: "GET", path: st.path, accept: "text/event-stream",
		stream: true, lastID: st.lastID})
	if err != nil {
		return err
	}
	st.rc, st.cancel = resp.rc, resp.cancel
	if resp.status == http.StatusNoContent {
		st.done = true
		st.Close()
		return nil
	}
	st.sc = bufio.NewScanner(resp.rc)
	st.sc.Buffer(make([]byte, 0, 64<<10), maxEventBytes)
	return nil
}

// Next reads the next event.
func (st *EventStream) Next() bool {
	for {
		if st.done || st.err != nil {
			return false
		}
		ok, broke := st.scan()
		if ok {
			return true
		}
		if st.done || st.err != nil {
			return false
		}
		if st.ctx.Err() != nil {
			st.fail(st.ctx.Err())
			return false
		}
		cerr := &ConnectionError{Method: "GET", Path: st.path, Attempts: st.fails + 1,
			Err: errors.New("event stream ended before the terminal status: " + broke.Error())}
		if st.lastID == "" {
			st.fail(cerr)
			return false
		}
		c := st.svc.c
		if st.fails == 0 {
			st.tFail = time.Now()
		}
		delay := c.backoff(st.fails)
		if st.fails >= c.maxRetries || time.Since(st.tFail)+delay > c.maxRetryTime {
			st.fail(cerr)
			return false
		}
		st.Close()
		c.logf("eai: GET %s: stream broke after id %s; resuming in %s", st.path, st.lastID, delay.Round(time.Millisecond))
		if err := c.sleep(st.ctx, delay); err != nil {
			st.fail(err)
			return false
		}
		st.fails++
		if err := st.open(); err != nil {
			st.fail(err)
			return false
		}
	}
}

// scan reads one event from the open connection: (true, nil) with st.ev set,
// or (false, why) when the connection ended first.
func (st *EventStream) scan() (bool, error) {
	var typ, id string
	var data bytes.Buffer
	hasData := false
	for st.sc.Scan() {
		line := st.sc.Text()
		if line == "" {
			if !hasData && typ == "" {
				continue
			}
			ev, err := makeEvent(typ, id, data.Bytes())
			if err != nil {
				st.fail(err)
				return false, err
			}
			st.ev = ev
			if ev.ID != "" {
				st.lastID = ev.ID
			}
			st.fails = 0
			if ev.Terminal() {
				st.done = true
				st.Close()
			}
			return true, nil
		}
		if strings.HasPrefix(line, ":") {
			continue // ": ping" heartbeats and other comments
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			typ = value
		case "id":
			if !strings.ContainsRune(value, 0) {
				id = value
			}
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
			if data.Len() > maxEventBytes {
				err := errors.New("event larger than 16 MiB")
				st.fail(err)
				return false, err
			}
		}
	}
	err := st.sc.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return false, err
}

func (st *EventStream) fail(err error) {
	st.err = err
	st.Close()
}

func makeEvent(typ, id string, data []byte) (*Event, error) {
	if typ == "" {
		typ = "message"
	}
	ev := &Event{Type: typ, ID: id}
	if len(data) == 0 {
		return ev, nil
	}
	if err := json.Unmarshal(data, &ev.Raw); err != nil {
		ev.Data = append([]byte(nil), data...)
		return ev, nil
	}
	if s, ok := ev.Raw["status"].(string); ok {
		ev.Status = s
	}
	if d, ok := ev.Raw["data"].(string); ok {
		if enc, _ := ev.Raw["encoding"].(string); enc == "base64" {
			b, err := base64.StdEncoding.DecodeString(d)
			if err != nil {
				return nil, errors.New("eai: malformed base64 in event")
			}
			ev.Data = b
		} else {
			ev.Data = []byte(d)
		}
	}
	return ev, nil
}

// Event is the current event.
func (st *EventStream) Event() *Event { return st.ev }

// Err is the error that ended the stream early, nil after a terminal status.
func (st *EventStream) Err() error {
	if st.err != nil && st.done {
		return nil
	}
	return st.err
}

// Close releases the connection; safe to call more than once.
func (st *EventStream) Close() error {
	if st.rc != nil {
		st.rc.Close()
		st.rc = nil
	}
	if st.cancel != nil {
		st.cancel()
		st.cancel = nil
	}
	return nil
}
