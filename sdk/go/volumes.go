package eai

// Volumes (docs/volumes.md): disks of the tenant's, kept between executions
// and sessions on the node that made them.
//
//	v, err := c.Volumes.Create(ctx, "notes", "64Mi")
//	_, err = c.Sandbox.Execute(ctx, eai.ExecuteRequest{Image: "python:3.11-slim", Profile: "gvisor-small",
//		Command: []string{"sh", "-c", "echo kept > /mnt/notes/a.txt"},
//		Volumes: []eai.VolumeMount{{Name: "notes", Path: "/mnt/notes"}}})
//	data, err := c.Volumes.ReadFile(ctx, "notes", "a.txt") // "kept\n"
//	_, err = c.Volumes.Delete(ctx, "notes")

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// VolumeMount is a volume an execution or a session mounts (docs/volumes.md "Mounting").
type VolumeMount struct {
	Name     string `json:"name"` // the volume's name or id
	Path     string `json:"path"` // absolute, under /mnt
	ReadOnly bool   `json:"read_only,omitempty"`
}

// VolumeInfo is a volume as the server reports it; UsedBytes and FreeBytes come with Get.
type VolumeInfo struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	SizeBytes int64  `json:"size_bytes"`
	Status    string `json:"status"`
	CreatedAt string `json:"created_at,omitempty"`
	Attached  *struct {
		Writer  *string `json:"writer"`
		Readers int     `json:"readers"`
	} `json:"attached,omitempty"`
	Usage     map[string]any `json:"usage,omitempty"`
	UsedBytes *int64         `json:"used_bytes,omitempty"`
	FreeBytes *int64         `json:"free_bytes,omitempty"`
}

// VolumeService is c.Volumes; a ref is a volume's id (vol_...) or its name.
type VolumeService struct{ c *Client }

func volumePath(ref string, rest ...string) (string, error) {
	if ref == "" || strings.ContainsAny(ref, "/?#") {
		return "", fmt.Errorf("eai: bad volume %q", ref)
	}
	return "/v1/volumes/" + url.PathEscape(ref) + strings.Join(rest, ""), nil
}

// Create makes a volume of size bytes (an int) or a quantity ("512Mi"); it
// answers once the volume is formatted and mounted on the node.  A create
// whose answer was lost is not retried: a second one answers 409 conflict.
func (vs *VolumeService) Create(ctx context.Context, name string, size any) (*VolumeInfo, error) {
	b, err := json.Marshal(map[string]any{"name": name, "size_bytes": size})
	if err != nil {
		return nil, err
	}
	var info VolumeInfo
	if err := vs.c.getJSON(ctx, &request{method: "POST", path: "/v1/volumes", body: b, extra: 90 * time.Second,
		noLostRetry: true}, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// List returns this tenant's volumes.
func (vs *VolumeService) List(ctx context.Context) ([]VolumeInfo, error) {
	var page struct {
		Items []VolumeInfo `json:"items"`
	}
	if err := vs.c.getJSON(ctx, &request{method: "GET", path: "/v1/volumes"}, &page); err != nil {
		return nil, err
	}
	return page.Items, nil
}

// Get returns a volume with its used and free bytes.
func (vs *VolumeService) Get(ctx context.Context, ref string) (*VolumeInfo, error) {
	p, err := volumePath(ref)
	if err != nil {
		return nil, err
	}
	var info VolumeInfo
	if err := vs.c.getJSON(ctx, &request{method: "GET", path: p}, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// Delete removes a volume; a *APIError with Code "volume_in_use" (409) while a
// sandbox or a file call holds it.
func (vs *VolumeService) Delete(ctx context.Context, ref string) (map[string]any, error) {
	p, err := volumePath(ref)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := vs.c.getJSON(ctx, &request{method: "DELETE", path: p, extra: 30 * time.Second}, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// WriteFile puts data at path (relative to the volume's root).
func (vs *VolumeService) WriteFile(ctx context.Context, ref, path string, data []byte) error {
	p, err := volumePath(ref)
	if err != nil {
		return err
	}
	return vs.c.writeFileAt(ctx, p, path, data)
}

// ReadFile returns the bytes of a file of the volume.
func (vs *VolumeService) ReadFile(ctx context.Context, ref, path string) ([]byte, error) {
	p, err := volumePath(ref)
	if err != nil {
		return nil, err
	}
	return vs.c.readFileAt(ctx, p, path)
}

// ListFiles lists the files under dir ("" for the whole volume), recursively.
func (vs *VolumeService) ListFiles(ctx context.Context, ref, dir string) ([]SessionFile, error) {
	p, err := volumePath(ref)
	if err != nil {
		return nil, err
	}
	return vs.c.listFilesAt(ctx, p, dir)
}

// DeleteFile removes a file, a symlink or an empty directory of the volume.
func (vs *VolumeService) DeleteFile(ctx context.Context, ref, path string) error {
	p, err := volumePath(ref)
	if err != nil {
		return err
	}
	return vs.c.deleteFileAt(ctx, p, path)
}
