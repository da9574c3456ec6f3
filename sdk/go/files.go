package eai

import (
	"context"
	"net/url"
)

// The files API of a session's /tmp (base: sessionPath(id)) and of a volume
// (base: volumePath(ref)): the same four calls under {base}/files.

func (c *Client) writeFileAt(ctx context.Context, base, path string, data []byte) error {
	if data == nil {
		data = []byte{}
	}
	_, err := c.do(ctx, &request{method: "PUT", path: base + "/files/" + filePathEscaped(path), body: data,
		ctype: "application/octet-stream"})
	return err
}

func (c *Client) readFileAt(ctx context.Context, base, path string) ([]byte, error) {
	resp, err := c.do(ctx, &request{method: "GET", path: base + "/files/" + filePathEscaped(path),
		accept: "application/octet-stream"})
	if err != nil {
		return nil, err
	}
	return resp.body, nil
}

func (c *Client) listFilesAt(ctx context.Context, base, dir string) ([]SessionFile, error) {
	var q url.Values
	if dir != "" {
		q = url.Values{"path": {dir}}
	}
	var out struct {
		Items []SessionFile `json:"items"`
	}
	if err := c.getJSON(ctx, &request{method: "GET", path: base + "/files", query: q}, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

func (c *Client) deleteFileAt(ctx context.Context, base, path string) error {
	_, err := c.do(ctx, &request{method: "DELETE", path: base + "/files/" + filePathEscaped(path)})
	return err
}
