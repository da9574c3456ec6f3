package eai

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestVolumeLifecycleAndMounts(t *testing.T) {
	const vol = "vol_1"
	var mu sync.Mutex
	var seen []string
	bodies := map[string]map[string]any{}
	var put []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.EscapedPath())
		mu.Unlock()
		if r.Method == "POST" {
			var m map[string]any
			json.Unmarshal(b, &m)
			bodies[r.URL.Path] = m
		}
		switch {
		case r.Method == "POST" && r.URL.Path == "/v1/volumes":
			writeJSON(w, 201, map[string]any{"id": vol, "name": "notes", "size_bytes": 67108864, "status": "ready"})
		case r.Method == "POST" && r.URL.Path == "/v1/sandbox/executions":
			writeJSON(w, 202, map[string]any{"id": "sbx_1", "status": "queued"})
		case r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/v1/sandbox/executions/"):
			writeJSON(w, 200, map[string]any{"id": "sbx_1", "status": "succeeded", "stdout": "written\n"})
		case r.Method == "POST" && r.URL.Path == "/v1/sandbox/sessions":
			writeJSON(w, 201, map[string]any{"id": "ses_1", "status": "running"})
		case r.Method == "PUT":
			put = b
			writeJSON(w, 200, map[string]any{"path": "a b.txt", "size": len(b)})
		case r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/files"):
			writeJSON(w, 200, map[string]any{"items": []any{map[string]any{"path": "/a b.txt", "size": 5, "type": "file"}}})
		case r.Method == "GET" && strings.Contains(r.URL.Path, "/files/"):
			w.Write(put)
		case r.Method == "DELETE" && strings.Contains(r.URL.Path, "/files/"):
			writeJSON(w, 200, map[string]any{})
		case r.Method == "GET" && r.URL.Path == "/v1/volumes":
			writeJSON(w, 200, map[string]any{"items": []any{map[string]any{"id": vol, "name": "notes", "status": "ready"}}})
		case r.Method == "GET":
			writeJSON(w, 200, map[string]any{"id": vol, "name": "notes", "status": "ready", "used_bytes": 1000,
				"free_bytes": 2000, "attached": map[string]any{"writer": nil, "readers": 0}})
		default:
			writeJSON(w, 200, map[string]any{"id": vol, "status": "deleted"})
		}
	}))
	defer srv.Close()
	c, _ := newTest(t, srv)
	ctx := context.Background()
	v, err := c.Volumes.Create(ctx, "notes", "64Mi")
	if err != nil || v.ID != vol || v.SizeBytes != 67108864 {
		t.Fatalf("create %v %+v", err, v)
	}
	ex, err := c.Sandbox.Execute(ctx, ExecuteRequest{Image: "python:3.11-slim", Command: []string{"true"},
		Volumes: []VolumeMount{{Name: "notes", Path: "/mnt/notes"}}})
	if err != nil || ex.Status != "succeeded" {
		t.Fatalf("execute %v %+v", err, ex)
	}
	if _, err := c.Sandbox.Sessions.Create(ctx, SessionRequest{Image: "python:3.11-slim",
		Volumes: []VolumeMount{{Name: "notes", Path: "/mnt/in", ReadOnly: true}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Volumes.WriteFile(ctx, "notes", "a b.txt", []byte("kept\n")); err != nil {
		t.Fatal(err)
	}
	if b, err := c.Volumes.ReadFile(ctx, "notes", "a b.txt"); err != nil || string(b) != "kept\n" {
		t.Fatalf("read %q %v", b, err)
	}
	if fs, err := c.Volumes.ListFiles(ctx, "notes", ""); err != nil || len(fs) != 1 || fs[0].Path != "/a b.txt" {
		t.Fatalf("list files %v %v", fs, err)
	}
	if err := c.Volumes.DeleteFile(ctx, "notes", "a b.txt"); err != nil {
		t.Fatal(err)
	}
	if vs, err := c.Volumes.List(ctx); err != nil || len(vs) != 1 || vs[0].ID != vol {
		t.Fatalf("list %v %v", vs, err)
	}
	if g, err := c.Volumes.Get(ctx, "notes"); err != nil || g.FreeBytes == nil || *g.FreeBytes != 2000 ||
		g.Attached == nil || g.Attached.Writer != nil {
		t.Fatalf("get %v %+v", err, g)
	}
	if d, err := c.Volumes.Delete(ctx, vol); err != nil || d["status"] != "deleted" {
		t.Fatalf("delete %v %v", err, d)
	}
	want := "POST /v1/volumes|POST /v1/sandbox/executions|GET /v1/sandbox/executions/sbx_1|POST /v1/sandbox/sessions|" +
		"PUT /v1/volumes/notes/files/a%20b.txt|GET /v1/volumes/notes/files/a%20b.txt|GET /v1/volumes/notes/files|" +
		"DELETE /v1/volumes/notes/files/a%20b.txt|GET /v1/volumes|GET /v1/volumes/notes|DELETE /v1/volumes/vol_1"
	if strings.Join(seen, "|") != want {
		t.Fatalf("requests\n%s\nwant\n%s", strings.Join(seen, "|"), want)
	}
	if b := bodies["/v1/volumes"]; b["name"] != "notes" || b["size_bytes"] != "64Mi" {
		t.Fatalf("create body %v", b)
	}
	mounts := func(p string) string { j, _ := json.Marshal(bodies[p]["volumes"]); return string(j) }
	if got := mounts("/v1/sandbox/executions"); got != `[{"name":"notes","path":"/mnt/notes"}]` {
		t.Fatalf("execution volumes %s", got)
	}
	if got := mounts("/v1/sandbox/sessions"); got != `[{"name":"notes","path":"/mnt/in","read_only":true}]` {
		t.Fatalf("session volumes %s", got)
	}
}

func TestVolumeCreateNotRetriedAfterLostAnswer(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		writeJSON(w, 409, map[string]any{"error": map[string]any{"code": "volume_in_use", "message": "held"}})
	}))
	defer srv.Close()
	c, _ := newTest(t, srv)
	_, err := c.Volumes.Create(context.Background(), "n", 16<<20)
	var ce *ConnectionError
	if !errors.As(err, &ce) || n.Load() != 1 {
		t.Fatalf("err %v after %d requests", err, n.Load())
	}
	_, err = c.Volumes.Delete(context.Background(), "n")
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 409 || ae.Code != "volume_in_use" {
		t.Fatalf("delete while held: %v", err)
	}
	if _, err := c.Volumes.Get(context.Background(), "a/b"); err == nil {
		t.Fatal("a ref with a slash is refused before any request")
	}
}
