package api

import (
	"time"

	"github.com/heraldhq/herald/engine"
)

// alertView is an alert as GET /v1/alerts shows it: its kind (read from
// the cause for alerts recorded before kinds were) and its params with
// what a reader needs to word it: the recipient's display name, and
// durations in seconds.
type alertView struct {
	*engine.Alert
	Kind   engine.AlertKind `json:"kind"`
	Params alertParamsView  `json:"params"`
}

type alertParamsView struct {
	engine.AlertParams
	Late          *float64 `json:"late_seconds,omitempty"`
	RecipientName string   `json:"recipient_name,omitempty"`
}

func (s *server) alertView(a *engine.Alert) alertView {
	v := alertView{Alert: a, Kind: a.Kind}
	if v.Kind == "" {
		v.Kind = engine.ParseAlertCause(a.Cause).Kind
	}
	if a.Params != nil {
		v.Params.AlertParams = *a.Params
		if a.Params.Late > 0 {
			late := a.Params.Late.Round(time.Second).Seconds()
			v.Params.Late = &late
		}
		if a.Params.Recipient != "" && s.cfg.People != nil {
			v.Params.RecipientName = s.cfg.People.DisplayName(a.Params.Recipient)
		}
	}
	return v
}
