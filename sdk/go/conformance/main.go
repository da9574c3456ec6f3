// Command conformance runs sdk/conformance/scenarios.json through the Go SDK
// against the eaid named by EAI_URL (sdk/conformance/README.md; started by
// sdk/conformance/run.sh).  Prints PASS/FAIL per scenario and "N passed, M
// failed"; exit status 1 when anything failed.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	eai "github.com/enterprise-ai/eai-sandbox/sdk/go"
)

type step struct {
	Call   string            `json:"call"`
	Client map[string]string `json:"client"`
	Args   map[string]any    `json:"args"`
	Expect map[string]any    `json:"expect"`
	Save   map[string]string `json:"save"`
}

type scenario struct {
	Name  string `json:"name"`
	Steps []step `json:"steps"`
}

type suite struct {
	Format    string         `json:"format"`
	Variables map[string]any `json:"variables"`
	Scenarios []scenario     `json:"scenarios"`
}

// result is what a call produced: raw JSON for paths, plus decoded output.
type result struct {
	raw      any
	stdout   []byte
	stderr   []byte
	hasOut   bool
	bytes    []byte
	isBytes  bool
	events   []*eai.Event
	isStream bool
}

func main() {
	path := os.Getenv("EAI_CONFORMANCE_SCENARIOS")
	if path == "" {
		path = "../conformance/scenarios.json"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(2)
	}
	var s suite
	if err := json.Unmarshal(b, &s); err != nil || s.Format != "eai-sdk-conformance/1" {
		fmt.Fprintf(os.Stderr, "conformance: %s: bad format (%v)\n", path, err)
		os.Exit(2)
	}
	if v := os.Getenv("EAI_CONFORMANCE_IMAGE"); v != "" {
		s.Variables["image"] = v
	}
	if v := os.Getenv("EAI_CONFORMANCE_PROFILE"); v != "" {
		s.Variables["profile"] = v
	}
	only := map[string]bool{}
	for _, n := range strings.Split(os.Getenv("EAI_CONFORMANCE_ONLY"), ",") {
		if n = strings.TrimSpace(n); n != "" {
			only[n] = true
		}
	}
	passed, failed := 0, 0
	for _, sc := range s.Scenarios {
		if len(only) > 0 && !only[sc.Name] {
			continue
		}
		t0 := time.Now()
		if err := runScenario(s.Variables, sc); err != nil {
			failed++
			fmt.Printf("FAIL %s: %v\n", sc.Name, err)
		} else {
			passed++
			fmt.Printf("PASS %s (%.1f s)\n", sc.Name, time.Since(t0).Seconds())
		}
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 || passed == 0 {
		os.Exit(1)
	}
}

func unique() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func runScenario(globals map[string]any, sc scenario) error {
	vars := map[string]any{"unique": unique()}
	for k, v := range globals {
		vars[k] = v
	}
	for i, st := range sc.Steps {
		args, err := subst(st.Args, vars)
		if err != nil {
			return fmt.Errorf("step %d (%s): %v", i+1, st.Call, err)
		}
		exp, err := subst(st.Expect, vars)
		if err != nil {
			return fmt.Errorf("step %d (%s): %v", i+1, st.Call, err)
		}
		am, _ := args.(map[string]any)
		em, _ := exp.(map[string]any)
		res, callErr := call(st, am)
		if err := check(em, res, callErr); err != nil {
			return fmt.Errorf("step %d (%s): %v", i+1, st.Call, err)
		}
		for name, p := range st.Save {
			v, ok := lookup(res.raw, p)
			if !ok {
				return fmt.Errorf("step %d (%s): save %s: no value at %q", i+1, st.Call, name, p)
			}
			vars[name] = v
		}
	}
	return nil
}

var varRe = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)\}`)

func subst(v any, vars map[string]any) (any, error) {
	switch x := v.(type) {
	case string:
		if m := varRe.FindStringSubmatch(x); m != nil && m[0] == x {
			val, ok := vars[m[1]]
			if !ok {
				return nil, fmt.Errorf("unknown variable %s", m[1])
			}
			return val, nil
		}
		var err error
		out := varRe.ReplaceAllStringFunc(x, func(s string) string {
			val, ok := vars[s[2:len(s)-1]]
			if !ok {
				err = fmt.Errorf("unknown variable %s", s)
				return s
			}
			if str, ok := val.(string); ok {
				return str
			}
			j, _ := json.Marshal(val)
			return string(j)
		})
		return out, err
	case map[string]any:
		m := map[string]any{}
		for k, e := range x {
			r, err := subst(e, vars)
			if err != nil {
				return nil, err
			}
			m[k] = r
		}
		return m, nil
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			r, err := subst(e, vars)
			if err != nil {
				return nil, err
			}
			a[i] = r
		}
		return a, nil
	}
	return v, nil
}

func client(spec map[string]string) (*eai.Client, error) {
	key := os.Getenv("EAI_API_KEY")
	switch spec["key"] {
	case "", "a":
	case "b":
		key = os.Getenv("EAI_API_KEY_B")
	case "invalid":
		key = "eai_0000000000000000_" + strings.Repeat("0", 64)
	default:
		return nil, fmt.Errorf("unknown client key %q", spec["key"])
	}
	opts := []eai.Option{eai.WithAPIKey(key)}
	if l := spec["language"]; l != "" {
		opts = append(opts, eai.WithLanguage(l))
	}
	return eai.NewClient(opts...)
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func timeoutOpt(m map[string]any) []eai.CallOption {
	if t, ok := m["timeout_s"].(float64); ok && t > 0 {
		return []eai.CallOption{eai.WithTimeout(time.Duration(t * float64(time.Second)))}
	}
	return nil
}

func toRaw(v any) any {
	b, _ := json.Marshal(v)
	var out any
	json.Unmarshal(b, &out)
	return out
}

func execResult(ex *eai.Execution) *result {
	return &result{raw: ex.Raw, stdout: ex.Stdout, stderr: ex.Stderr, hasOut: true}
}

func call(st step, args map[string]any) (*result, error) {
	c, err := client(st.Client)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sb := c.Sandbox
	switch st.Call {
	case "execute":
		ex, err := sb.Execute(ctx, args["request"], timeoutOpt(args)...)
		if err != nil {
			return nil, err
		}
		return execResult(ex), nil
	case "create":
		var opts []eai.CallOption
		if k := str(args, "idempotency_key"); k != "" {
			opts = append(opts, eai.WithIdempotencyKey(k))
		}
		ex, err := sb.Create(ctx, args["request"], opts...)
		if err != nil {
			return nil, err
		}
		return &result{raw: ex.Raw}, nil
	case "get":
		ex, err := sb.Get(ctx, str(args, "id"))
		if err != nil {
			return nil, err
		}
		return execResult(ex), nil
	case "wait":
		ex, err := sb.Wait(ctx, str(args, "id"), timeoutOpt(args)...)
		if err != nil {
			return nil, err
		}
		return execResult(ex), nil
	case "list":
		p := eai.ListParams{Status: str(args, "status"), RunID: str(args, "run_id")}
		if l, ok := args["limit"].(float64); ok {
			p.Limit = int(l)
		}
		it := sb.List(ctx, p)
		items := []any{}
		for it.Next() {
			items = append(items, it.Execution().Raw)
		}
		if it.Err() != nil {
			return nil, it.Err()
		}
		return &result{raw: items}, nil
	case "cancel":
		ex, err := sb.Cancel(ctx, str(args, "id"))
		if err != nil {
			return nil, err
		}
		return &result{raw: ex.Raw}, nil
	case "download_file":
		b, err := sb.DownloadFile(ctx, str(args, "id"), str(args, "path"))
		if err != nil {
			return nil, err
		}
		return &result{bytes: b, isBytes: true}, nil
	case "stream":
		st, err := sb.Stream(ctx, str(args, "id"))
		if err != nil {
			return nil, err
		}
		defer st.Close()
		r := &result{isStream: true}
		raws := []any{}
		for st.Next() {
			ev := st.Event()
			r.events = append(r.events, ev)
			raws = append(raws, map[string]any{"event": ev.Type, "data": ev.Raw})
		}
		if st.Err() != nil {
			return nil, st.Err()
		}
		r.raw = raws
		return r, nil
	case "contracts_validate":
		v, err := c.Contracts.Validate(ctx, str(args, "name"), args["document"])
		if err != nil {
			return nil, err
		}
		return &result{raw: toRaw(v)}, nil
	case "manifests_apply":
		v, err := c.Manifests.Apply(ctx, args["manifest"])
		if err != nil {
			return nil, err
		}
		return &result{raw: toRaw(v)}, nil
	case "manifests_get":
		v, err := c.Manifests.Get(ctx, str(args, "kind"), str(args, "name"))
		if err != nil {
			return nil, err
		}
		return &result{raw: toRaw(v)}, nil
	case "manifests_delete":
		v, err := c.Manifests.Delete(ctx, str(args, "kind"), str(args, "name"))
		if err != nil {
			return nil, err
		}
		return &result{raw: toRaw(v)}, nil
	case "runs_get":
		o := &eai.RunGetOptions{}
		if l, ok := args["limit"].(float64); ok {
			o.Limit = int(l)
		}
		v, err := c.Agent.Runs.Get(ctx, str(args, "run_id"), o)
		if err != nil {
			return nil, err
		}
		return &result{raw: toRaw(v)}, nil
	case "runs_list":
		o := eai.RunListOptions{AgentID: str(args, "agent_id"), ProjectID: str(args, "project_id")}
		if l, ok := args["limit"].(float64); ok {
			o.Limit = int(l)
		}
		v, err := c.Agent.Runs.All(ctx, o)
		if err != nil {
			return nil, err
		}
		return &result{raw: toRaw(v)}, nil
	case "agents_get":
		v, err := c.Agent.Agents.Get(ctx, str(args, "agent_id"))
		if err != nil {
			return nil, err
		}
		return &result{raw: toRaw(v)}, nil
	case "agents_list":
		limit := 0
		if l, ok := args["limit"].(float64); ok {
			limit = int(l)
		}
		v, err := c.Agent.Agents.All(ctx, limit)
		if err != nil {
			return nil, err
		}
		return &result{raw: toRaw(v)}, nil
	}
	return nil, fmt.Errorf("unknown call %q", st.Call)
}

func lookup(v any, path string) (any, bool) {
	if path == "" {
		return v, true
	}
	for _, seg := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			e, ok := x[seg]
			if !ok {
				return nil, false
			}
			v = e
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func errClass(err error) string {
	var (
		a  *eai.AuthError
		nf *eai.NotFoundError
		va *eai.ValidationError
		co *eai.ConflictError
		rl *eai.RateLimitedError
		un *eai.UnavailableError
		se *eai.ServerError
		te *eai.TimeoutError
		ce *eai.ConnectionError
	)
	switch {
	case errors.As(err, &a):
		return "auth"
	case errors.As(err, &nf):
		return "not_found"
	case errors.As(err, &va):
		return "validation"
	case errors.As(err, &co):
		return "conflict"
	case errors.As(err, &rl):
		return "rate_limited"
	case errors.As(err, &un):
		return "unavailable"
	case errors.As(err, &se):
		return "server"
	case errors.As(err, &te):
		return "timeout"
	case errors.As(err, &ce):
		return "connection"
	}
	return "other"
}

func checkError(want map[string]any, err error) error {
	if err == nil {
		return fmt.Errorf("expected a %v error, the call succeeded", want["class"])
	}
	if cls := errClass(err); cls != want["class"] {
		return fmt.Errorf("error class %s, want %v (%v)", cls, want["class"], err)
	}
	var ae *eai.APIError
	hasAE := errors.As(err, &ae)
	need := func(k string) error {
		if !hasAE {
			return fmt.Errorf("expected %s on an API error, got %T %v", k, err, err)
		}
		return nil
	}
	for k, v := range want {
		switch k {
		case "class":
		case "code":
			if e := need(k); e != nil {
				return e
			}
			if ae.Code != v {
				return fmt.Errorf("code %q, want %v", ae.Code, v)
			}
		case "http_status":
			if e := need(k); e != nil {
				return e
			}
			if f, _ := v.(float64); int(f) != ae.Status {
				return fmt.Errorf("status %d, want %v", ae.Status, v)
			}
		case "message":
			if e := need(k); e != nil {
				return e
			}
			if ae.Message != v {
				return fmt.Errorf("message %q, want %v", ae.Message, v)
			}
		case "message_i18n":
			if e := need(k); e != nil {
				return e
			}
			m, _ := v.(map[string]any)
			for lang, text := range m {
				if ae.MessageI18n[lang] != text {
					return fmt.Errorf("message_i18n.%s %q, want %v", lang, ae.MessageI18n[lang], text)
				}
			}
		case "details_paths":
			if e := need(k); e != nil {
				return e
			}
			paths, _ := v.([]any)
			for _, p := range paths {
				found := false
				for _, d := range ae.Details {
					found = found || d.Path == p
				}
				if !found {
					return fmt.Errorf("details %v lack path %v", ae.Details, p)
				}
			}
		case "request_id":
			if e := need(k); e != nil {
				return e
			}
			if v == true && ae.RequestID == "" {
				return errors.New("no request id")
			}
		default:
			return fmt.Errorf("unknown error expectation %q", k)
		}
	}
	return nil
}

func jsonEqual(a, b any) bool { return reflect.DeepEqual(toRaw(a), toRaw(b)) }

func check(exp map[string]any, r *result, err error) error {
	if w, ok := exp["error"].(map[string]any); ok {
		return checkError(w, err)
	}
	if err != nil {
		return fmt.Errorf("call failed: %v", err)
	}
	stdout, stderr := r.stdout, r.stderr
	if r.isStream {
		var o, e bytes.Buffer
		for _, ev := range r.events {
			switch ev.Type {
			case "stdout":
				o.Write(ev.Data)
			case "stderr":
				e.Write(ev.Data)
			}
		}
		stdout, stderr = o.Bytes(), e.Bytes()
	}
	for k, v := range exp {
		switch k {
		case "fields":
			for p, want := range v.(map[string]any) {
				got, ok := lookup(r.raw, p)
				if !ok && want == nil {
					continue
				}
				if !ok || !jsonEqual(got, want) {
					return fmt.Errorf("%s = %v, want %v", p, got, want)
				}
			}
		case "one_of":
			for p, wants := range v.(map[string]any) {
				got, _ := lookup(r.raw, p)
				hit := false
				for _, w := range wants.([]any) {
					hit = hit || jsonEqual(got, w)
				}
				if !hit {
					return fmt.Errorf("%s = %v, want one of %v", p, got, wants)
				}
			}
		case "match":
			for p, re := range v.(map[string]any) {
				got, _ := lookup(r.raw, p)
				s, ok := got.(string)
				if !ok || !regexp.MustCompile(re.(string)).MatchString(s) {
					return fmt.Errorf("%s = %v does not match %v", p, got, re)
				}
			}
		case "stdout":
			if string(stdout) != v {
				return fmt.Errorf("stdout %q, want %q", stdout, v)
			}
		case "stderr":
			if string(stderr) != v {
				return fmt.Errorf("stderr %q, want %q", stderr, v)
			}
		case "stdout_contains":
			if !strings.Contains(string(stdout), v.(string)) {
				return fmt.Errorf("stdout %q lacks %q", stdout, v)
			}
		case "stdout_b64":
			if got := base64.StdEncoding.EncodeToString(stdout); got != v {
				return fmt.Errorf("stdout base64 %s, want %v", got, v)
			}
		case "files_include":
			files, _ := lookup(r.raw, "files")
			for _, want := range v.([]any) {
				hit := false
				for _, f := range asList(files) {
					p, _ := lookup(f, "path")
					hit = hit || p == want
				}
				if !hit {
					return fmt.Errorf("files %v lack %v", files, want)
				}
			}
		case "ids":
			var ids []any
			for _, it := range asList(r.raw) {
				id, _ := lookup(it, "id")
				ids = append(ids, id)
			}
			if !jsonEqual(ids, v) {
				return fmt.Errorf("ids %v, want %v", ids, v)
			}
		case "count":
			if f, _ := v.(float64); len(asList(r.raw)) != int(f) {
				return fmt.Errorf("count %d, want %v", len(asList(r.raw)), v)
			}
		case "text":
			if !r.isBytes || string(r.bytes) != v {
				return fmt.Errorf("file text %q, want %q", r.bytes, v)
			}
		case "bytes_b64":
			if got := base64.StdEncoding.EncodeToString(r.bytes); !r.isBytes || got != v {
				return fmt.Errorf("file bytes %s, want %v", got, v)
			}
		case "last_status":
			if len(r.events) == 0 {
				return errors.New("no events")
			}
			last := r.events[len(r.events)-1]
			if last.Type != "status" || last.Status != v {
				return fmt.Errorf("last event %s %q, want status %v", last.Type, last.Status, v)
			}
		default:
			return fmt.Errorf("unknown expectation %q", k)
		}
	}
	return nil
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
