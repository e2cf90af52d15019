package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrAlertNotDue is NotifyAlert's answer when the alert was notified
// within its interval, has nothing new, was acknowledged, or another
// leader notified it first.
var ErrAlertNotDue = errors.New("alert not due for notification")

// NotifyAlert hands an alert to the alert rule: it creates a task of that
// rule, due at once, and records the notification on the alert — both in
// one command, so an alert is delivered at most once per cause per
// interval, whatever happens to leaders.
type NotifyAlert struct {
	ID       string          `json:"id"`
	Seq      int             `json:"seq"` // the alert's Notified + 1, as the leader saw it
	Interval time.Duration   `json:"interval"`
	Rule     string          `json:"rule"`
	Data     json.RawMessage `json:"data"`
	Now      time.Time       `json:"now"`
}

// AlertTaskKey names the task of an alert's seq-th notification.
func AlertTaskKey(id string, seq int) string { return fmt.Sprintf(alertTaskPrefix+"%s:%d", id, seq) }

func (a applier) notifyAlert(c NotifyAlert) any {
	al, ok := a.st.Alerts[c.ID]
	if !ok {
		return fmt.Errorf("no alert %q", c.ID)
	}
	if al.Acked || al.Notified+1 != c.Seq ||
		(al.Notified > 0 && (!al.Last.After(al.NotifiedAt) || c.Now.Sub(al.NotifiedAt) < c.Interval)) {
		return ErrAlertNotDue
	}
	// An alert pruned by retention and raised again counts from 1 again,
	// while the keys of its earlier notifications may still be taken (a
	// task, or the ledger once its run is pruned): a task whose run key is
	// taken would never fire. Take the next free number instead.
	seq := c.Seq
	for a.taskKeyTaken(AlertTaskKey(c.ID, seq)) {
		seq++
	}
	t := &Task{Key: AlertTaskKey(c.ID, seq), Rule: c.Rule, DueAt: c.Now, Data: c.Data, State: TaskPending, SubmittedAt: c.Now, Alert: c.ID}
	a.st.putTask(t)
	n := *al
	n.Notified, n.NotifiedAt = seq, c.Now
	a.st.Alerts[c.ID] = &n
	a.signalTasks()
	return t
}

// taskKeyTaken reports whether a task with key exists or its run key was
// used (the run exists, or was pruned and is in the ledger).
func (a applier) taskKeyTaken(key string) bool {
	if _, ok := a.st.Tasks.Get(key); ok {
		return true
	}
	if _, ok := a.st.Runs.Get(TaskRunKey(key)); ok {
		return true
	}
	_, ok := a.st.Ledger.Get(TaskRunKey(key))
	return ok
}

// raiseAlert applies CmdRaiseAlert. The cause's kind is the body's (a
// version 1 body's was upgraded from its cause key), its subject always the
// cause key's.
func (a applier) raiseAlert(c RaiseAlert) any {
	var p AlertParams
	if c.Params != nil {
		p = *c.Params
	}
	a.st.raise(AlertCause{Kind: c.Kind, Subject: ParseAlertCause(c.Cause).Subject}, c.Cause, c.Rule, p, c.Message, c.Now)
	return nil
}

func (a applier) ackAlert(c AckAlert) any {
	al, ok := a.st.Alerts[c.ID]
	if !ok {
		return fmt.Errorf("no alert %q", c.ID)
	}
	n := *al
	n.Acked = true
	a.st.Alerts[c.ID] = &n
	return nil
}

// Alert returns the alert with id, if any.
func (f *FSM) Alert(id string) (*Alert, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	a, ok := f.st.Alerts[id]
	return a, ok
}

// AlertData is the data of an alert rule's task (run.data in ops_alert).
type AlertData struct {
	Kind     string `json:"kind"`
	Severity string `json:"severity"`
	Alert    string `json:"alert"`
	Cause    string `json:"cause"`
	Rule     string `json:"rule,omitempty"`
	Run      string `json:"run,omitempty"`
	Channel  string `json:"channel,omitempty"`
	Message  string `json:"message"`
	Count    int    `json:"count"`
	First    string `json:"first"`
	Last     string `json:"last"`
}

// AlertDataOf describes al for the alert rule, its times in loc (the
// display zone: a person reads them).
func AlertDataOf(al *Alert, loc *time.Location) AlertData {
	d := AlertData{Severity: "warning", Alert: al.ID, Cause: al.Cause, Rule: al.Rule, Message: LocalizeText(al.Message, loc),
		Count: al.Count, First: al.First.In(loc).Format(time.RFC3339), Last: al.Last.In(loc).Format(time.RFC3339)}
	kind := al.Kind
	if kind == "" {
		kind = ParseAlertCause(al.Cause).Kind // recorded before kinds were
	}
	d.Kind = string(kind)
	if kind == "" {
		d.Kind, _, _ = strings.Cut(al.Cause, ":")
	}
	subject := ParseAlertCause(al.Cause).Subject
	switch kind {
	case AlertDeliveryFailed, AlertDeliveryExpired, AlertRuleError, AlertRunLate, AlertQuietExpired:
		d.Run = subject
	case AlertChannelConfig, AlertChannelDown:
		d.Channel, d.Severity = subject, "critical"
	case AlertSendStuck:
		d.Channel = subject
	case AlertRuleBroken, AlertClockSkew, AlertDiskWrite:
		d.Severity = "critical"
	}
	return d
}
