package eai

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// agentMock answers the agent routes and records the request URIs and bodies.
type agentMock struct {
	mu     sync.Mutex
	uris   []string
	bodies []string
}

func (m *agentMock) handler(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	m.uris = append(m.uris, r.URL.RequestURI())
	m.bodies = append(m.bodies, string(b))
	m.mu.Unlock()
	switch {
	case r.URL.Path == "/v1/runs/r 1":
		writeJSON(w, 200, map[string]any{"run_id": "r 1", "agent_id": "a1", "truncated": true, "total": 3,
			"executions": []any{map[string]any{"id": "sbx_1", "status": "succeeded", "profile": "gvisor",
				"trace_id": "t1", "usage": map[string]any{"cpu_seconds": 0.5}}},
			"counts": map[string]int{"succeeded": 2, "failed": 1}, "usage": map[string]any{"cpu_seconds": 1.5},
			"trace_ids": []string{"t1"}, "sessions": []any{map[string]any{"id": "ses_1", "status": "running"}},
			"sessions_scope": "node"})
	case r.URL.Path == "/v1/runs" && r.URL.Query().Get("after") == "":
		writeJSON(w, 200, map[string]any{"items": []any{map[string]any{"run_id": "r1", "executions": 2}}, "next": "r1"})
	case r.URL.Path == "/v1/runs":
		writeJSON(w, 200, map[string]any{"items": []any{map[string]any{"run_id": "r2"}}, "next": nil})
	case r.URL.Path == "/v1/agents/a1":
		writeJSON(w, 200, map[string]any{"agent_id": "a1", "runs": 2, "executions": 4, "newest_run": "r2",
			"usage": []any{map[string]any{"profile": "gvisor", "executions": 4, "cpu_seconds": 2.0}}})
	case r.URL.Path == "/v1/agents":
		writeJSON(w, 200, map[string]any{"items": []any{map[string]any{"agent_id": "a1", "runs": 2}}, "next": nil})
	case r.URL.Path == "/v1/sandbox/sessions":
		writeJSON(w, 201, map[string]any{"id": "ses_1", "status": "running", "run_id": "r1"})
	default:
		envelope(w, 404, "not_found", "Run not found", "Run introuvable")
	}
}

func TestAgentViewRunsGetListAndPage(t *testing.T) {
	m := &agentMock{}
	srv := httptest.NewServer(http.HandlerFunc(m.handler))
	defer srv.Close()
	c, _ := newTest(t, srv)
	ctx := context.Background()
	run, err := c.Agent.Runs.Get(ctx, "r 1", &RunGetOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if m.uris[0] != "/v1/runs/r%201?limit=1" {
		t.Fatalf("uri %q", m.uris[0])
	}
	if run.Total != 3 || !run.Truncated || run.Counts["failed"] != 1 || run.Usage.CPUSeconds != 1.5 ||
		len(run.Executions) != 1 || run.Executions[0].ID != "sbx_1" || run.Sessions[0].ID != "ses_1" {
		t.Fatalf("run %+v", run)
	}
	all, err := c.Agent.Runs.All(ctx, RunListOptions{AgentID: "a1", Limit: 1})
	if err != nil || len(all) != 2 || all[0].RunID != "r1" || all[1].RunID != "r2" || all[0].Executions != 2 {
		t.Fatalf("all %+v %v", all, err)
	}
	if m.uris[1] != "/v1/runs?agent_id=a1&limit=1" || m.uris[2] != "/v1/runs?after=r1&agent_id=a1&limit=1" {
		t.Fatalf("uris %q", m.uris)
	}
	_, next, err := c.Agent.Runs.Page(ctx, RunListOptions{ProjectID: "p1"})
	if err != nil || next != "r1" {
		t.Fatalf("page next %q %v", next, err)
	}
}

func TestAgentViewNotFound(t *testing.T) {
	m := &agentMock{}
	srv := httptest.NewServer(http.HandlerFunc(m.handler))
	defer srv.Close()
	c, _ := newTest(t, srv)
	_, err := c.Agent.Runs.Get(context.Background(), "nope", nil)
	var nf *NotFoundError
	if !errors.As(err, &nf) || nf.Code != "not_found" {
		t.Fatalf("err %v", err)
	}
	ses, err := c.Agent.Sessions.ForRun(context.Background(), "nope")
	if err != nil || len(ses) != 0 {
		t.Fatalf("ForRun %v %v", ses, err)
	}
}

func TestAgentViewAgentsAndSessions(t *testing.T) {
	m := &agentMock{}
	srv := httptest.NewServer(http.HandlerFunc(m.handler))
	defer srv.Close()
	c, _ := newTest(t, srv)
	ctx := context.Background()
	a, err := c.Agent.Agents.Get(ctx, "a1")
	if err != nil || a.Runs != 2 || a.Executions != 4 || *a.NewestRun != "r2" || *a.Usage[0].Profile != "gvisor" {
		t.Fatalf("agent %+v %v", a, err)
	}
	agents, err := c.Agent.Agents.All(ctx, 0)
	if err != nil || len(agents) != 1 || agents[0].AgentID != "a1" {
		t.Fatalf("agents %+v %v", agents, err)
	}
	s, err := c.Agent.Sessions.Create(ctx, SessionRequest{Image: "img", Profile: "gvisor", AgentID: "a1", RunID: "r1"})
	if err != nil || s.ID != "ses_1" {
		t.Fatalf("session %v %v", s, err)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(m.bodies[len(m.bodies)-1]), &body); err != nil || body["run_id"] != "r1" ||
		body["agent_id"] != "a1" {
		t.Fatalf("body %v %v", body, err)
	}
	ses, err := c.Agent.Sessions.ForRun(ctx, "r 1")
	if err != nil || len(ses) != 1 || ses[0].ID != "ses_1" {
		t.Fatalf("ForRun %v %v", ses, err)
	}
}
