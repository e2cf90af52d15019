package engine

// Compensated records that the on_failed hooks of these deliveries ran.
type Compensated struct {
	IDs []string `json:"ids"`
}

func (a applier) compensated(c Compensated) any {
	n := 0
	for _, id := range c.IDs {
		if a.st.Compensate[id] {
			delete(a.st.Compensate, id)
			n++
		}
	}
	return n
}

// ToCompensate returns up to limit deliveries that ended failed or expired
// and whose rule's on_failed has not run yet, in id order.
func (f *FSM) ToCompensate(limit int) []*Delivery {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []*Delivery
	for id := range f.st.Compensate {
		if d, ok := f.st.Deliveries.Get(id); ok {
			out = append(out, d)
		}
	}
	sortDeliveries(out)
	return out[:min(limit, len(out))]
}
