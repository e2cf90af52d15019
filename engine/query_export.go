package engine

import (
	"cmp"
	"slices"
)

// DeliveryPage selects one page of an export: the deliveries that Keep
// accepts (all when nil) with ids after After, in id order, at most Limit.
// Ids never change and never repeat, so a client that asks again after the
// last id it got sees every delivery that was there throughout exactly
// once, whatever is added or pruned between its pages.
type DeliveryPage struct {
	After string
	Limit int
	Keep  func(*Delivery) bool // called under the state's read lock: it must not call the FSM
}

// PageDeliveries returns p's page and whether more deliveries match after
// it. One pass over the deliveries with a heap of Limit: a page of 1,000
// of a million costs the pass, not a sort of the million.
func (f *FSM) PageDeliveries(p DeliveryPage) ([]*Delivery, bool) {
	if p.Limit <= 0 {
		return nil, false
	}
	// out is a max-heap by id of the smallest ids so far.
	greater := func(a, b *Delivery) bool { return a.ID > b.ID }
	out := make([]*Delivery, 0, min(p.Limit, 1024))
	more := false
	f.mu.RLock()
	for _, d := range f.st.Deliveries.All() {
		if d.ID <= p.After || (p.Keep != nil && !p.Keep(d)) {
			continue
		}
		if len(out) < p.Limit {
			out = append(out, d)
			if len(out) == p.Limit {
				heapify(out, greater)
			}
			continue
		}
		more = true
		if d.ID < out[0].ID {
			out[0] = d
			siftDown(out, 0, greater)
		}
	}
	f.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Delivery) int { return cmp.Compare(a.ID, b.ID) })
	return out, more
}
