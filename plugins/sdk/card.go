package sdk

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/heraldhq/herald/engine/heraldtype"
	channelv1 "github.com/heraldhq/herald/plugins/proto/channel/v1"
)

// CardUpdater is implemented by a Channel that can replace an interactive
// card it sent after someone clicked it (WeCom's update_template_card).
// Optional, as Recaller: a plugin without it answers Unimplemented, which
// the host reads as "this channel cannot update cards".
type CardUpdater interface {
	// UpdateCards judges each update on its own (a Result per update,
	// StatusSent when replaced); an error fails the batch.
	UpdateCards(ctx context.Context, batch []CardUpdate) ([]Result, error)
}

// CardUpdate is one card to replace.
type CardUpdate = heraldtype.CardUpdate

// ErrCardsUnsupported is Client.UpdateCards' answer for a plugin that does
// not serve UpdateCards.
var ErrCardsUnsupported = errors.New("the channel's plugin cannot update cards")

// UpdateCards asks the plugin to replace cards. A plugin without
// UpdateCards answers ErrCardsUnsupported.
func (c *Client) UpdateCards(ctx context.Context, batch []CardUpdate) ([]Result, error) {
	req := &channelv1.UpdateCardsRequest{Batch: make([]*channelv1.CardUpdate, len(batch))}
	for i, u := range batch {
		req.Batch[i] = &channelv1.CardUpdate{Id: u.ID, Recipient: u.Recipient, ResponseCode: u.ResponseCode, Payload: u.Payload}
	}
	resp, err := c.rpc.UpdateCards(ctx, req)
	if status.Code(err) == codes.Unimplemented {
		return nil, ErrCardsUnsupported
	}
	if err != nil {
		return nil, fromStatus(ctx, "update cards", err)
	}
	out := make([]Result, len(resp.GetResults()))
	for i, r := range resp.GetResults() {
		out[i] = resultFromWire(r)
	}
	return out, nil
}

func (s *server) UpdateCards(ctx context.Context, req *channelv1.UpdateCardsRequest) (*channelv1.SendResponse, error) {
	cu, ok := s.impl.(CardUpdater)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "this channel cannot update cards")
	}
	batch := make([]CardUpdate, len(req.GetBatch()))
	for i, u := range req.GetBatch() {
		batch[i] = CardUpdate{ID: u.GetId(), Recipient: u.GetRecipient(), ResponseCode: u.GetResponseCode(), Payload: u.GetPayload()}
	}
	results, err := cu.UpdateCards(ctx, batch)
	if err != nil {
		return nil, toStatus(ctx, err)
	}
	resp := &channelv1.SendResponse{Results: make([]*channelv1.Result, len(results))}
	for i, r := range results {
		resp.Results[i] = resultToWire(r)
	}
	return resp, nil
}
