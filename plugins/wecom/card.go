package wecom

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	"github.com/heraldhq/herald/plugins/sdk"
)

// Interactive cards: a template_card whose card_type WeCom calls back on a
// click (template_card_event). Herald sets such a card's task_id to the
// delivery id, so the click's TaskId names the delivery it answers; after
// the click the card can be replaced once (update_template_card with the
// click's response_code, within 72 h).

// interactiveCards are the card types with a click callback.
var interactiveCards = map[string]bool{"button_interaction": true, "vote_interaction": true, "multiple_interaction": true}

// maxTaskID is WeCom's bound on a card's task_id (digits, letters, _-@).
const maxTaskID = 128

// stampTaskID sets an interactive app card's task_id to id. A rule's own
// task_id is refused: the click could not be matched to its delivery.
func stampTaskID(p payload, id string) error {
	if p.msgType != "template_card" {
		return nil
	}
	card, _ := p.object.(map[string]any)
	if ct, _ := card["card_type"].(string); !interactiveCards[ct] {
		return nil
	}
	if own, ok := card["task_id"]; ok && own != id {
		return fmt.Errorf("%w: template_card.task_id is set by Herald (the delivery id, so a click finds its delivery); leave it out", ErrBadPayload)
	}
	if len(id) > maxTaskID {
		return fmt.Errorf("%w: delivery id %q is longer than a card's task_id may be", ErrBadPayload, id)
	}
	card["task_id"] = id
	return nil
}

// UpdateCards implements sdk.CardUpdater: each card is replaced through
// message/update_template_card for the person who clicked it, one call
// each. A group robot's cards have no callback and cannot be.
func (c *Channel) UpdateCards(ctx context.Context, batch []sdk.CardUpdate) ([]sdk.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st := c.st.Load()
	if st == nil {
		return nil, ErrNotConfigured
	}
	out := make([]sdk.Result, len(batch))
	for i, u := range batch {
		out[i] = st.updateOne(ctx, u)
	}
	return out, nil
}

func (st *state) updateOne(ctx context.Context, u sdk.CardUpdate) sdk.Result {
	res := sdk.Result{ID: u.ID, Status: sdk.StatusPermanent}
	if st.s.mode == modeRobot {
		res.Error = "a group robot's (webhook) cards cannot be updated"
		return res
	}
	p, err := parsePayload(u.Payload, false)
	if err == nil && p.msgType != "template_card" {
		err = fmt.Errorf("%w: a card is replaced by a template_card, not %s", ErrBadPayload, p.msgType)
	}
	if err == nil {
		err = stampTaskID(p, u.ID)
	}
	if err == nil {
		err = checkRecipient(u.Recipient)
	}
	if err == nil && u.ResponseCode == "" {
		err = fmt.Errorf("%w: the click carried no response_code", ErrBadPayload)
	}
	if err != nil {
		res.Error = err.Error()
		return res
	}
	var b bytes.Buffer
	b.WriteString(`{"userids":`)
	encode(&b, []string{u.Recipient})
	b.WriteString(`,"agentid":`)
	b.WriteString(strconv.Itoa(st.s.agentID))
	b.WriteString(`,"response_code":`)
	encode(&b, u.ResponseCode)
	b.WriteString(`,"template_card":`)
	encode(&b, p.object)
	b.WriteByte('}')
	r, e := st.postApp(ctx, pathCard, b.Bytes())
	if e != nil {
		return e.result(u.ID)
	}
	res = judge(u.ID, "", r)
	if res.Status != sdk.StatusSent {
		res.Error = st.redact(res.Error)
		st.log.Warn("wecom card update refused", "id", u.ID, "code", r.ErrCode, "error", res.Error)
	}
	return res
}

var _ sdk.CardUpdater = (*Channel)(nil)
