package host

import (
	"context"
	"fmt"

	"github.com/heraldhq/herald/engine/heraldtype"
	"github.com/heraldhq/herald/plugins/sdk"
)

// sendParts sends batch in as few plugin calls as fit the protocol's
// message limit (sdk.MaxSendBytes): one, unless the batch is bigger. A
// message that cannot fit in a call of its own is not sent and is answered
// StatusPermanent with its size, since no attempt could ever carry it; it
// is never cut. A part that fails fails the whole batch (the caller sends
// it again with the same idempotency keys).
func (in *instance) sendParts(ctx context.Context, batch []heraldtype.Message) ([]heraldtype.Result, error) {
	if sdk.SendSize(batch) <= sdk.MaxSendBytes {
		return in.sendChecked(ctx, batch)
	}
	out := make([]heraldtype.Result, 0, len(batch))
	var part []heraldtype.Message
	size := 0
	flush := func() error {
		if len(part) == 0 {
			return nil
		}
		rs, err := in.sendChecked(ctx, part)
		out = append(out, rs...)
		part, size = nil, 0
		return err
	}
	for _, m := range batch {
		n := sdk.SendSize([]heraldtype.Message{m})
		if n > sdk.MaxSendBytes {
			out = append(out, heraldtype.Result{ID: m.ID, Status: heraldtype.StatusPermanent,
				Error: fmt.Sprintf("not sent: the message is %d bytes in the plugin protocol, which carries at most %d per call", n, sdk.MaxSendBytes)})
			continue
		}
		if size+n > sdk.MaxSendBytes {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		part = append(part, m)
		size += n
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// sendChecked is one plugin call, its answer checked against its batch.
func (in *instance) sendChecked(ctx context.Context, batch []heraldtype.Message) ([]heraldtype.Result, error) {
	results, err := in.send(ctx, batch)
	if err != nil {
		return nil, err
	}
	return in.checked(batch, results)
}
