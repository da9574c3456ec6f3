package eai

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

func TestWriteStdinRawBytesAndEOF(t *testing.T) {
	type seen struct{ path, ctype, body string }
	got := make(chan seen, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.URL.RequestURI(), r.Header.Get("Content-Type"), string(b)}
		writeJSON(w, 200, map[string]any{"id": "sbx_1", "written": len(b), "eof": r.URL.Query().Get("eof") == "true", "pending": 0})
	}))
	defer srv.Close()
	c, _ := newTest(t, srv)
	w, err := c.Sandbox.WriteStdin(context.Background(), "sbx_1", []byte("x = 1\n"), false)
	if err != nil || w.Written != 6 || w.EOF {
		t.Fatalf("write: %+v %v", w, err)
	}
	s := <-got
	if s.path != "/v1/sandbox/executions/sbx_1/stdin" || s.ctype != "application/octet-stream" || s.body != "x = 1\n" {
		t.Fatalf("request %+v", s)
	}
	w, err = c.Sandbox.CloseStdin(context.Background(), "sbx_1")
	if err != nil || !w.EOF {
		t.Fatalf("close: %+v %v", w, err)
	}
	if s = <-got; s.path != "/v1/sandbox/executions/sbx_1/stdin?eof=true" || s.body != "" {
		t.Fatalf("close request %+v", s)
	}
}

func TestWriteStdinBusyRetriedThenClosedIsConflict(t *testing.T) {
	var n int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if string(b) != "a" {
			t.Errorf("body %q", b)
		}
		switch k := atomic.AddInt32(&n, 1); {
		case k <= 6:
			w.Header().Set("Retry-After", "1")
			envelope(w, 429, "stdin_busy", "busy", "occupé")
		case k == 7:
			writeJSON(w, 200, map[string]any{"id": "sbx_1", "written": 1, "eof": false, "pending": 1})
		default:
			envelope(w, 409, "stdin_closed", "closed", "fermée")
		}
	}))
	defer srv.Close()
	c, _ := newTest(t, srv)
	if w, err := c.Sandbox.WriteStdin(context.Background(), "sbx_1", []byte("a"), false); err != nil || w.Written != 1 {
		t.Fatalf("write: %+v %v", w, err)
	}
	if n != 7 {
		t.Fatalf("%d attempts, want 7", n)
	}
	_, err := c.Sandbox.WriteStdin(context.Background(), "sbx_1", []byte("a"), false)
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Code != "stdin_closed" {
		t.Fatalf("closed: %v", err)
	}
}

func TestWriteStdinBusyBoundedByContext(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		envelope(w, 429, "stdin_busy", "busy", "occupé")
	}))
	defer srv.Close()
	c, err := NewClient(WithBaseURL(srv.URL), WithAPIKey(testKey))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = c.Sandbox.WriteStdin(ctx, "sbx_1", []byte("a"), false)
	var ae *APIError
	if err == nil || (!errors.As(err, &ae) && !errors.Is(err, context.DeadlineExceeded)) {
		t.Fatalf("want stdin_busy or the deadline, got %v", err)
	}
}
