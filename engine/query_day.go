package engine

import (
	"cmp"
	"slices"
	"time"
)

// RunFired reports whether the run key was started: its run exists, or it
// was pruned and the ledger remembers it. The dashboard uses it to tell a
// slot that should have fired and did not.
func (f *FSM) RunFired(key string) (*Run, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if r, ok := f.st.Runs[key]; ok {
		return r, true
	}
	_, ok := f.st.Ledger[key]
	return nil, ok
}

// DeliveryFilter selects deliveries for FindDeliveries; zero fields
// match everything.
type DeliveryFilter struct {
	Recipients []string // any of these userids
	// Date is the run's date (the slot's date in the rule's zone, as the
	// daily aggregates count it).
	Date string
	Keep func(*Delivery) bool // called under the state's read lock: it must not call the FSM
}

// FindDeliveries returns the deliveries that match flt, by not_before
// then id.
func (f *FSM) FindDeliveries(flt DeliveryFilter) []*Delivery {
	f.mu.RLock()
	var out []*Delivery
	for _, d := range f.st.Deliveries {
		if len(flt.Recipients) > 0 && !slices.Contains(flt.Recipients, d.Recipient) {
			continue
		}
		if flt.Keep != nil && !flt.Keep(d) {
			continue
		}
		if flt.Date != "" && f.st.deliveryDate(d) != flt.Date {
			continue
		}
		out = append(out, d)
	}
	f.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Delivery) int {
		if c := a.NotBefore.Compare(b.NotBefore); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out
}

// DeliveryDate is the date of d's run, as DeliveriesTo and the daily
// aggregates count it.
func (f *FSM) DeliveryDate(d *Delivery) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.deliveryDate(d)
}

func (s *state) deliveryDate(d *Delivery) string {
	if r, ok := s.Runs[d.RunKey]; ok {
		return r.date()
	}
	return d.Slot.UTC().Format(time.DateOnly)
}
