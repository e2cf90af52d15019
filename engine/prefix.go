package engine

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
)

// MinIDPrefix is the shortest id prefix accepted for a delivery or an
// alert, as git accepts a short commit hash: short enough to type, long
// enough to be unique in practice.
const MinIDPrefix = 8

// ErrNoMatch means no record has that id (or id prefix).
var ErrNoMatch = errors.New("no match")

// AmbiguousError means a prefix matches more than one record.
type AmbiguousError struct {
	Prefix  string
	Matches []string // the first few, sorted
	Count   int
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("id prefix %q is ambiguous: %d match (%s…); give more characters", e.Prefix, e.Count, strings.Join(e.Matches, ", "))
}

// resolvePrefix finds the one key (of keys, has says which) that is id,
// or that starts with id when id has at least MinIDPrefix characters.
func resolvePrefix(has func(string) bool, keys iter.Seq[string], id string) (string, error) {
	if has(id) {
		return id, nil
	}
	if len(id) < MinIDPrefix {
		return "", fmt.Errorf("%w: %q (a prefix needs at least %d characters)", ErrNoMatch, id, MinIDPrefix)
	}
	var found []string
	n := 0
	for k := range keys {
		if strings.HasPrefix(k, id) {
			n++
			if len(found) < 4 {
				found = append(found, k)
			}
		}
	}
	switch n {
	case 0:
		return "", fmt.Errorf("%w: %q", ErrNoMatch, id)
	case 1:
		return found[0], nil
	}
	slices.Sort(found)
	return "", &AmbiguousError{Prefix: id, Matches: found, Count: n}
}

// FindDelivery returns the delivery whose id is id, or starts with id (at
// least MinIDPrefix characters). It fails with ErrNoMatch or an
// *AmbiguousError. A prefix costs a walk over every delivery: fine for a
// person at a terminal, not for a hot path.
func (f *FSM) FindDelivery(id string) (*Delivery, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	k, err := resolvePrefix(f.st.Deliveries.Has, f.st.Deliveries.Keys(), id)
	if err != nil {
		return nil, err
	}
	return f.st.Deliveries.At(k), nil
}

// FindAlert is FindDelivery for alerts.
func (f *FSM) FindAlert(id string) (*Alert, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	k, err := resolvePrefix(func(k string) bool { _, ok := f.st.Alerts[k]; return ok }, maps.Keys(f.st.Alerts), id)
	if err != nil {
		return nil, err
	}
	return f.st.Alerts[k], nil
}
