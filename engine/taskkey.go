package engine

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// Limits of a task, whoever submits it: the HTTP API or a rule's on_failed
// hook through the Lua task library. Both check against these, so that a
// task one of them makes is one the other can read and cancel.
const (
	// MaxTaskKey is the longest task key, in bytes.
	MaxTaskKey = 200
	// MaxTaskAhead is how far ahead a task may be due: from now for the
	// API, from the run's slot for a rule (every leader computes the same).
	MaxTaskAhead = 10 * 366 * 24 * time.Hour
)

// alertTaskPrefix starts the keys of the tasks Herald makes for alerts
// (AlertTaskKey); a submitted key may not, or it could collide with one.
const alertTaskPrefix = "alert:"

// ErrTaskKeyMissing is CheckTaskKey's answer to the empty key. It has no
// advice of its own: each caller says how its user should build a key.
var ErrTaskKeyMissing = errors.New("task key required")

// TaskKeyError says why a key cannot name a task.
type TaskKeyError struct {
	Key string
	// Reason is what is wrong with the key, worded to follow "key: "; the
	// HTTP API returns it as the field error's reason.
	Reason string
}

func (e *TaskKeyError) Error() string { return "key: " + e.Reason }

// CheckTaskKey is the one rule for the keys of submitted tasks: the API
// and the Lua task library both call it. A key names its task in URLs
// (GET and DELETE /v1/tasks/{key}), so it holds nothing a URL would
// change, and keys starting with "alert:" are Herald's own. It returns
// ErrTaskKeyMissing for "", a *TaskKeyError for a bad key, else nil.
func CheckTaskKey(k string) error {
	switch {
	case k == "":
		return ErrTaskKeyMissing
	case len(k) > MaxTaskKey:
		return &TaskKeyError{k, fmt.Sprintf("longer than %d bytes", MaxTaskKey)}
	case strings.HasPrefix(k, alertTaskPrefix):
		return &TaskKeyError{k, `keys starting with "` + alertTaskPrefix + `" are Herald's own`}
	case k == "." || k == "..":
		// A URL path cleans them away: /v1/tasks/.. is /v1/, so such a
		// task could never be read or cancelled.
		return &TaskKeyError{k, fmt.Sprintf("%q cannot be a key (it goes in URLs)", k)}
	}
	for _, r := range k {
		if r == '/' || r == '?' || r == '#' || r == '%' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return &TaskKeyError{k, fmt.Sprintf("must not contain %q (it goes in URLs)", r)}
		}
	}
	return nil
}
