package heraldtype

import "encoding/json"

// CardUpdate asks a channel to replace an interactive card after a click
// (WeCom's message/update_template_card). The verdict is a Result:
// StatusSent when it was replaced, StatusRetryable to ask again,
// StatusPermanent when it never will be (the response_code used or past
// its 72 h).
type CardUpdate struct {
	ID           string          // the card's delivery id
	Recipient    string          // who clicked: the card is replaced for them
	ResponseCode string          // the click's response_code
	Payload      json.RawMessage // {"msgtype": "template_card", "template_card": {…}}
}
