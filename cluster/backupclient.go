package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// stream sends body (nil for none) to path and returns the answer's body
// when it is 2xx; otherwise the APIError.
func (c *Client) stream(ctx context.Context, method, path string, body io.Reader) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, method, baseURLScheme(c.Addr, c.Scheme)+path, body)
	if err != nil {
		return nil, fmt.Errorf("node address %q: %w", c.Addr, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &UnreachableError{Addr: c.Addr, Err: err}
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, DefaultMaxResponse))
		return nil, c.apiError(resp.StatusCode, b)
	}
	return resp.Body, nil
}

// Backup streams a backup of the cluster's state from the node at Addr
// (any member) into w, checking its envelope and checksum on the way:
// an error means w holds no usable backup.
func (c *Client) Backup(ctx context.Context, w io.Writer) (BackupHeader, error) {
	body, err := c.stream(ctx, http.MethodGet, SnapshotPath, nil)
	if err != nil {
		return BackupHeader{}, err
	}
	defer body.Close()
	h, state, err := OpenBackup(io.TeeReader(body, w))
	if err != nil {
		return h, fmt.Errorf("%s: %w", c.Addr, err)
	}
	if _, err := io.Copy(io.Discard, state); err != nil {
		return h, fmt.Errorf("%s: the backup did not arrive whole: %w", c.Addr, err)
	}
	return h, nil
}

// Restore sends the backup read from r to the node at Addr, which
// replaces the cluster's state with it (a follower forwards it to the
// leader). It is not retried: a restore that answered nothing may have
// happened.
func (c *Client) Restore(ctx context.Context, r io.Reader) (RestoreAnswer, error) {
	var out RestoreAnswer
	body, err := c.stream(ctx, http.MethodPut, SnapshotPath, r)
	if err != nil {
		return out, err
	}
	defer body.Close()
	if err := json.NewDecoder(io.LimitReader(body, DefaultMaxResponse)).Decode(&out); err != nil {
		return out, fmt.Errorf("%s: bad response: %w", c.Addr, err)
	}
	return out, nil
}
