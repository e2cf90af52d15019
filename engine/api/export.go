package api

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/heraldhq/herald/engine"
)

// maxExportPage bounds limit on GET /v1/deliveries/export.
const maxExportPage = 10000

// ExportPage is the body of GET /v1/deliveries/export: deliveries whole
// (as GET /v1/deliveries/{id} shows them), in id order, at most limit and
// about 4 MiB of them; Next is the after of the next page, empty on the
// last. Ids never change, so paging by them lists every delivery that
// exists throughout exactly once, while deliveries are added and pruned.
type ExportPage struct {
	Deliveries []json.RawMessage `json:"deliveries"`
	Next       string            `json:"next,omitempty"`
}

// exportDeliveries serves GET /v1/deliveries/export?after=ID&limit=N
// [&since=T][&rule=R]: one page of every delivery (since: of runs whose
// slot is at or after T), for `herald deliveries export`.
func (s *server) exportDeliveries(w http.ResponseWriter, r *http.Request) {
	if !onlyParams(w, r, "after", "limit", "since", "rule") {
		return
	}
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), 1000, maxExportPage)
	if err != nil {
		writeFieldError(w, &FieldError{"limit", err.Error()})
		return
	}
	var since time.Time
	if v := q.Get("since"); v != "" {
		if since, err = s.queryTime(v); err != nil {
			writeFieldError(w, s.badTime("since", err))
			return
		}
	}
	rule := q.Get("rule")
	ds, more := s.cfg.FSM.PageDeliveries(engine.DeliveryPage{After: q.Get("after"), Limit: limit, Keep: func(d *engine.Delivery) bool {
		return (rule == "" || d.Rule == rule) && !d.Slot.Before(since)
	}})
	items, err := encodeBounded(ds, maxListBytes, func(d *engine.Delivery) any { return s.deliveryViews([]*engine.Delivery{d})[0] })
	if err != nil {
		s.writeApplyError(w, err)
		return
	}
	out := ExportPage{Deliveries: items}
	if len(items) < len(ds) {
		more = true // the rest of this page on the next
	}
	if more && len(items) > 0 {
		out.Next = ds[len(items)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}
