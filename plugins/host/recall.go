package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/heraldhq/herald/engine/heraldtype"
	"github.com/heraldhq/herald/plugins/sdk"
)

// Recall implements engine.Recaller: it asks channel's plugin to take back
// messages it sent. A plugin that does not serve Recall (one built before
// it) gets every message answered not recallable, with the reason; an
// error means the whole batch failed and is worth asking again.
func (h *Host) Recall(ctx context.Context, channel string, batch []heraldtype.RecallMessage) ([]heraldtype.RecallResult, error) {
	in, p, err := h.pluginFor(ctx, channel, len(batch))
	if err != nil {
		return nil, err
	}
	if len(batch) == 0 {
		return []heraldtype.RecallResult{}, nil
	}
	results, err := p.Channel().Recall(ctx, batch)
	if errors.Is(err, sdk.ErrRecallUnsupported) {
		out := make([]heraldtype.RecallResult, len(batch))
		for i, m := range batch {
			out[i] = heraldtype.RecallResult{ID: m.ID, Status: heraldtype.RecallNotRecallable,
				Error: fmt.Sprintf("channel %s (plugin %s) cannot recall messages", channel, in.src.name)}
		}
		return out, nil
	}
	if err != nil {
		return nil, in.sendErr(ctx, err)
	}
	want := make(map[string]bool, len(batch))
	for _, m := range batch {
		want[m.ID] = true
	}
	out := make([]heraldtype.RecallResult, 0, len(results))
	for _, r := range results {
		if !want[r.ID] || !r.Status.Known() {
			return nil, fmt.Errorf("%w: channel %s: recall result for id %q (status %d) does not answer the batch", ErrBadResponse, channel, r.ID, r.Status)
		}
		delete(want, r.ID)
		r.Code, r.Error = cutText(in.redact(r.Code)), cutText(in.redact(r.Error))
		out = append(out, r)
	}
	if len(want) > 0 {
		return nil, fmt.Errorf("%w: channel %s: no recall result for %d of %d messages", ErrBadResponse, channel, len(want), len(batch))
	}
	return out, nil
}

// pluginFor is channel's instance and its running plugin, for a call
// outside Send (recall, card updates) of n items; with n 0 it checks only
// that the channel exists, and p is nil.
func (h *Host) pluginFor(ctx context.Context, channel string, n int) (in *instance, p *Plugin, err error) {
	h.mu.Lock()
	closed, started := h.closed, h.started
	h.mu.Unlock()
	if closed {
		return nil, nil, ErrClosed
	}
	in, ok := h.instances[channel]
	if !ok {
		return nil, nil, fmt.Errorf("%w: %q", ErrUnknownChannel, channel)
	}
	if n == 0 {
		return in, nil, nil
	}
	if !started {
		return nil, nil, fmt.Errorf("%w: channel %s: the plugin host was not started", ErrUnavailable, channel)
	}
	p, err = in.plugin(ctx, nil)
	return in, p, err
}
