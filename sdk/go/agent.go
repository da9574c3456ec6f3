package eai

// The agent view (docs/api.md "Runs and agents"): what an agent platform reads.
//
//	run, err := c.Agent.Runs.Get(ctx, "run-42", nil)       // executions, sessions, counts, usage, trace ids
//	agents, err := c.Agent.Agents.All(ctx, 0)               // every page
//	s, err := c.Agent.Sessions.Create(ctx, eai.SessionRequest{Image: "python:3.11-slim", RunID: "run-42"})
//
// Agents, Runs and Sessions are the AgentsClient, RunsClient and SessionsClient
// of the Python module enterprise_ai.agent.

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"time"
)

// AgentService is c.Agent.
type AgentService struct {
	Agents   *AgentsClient
	Runs     *RunsClient
	Sessions *SessionsClient
}

// AgentsClient is c.Agent.Agents.
type AgentsClient struct{ c *Client }

// RunsClient is c.Agent.Runs.
type RunsClient struct{ c *Client }

// SessionsClient is c.Agent.Sessions: c.Sandbox.Sessions, whose SessionRequest
// carries ProjectID, AgentID and RunID, plus ForRun.
type SessionsClient struct {
	*SessionService
	c *Client
}

func newAgentService(c *Client) *AgentService {
	return &AgentService{Agents: &AgentsClient{c: c}, Runs: &RunsClient{c: c},
		Sessions: &SessionsClient{SessionService: c.Sandbox.Sessions, c: c}}
}

// RunExecution is one execution of a run (no output: read it with Sandbox.Get).
type RunExecution struct {
	ID         string     `json:"id"`
	Status     string     `json:"status"`
	Profile    string     `json:"profile"`
	SessionID  *string    `json:"session_id"`
	TraceID    *string    `json:"trace_id"`
	CreatedAt  *time.Time `json:"created_at"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	Usage      *Usage     `json:"usage"`
}

// Run is GET /v1/runs/{run_id}: executions (oldest first, at most the limit;
// Truncated when the run has more), this node's sessions of the run, and the
// counts, usage sums and times of the whole run.
type Run struct {
	RunID             string         `json:"run_id"`
	AgentID           *string        `json:"agent_id"`
	ProjectID         *string        `json:"project_id"`
	Executions        []RunExecution `json:"executions"`
	Truncated         bool           `json:"truncated"`
	Total             int            `json:"total"`
	Counts            map[string]int `json:"counts"`
	Usage             Usage          `json:"usage"`
	TraceIDs          []string       `json:"trace_ids"`
	FirstAt           *time.Time     `json:"first_at"`
	LastAt            *time.Time     `json:"last_at"`
	Sessions          []SessionInfo  `json:"sessions"`
	SessionsTruncated bool           `json:"sessions_truncated"`
	SessionsScope     string         `json:"sessions_scope"`
}

// RunSummary is one item of GET /v1/runs.
type RunSummary struct {
	RunID      string     `json:"run_id"`
	AgentID    *string    `json:"agent_id"`
	ProjectID  *string    `json:"project_id"`
	Executions int        `json:"executions"`
	FirstAt    *time.Time `json:"first_at"`
	LastAt     *time.Time `json:"last_at"`
}

// ProfileUsage is an agent's usage on one profile.
type ProfileUsage struct {
	Profile         *string    `json:"profile"`
	Executions      int        `json:"executions"`
	CPUSeconds      float64    `json:"cpu_seconds"`
	MemoryMBSeconds float64    `json:"memory_mb_seconds"`
	DurationS       float64    `json:"duration_s"`
	LastSeen        *time.Time `json:"last_seen"`
}

// Agent is GET /v1/agents/{agent_id}.
type Agent struct {
	AgentID    string         `json:"agent_id"`
	Executions int            `json:"executions"`
	Runs       int            `json:"runs"`
	NewestRun  *string        `json:"newest_run"`
	LastSeen   *time.Time     `json:"last_seen"`
	Usage      []ProfileUsage `json:"usage"`
}

// AgentSummary is one item of GET /v1/agents.
type AgentSummary struct {
	AgentID    string     `json:"agent_id"`
	Executions int        `json:"executions"`
	Runs       int        `json:"runs"`
	LastSeen   *time.Time `json:"last_seen"`
}

// RunListOptions filters GET /v1/runs; Limit is the page size (1..100, 0: the
// server's 20), After the cursor of Page.
type RunListOptions struct {
	AgentID   string
	ProjectID string
	Limit     int
	After     string
}

// RunGetOptions: Limit (1..1000, 0: the server's 100) caps the executions listed.
type RunGetOptions struct{ Limit int }

// maxPages bounds All, a guard against a server that never ends its pages.
const maxPages = 10000

// Get reads one run.  A run the tenant does not have is a *NotFoundError.
func (r *RunsClient) Get(ctx context.Context, runID string, o *RunGetOptions) (*Run, error) {
	var q url.Values
	if o != nil && o.Limit > 0 {
		q = url.Values{"limit": {strconv.Itoa(o.Limit)}}
	}
	var run Run
	if err := r.c.getJSON(ctx, &request{method: "GET", path: "/v1/runs/" + url.PathEscape(runID), query: q}, &run); err != nil {
		return nil, err
	}
	return &run, nil
}

// Page reads one page of runs (by run_id) and the cursor of the next ("" on the last).
func (r *RunsClient) Page(ctx context.Context, o RunListOptions) ([]RunSummary, string, error) {
	q := url.Values{}
	for k, v := range map[string]string{"agent_id": o.AgentID, "project_id": o.ProjectID, "after": o.After} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	var page struct {
		Items []RunSummary `json:"items"`
		Next  *string      `json:"next"`
	}
	if err := r.c.getJSON(ctx, &request{method: "GET", path: "/v1/runs", query: q}, &page); err != nil {
		return nil, "", err
	}
	next := ""
	if page.Next != nil {
		next = *page.Next
	}
	return page.Items, next, nil
}

// All reads every page of runs.
func (r *RunsClient) All(ctx context.Context, o RunListOptions) ([]RunSummary, error) {
	var all []RunSummary
	for i := 0; i < maxPages; i++ {
		items, next, err := r.Page(ctx, o)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == "" || len(items) == 0 {
			return all, nil
		}
		o.After = next
	}
	return all, errors.New("eai: too many pages")
}

// Get reads one agent.  An agent the tenant has no execution of is a *NotFoundError.
func (a *AgentsClient) Get(ctx context.Context, agentID string) (*Agent, error) {
	var ag Agent
	if err := a.c.getJSON(ctx, &request{method: "GET", path: "/v1/agents/" + url.PathEscape(agentID)}, &ag); err != nil {
		return nil, err
	}
	return &ag, nil
}

// Page reads one page of agents (by agent_id) and the next cursor ("" on the last).
func (a *AgentsClient) Page(ctx context.Context, limit int, after string) ([]AgentSummary, string, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if after != "" {
		q.Set("after", after)
	}
	var page struct {
		Items []AgentSummary `json:"items"`
		Next  *string        `json:"next"`
	}
	if err := a.c.getJSON(ctx, &request{method: "GET", path: "/v1/agents", query: q}, &page); err != nil {
		return nil, "", err
	}
	next := ""
	if page.Next != nil {
		next = *page.Next
	}
	return page.Items, next, nil
}

// All reads every agent of the tenant (limit: the page size, 0 for the server's).
func (a *AgentsClient) All(ctx context.Context, limit int) ([]AgentSummary, error) {
	var all []AgentSummary
	after := ""
	for i := 0; i < maxPages; i++ {
		items, next, err := a.Page(ctx, limit, after)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == "" || len(items) == 0 {
			return all, nil
		}
		after = next
	}
	return all, errors.New("eai: too many pages")
}

// Runs reads every run of one agent (GET /v1/runs?agent_id=).
func (a *AgentsClient) Runs(ctx context.Context, agentID string) ([]RunSummary, error) {
	return (&RunsClient{c: a.c}).All(ctx, RunListOptions{AgentID: agentID})
}

// ForRun lists this node's sessions created with runID (none: an empty slice).
func (s *SessionsClient) ForRun(ctx context.Context, runID string) ([]SessionInfo, error) {
	run, err := (&RunsClient{c: s.c}).Get(ctx, runID, &RunGetOptions{Limit: 1})
	var nf *NotFoundError
	if errors.As(err, &nf) {
		return []SessionInfo{}, nil
	}
	if err != nil {
		return nil, err
	}
	return run.Sessions, nil
}
