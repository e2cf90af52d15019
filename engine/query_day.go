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
	if r, ok := f.st.Runs.Get(key); ok {
		return r, true
	}
	_, ok := f.st.Ledger.Get(key)
	return nil, ok
}

// DeliveryFilter selects deliveries for FindDeliveries; zero fields
// match everything.
type DeliveryFilter struct {
	Recipients []string // any of these userids
	// Date is a day in Zone (UTC when nil): the deliveries whose run's slot
	// falls on it (PersonDay). It is the day a person reads the times in,
	// not the rule's: a person asking "what did lina get today?" means
	// today where they read the clock, whatever zone each rule runs in.
	Date string
	Zone *time.Location
	Keep func(*Delivery) bool // called under the state's read lock: it must not call the FSM
	// Newest, when above 0, keeps only the last Newest matches in the
	// order (the newest): a dashboard asking for 100 of 100,000 pays for
	// a heap of 100, not a sort of 100,000.
	Newest int
}

// FindDeliveries returns the deliveries that match flt, by not_before
// then id, and how many matched in all.
func (f *FSM) FindDeliveries(flt DeliveryFilter) ([]*Delivery, int) {
	less := func(a, b *Delivery) bool {
		if c := a.NotBefore.Compare(b.NotBefore); c != 0 {
			return c < 0
		}
		return a.ID < b.ID
	}
	var out []*Delivery
	total := 0
	// The day's bounds, found once: the same days as PersonDay, without
	// formatting every delivery's slot under the read lock.
	var from, to time.Time
	if flt.Date != "" {
		zone := flt.Zone
		if zone == nil {
			zone = time.UTC
		}
		day, err := time.ParseInLocation(time.DateOnly, flt.Date, zone)
		if err != nil {
			return nil, 0 // no delivery falls on a day that is not one
		}
		from, to = day, day.AddDate(0, 0, 1)
	}
	f.mu.RLock()
	for _, r := range f.st.Deliveries.records() {
		if len(flt.Recipients) > 0 && !slices.Contains(flt.Recipients, r.getRecipient()) {
			continue
		}
		d := r.delivery()
		if flt.Keep != nil && !flt.Keep(d) {
			continue
		}
		if flt.Date != "" && (d.Slot.Before(from) || !d.Slot.Before(to)) {
			continue
		}
		total++
		if flt.Newest <= 0 || len(out) < flt.Newest {
			out = append(out, d)
			if len(out) == flt.Newest {
				heapify(out, less)
			}
			continue
		}
		// out is a min-heap of the newest so far: d replaces its oldest.
		if less(out[0], d) {
			out[0] = d
			siftDown(out, 0, less)
		}
	}
	f.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Delivery) int {
		if c := a.NotBefore.Compare(b.NotBefore); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out, total
}

func heapify(h []*Delivery, less func(a, b *Delivery) bool) {
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, i, less)
	}
}

func siftDown(h []*Delivery, i int, less func(a, b *Delivery) bool) {
	for {
		l, small := 2*i+1, i
		if l < len(h) && less(h[l], h[small]) {
			small = l
		}
		if r := l + 1; r < len(h) && less(h[r], h[small]) {
			small = r
		}
		if small == i {
			return
		}
		h[i], h[small] = h[small], h[i]
		i = small
	}
}

// DeliveryDate is the date of d's run, as DeliveriesTo and the daily
// aggregates count it.
func (f *FSM) DeliveryDate(d *Delivery) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.deliveryDate(d)
}

// PersonDay is the day, in zone (UTC when nil), that a delivery whose run's
// slot is slot belongs to for a person reading in that zone. The filter of
// FindDeliveries and every default "today" of it use this one definition.
func PersonDay(slot time.Time, zone *time.Location) string {
	if zone == nil {
		zone = time.UTC
	}
	return slot.In(zone).Format(time.DateOnly)
}

func (s *state) deliveryDate(d *Delivery) string {
	if r, ok := s.Runs.Get(d.RunKey); ok {
		return r.date()
	}
	return d.Slot.UTC().Format(time.DateOnly)
}
