package eai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const testKey = "eai_0123456789abcdef_" + "5ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7"

func envelope(w http.ResponseWriter, status int, code, en, fr string, details ...ErrorDetail) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if details == nil {
		details = []ErrorDetail{}
	}
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"code": code, "message": en, "message_i18n": map[string]string{"en": en, "fr": fr},
		"request_id": "req-1", "details": details}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// newTest returns a client on srv whose backoff sleeps are recorded, not slept.
func newTest(t *testing.T, srv *httptest.Server, opts ...Option) (*Client, *[]time.Duration) {
	t.Helper()
	c, err := NewClient(append([]Option{WithBaseURL(srv.URL), WithAPIKey(testKey)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	slept := []time.Duration{}
	c.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		slept = append(slept, d)
		mu.Unlock()
		return ctx.Err()
	}
	return c, &slept
}

func TestRetry503HonoursRetryAfterAndKeepsIdempotencyKey(t *testing.T) {
	var n int32
	keys := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testKey {
			t.Errorf("authorization header %q", r.Header.Get("Authorization"))
		}
		keys <- r.Header.Get("Idempotency-Key")
		if atomic.AddInt32(&n, 1) <= 2 {
			w.Header().Set("Retry-After", "3")
			envelope(w, 503, "sandbox_unavailable", "No sandbox runtime", "Aucun environnement")
			return
		}
		writeJSON(w, 202, map[string]any{"id": "sbx_1", "status": "queued"})
	}))
	defer srv.Close()
	c, slept := newTest(t, srv)
	ex, err := c.Sandbox.Create(context.Background(), map[string]any{"image": "i", "command": []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if ex.ID != "sbx_1" || n != 3 {
		t.Fatalf("id %q after %d attempts", ex.ID, n)
	}
	k1, k2, k3 := <-keys, <-keys, <-keys
	if k1 == "" || k1 != k2 || k2 != k3 || len(k1) != 36 {
		t.Fatalf("idempotency keys %q %q %q", k1, k2, k3)
	}
	if len(*slept) != 2 || (*slept)[0] < 3*time.Second || (*slept)[1] < 3*time.Second {
		t.Fatalf("Retry-After not honoured: slept %v", *slept)
	}
}

func TestRealSleepRetryAfterOneSecond(t *testing.T) {
	var n int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if atomic.AddInt32(&n, 1) == 1 {
			w.Header().Set("Retry-After", "1")
			envelope(w, 429, "rate_limited", "Too many requests", "Trop de requêtes")
			return
		}
		writeJSON(w, 200, map[string]any{"id": "sbx_1", "status": "running"})
	}))
	defer srv.Close()
	c, err := NewClient(WithBaseURL(srv.URL), WithAPIKey(testKey))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if _, err := c.Sandbox.Get(context.Background(), "sbx_1"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d < time.Second || d > 5*time.Second {
		t.Fatalf("took %v, want about 1 s (Retry-After: 1)", d)
	}
}

func TestRetriesAreBoundedInCount(t *testing.T) {
	var n int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt32(&n, 1)
		w.Header().Set("Retry-After", "1")
		envelope(w, 429, "rate_limited", "Too many requests, retry later", "Trop de requêtes, réessayez plus tard")
	}))
	defer srv.Close()
	c, slept := newTest(t, srv, WithRetry(3, time.Minute))
	_, err := c.Sandbox.Get(context.Background(), "sbx_1")
	var rl *RateLimitedError
	if !errors.As(err, &rl) || rl.Code != "rate_limited" || rl.RetryAfter != time.Second || rl.Status != 429 {
		t.Fatalf("want RateLimitedError, got %#v", err)
	}
	if n != 4 || len(*slept) != 3 {
		t.Fatalf("%d attempts, %d sleeps; want 4 and 3", n, len(*slept))
	}
	for i, d := range *slept {
		if d < time.Second {
			t.Fatalf("sleep %d = %v < Retry-After", i, d)
		}
	}
}

func TestRetriesAreBoundedInTime(t *testing.T) {
	var n int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt32(&n, 1)
		w.Header().Set("Retry-After", "30")
		envelope(w, 503, "storage_unavailable", "Storage is unavailable", "Le stockage est indisponible")
	}))
	defer srv.Close()
	c, slept := newTest(t, srv, WithRetry(5, 10*time.Second))
	_, err := c.Sandbox.Get(context.Background(), "sbx_1")
	var ue *UnavailableError
	if !errors.As(err, &ue) || n != 1 || len(*slept) != 0 {
		t.Fatalf("want one attempt and UnavailableError, got %d attempts, %v", n, err)
	}
}

func TestBackoffIsExponentialWithJitter(t *testing.T) {
	c, err := NewClient(WithBaseURL("http://127.0.0.1:1"), WithAPIKey(testKey))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[time.Duration]bool{}
	for a := 0; a < 8; a++ {
		full := backoffBase << a
		if full > backoffCap {
			full = backoffCap
		}
		for i := 0; i < 50; i++ {
			d := c.backoff(a)
			if d < full/2 || d > full {
				t.Fatalf("attempt %d: %v outside [%v, %v]", a, d, full/2, full)
			}
			seen[d] = true
		}
	}
	if len(seen) < 100 {
		t.Fatalf("no jitter: %d distinct delays", len(seen))
	}
}

// The first create is read by the server, which then drops the connection
// without answering (a lost answer); the retry carries the same key and the
// server's idempotency returns the first execution: the code ran once.
func TestDroppedConnectionThenIdempotentRetry(t *testing.T) {
	var mu sync.Mutex
	runs := map[string]string{} // idempotency key -> execution id
	bodies := []string{}
	attempts := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		attempts++
		first := attempts == 1
		bodies = append(bodies, string(b))
		id, seen := runs[key]
		if !seen {
			id = fmt.Sprintf("sbx_%d", len(runs)+1)
			runs[key] = id
		}
		mu.Unlock()
		if first {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close()
			return
		}
		status := 202
		if seen {
			status = 200
		}
		writeJSON(w, status, map[string]any{"id": id, "status": "queued"})
	}))
	defer srv.Close()
	c, slept := newTest(t, srv)
	ex, err := c.Sandbox.Create(context.Background(), ExecuteRequest{Image: "i", Profile: "p", Command: []string{"echo", "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if ex.ID != "sbx_1" || len(runs) != 1 || attempts != 2 || len(*slept) != 1 {
		t.Fatalf("id %s, %d runs, %d attempts, %d sleeps", ex.ID, len(runs), attempts, len(*slept))
	}
	if bodies[0] != bodies[1] || !strings.Contains(bodies[0], `"command":["echo","hi"]`) {
		t.Fatalf("retry body differs: %q vs %q", bodies[0], bodies[1])
	}
}

func TestGivenIdempotencyKeyIsSent(t *testing.T) {
	got := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Idempotency-Key")
		writeJSON(w, 202, map[string]any{"id": "sbx_1", "status": "queued"})
	}))
	defer srv.Close()
	c, _ := newTest(t, srv)
	if _, err := c.Sandbox.Create(context.Background(), &ExecuteRequest{Image: "i", Command: []string{"x"}, IdempotencyKey: "k-struct"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sandbox.Create(context.Background(), map[string]any{"image": "i"}, WithIdempotencyKey("k-opt")); err != nil {
		t.Fatal(err)
	}
	if a, b := <-got, <-got; a != "k-struct" || b != "k-opt" {
		t.Fatalf("keys %q %q", a, b)
	}
	c.Sandbox.Create(context.Background(), map[string]any{"image": "i"})
	c.Sandbox.Create(context.Background(), map[string]any{"image": "i"})
	if a, b := <-got, <-got; a == "" || a == b {
		t.Fatalf("generated keys %q %q: two creates must not share one", a, b)
	}
}

func TestFrenchErrorEnvelope(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept-Language") != "fr" {
			envelope(w, 404, "not_found", "Execution not found", "Exécution introuvable")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(404)
		io.WriteString(w, `{"error":{"code":"not_found","message":"Exécution introuvable","message_i18n":{"en":"Execution not found","fr":"Exécution introuvable"},"request_id":"rid-42","details":[]}}`)
	}))
	defer srv.Close()
	c, _ := newTest(t, srv, WithLanguage("fr"))
	_, err := c.Sandbox.Get(context.Background(), "sbx_missing")
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("want NotFoundError, got %T %v", err, err)
	}
	var ae *APIError
	if !errors.As(err, &ae) || ae != nf.APIError {
		t.Fatal("errors.As(*APIError) does not reach the envelope")
	}
	if nf.Status != 404 || nf.Code != "not_found" || nf.Message != "Exécution introuvable" ||
		nf.MessageI18n["en"] != "Execution not found" || nf.RequestID != "rid-42" {
		t.Fatalf("envelope %+v", nf.APIError)
	}
	if !strings.Contains(err.Error(), "Exécution introuvable") {
		t.Fatalf("error text %q", err.Error())
	}
}

func TestErrorClasses(t *testing.T) {
	cases := []struct {
		status int
		code   string
		check  func(error) bool
	}{
		{401, "unauthenticated", func(e error) bool { var x *AuthError; return errors.As(e, &x) }},
		{403, "forbidden", func(e error) bool { var x *AuthError; return errors.As(e, &x) }},
		{404, "not_found", func(e error) bool { var x *NotFoundError; return errors.As(e, &x) }},
		{400, "invalid_json", func(e error) bool { var x *ValidationError; return errors.As(e, &x) }},
		{422, "validation_failed", func(e error) bool { var x *ValidationError; return errors.As(e, &x) }},
		{409, "already_finished", func(e error) bool { var x *ConflictError; return errors.As(e, &x) }},
		{500, "internal", func(e error) bool { var x *ServerError; return errors.As(e, &x) }},
	}
	for _, tc := range cases {
		var n int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			atomic.AddInt32(&n, 1)
			envelope(w, tc.status, tc.code, "m", "m", ErrorDetail{Path: "/limits/memory", Message: "bad"})
		}))
		c, _ := newTest(t, srv)
		_, err := c.Sandbox.Get(context.Background(), "x")
		srv.Close()
		var ae *APIError
		if !tc.check(err) || !errors.As(err, &ae) || ae.Code != tc.code || ae.Status != tc.status ||
			len(ae.Details) != 1 || ae.Details[0].Path != "/limits/memory" {
			t.Fatalf("%d: got %T %v", tc.status, err, err)
		}
		if n != 1 {
			t.Fatalf("%d was retried (%d attempts)", tc.status, n)
		}
	}
}

func TestNonEnvelopeAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(502)
		io.WriteString(w, "<html>bad gateway</html>")
	}))
	defer srv.Close()
	c, _ := newTest(t, srv)
	_, err := c.Sandbox.Get(context.Background(), "x")
	var se *ServerError
	if !errors.As(err, &se) || se.Code != "http_502" || se.Status != 502 {
		t.Fatalf("got %T %v", err, err)
	}
}

func TestKeyNeverPrintedOrLogged(t *testing.T) {
	secret := testKey[len("eai_0123456789abcdef_"):]
	var logbuf bytes.Buffer
	// A port nobody listens on: connection errors, retried and logged.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	c, err := NewClient(WithBaseURL("http://"+addr), WithAPIKey(testKey), WithRetry(2, time.Minute),
		WithLogger(log.New(&logbuf, "", 0)))
	if err != nil {
		t.Fatal(err)
	}
	c.sleep = func(ctx context.Context, d time.Duration) error { return nil }
	_, err = c.Sandbox.Get(context.Background(), "sbx_1")
	var ce *ConnectionError
	if !errors.As(err, &ce) || ce.Attempts != 3 {
		t.Fatalf("want ConnectionError after 3 attempts, got %v", err)
	}
	if !strings.Contains(logbuf.String(), "retrying") {
		t.Fatalf("retries not logged: %q", logbuf.String())
	}
	opts := []Option{WithBaseURL("http://" + addr), WithAPIKey(testKey)}
	texts := []string{err.Error(), fmt.Sprintf("%#v", err), logbuf.String(),
		fmt.Sprint(c), fmt.Sprintf("%v|%+v|%#v|%s|%q", c, c, c, c, c), fmt.Sprintf("%+v", *c.Sandbox),
		fmt.Sprintf("%#v", opts)}
	for _, s := range texts {
		if strings.Contains(s, secret) {
			t.Fatalf("secret leaked in %q", s)
		}
	}
	if !strings.Contains(c.String(), "eai_0123456789abcdef_[REDACTED]") {
		t.Fatalf("String() = %q", c.String())
	}
}

func TestBase64OutputDecoded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"id": "sbx_1", "status": "succeeded", "exit_code": 0,
			"stdout": "AP8BAg==", "stdout_encoding": "base64", "stderr": "é\n", "stderr_encoding": "utf-8"})
	}))
	defer srv.Close()
	c, _ := newTest(t, srv)
	ex, err := c.Sandbox.Get(context.Background(), "sbx_1")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ex.Stdout, []byte{0, 0xff, 1, 2}) || ex.StderrText() != "é\n" || *ex.ExitCode != 0 {
		t.Fatalf("stdout %v stderr %q", ex.Stdout, ex.Stderr)
	}
	if ex.Raw["stdout"] != "AP8BAg==" {
		t.Fatalf("raw not kept: %v", ex.Raw["stdout"])
	}
}

func TestWaitLongPollsWithoutSpinning(t *testing.T) {
	var n int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("wait_s") != "30" {
			t.Errorf("wait_s = %q", r.URL.Query().Get("wait_s"))
		}
		if atomic.AddInt32(&n, 1) < 3 {
			time.Sleep(300 * time.Millisecond) // the server's long-poll
			writeJSON(w, 200, map[string]any{"id": "sbx_1", "status": "running"})
			return
		}
		writeJSON(w, 200, map[string]any{"id": "sbx_1", "status": "failed", "exit_code": 3})
	}))
	defer srv.Close()
	c, _ := newTest(t, srv)
	ex, err := c.Sandbox.Wait(context.Background(), "sbx_1")
	if err != nil || ex.Status != "failed" || *ex.ExitCode != 3 || n != 3 {
		t.Fatalf("%v %+v after %d polls", err, ex, n)
	}
}

func TestWaitDoesNotSpinOnImmediateAnswers(t *testing.T) {
	var n int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt32(&n, 1)
		writeJSON(w, 200, map[string]any{"id": "sbx_1", "status": "running"})
	}))
	defer srv.Close()
	c, err := NewClient(WithBaseURL(srv.URL), WithAPIKey(testKey))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Sandbox.Wait(context.Background(), "sbx_1", WithTimeout(1500*time.Millisecond))
	var te *TimeoutError
	if !errors.As(err, &te) || te.LastStatus != "running" {
		t.Fatalf("want TimeoutError, got %v", err)
	}
	if n > 5 {
		t.Fatalf("%d polls in 1.5 s: tight loop", n)
	}
}

func TestExecuteOverallTimeoutLeavesTheExecutionAlone(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "POST" && r.URL.Path == "/v1/sandbox/executions":
			writeJSON(w, 202, map[string]any{"id": "sbx_9", "status": "queued"})
		case r.Method == "POST" && r.URL.Path == "/v1/sandbox/executions/sbx_9/cancel":
			cancelled <- struct{}{}
			writeJSON(w, 202, map[string]any{"id": "sbx_9", "status": "cancelled"})
		default:
			select { // long-poll that outlives the client's patience
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			writeJSON(w, 200, map[string]any{"id": "sbx_9", "status": "running"})
		}
	}))
	defer srv.Close()
	c, _ := newTest(t, srv)
	t0 := time.Now()
	_, err := c.Sandbox.Execute(context.Background(), map[string]any{"image": "i", "command": []string{"sleep", "99"}},
		WithTimeout(time.Second))
	var te *TimeoutError
	if !errors.As(err, &te) || te.ExecutionID != "sbx_9" || te.LastStatus != "queued" {
		t.Fatalf("want TimeoutError for sbx_9, got %v", err)
	}
	if d := time.Since(t0); d > 4*time.Second {
		t.Fatalf("timeout of 1 s took %v", d)
	}
	select {
	case <-cancelled:
		t.Fatal("execute cancelled the execution; the caller decides")
	default:
	}
}

func TestContextCancellationStopsLongPoll(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer srv.Close()
	c, _ := newTest(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	t0 := time.Now()
	_, err := c.Sandbox.Wait(ctx, "sbx_1")
	if !errors.Is(err, context.Canceled) || time.Since(t0) > 3*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(t0))
	}
}

func TestExecuteHappyPathAndSeedShape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case "POST":
			var body map[string]any
			json.NewDecoder(r.Body).Decode(&body)
			if body["image"] != "python:3.12-slim" || body["profile"] != "gvisor-small" {
				t.Errorf("body %v", body)
			}
			writeJSON(w, 202, map[string]any{"id": "sbx_2", "status": "queued"})
		default:
			writeJSON(w, 200, map[string]any{"id": "sbx_2", "status": "succeeded", "exit_code": 0, "stdout": "1\n",
				"stdout_encoding": "utf-8", "files": []any{map[string]any{"path": "/tmp/outputs/a", "size": 1, "sha256": "x"}}})
		}
	}))
	defer srv.Close()
	c, _ := newTest(t, srv)
	ctx := context.Background()
	ex, err := c.Sandbox.Execute(ctx, map[string]any{"image": "python:3.12-slim", "profile": "gvisor-small"})
	if err != nil || ex.Status != "succeeded" || ex.StdoutText() != "1\n" || len(ex.Files) != 1 {
		t.Fatalf("%v %+v", err, ex)
	}
	b, _ := json.Marshal(ex)
	if !strings.Contains(string(b), `"stdout":"1\n"`) {
		t.Fatalf("marshal %s", b)
	}
}

func TestStreamSSE(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "text/event-stream" {
			t.Errorf("accept %q", r.Header.Get("Accept"))
		}
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		io.WriteString(w, ": hello\n\nevent: status\ndata: {\"status\":\"running\"}\n\n")
		f.Flush()
		io.WriteString(w, "event: stdout\ndata: {\"data\":\"a\\n\"}\n\nevent: stderr\ndata: {\"data\":\"/w==\",\"encoding\":\"base64\"}\n\n")
		f.Flush()
		io.WriteString(w, "event: status\ndata: {\"status\":\"succeeded\",\"exit_code\":0}\n\n")
	}))
	defer srv.Close()
	c, _ := newTest(t, srv)
	st, err := c.Sandbox.Stream(context.Background(), "sbx_1")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var got []string
	for st.Next() {
		ev := st.Event()
		got = append(got, fmt.Sprintf("%s:%s:%x", ev.Type, ev.Status, ev.Data))
	}
	if st.Err() != nil {
		t.Fatal(st.Err())
	}
	want := "status:running:|stdout::610a|stderr::ff|status:succeeded:"
	if strings.Join(got, "|") != want {
		t.Fatalf("events %v", got)
	}
}

func TestStreamCutBeforeTerminalIsAnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: status\ndata: {\"status\":\"running\"}\n\n")
	}))
	defer srv.Close()
	c, _ := newTest(t, srv)
	st, err := c.Sandbox.Stream(context.Background(), "sbx_1")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for st.Next() {
		n++
	}
	var ce *ConnectionError
	if n != 1 || !errors.As(st.Err(), &ce) {
		t.Fatalf("%d events, err %v", n, st.Err())
	}
}

func TestListPages(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("limit") != "2" || q.Get("run_id") != "r1" {
			t.Errorf("query %v", q)
		}
		switch q.Get("after") {
		case "":
			writeJSON(w, 200, map[string]any{"items": []any{map[string]any{"id": "e5"}, map[string]any{"id": "e4"}}, "next": "c2"})
		case "c2":
			writeJSON(w, 200, map[string]any{"items": []any{map[string]any{"id": "e3"}, map[string]any{"id": "e2"}}, "next": "c4"})
		default:
			writeJSON(w, 200, map[string]any{"items": []any{map[string]any{"id": "e1"}}, "next": nil})
		}
	}))
	defer srv.Close()
	c, _ := newTest(t, srv)
	it := c.Sandbox.List(context.Background(), ListParams{RunID: "r1", Limit: 2})
	var ids []string
	for it.Next() {
		ids = append(ids, it.Execution().ID)
	}
	if it.Err() != nil || strings.Join(ids, ",") != "e5,e4,e3,e2,e1" || it.Pages() != 3 {
		t.Fatalf("%v %v %d", it.Err(), ids, it.Pages())
	}
}

func TestDownloadFileAndInputFiles(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			b, _ := io.ReadAll(r.Body)
			want := `"files":[{"content":"a,b\n","path":"/tmp/in/a.csv"},{"content_b64":"AP8=","path":"/tmp/in/b.bin"}]`
			if !strings.Contains(string(b), want) {
				t.Errorf("body %s", b)
			}
			writeJSON(w, 202, map[string]any{"id": "sbx_1", "status": "queued"})
			return
		}
		if r.URL.EscapedPath() != "/v1/sandbox/executions/sbx_1/files/tmp/outputs/r%20s.bin" {
			t.Errorf("path %q", r.URL.EscapedPath())
		}
		w.Write([]byte{0, 1, 0xfe})
	}))
	defer srv.Close()
	c, _ := newTest(t, srv)
	_, err := c.Sandbox.Create(context.Background(), ExecuteRequest{Image: "i", Command: []string{"x"},
		Files: []File{{Path: "/tmp/in/a.csv", Data: []byte("a,b\n")}, {Path: "/tmp/in/b.bin", Data: []byte{0, 0xff}}}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Sandbox.DownloadFile(context.Background(), "sbx_1", "/tmp/outputs/r s.bin")
	if err != nil || !bytes.Equal(b, []byte{0, 1, 0xfe}) {
		t.Fatalf("%v %v", err, b)
	}
}

func TestClientOptionsValidated(t *testing.T) {
	t.Setenv("EAI_API_KEY", "")
	t.Setenv("EAI_URL", "")
	if _, err := NewClient(WithBaseURL("http://x")); err == nil {
		t.Fatal("missing key accepted")
	}
	if _, err := NewClient(WithBaseURL("ftp://x"), WithAPIKey(testKey)); err == nil {
		t.Fatal("ftp accepted")
	}
	if _, err := NewClient(WithBaseURL("http://u:p@x"), WithAPIKey(testKey)); err == nil {
		t.Fatal("credentials in URL accepted")
	}
	t.Setenv("EAI_URL", "http://127.0.0.1:9/prefix/")
	t.Setenv("EAI_API_KEY", testKey)
	c, err := NewClient()
	if err != nil || c.url("/v1/x", nil) != "http://127.0.0.1:9/prefix/v1/x" {
		t.Fatalf("%v %v", err, c)
	}
	if _, err := c.Sandbox.Create(context.Background(), []string{"x"}); err == nil {
		t.Fatal("non-object request accepted")
	}
}

func TestStreamStopsWithTheContext(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: status\ndata: {\"status\":\"running\"}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer srv.Close()
	c, _ := newTest(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	st, err := c.Sandbox.Stream(ctx, "sbx_1")
	if err != nil {
		t.Fatal(err)
	}
	if !st.Next() || st.Event().Status != "running" {
		t.Fatal("first event missing")
	}
	time.AfterFunc(200*time.Millisecond, cancel)
	t0 := time.Now()
	if st.Next() || !errors.Is(st.Err(), context.Canceled) || time.Since(t0) > 3*time.Second {
		t.Fatalf("err %v after %v", st.Err(), time.Since(t0))
	}
}

func TestAttemptTimeoutIsAConnectionErrorAndRetried(t *testing.T) {
	var n int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if atomic.AddInt32(&n, 1) == 1 {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		writeJSON(w, 200, map[string]any{"id": "sbx_1", "status": "running"})
	}))
	defer srv.Close()
	c, slept := newTest(t, srv, WithRequestTimeout(300*time.Millisecond))
	ex, err := c.Sandbox.Get(context.Background(), "sbx_1")
	if err != nil || ex.Status != "running" || n != 2 || len(*slept) != 1 {
		t.Fatalf("%v after %d attempts", err, n)
	}
	c2, _ := newTest(t, srv, WithRequestTimeout(300*time.Millisecond), WithRetry(0, 0))
	atomic.StoreInt32(&n, 0)
	_, err = c2.Sandbox.Get(context.Background(), "sbx_1")
	var ce *ConnectionError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "no answer within 300ms") || errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

func TestOversizedAnswerIsNotRetried(t *testing.T) {
	var n int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt32(&n, 1)
		writeJSON(w, 200, map[string]any{"id": "sbx_1", "status": "running", "pad": strings.Repeat("x", 4096)})
	}))
	defer srv.Close()
	c, _ := newTest(t, srv, WithMaxResponseBytes(1024))
	_, err := c.Sandbox.Get(context.Background(), "sbx_1")
	var tl *TooLargeError
	if !errors.As(err, &tl) || n != 1 {
		t.Fatalf("%v after %d attempts", err, n)
	}
}
