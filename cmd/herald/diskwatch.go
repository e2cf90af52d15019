package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/heraldhq/herald/cluster"
	"github.com/heraldhq/herald/engine"
)

// A member that cannot write its Raft log (a full disk, an I/O error)
// stores no new entries: a follower falls behind, a leader steps down. It
// cannot propose anything itself, so the leader raises the alert from the
// member's report (cluster.MemberReports): the node that lost leadership
// over its disk is reported by the next leader. Once the member writes
// again the leader acknowledges the alert: an alert resolves by its
// acknowledgement (herald_alerts_open counts the others). A failure that
// starts again later has another "since", so another message, which
// re-opens it.

// checkDisks raises or resolves the disk-write alert of every member whose
// report is known; an unknown member (down, an older build) is left as it
// stands.
func (w *opsWatch) checkDisks(ctx context.Context, now time.Time, leader bool) {
	if w.reports == nil {
		return
	}
	seen := map[string]bool{}
	for _, r := range w.reports() {
		if r.Report == nil {
			continue
		}
		cause := engine.AlertCause{Kind: engine.AlertDiskWrite, Subject: r.ID}
		key := cause.Key()
		seen[key] = true
		failing, since, why := diskFailure(r.Report)
		if !failing {
			delete(w.diskRaised, key)
			if al, ok := w.alert(engine.AlertID(key)); leader && ok && !al.Acked {
				if err := w.ack(ctx, al.ID); err != nil {
					w.log.Warn("cannot resolve alert", "cause", key, "err", err)
				} else {
					w.log.Info("a member writes its data dir again; its alert is resolved", "node", r.ID)
				}
			}
			continue
		}
		// The free bytes change from one report to the next: the alert is
		// raised again only for a new failure or another error (stem).
		stem := fmt.Sprintf("node %s cannot write %s; it stores no new Raft entries until it can (a leader steps down): "+
			"free space in its data dir or replace the disk", r.ID, why)
		msg := fmt.Sprintf("%s (%d bytes free)", stem, r.Report.DataDirFreeBytes)
		if !leader || w.diskRaised[key] == stem {
			continue
		}
		if al, ok := w.alert(engine.AlertID(key)); ok && !al.Acked && strings.HasPrefix(al.Message, stem+" (") {
			w.diskRaised[key] = stem // an earlier leader raised it
			continue
		}
		errText := r.Report.Log.LastError
		if !r.Report.Log.Failing() {
			errText = r.Report.Snapshot.LastError
		}
		if w.raiseAlert(ctx, engine.NewRaiseAlert(cause, "", engine.AlertParams{Nodes: []string{r.ID}, Error: errText, Since: since}, msg, now)) {
			w.diskRaised[key] = stem
			w.log.Warn("a member cannot write its data dir; alert raised", "node", r.ID, "since", since, "err", errText)
		}
	}
	for key := range w.diskRaised {
		if !seen[key] {
			delete(w.diskRaised, key) // no longer a member, or unknown: look again when it reports
		}
	}
}

// diskFailure says whether a report shows writes failing, since when (the
// earliest of its kinds) and what fails, in words.
func diskFailure(r *cluster.Report) (bool, time.Time, string) {
	var (
		parts []string
		since time.Time
	)
	add := func(what string, h cluster.WriteHealth) {
		if !h.Failing() {
			return
		}
		parts = append(parts, fmt.Sprintf("%s since %s: %s", what, h.FailingSince.UTC().Format(time.RFC3339), h.LastError))
		if since.IsZero() || h.FailingSince.Before(since) {
			since = h.FailingSince
		}
	}
	add("its Raft log", r.Log)
	add("snapshots", r.Snapshot)
	return len(parts) > 0, since, strings.Join(parts, "; ")
}
