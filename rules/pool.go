package rules

import "sync"

// pool keeps idle states of one version. A state is built once (standard
// library, Herald's modules) and then reused by many runs; every run gets
// fresh closures and a fresh global environment (see plan.go), so runs do
// not see each other's values. States of an old version are closed when
// it is replaced.
type pool struct {
	env  *env
	hook func(*sandbox) // tests: extra functions in every new state

	mu     sync.Mutex
	idle   []*sandbox
	max    int
	closed bool
}

func newPool(e *env, max int) *pool { return &pool{env: e, max: max} }

// get returns an idle state or builds one.
func (p *pool) get() *sandbox {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		sb := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return sb
	}
	p.mu.Unlock()
	sb := newSandbox(p.env)
	if p.hook != nil {
		p.hook(sb)
	}
	return sb
}

// put returns a state after a run. A state whose call was interrupted may
// be left in the middle of anything, so it is closed, as are states beyond
// the pool's size and those of a closed (replaced) version.
func (p *pool) put(sb *sandbox) {
	p.mu.Lock()
	keep := !sb.broken && !p.closed && len(p.idle) < p.max
	if keep {
		sb.run = nil
		sb.stubs, sb.sweepAt = nil, 0 // nothing of the run can reach its stubs any more
		sb.L.SetTop(0)
		p.idle = append(p.idle, sb)
	}
	p.mu.Unlock()
	if !keep {
		sb.L.Close()
	}
}

// close drops the idle states; states still in use are closed by put.
func (p *pool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, sb := range idle {
		sb.L.Close()
	}
}
