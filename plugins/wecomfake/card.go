package wecomfake

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Interactive template cards: message/send answers a response_code for
// one, and so does each click (template_card_event); either may replace
// the card once, within CardCodeTTL, through update_template_card. The
// fake's page shows a card's buttons; clicking one sends the click to the
// corp's callback URL, as a member's WeCom client would.

// CardCodeTTL is how long a response_code may be used (WeCom: 72 h).
const CardCodeTTL = 72 * time.Hour

// cardCode is one response_code handed out.
type cardCode struct {
	at   time.Time
	app  *app // nil for a click the fake was told to send for an unknown app
	used bool
}

// interactive are the card types with click callbacks.
var interactive = map[string]bool{"button_interaction": true, "vote_interaction": true, "multiple_interaction": true}

// cardOf reads a template_card object's card_type and task_id.
func cardOf(raw json.RawMessage) (cardType, taskID string) {
	var c struct {
		CardType string `json:"card_type"`
		TaskID   string `json:"task_id"`
	}
	_ = json.Unmarshal(raw, &c) // checked by checkContent already
	return c.CardType, c.TaskID
}

// updateReq is update_template_card's body.
type updateReq struct {
	UserIDs      []string        `json:"userids"`
	AgentID      int             `json:"agentid"`
	ResponseCode string          `json:"response_code"`
	TemplateCard json.RawMessage `json:"template_card"`
}

// updateCard answers POST /cgi-bin/message/update_template_card: the card
// of each listed member with the code's task_id is replaced. Callers hold
// s.mu.
func (s *Server) updateCard(q url.Values, body []byte, ip string) reply {
	a, rep, ok := s.checkToken(q)
	if !ok {
		return rep
	}
	if a.trusted != nil && !a.trusted[ip] {
		return fail(60020)
	}
	var req updateReq
	if json.Unmarshal(body, &req) != nil {
		return failf(40058, "invalid Request Parameter: body is not a JSON object")
	}
	if req.AgentID != a.agentID {
		return fail(301002)
	}
	c, ok := s.codes[req.ResponseCode]
	now := s.now()
	switch {
	case req.ResponseCode == "" || !ok || (c.app != nil && c.app != a):
		return failf(40058, "invalid Request Parameter: response_code")
	case c.used:
		return failf(40058, "invalid Request Parameter: response_code already used")
	case now.Sub(c.at) > CardCodeTTL:
		return failf(40058, "invalid Request Parameter: response_code expired")
	}
	cardType, taskID := cardOf(req.TemplateCard)
	if cardType == "" {
		return fail(44004)
	}
	if len(req.UserIDs) == 0 {
		return fail(82001)
	}
	c.used = true
	for i := range s.rec.msgs {
		m := &s.rec.msgs[i]
		if m.TaskID == "" || m.TaskID != taskID || m.CorpID != a.corp.id {
			continue
		}
		for _, u := range req.UserIDs {
			if m.UserID == strings.ToLower(u) {
				m.Updated, m.UpdatedAt = []byte(req.TemplateCard), now
			}
		}
	}
	return reply{}
}

// cardClickForm answers POST /cards/click from the messages page: the
// member clicks a button of a card they received.
func (s *Server) cardClickForm(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeAdminError(w, http.StatusBadRequest, err)
		return
	}
	c := CardClick{UserID: r.PostForm.Get("userid"), TaskID: r.PostForm.Get("task_id"), EventKey: r.PostForm.Get("key"), CorpID: r.PostForm.Get("corp_id")}
	if _, err := s.SendCardClick(r.Context(), c); err != nil {
		writeAdminError(w, http.StatusBadRequest, err)
		return
	}
	http.Redirect(w, r, "/messages", http.StatusSeeOther)
}

// cardButtons are a card's buttons as the page shows them.
type cardButton struct{ Text, Key string }

func buttonsOf(body []byte) []cardButton {
	var m struct {
		TemplateCard struct {
			CardType   string `json:"card_type"`
			ButtonList []struct {
				Text string `json:"text"`
				Key  string `json:"key"`
			} `json:"button_list"`
		} `json:"template_card"`
	}
	if json.Unmarshal(body, &m) != nil || m.TemplateCard.CardType != "button_interaction" {
		return nil
	}
	out := make([]cardButton, 0, len(m.TemplateCard.ButtonList))
	for _, b := range m.TemplateCard.ButtonList {
		out = append(out, cardButton{b.Text, b.Key})
	}
	return out
}
