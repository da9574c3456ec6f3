package eai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ContractsService is c.Contracts.
type ContractsService struct{ c *Client }

// ManifestsService is c.Manifests.
type ManifestsService struct{ c *Client }

// ValidationResult is the answer of Contracts.Validate.
type ValidationResult struct {
	Valid  bool          `json:"valid"`
	Errors []ErrorDetail `json:"errors"`
}

// ApplyResult is the answer of Manifests.Apply.
type ApplyResult struct {
	Kind     string         `json:"kind"`
	Name     string         `json:"name"`
	Result   string         `json:"result"` // "created" or "updated"
	Manifest map[string]any `json:"manifest"`
}

// document encodes doc: a string or []byte is sent as is (YAML unless it
// starts with '{'), anything else as JSON.
func document(doc any) ([]byte, string, error) {
	var b []byte
	switch d := doc.(type) {
	case nil:
		return nil, "", errors.New("eai: nil document")
	case string:
		b = []byte(d)
	case []byte:
		b = d
	case json.RawMessage:
		return d, "application/json", nil
	default:
		j, err := json.Marshal(doc)
		if err != nil {
			return nil, "", fmt.Errorf("eai: cannot encode document: %w", err)
		}
		return j, "application/json", nil
	}
	if strings.HasPrefix(strings.TrimSpace(string(b)), "{") {
		return b, "application/json", nil
	}
	return b, "application/yaml", nil
}

// Validate checks doc against the contract name ("tool-manifest",
// "sandbox-execution").  An invalid document is a result, not an error.
func (s *ContractsService) Validate(ctx context.Context, name string, doc any) (*ValidationResult, error) {
	if name == "" {
		return nil, errors.New("eai: empty contract name")
	}
	b, ct, err := document(doc)
	if err != nil {
		return nil, err
	}
	var out ValidationResult
	err = s.c.getJSON(ctx, &request{method: "POST", path: "/v1/contracts/" + url.PathEscape(name) + "/validate", body: b, ctype: ct}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Apply stores a manifest (JSON value, or YAML/JSON text) for the tenant;
// schema errors come back as *ValidationError with Details.
func (s *ManifestsService) Apply(ctx context.Context, doc any) (*ApplyResult, error) {
	b, ct, err := document(doc)
	if err != nil {
		return nil, err
	}
	var out ApplyResult
	if err := s.c.getJSON(ctx, &request{method: "POST", path: "/v1/manifests/apply", body: b, ctype: ct}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func manifestPath(kind, name string) (string, error) {
	if kind == "" || name == "" {
		return "", errors.New("eai: manifest kind and name are required")
	}
	return "/v1/manifests/" + url.PathEscape(kind) + "/" + url.PathEscape(name), nil
}

// Get returns a manifest as applied.
func (s *ManifestsService) Get(ctx context.Context, kind, name string) (map[string]any, error) {
	p, err := manifestPath(kind, name)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := s.c.getJSON(ctx, &request{method: "GET", path: p}, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteResult is the answer of Manifests.Delete.
type DeleteResult struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Result string `json:"result"` // "deleted"
}

// Delete removes a manifest (*NotFoundError when absent).
func (s *ManifestsService) Delete(ctx context.Context, kind, name string) (*DeleteResult, error) {
	p, err := manifestPath(kind, name)
	if err != nil {
		return nil, err
	}
	var out DeleteResult
	if err := s.c.getJSON(ctx, &request{method: "DELETE", path: p}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
