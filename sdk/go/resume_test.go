package eai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func sseEvents(first, last int, terminal bool) string {
	var b strings.Builder
	for i := first; i <= last; i++ {
		switch i {
		case 0:
			b.WriteString("id: 0\nevent: status\ndata: {\"status\":\"queued\"}\n\n")
		case 1:
			b.WriteString("id: 1\nevent: status\ndata: {\"status\":\"running\"}\n\n: ping\n\n")
		default:
			fmt.Fprintf(&b, "id: %d\nevent: stdout\ndata: {\"data\":\"line%d\\n\"}\n\n", i, i)
		}
	}
	if terminal {
		fmt.Fprintf(&b, "id: %d\nevent: status\ndata: {\"status\":\"succeeded\",\"exit_code\":0}\n\n", last+1)
	}
	return b.String()
}

// scripted answers one step per request and records the Last-Event-ID of each.
type scripted struct {
	mu    sync.Mutex
	steps []func(w http.ResponseWriter)
	dflt  func(w http.ResponseWriter)
	ids   []string
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.ids = append(s.ids, r.Header.Get("Last-Event-ID"))
	step := s.dflt
	if len(s.steps) > 0 {
		step, s.steps = s.steps[0], s.steps[1:]
	}
	s.mu.Unlock()
	step(w)
}

// streamStep sends payload; cut=true hijacks and closes the connection
// without ending the chunked body (a dropped stream).
func streamStep(payload string, cut bool) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		io.WriteString(w, payload)
		w.(http.Flusher).Flush()
		if cut {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.(*net.TCPConn).SetLinger(0)
				conn.Close()
			}
		}
	}
}

func collectStream(t *testing.T, st *EventStream) []string {
	t.Helper()
	var ids []string
	for st.Next() {
		ids = append(ids, st.Event().ID)
	}
	return ids
}

func TestStreamResumesWithLastEventID(t *testing.T) {
	sc := &scripted{steps: []func(http.ResponseWriter){streamStep(sseEvents(0, 3, false), true), streamStep(sseEvents(4, 6, true), false)}}
	srv := httptest.NewServer(sc)
	defer srv.Close()
	c, slept := newTest(t, srv)
	st, err := c.Sandbox.Stream(context.Background(), "sbx_1")
	if err != nil {
		t.Fatal(err)
	}
	got := collectStream(t, st)
	if st.Err() != nil {
		t.Fatal(st.Err())
	}
	if strings.Join(got, ",") != "0,1,2,3,4,5,6,7" {
		t.Fatalf("ids %v", got)
	}
	if len(sc.ids) != 2 || sc.ids[0] != "" || sc.ids[1] != "3" {
		t.Fatalf("Last-Event-ID per request %q", sc.ids)
	}
	if len(*slept) != 1 {
		t.Fatalf("slept %v", *slept)
	}
}

func TestStreamCleanEOFBeforeTerminalResumes(t *testing.T) {
	sc := &scripted{steps: []func(http.ResponseWriter){streamStep(sseEvents(0, 2, false), false), streamStep(sseEvents(3, 3, true), false)}}
	srv := httptest.NewServer(sc)
	defer srv.Close()
	c, _ := newTest(t, srv)
	st, _ := c.Sandbox.Stream(context.Background(), "sbx_1")
	if got := collectStream(t, st); strings.Join(got, ",") != "0,1,2,3,4" || st.Err() != nil {
		t.Fatalf("ids %v err %v", got, st.Err())
	}
	if sc.ids[1] != "2" {
		t.Fatalf("Last-Event-ID %q", sc.ids)
	}
}

func TestStream204Ends(t *testing.T) {
	sc := &scripted{dflt: func(w http.ResponseWriter) { w.WriteHeader(204) }}
	srv := httptest.NewServer(sc)
	defer srv.Close()
	c, _ := newTest(t, srv)
	st, err := c.Sandbox.Stream(context.Background(), "sbx_1", WithLastEventID("9"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Next() || st.Err() != nil || sc.ids[0] != "9" {
		t.Fatalf("204: next/err %v ids %q", st.Err(), sc.ids)
	}
	sc.steps = []func(http.ResponseWriter){streamStep(sseEvents(0, 1, false), true)}
	st, _ = c.Sandbox.Stream(context.Background(), "sbx_1")
	if got := collectStream(t, st); strings.Join(got, ",") != "0,1" || st.Err() != nil {
		t.Fatalf("resumed then 204: %v %v", got, st.Err())
	}
}

func TestStreamResumeBounded(t *testing.T) {
	sc := &scripted{steps: []func(http.ResponseWriter){streamStep(sseEvents(0, 0, false), true)}, dflt: streamStep("", true)}
	srv := httptest.NewServer(sc)
	defer srv.Close()
	c, slept := newTest(t, srv, WithRetry(3, time.Minute))
	st, _ := c.Sandbox.Stream(context.Background(), "sbx_1")
	got := collectStream(t, st)
	var ce *ConnectionError
	if len(got) != 1 || !errors.As(st.Err(), &ce) {
		t.Fatalf("ids %v err %v", got, st.Err())
	}
	if len(sc.ids) != 1+3 || len(*slept) != 3 {
		t.Fatalf("%d requests (%q), slept %v", len(sc.ids), sc.ids, *slept)
	}
	for _, id := range sc.ids[1:] {
		if id != "0" {
			t.Fatalf("Last-Event-ID %q", sc.ids)
		}
	}
}

// computed by the server's code: core/obs/callback.c eai_cb_sign with
// core/base/util.c eai_hmac_sha256_hex, compiled into a small C program.
const (
	vecSecret = "whsec_0123456789abcdef"
	vecT      = 1764650000
	vecBody   = `{"id":"evt_1","type":"execution.finished","execution":{"id":"sbx_1","status":"succeeded"}}`
	vecSig    = "t=1764650000,v1=1fc37c80235f300c0066ef359feaa4b03278d5959b94192d0d77bea83aeb1841"
)

func TestCallbackSignatureVector(t *testing.T) {
	if got := SignCallback(vecSecret, vecT, []byte(vecBody)); got != vecSig {
		t.Fatalf("sign %s", got)
	}
	at := time.Unix(vecT, 0)
	tol := DefaultSignatureTolerance
	ok := func(secret, h, body string, tol time.Duration, now time.Time) bool {
		return verifySignatureAt(secret, h, []byte(body), tol, now)
	}
	if !ok(vecSecret, vecSig, vecBody, tol, at.Add(10*time.Second)) {
		t.Fatal("vector refused")
	}
	bad := []bool{
		ok(vecSecret, vecSig, vecBody+" ", tol, at),
		ok(vecSecret+"x", vecSig, vecBody, tol, at),
		ok(vecSecret, vecSig, vecBody, tol, at.Add(301*time.Second)),
		ok(vecSecret, vecSig, vecBody, tol, at.Add(-301*time.Second)),
		ok(vecSecret, strings.Replace(vecSig, "t=1764650000", "t=1764650001", 1), vecBody, tol, at),
		ok(vecSecret, "", vecBody, tol, at),
		ok(vecSecret, "garbage", vecBody, tol, at),
		ok(vecSecret, "t=abc,v1=00", vecBody, tol, at),
		ok(vecSecret, "v1="+strings.Repeat("0", 64), vecBody, tol, at),
		ok(vecSecret, "t=1764650000", vecBody, tol, at),
	}
	for i, b := range bad {
		if b {
			t.Fatalf("case %d accepted", i)
		}
	}
	if !ok(vecSecret, vecSig, vecBody, 10*time.Minute, at.Add(500*time.Second)) || !ok(vecSecret, vecSig, vecBody, 0, at.Add(time.Hour)) {
		t.Fatal("tolerance not honoured")
	}
	if VerifySignature(vecSecret, vecSig, []byte(vecBody), tol) {
		t.Fatal("a 2025 timestamp accepted now")
	}
}

func TestCreateSendsCallbackAndViewHasIt(t *testing.T) {
	var body map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			json.NewDecoder(r.Body).Decode(&body)
			writeJSON(w, 202, map[string]any{"id": "sbx_1", "status": "queued"})
			return
		}
		writeJSON(w, 200, map[string]any{"id": "sbx_1", "status": "succeeded", "exit_code": 0,
			"callback": map[string]any{"url": "https://h.example.com/x", "attempts": 1, "last_status": 200, "delivered_at": "2026-12-02T06:00:00Z"}})
	}))
	defer srv.Close()
	c, _ := newTest(t, srv)
	ex, err := c.Sandbox.Execute(context.Background(), ExecuteRequest{Image: "i", Command: []string{"true"},
		Callback: &Callback{URL: "https://h.example.com/x", Secret: strings.Repeat("s", 20)}})
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := body["callback"].(map[string]any)
	if cb["url"] != "https://h.example.com/x" || cb["secret"] != strings.Repeat("s", 20) {
		t.Fatalf("sent %v", body)
	}
	if ex.Callback == nil || ex.Callback.Attempts != 1 || ex.Callback.DeliveredAt == nil {
		t.Fatalf("view %+v", ex.Callback)
	}
}

func TestSessionLifecycle(t *testing.T) {
	const ses = "ses_1"
	var mu sync.Mutex
	var seen []string
	var put []byte
	var execBody map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.EscapedPath())
		mu.Unlock()
		switch {
		case r.Method == "POST" && r.URL.Path == "/v1/sandbox/sessions":
			writeJSON(w, 201, map[string]any{"id": ses, "status": "running", "profile": "gvisor-small"})
		case r.Method == "PUT":
			put = b
			writeJSON(w, 200, map[string]any{"path": "/tmp/a b.py", "size": len(b)})
		case r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/files"):
			writeJSON(w, 200, map[string]any{"items": []any{map[string]any{"path": "/tmp/a b.py", "size": 10, "type": "file"}}})
		case r.Method == "GET" && strings.Contains(r.URL.Path, "/files/"):
			w.Write(put)
		case r.Method == "POST":
			json.Unmarshal(b, &execBody)
			writeJSON(w, 202, map[string]any{"id": "sbx_1", "status": "queued"})
		case r.Method == "GET":
			writeJSON(w, 200, map[string]any{"id": "sbx_1", "status": "succeeded", "stdout": "42\n", "session_id": ses})
		case r.Method == "DELETE" && strings.Contains(r.URL.Path, "/files/"):
			writeJSON(w, 200, map[string]any{})
		default:
			writeJSON(w, 200, map[string]any{"id": ses, "status": "ended", "end_reason": "deleted", "usage": map[string]any{"cpu_seconds": 0.5}})
		}
	}))
	defer srv.Close()
	c, _ := newTest(t, srv)
	ctx := context.Background()
	s, err := c.Sandbox.Sessions.Create(ctx, SessionRequest{Image: "python:3.11-slim", Profile: "gvisor-small"})
	if err != nil || s.ID != ses || s.Info.Status != "running" {
		t.Fatalf("create %v %+v", err, s)
	}
	if err := s.WriteFile(ctx, "/tmp/a b.py", []byte("print(6*7)")); err != nil {
		t.Fatal(err)
	}
	if b, err := s.ReadFile(ctx, "/tmp/a b.py"); err != nil || string(b) != "print(6*7)" {
		t.Fatalf("read %q %v", b, err)
	}
	if fs, err := s.ListFiles(ctx, ""); err != nil || len(fs) != 1 || fs[0].Type != "file" {
		t.Fatalf("list %v %v", fs, err)
	}
	ex, err := s.Run(ctx, []string{"python3", "/tmp/a b.py"})
	if err != nil || ex.StdoutText() != "42\n" || ex.SessionID != ses {
		t.Fatalf("run %v %+v", err, ex)
	}
	if err := s.DeleteFile(ctx, "/tmp/a b.py"); err != nil {
		t.Fatal(err)
	}
	end, err := s.Close(ctx)
	if err != nil || end.EndReason != "deleted" || end.Usage.CPUSeconds != 0.5 {
		t.Fatalf("close %v %+v", err, end)
	}
	want := "POST /v1/sandbox/sessions|PUT /v1/sandbox/sessions/ses_1/files/tmp/a%20b.py|GET /v1/sandbox/sessions/ses_1/files/tmp/a%20b.py|" +
		"GET /v1/sandbox/sessions/ses_1/files|POST /v1/sandbox/sessions/ses_1/executions|GET /v1/sandbox/executions/sbx_1|" +
		"DELETE /v1/sandbox/sessions/ses_1/files/tmp/a%20b.py|DELETE /v1/sandbox/sessions/ses_1"
	if strings.Join(seen, "|") != want {
		t.Fatalf("requests\n%s\nwant\n%s", strings.Join(seen, "|"), want)
	}
	if fmt.Sprint(execBody["command"]) != "[python3 /tmp/a b.py]" {
		t.Fatalf("exec body %v", execBody)
	}
}

func TestSessionCreateNotRetriedAfterLostAnswer(t *testing.T) {
	var n atomic.Int32 // the handler runs on the server's goroutine
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	}))
	defer srv.Close()
	c, _ := newTest(t, srv)
	_, err := c.Sandbox.Sessions.Create(context.Background(), SessionRequest{Image: "i"})
	var ce *ConnectionError
	if !errors.As(err, &ce) || n.Load() != 1 {
		t.Fatalf("err %v after %d requests", err, n.Load())
	}
}
