package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/heraldhq/herald/plugins/sdk"
)

// config is the channel instance's configuration. The host adds "channel",
// the instance's name; a plugin must accept that key.
type config struct {
	Channel string `json:"channel"`
	File    string `json:"file"`
}

// channel appends "time<TAB>key<TAB>recipient<TAB>payload" lines to a file.
// It remembers the keys it wrote, from the file itself, so that a message
// sent again after a restart or by a new leader is not written twice.
type channel struct {
	mu   sync.Mutex
	cfg  config
	seen map[string]bool
}

func newChannel() *channel { return &channel{} }

// Info declares limits for the host to enforce; this channel has no
// provider to protect, so they only show how.
func (c *channel) Info(context.Context) (sdk.Info, error) {
	return sdk.Info{
		Name:    "example",
		Version: "1.0.0",
		Limits: []sdk.Limit{
			{Scope: sdk.ScopeChannel, Count: 100, Per: time.Second},
			{Scope: sdk.ScopeRecipient, Count: 20, Per: time.Minute},
		},
	}, nil
}

func (c *channel) Configure(ctx context.Context, raw json.RawMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var cfg config
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return fmt.Errorf("example: config: %w", err)
	}
	if cfg.File == "" {
		return errors.New("example: config: file is required")
	}
	seen, err := readKeys(cfg.File)
	if err != nil {
		return fmt.Errorf("example: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cfg, c.seen = cfg, seen
	return nil
}

func readKeys(path string) (map[string]bool, error) {
	seen := map[string]bool{}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return seen, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// A line holds a whole payload, so it has no useful cap: a
	// bufio.Scanner's would fail every restart after one long message.
	br := bufio.NewReader(f)
	for {
		line, err := br.ReadString('\n')
		if fields := strings.SplitN(line, "\t", 4); len(fields) == 4 {
			seen[fields[1]] = true
		}
		if errors.Is(err, io.EOF) {
			return seen, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (c *channel) Send(ctx context.Context, batch []sdk.Message) ([]sdk.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		return nil, errors.New("example: not configured")
	}
	results := make([]sdk.Result, 0, len(batch))
	var lines strings.Builder
	written := map[string]bool{} // keys of this batch's lines
	now := time.Now().UTC().Format(time.RFC3339)
	for _, m := range batch {
		r := sdk.Result{ID: m.ID, Status: sdk.StatusSent, ProviderID: m.IdempotencyKey}
		switch {
		case strings.ContainsAny(m.IdempotencyKey+m.Recipient, "\t\n"):
			r = sdk.Result{ID: m.ID, Status: sdk.StatusPermanent, Error: "key or recipient holds a tab or newline"}
		case !c.seen[m.IdempotencyKey] && !written[m.IdempotencyKey]:
			var compact bytes.Buffer
			if err := json.Compact(&compact, m.Payload); err != nil {
				r = sdk.Result{ID: m.ID, Status: sdk.StatusPermanent, Error: "payload is not JSON"}
				break
			}
			fmt.Fprintf(&lines, "%s\t%s\t%s\t%s\n", now, m.IdempotencyKey, m.Recipient, compact.String())
			written[m.IdempotencyKey] = true
		}
		results = append(results, r)
	}
	if lines.Len() > 0 {
		if err := appendSync(c.cfg.File, lines.String()); err != nil {
			return nil, fmt.Errorf("example: %w", err)
		}
	}
	// Remember the keys only once their lines are on disk: after a failed
	// write the retry must be written, not answered as already sent.
	for k := range written {
		c.seen[k] = true
	}
	return results, nil
}

// Health implements sdk.HealthChecker: the file must be writable.
func (c *channel) Health(context.Context) error {
	c.mu.Lock()
	path := c.cfg.File
	c.mu.Unlock()
	if path == "" {
		return errors.New("not configured")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

func appendSync(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

var (
	_ sdk.Channel       = (*channel)(nil)
	_ sdk.HealthChecker = (*channel)(nil)
)
