package mock

import (
	"context"
	"encoding/json"

	"github.com/heraldhq/herald/plugins/sdk"
)

// Recall implements sdk.Recaller: a message the mock delivered is taken
// back by a line with recall set (its key found by the provider id the mock
// gave it). Unknown ids are not recallable; with no_recall set, nothing is.
func (c *Channel) Recall(ctx context.Context, batch []sdk.RecallMessage) ([]sdk.RecallResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.out == nil {
		return nil, ErrNotConfigured
	}
	if err := c.out.lockAndCatchUp(); err != nil {
		return nil, err
	}
	defer func() { _ = c.out.unlock() }()
	byProvider := make(map[string]string, len(c.out.seen))
	for k := range c.out.seen {
		byProvider[ProviderID(k)] = k
	}
	now := c.now().UTC()
	var lines []byte
	out := make([]sdk.RecallResult, 0, len(batch))
	for _, m := range batch {
		r := sdk.RecallResult{ID: m.ID}
		key, ok := byProvider[m.ProviderID]
		switch {
		case c.cfg.NoRecall:
			r.Status, r.Code, r.Error = sdk.RecallNotRecallable, "mock_no_recall", "no_recall is set"
		case !ok:
			r.Status, r.Code, r.Error = sdk.RecallNotRecallable, "mock_unknown", "the mock delivered no message with id "+m.ProviderID
		default:
			line, err := json.Marshal(Record{Key: key, ID: m.ID, Recipient: m.Recipient, Channel: c.cfg.Channel, Payload: json.RawMessage("null"), ReceivedAt: now.In(c.cfg.loc), Recall: true})
			if err != nil {
				return nil, err
			}
			lines = append(append(lines, line...), '\n')
			r.Status = sdk.RecallDone
		}
		out = append(out, r)
	}
	if err := c.out.append(lines); err != nil {
		return nil, err
	}
	return out, nil
}

var _ sdk.Recaller = (*Channel)(nil)
