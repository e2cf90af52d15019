package sdk

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/heraldhq/herald/engine/heraldtype"
	channelv1 "github.com/heraldhq/herald/plugins/proto/channel/v1"
)

// Recaller is implemented by a Channel that can take back messages it sent
// (WeCom app messages within 24 h). It is optional: a channel without it,
// and every plugin built before the protocol had Recall, answers
// Unimplemented, and the host reads that as "not recallable".
type Recaller interface {
	// Recall judges each message on its own; an error fails the batch.
	Recall(ctx context.Context, batch []RecallMessage) ([]RecallResult, error)
}

// The recall values, under the SDK's names.
type (
	// RecallMessage is one sent message to take back.
	RecallMessage = heraldtype.RecallMessage
	// RecallResult is the verdict on one recall.
	RecallResult = heraldtype.RecallResult
)

// The recall verdicts.
const (
	RecallDone          = heraldtype.RecallDone
	RecallNotRecallable = heraldtype.RecallNotRecallable
	RecallRetryable     = heraldtype.RecallRetryable
)

// ErrRecallUnsupported is Client.Recall's answer for a plugin that does not
// serve Recall.
var ErrRecallUnsupported = errors.New("the channel's plugin cannot recall messages")

// Recall asks the plugin to take back batch. A plugin without Recall
// answers ErrRecallUnsupported.
func (c *Client) Recall(ctx context.Context, batch []RecallMessage) ([]RecallResult, error) {
	req := &channelv1.RecallRequest{Batch: make([]*channelv1.RecallMessage, len(batch))}
	for i, m := range batch {
		req.Batch[i] = &channelv1.RecallMessage{Id: m.ID, ProviderId: m.ProviderID, Recipient: m.Recipient, SentAtMs: m.SentAt.UnixMilli()}
	}
	resp, err := c.rpc.Recall(ctx, req)
	if status.Code(err) == codes.Unimplemented {
		return nil, ErrRecallUnsupported
	}
	if err != nil {
		return nil, fromStatus(ctx, "recall", err)
	}
	out := make([]RecallResult, len(resp.GetResults()))
	for i, r := range resp.GetResults() {
		st := r.GetStatus()
		if st < 0 || st > 255 {
			st = 0
		}
		out[i] = RecallResult{ID: r.GetId(), Status: heraldtype.RecallStatus(st), Code: r.GetCode(), Error: r.GetError()}
	}
	return out, nil
}

func (s *server) Recall(ctx context.Context, req *channelv1.RecallRequest) (*channelv1.RecallResponse, error) {
	rc, ok := s.impl.(Recaller)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "this channel cannot recall messages")
	}
	batch := make([]RecallMessage, len(req.GetBatch()))
	for i, m := range req.GetBatch() {
		batch[i] = RecallMessage{ID: m.GetId(), ProviderID: m.GetProviderId(), Recipient: m.GetRecipient(), SentAt: time.UnixMilli(m.GetSentAtMs()).UTC()}
	}
	results, err := rc.Recall(ctx, batch)
	if err != nil {
		return nil, toStatus(ctx, err)
	}
	resp := &channelv1.RecallResponse{Results: make([]*channelv1.RecallResult, len(results))}
	for i, r := range results {
		resp.Results[i] = &channelv1.RecallResult{Id: r.ID, Status: channelv1.RecallStatus(r.Status), Code: r.Code, Error: r.Error}
	}
	return resp, nil
}
