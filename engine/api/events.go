package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/heraldhq/herald/engine"
)

// EventRequest is the body of POST /v1/events.
type EventRequest struct {
	ID   string          `json:"id"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
}

// EventView is an event as the API shows it.
type EventView struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Source    string    `json:"source"`
	Data      any       `json:"data,omitempty"`
	At        time.Time `json:"at"`
	Handled   bool      `json:"handled"`
	HandledAt time.Time `json:"handled_at,omitzero"`
}

func eventView(e *engine.Event) EventView {
	v := EventView{ID: e.ID, Type: e.Type, Source: e.Source, At: e.At, Handled: e.Handled, HandledAt: e.HandledAt}
	if len(e.Data) > 0 {
		v.Data = e.Data
	}
	return v
}

// recordEvent serves POST /v1/events: 202 for a new event, 200 for an id
// already recorded (nothing new happens).
func (s *server) recordEvent(w http.ResponseWriter, r *http.Request) {
	var req EventRequest
	if err := decodeBody(w, r, engine.MaxEventData+4096, &req, false, "with id, type and data"); err != nil {
		writeFieldError(w, err)
		return
	}
	switch {
	case req.ID == "":
		writeFieldError(w, &FieldError{"id", "required: the event's own id (the same id again is the same event)"})
		return
	case req.Type == "":
		writeFieldError(w, &FieldError{"type", `required: what happened, like "enquiry.replied" (rules name it in events = {…})`})
		return
	}
	data, err := canonicalData(req.Data)
	if err != nil {
		writeFieldError(w, err)
		return
	}
	ev := engine.NewEvent{ID: req.ID, Type: req.Type, Source: "api", Data: data}
	if err := engine.CheckEvent(ev); err != nil {
		writeFieldError(w, &FieldError{"id", err.Error()})
		return
	}
	setTarget(r, req.ID)
	res, err := s.apply(r.Context(), engine.CmdRecordEvent, engine.RecordEvent{NewEvent: ev, Now: s.now()})
	switch {
	case errors.Is(err, engine.ErrEventBacklog):
		writeError(w, http.StatusServiceUnavailable, err.Error())
	case errors.Is(err, engine.ErrEventInvalid):
		writeError(w, http.StatusBadRequest, err.Error())
	case err != nil:
		s.writeApplyError(w, err)
	default:
		rr := res.(engine.RecordEventResult)
		code := http.StatusOK
		if rr.Created {
			code = http.StatusAccepted
		}
		writeJSON(w, code, eventView(rr.Event))
	}
}

func (s *server) getEvent(w http.ResponseWriter, r *http.Request) {
	e, ok := s.cfg.FSM.Event(r.PathValue("id"))
	if !ok {
		writeError(w, http.StatusNotFound, "no event "+r.PathValue("id")+" (handled events are kept for a week)")
		return
	}
	writeJSON(w, http.StatusOK, eventView(e))
}

// TaskReplaceRequest is the body of PUT /v1/tasks/{key}: a new due time,
// new data, or both.
type TaskReplaceRequest struct {
	DueAt string          `json:"due_at"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// replaceTask serves PUT /v1/tasks/{key}: moves a pending task.
func (s *server) replaceTask(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	var req TaskReplaceRequest
	if err := decodeBody(w, r, maxTaskData+4096, &req, false, "with due_at and/or data"); err != nil {
		writeFieldError(w, err)
		return
	}
	c := engine.ReplaceTask{Key: key, Now: s.now()}
	if req.DueAt == "" && req.Data == nil {
		writeFieldError(w, &FieldError{"due_at", "give due_at, data or both: what the task changes to"})
		return
	}
	if req.DueAt != "" {
		due, err := engine.ParseTime(req.DueAt, s.zone())
		if err != nil {
			writeFieldError(w, s.badTime("due_at", err))
			return
		}
		if due.IsZero() || due.Sub(c.Now) > engine.MaxTaskAhead || c.Now.Sub(due) > maxPastDue {
			writeFieldError(w, &FieldError{"due_at", fmt.Sprintf("%s: want a time from an hour ago to ten years ahead", req.DueAt)})
			return
		}
		c.DueAt = due
	}
	if req.Data != nil {
		data, err := canonicalData(req.Data)
		if err != nil {
			writeFieldError(w, err)
			return
		}
		if data == nil {
			data = []byte("{}")
		}
		c.Data = data
	}
	res, err := s.apply(r.Context(), engine.CmdReplaceTask, c)
	switch {
	case errors.Is(err, engine.ErrNoTask):
		writeError(w, http.StatusNotFound, "no task "+key)
	case errors.Is(err, engine.ErrTaskNotPending):
		writeError(w, http.StatusConflict, err.Error())
	case err != nil:
		s.writeApplyError(w, err)
	default:
		writeJSON(w, http.StatusOK, s.taskView(res.(engine.ReplaceResult).Task))
	}
}
