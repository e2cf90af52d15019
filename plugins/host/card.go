package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/heraldhq/herald/engine/heraldtype"
	"github.com/heraldhq/herald/plugins/sdk"
)

// UpdateCards implements engine.CardUpdater: it asks channel's plugin to
// replace clicked cards. A plugin that does not serve UpdateCards gets
// every update answered permanent, with the reason; an error means the
// whole batch failed and is worth asking again.
func (h *Host) UpdateCards(ctx context.Context, channel string, batch []heraldtype.CardUpdate) ([]heraldtype.Result, error) {
	in, p, err := h.pluginFor(ctx, channel, len(batch))
	if err != nil {
		return nil, err
	}
	if len(batch) == 0 {
		return []heraldtype.Result{}, nil
	}
	results, err := p.Channel().UpdateCards(ctx, batch)
	if errors.Is(err, sdk.ErrCardsUnsupported) {
		out := make([]heraldtype.Result, len(batch))
		for i, u := range batch {
			out[i] = heraldtype.Result{ID: u.ID, Status: heraldtype.StatusPermanent,
				Error: fmt.Sprintf("channel %s (plugin %s) cannot update cards", channel, in.src.name)}
		}
		return out, nil
	}
	if err != nil {
		return nil, in.sendErr(ctx, err)
	}
	want := make(map[string]bool, len(batch))
	for _, u := range batch {
		want[u.ID] = true
	}
	out := make([]heraldtype.Result, 0, len(results))
	for _, r := range results {
		if !want[r.ID] || !r.Status.Known() {
			return nil, fmt.Errorf("%w: channel %s: card update result for id %q (status %d) does not answer the batch", ErrBadResponse, channel, r.ID, r.Status)
		}
		delete(want, r.ID)
		r.Code, r.Error = cutText(in.redact(r.Code)), cutText(in.redact(r.Error))
		out = append(out, r)
	}
	if len(want) > 0 {
		return nil, fmt.Errorf("%w: channel %s: no card update result for %d of %d cards", ErrBadResponse, channel, len(want), len(batch))
	}
	return out, nil
}
