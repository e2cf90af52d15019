package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// maxPeopleMatched bounds the userids a name search follows: a name
// shared by more people than this is a search to narrow down.
const maxPeopleMatched = 20

// deliveryView is a delivery as the API shows it: states by name, and
// the recipient's display name from the people data.
type deliveryView struct {
	*engine.Delivery
	State         string        `json:"state"`
	Priority      string        `json:"priority"`
	RecipientName string        `json:"recipient_name,omitempty"`
	Failures      []failureView `json:"failures"`
}

// failureView is one attempt that did not send a delivery.
type failureView struct {
	At      time.Time `json:"at"`
	Attempt int       `json:"attempt"`
	// Outcome: retryable, rate_limited, permanent, misconfigured, expired.
	Outcome string `json:"outcome"`
	Code    string `json:"code,omitempty"`
	Error   string `json:"error,omitempty"`
}

func outcomeName(s heraldtype.Status) string {
	switch s {
	case heraldtype.StatusSent:
		return "sent"
	case heraldtype.StatusRetryable:
		return "retryable"
	case heraldtype.StatusRateLimited:
		return "rate_limited"
	case heraldtype.StatusPermanent:
		return "permanent"
	case heraldtype.StatusConfig:
		return "misconfigured"
	case 0:
		return "expired"
	}
	return "unknown"
}

func (s *server) deliveryViews(ds []*engine.Delivery) []deliveryView {
	out := make([]deliveryView, len(ds))
	names := map[string]string{}
	for i, d := range ds {
		v := deliveryView{Delivery: d, State: d.State.String(), Priority: d.Priority.String(), Failures: []failureView{}}
		if s.cfg.People != nil {
			name, ok := names[d.Recipient]
			if !ok {
				name = s.cfg.People.DisplayName(d.Recipient)
				names[d.Recipient] = name
			}
			v.RecipientName = name
		}
		for _, f := range d.Failures {
			v.Failures = append(v.Failures, failureView{At: f.At, Attempt: f.Attempt, Outcome: outcomeName(f.Status), Code: f.Code, Error: f.Error})
		}
		out[i] = v
	}
	return out
}

// deliveries serves GET /v1/deliveries. With recipient (a userid, or a
// name from the people data) it lists that person's deliveries of a day:
// date, else today. A day is tz's (default the display zone's): the one
// the person asking reads the clock in (engine.PersonDay).
func (s *server) deliveries(w http.ResponseWriter, r *http.Request) {
	if !onlyParams(w, r, "rule", "run", "state", "recipient", "date", "tz", "limit") {
		return
	}
	q := r.URL.Query()
	zone := s.displayZone()
	if tz := q.Get("tz"); tz != "" {
		loc, err := engine.LoadZone(tz)
		if err != nil || tz == "Local" {
			writeFieldError(w, &FieldError{"tz", fmt.Sprintf("unknown time zone %q: want an IANA name such as Asia/Shanghai, or UTC", tz)})
			return
		}
		zone = loc
	}
	rule, run, state, recipient, date := q.Get("rule"), q.Get("run"), q.Get("state"), q.Get("recipient"), q.Get("date")
	limit, err := intParam(q.Get("limit"), 100, 10000)
	if err != nil {
		writeFieldError(w, &FieldError{"limit", err.Error()})
		return
	}
	if state != "" && !validState(state) {
		writeFieldError(w, &FieldError{"state", "want pending, claimed, sent, failed, expired, cancelled or recalled"})
		return
	}
	if date != "" {
		if _, err := time.Parse(time.DateOnly, date); err != nil {
			writeFieldError(w, &FieldError{"date", "want a date like 2026-12-01"})
			return
		}
	}
	flt := engine.DeliveryFilter{Date: date, Zone: zone, Keep: func(d *engine.Delivery) bool {
		return (rule == "" || d.Rule == rule) && (run == "" || d.RunKey == run) && (state == "" || d.State.String() == state)
	}}
	var matched []string
	if recipient != "" {
		if date == "" {
			flt.Date = engine.PersonDay(s.now(), zone)
		}
		// The people data decides who is meant; a recipient it does not
		// know (a group chat, a robot) is taken as a userid.
		if s.cfg.People != nil {
			matched = s.cfg.People.Find(recipient, maxPeopleMatched)
		}
		if len(matched) == 0 {
			matched = []string{recipient}
		}
		flt.Recipients = matched
	}
	flt.Newest = limit // the newest
	ds, total := s.cfg.FSM.FindDeliveries(flt)
	items, err := encodeNewest(ds, maxListBytes, func(d *engine.Delivery) any { return s.deliveryViews([]*engine.Delivery{d})[0] })
	if err != nil {
		s.writeApplyError(w, err)
		return
	}
	body := map[string]any{"total": total, "deliveries": items}
	if len(items) < len(ds) {
		body["truncated"] = truncatedReason
	}
	if recipient != "" {
		people := make([]map[string]string, 0, len(matched))
		for _, id := range matched {
			p := map[string]string{"userid": id}
			if s.cfg.People != nil {
				p["name"] = s.cfg.People.DisplayName(id)
			}
			people = append(people, p)
		}
		body["date"], body["timezone"], body["recipients"] = flt.Date, zone.String(), people
	}
	writeJSON(w, http.StatusOK, body)
}
