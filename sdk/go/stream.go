package eai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strings"
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
// an error; a stream that ends before the terminal status is an error
// (*ConnectionError).  It is not resumed: the server would replay the output.
type EventStream struct {
	ctx    context.Context
	rc     io.ReadCloser
	cancel context.CancelFunc
	sc     *bufio.Scanner
	ev     *Event
	err    error
	done   bool
	path   string
}

// Stream opens GET /v1/sandbox/executions/{id}/events.  Opening is retried
// like any request; the open stream is bound by ctx only.
func (s *SandboxService) Stream(ctx context.Context, id string) (*EventStream, error) {
	p, err := execPath(id, "events")
	if err != nil {
		return nil, err
	}
	resp, err := s.c.do(ctx, &request{method: "GET", path: p, accept: "text/event-stream", stream: true})
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(resp.rc)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventBytes)
	return &EventStream{ctx: ctx, rc: resp.rc, cancel: resp.cancel, sc: sc, path: p}, nil
}

// Next reads the next event.
func (st *EventStream) Next() bool {
	if st.done || st.err != nil {
		return false
	}
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
				return false
			}
			st.ev = ev
			if ev.Terminal() {
				st.done = true
				st.Close()
			}
			return true
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			typ = value
		case "id":
			id = value
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
			if data.Len() > maxEventBytes {
				st.fail(errors.New("event larger than 16 MiB"))
				return false
			}
		}
	}
	err := st.sc.Err()
	if st.ctx.Err() != nil {
		st.fail(st.ctx.Err())
		return false
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	st.fail(&ConnectionError{Method: "GET", Path: st.path, Attempts: 1, Err: errors.New("event stream ended before the terminal status: " + err.Error())})
	return false
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
