// Package eai is the Go client of the eai-sandbox API (docs/api.md): run
// untrusted code in gVisor or Kata sandboxes.
//
//	c, err := eai.NewClient(eai.WithBaseURL("http://127.0.0.1:8080"), eai.WithAPIKey(os.Getenv("EAI_API_KEY")))
//	ex, err := c.Sandbox.Execute(ctx, map[string]any{"image": "python:3.12-slim",
//		"profile": "gvisor-small", "command": []string{"python", "-c", "print(1)"}})
//
// Standard library only.  Every call takes a context and stops when it is
// done.  Requests are retried with exponential backoff and jitter on
// connection errors, 429 and 503 (honouring Retry-After), bounded in count and
// time; creates always carry an Idempotency-Key so a retry never runs the code
// twice.  The API key never appears in errors, logs or fmt output.
package eai

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	mrand "math/rand"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Version of this SDK, sent in User-Agent.
const Version = "0.1.0"

// Defaults (docs/sdk.md).
const (
	DefaultBaseURL        = "http://127.0.0.1:8080"
	DefaultMaxRetries     = 5
	DefaultMaxRetryTime   = 60 * time.Second
	DefaultRequestTimeout = 30 * time.Second
	DefaultExecuteTimeout = 10 * time.Minute
	DefaultMaxResponse    = 256 << 20
	maxRetryAfter         = 60 * time.Second
	backoffBase           = 250 * time.Millisecond
	backoffCap            = 8 * time.Second
)

// Client talks to one eaid control plane with one API key.  It is safe for
// concurrent use.
type Client struct {
	Sandbox   *SandboxService
	Contracts *ContractsService
	Manifests *ManifestsService
	// Volumes are the tenant's volumes (docs/volumes.md).
	Volumes *VolumeService
	// Agent is the agent view: Agent.Agents, Agent.Runs, Agent.Sessions.
	Agent *AgentService

	base           *url.URL
	key            string
	lang           string
	hc             *http.Client
	maxRetries     int
	maxRetryTime   time.Duration
	requestTimeout time.Duration
	executeTimeout time.Duration
	maxResponse    int64
	logger         *log.Logger
	sleep          func(ctx context.Context, d time.Duration) error

	rmu sync.Mutex
	rnd *mrand.Rand
}

// Option configures a Client.
type Option func(*Client) error

// WithBaseURL sets the control plane URL (default $EAI_URL, else
// http://127.0.0.1:8080).  A path prefix is kept (e.g. behind a gateway).
func WithBaseURL(u string) Option {
	return func(c *Client) error {
		p, err := parseBase(u)
		if err != nil {
			return err
		}
		c.base = p
		return nil
	}
}

// WithAPIKey sets the key (default $EAI_API_KEY).
func WithAPIKey(k string) Option {
	return func(c *Client) error { c.key = strings.TrimSpace(k); return nil }
}

// WithLanguage sets Accept-Language ("en" or "fr"): error messages come back
// in that language in APIError.Message.
func WithLanguage(lang string) Option {
	return func(c *Client) error {
		if strings.ContainsAny(lang, "\r\n") {
			return errors.New("eai: invalid language")
		}
		c.lang = lang
		return nil
	}
}

// WithHTTPClient replaces the http.Client (its Timeout should be 0 or above
// the 60 s long-poll; each request gets its own deadline).
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return errors.New("eai: nil http client")
		}
		c.hc = hc
		return nil
	}
}

// WithRetry bounds the retries: at most maxRetries after the first attempt,
// and no retry starts whose wait would end more than maxTime after the first
// attempt began.  WithRetry(0, 0) disables retries.
func WithRetry(maxRetries int, maxTime time.Duration) Option {
	return func(c *Client) error {
		if maxRetries < 0 || maxRetries > 100 || maxTime < 0 {
			return errors.New("eai: retry bounds out of range (0..100 retries, time >= 0)")
		}
		c.maxRetries, c.maxRetryTime = maxRetries, maxTime
		return nil
	}
}

// WithRequestTimeout bounds each HTTP attempt (default 30 s; long-polls get
// their wait_s on top).
func WithRequestTimeout(d time.Duration) Option {
	return func(c *Client) error {
		if d <= 0 {
			return errors.New("eai: request timeout must be > 0")
		}
		c.requestTimeout = d
		return nil
	}
}

// WithExecuteTimeout is Execute's overall timeout when the context has no
// earlier deadline (default 10 min).
func WithExecuteTimeout(d time.Duration) Option {
	return func(c *Client) error {
		if d <= 0 {
			return errors.New("eai: execute timeout must be > 0")
		}
		c.executeTimeout = d
		return nil
	}
}

// WithMaxResponseBytes caps the size of one answer read into memory
// (default 256 MiB).
func WithMaxResponseBytes(n int64) Option {
	return func(c *Client) error {
		if n <= 0 {
			return errors.New("eai: max response bytes must be > 0")
		}
		c.maxResponse = n
		return nil
	}
}

// WithLogger logs retries (method, path, status or error, delay): never
// headers, bodies or the key.
func WithLogger(l *log.Logger) Option {
	return func(c *Client) error { c.logger = l; return nil }
}

// NewClient builds a client.  It fails on a malformed base URL or a missing key.
func NewClient(opts ...Option) (*Client, error) {
	c := &Client{
		key:            strings.TrimSpace(os.Getenv("EAI_API_KEY")),
		hc:             &http.Client{},
		maxRetries:     DefaultMaxRetries,
		maxRetryTime:   DefaultMaxRetryTime,
		requestTimeout: DefaultRequestTimeout,
		executeTimeout: DefaultExecuteTimeout,
		maxResponse:    DefaultMaxResponse,
		sleep:          sleepCtx,
		rnd:            mrand.New(mrand.NewSource(time.Now().UnixNano())),
	}
	base := os.Getenv("EAI_URL")
	if base == "" {
		base = DefaultBaseURL
	}
	var err error
	if c.base, err = parseBase(base); err != nil {
		c.base = nil // an explicit WithBaseURL may still fix it
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(c); err != nil {
			return nil, err
		}
	}
	if c.base == nil {
		return nil, fmt.Errorf("eai: invalid EAI_URL: %v", err)
	}
	if c.key == "" {
		return nil, errors.New("eai: no API key (WithAPIKey or EAI_API_KEY)")
	}
	if strings.ContainsAny(c.key, "\r\n\t ") {
		return nil, errors.New("eai: malformed API key")
	}
	c.Sandbox = &SandboxService{c: c}
	c.Sandbox.Sessions = &SessionService{s: c.Sandbox}
	c.Contracts = &ContractsService{c: c}
	c.Manifests = &ManifestsService{c: c}
	c.Volumes = &VolumeService{c: c}
	c.Agent = newAgentService(c)
	return c, nil
}

func parseBase(u string) (*url.URL, error) {
	p, err := url.Parse(strings.TrimSpace(u))
	if err != nil {
		return nil, fmt.Errorf("eai: invalid base URL: %w", err)
	}
	if (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return nil, fmt.Errorf("eai: base URL must be http(s)://host[:port][/prefix], got %q", u)
	}
	if p.User != nil {
		return nil, errors.New("eai: base URL must not carry credentials")
	}
	p.Path = strings.TrimRight(p.Path, "/")
	p.RawQuery, p.Fragment = "", ""
	return p, nil
}

// BaseURL is the control plane URL in use.
func (c *Client) BaseURL() string { return c.base.String() }

// String never shows the key.
func (c *Client) String() string {
	return fmt.Sprintf("eai.Client{base: %s, key: %s, language: %q}", c.base, redact(c.key), c.lang)
}

// GoString never shows the key (%#v).
func (c *Client) GoString() string { return c.String() }

// Format makes every fmt verb (%v, %+v, %#v, %s, %q) go through String, so
// reflection never prints the key field.
func (c *Client) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		fmt.Fprintf(f, "%q", c.String())
		return
	}
	io.WriteString(f, c.String())
}

// redact keeps the public key id (eai_<key_id>_...) and hides the secret.
func redact(k string) string {
	if strings.HasPrefix(k, "eai_") {
		if i := strings.IndexByte(k[4:], '_'); i > 0 {
			return k[:4+i] + "_[REDACTED]"
		}
	}
	if k == "" {
		return "(none)"
	}
	return "[REDACTED]"
}

// request is one logical call, retried as a whole.
type request struct {
	method  string
	path    string // already escaped, starts with /v1/...
	query   url.Values
	body    []byte
	ctype   string
	idemKey string
	extra   time.Duration // added to the per-attempt timeout (long-poll)
	accept  string
	lastID  string // Last-Event-ID (event streams)
	noRetry bool
	// callerCodes: error codes returned at once, not retried here (the
	// caller retries them its own way, e.g. stdin_busy).
	callerCodes []string
	// noLostRetry: a POST without Idempotency-Key; a connection error is not
	// retried (the request may have been done), 429/503 still are.
	noLostRetry bool
	stream      bool // 2xx: hand the open body back (rc), no per-attempt deadline after the headers
}

type response struct {
	status int
	header http.Header
	body   []byte
	rc     io.ReadCloser // stream requests only
	cancel context.CancelFunc
}

func (c *Client) logf(format string, args ...any) {
	if c.logger != nil {
		c.logger.Printf(format, args...)
	}
}

// do sends r, retrying on connection errors, 429 and 503.  2xx answers are
// returned; anything else becomes the classified *APIError.
func (c *Client) do(ctx context.Context, r *request) (*response, error) {
	start := time.Now()
	var lastErr error
	for attempt := 0; ; attempt++ {
		resp, err := c.once(ctx, r)
		if err == nil && resp.status >= 200 && resp.status < 300 {
			return resp, nil
		}
		var tl *TooLargeError
		if errors.As(err, &tl) {
			return nil, err // the same answer again would not be smaller
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var retryAfter time.Duration
		retryable := false
		if err != nil {
			lastErr = &ConnectionError{Method: r.method, Path: r.path, Attempts: attempt + 1, Err: err}
			retryable = !r.noLostRetry || errors.Is(err, syscall.ECONNREFUSED)
		} else {
			ae := parseEnvelope(resp)
			lastErr = classify(ae)
			retryAfter = ae.RetryAfter
			retryable = resp.status == 429 || resp.status == 503
			for _, code := range r.callerCodes {
				if ae.Code == code {
					retryable = false
				}
			}
		}
		if !retryable || r.noRetry || attempt >= c.maxRetries {
			return nil, lastErr
		}
		delay := c.backoff(attempt)
		if retryAfter > delay {
			delay = retryAfter
		}
		if time.Since(start)+delay > c.maxRetryTime {
			c.logf("eai: %s %s: not retrying (%v), retry budget %s spent", r.method, r.path, shortErr(lastErr), c.maxRetryTime)
			return nil, lastErr
		}
		c.logf("eai: %s %s: attempt %d failed (%v); retrying in %s", r.method, r.path, attempt+1, shortErr(lastErr), delay.Round(time.Millisecond))
		if err := c.sleep(ctx, delay); err != nil {
			return nil, err
		}
	}
}

func shortErr(err error) string {
	var ae *APIError
	if errors.As(err, &ae) {
		return fmt.Sprintf("%d %s", ae.Status, ae.Code)
	}
	return err.Error()
}

// backoff: exponential (250 ms doubling, capped at 8 s) with "equal jitter":
// half fixed, half random, so concurrent clients spread out.
func (c *Client) backoff(attempt int) time.Duration {
	d := float64(backoffBase) * math.Pow(2, float64(attempt))
	if d > float64(backoffCap) {
		d = float64(backoffCap)
	}
	c.rmu.Lock()
	j := c.rnd.Float64()
	c.rmu.Unlock()
	return time.Duration(d/2 + j*d/2)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (c *Client) url(path string, q url.Values) string {
	u := *c.base
	u.RawPath = ""
	u.Path = ""
	s := u.String() + c.base.EscapedPath() + path
	if len(q) > 0 {
		s += "?" + q.Encode()
	}
	return s
}

func (c *Client) newHTTPRequest(ctx context.Context, r *request) (*http.Request, error) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, c.url(r.path, r.query), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if r.accept != "" {
		req.Header.Set("Accept", r.accept)
	} else {
		req.Header.Set("Accept", "application/json")
	}
	req.Header.Set("User-Agent", "eai-sdk-go/"+Version)
	if c.lang != "" {
		req.Header.Set("Accept-Language", c.lang)
	}
	if r.body != nil {
		ct := r.ctype
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if r.idemKey != "" {
		req.Header.Set("Idempotency-Key", r.idemKey)
	}
	if r.lastID != "" {
		req.Header.Set("Last-Event-ID", r.lastID)
	}
	return req, nil
}

// once is one attempt with its own deadline; the body is read fully (capped),
// except for a 2xx answer to a stream request.
func (c *Client) once(ctx context.Context, r *request) (*response, error) {
	actx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(c.requestTimeout+r.extra, cancel)
	req, err := c.newHTTPRequest(actx, r)
	if err != nil {
		timer.Stop()
		cancel()
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		expired := !timer.Stop() && ctx.Err() == nil
		cancel()
		if expired {
			return nil, fmt.Errorf("no answer within %s", c.requestTimeout+r.extra)
		}
		return nil, scrub(err)
	}
	if r.stream && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		timer.Stop()
		return &response{status: resp.StatusCode, header: resp.Header, rc: resp.Body, cancel: cancel}, nil
	}
	defer func() { timer.Stop(); cancel() }()
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, c.maxResponse+1))
	if err != nil {
		if actx.Err() != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("answer not complete within %s", c.requestTimeout+r.extra)
		}
		return nil, scrub(err)
	}
	if int64(len(b)) > c.maxResponse {
		return nil, &TooLargeError{Limit: c.maxResponse}
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// scrub strips the URL wrapper: errors then name neither query strings nor
// anything else from the request (the key is only ever in a header anyway).
func scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func parseEnvelope(resp *response) *APIError {
	ae := &APIError{Status: resp.status, Body: resp.body}
	var env struct {
		Error *struct {
			Code        string            `json:"code"`
			Message     string            `json:"message"`
			MessageI18n map[string]string `json:"message_i18n"`
			RequestID   string            `json:"request_id"`
			Details     []ErrorDetail     `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(resp.body, &env) == nil && env.Error != nil && env.Error.Code != "" {
		ae.Code = env.Error.Code
		ae.Message = env.Error.Message
		ae.MessageI18n = env.Error.MessageI18n
		ae.RequestID = env.Error.RequestID
		ae.Details = env.Error.Details
	} else {
		// Not our envelope (a proxy in between): keep the status.
		ae.Code = "http_" + strconv.Itoa(resp.status)
		ae.Message = http.StatusText(resp.status)
	}
	if ae.RequestID == "" {
		ae.RequestID = resp.header.Get("X-Request-Id")
	}
	ae.RetryAfter = parseRetryAfter(resp.header.Get("Retry-After"))
	return ae
}

// parseRetryAfter reads delta-seconds or an HTTP date, capped at 60 s.
func parseRetryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		if n < 0 || math.IsNaN(n) {
			return 0
		}
		if n > maxRetryAfter.Seconds() {
			return maxRetryAfter
		}
		d = time.Duration(n * float64(time.Second))
	} else if t, err := http.ParseTime(v); err == nil {
		d = time.Until(t)
	}
	if d < 0 {
		return 0
	}
	if d > maxRetryAfter {
		return maxRetryAfter
	}
	return d
}

// NewIdempotencyKey returns a random UUID (v4), as Create sends when the
// request names none.
func NewIdempotencyKey() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("eai: crypto/rand failed: " + err.Error())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func (c *Client) getJSON(ctx context.Context, r *request, out any) error {
	resp, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(resp.body, out); err != nil {
		return fmt.Errorf("eai: %s %s: malformed answer: %w", r.method, r.path, err)
	}
	return nil
}
