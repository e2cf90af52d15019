package wecomfake

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// FaultKind is what a fault does to a call it hits.
type FaultKind string

const (
	// FaultErrcode answers HTTP 200 with errcode Code, without acting.
	FaultErrcode FaultKind = "errcode"
	// FaultHTTP answers HTTP status Code (default 502) with an HTML body,
	// without acting.
	FaultHTTP FaultKind = "http"
	// FaultMalformed answers HTTP 200 with a body that is not JSON, without
	// acting.
	FaultMalformed FaultKind = "malformed"
	// FaultReset acts on the call (the message is delivered and recorded),
	// then closes the connection before any reply: the case that makes
	// duplicates.
	FaultReset FaultKind = "reset"
	// FaultAbort closes the connection without acting or replying.
	FaultAbort FaultKind = "abort"
)

// Fault is a failure switched on at run time.
type Fault struct {
	Kind FaultKind `json:"kind"`
	// Path limits the fault to one API path ("message/send" or
	// "/cgi-bin/message/send"); empty hits every API path.
	Path string `json:"path,omitempty"`
	// Code is the errcode of FaultErrcode, or the HTTP status of FaultHTTP.
	Code int `json:"code,omitempty"`
	// Count is how many calls the fault hits before it is spent; 0 means
	// until cleared.
	Count int `json:"count,omitempty"`
	// Probability is the share of matching calls the fault hits, drawn from
	// the seeded generator; 0 means every matching call.
	Probability float64 `json:"probability,omitempty"`
}

// ErrBadFault is returned for a fault that cannot be armed.
var ErrBadFault = errors.New("wecomfake: bad fault")

type faultState struct {
	f    Fault
	hits int
}

// AddFault arms a fault. Faults are tried in the order they were added;
// the first that matches a call and draws a hit answers it.
func (s *Server) AddFault(f Fault) error {
	switch f.Kind {
	case FaultErrcode:
		if f.Code == 0 {
			return fmt.Errorf("%w: errcode fault needs a non-zero code", ErrBadFault)
		}
	case FaultHTTP:
		if f.Code == 0 {
			f.Code = http.StatusBadGateway
		}
		if f.Code < 400 || f.Code > 599 {
			return fmt.Errorf("%w: http fault needs a 4xx or 5xx status, got %d", ErrBadFault, f.Code)
		}
	case FaultMalformed, FaultReset, FaultAbort:
	default:
		return fmt.Errorf("%w: unknown kind %q", ErrBadFault, f.Kind)
	}
	if f.Count < 0 || f.Probability < 0 || f.Probability > 1 {
		return fmt.Errorf("%w: count must be >= 0 and probability within [0,1]", ErrBadFault)
	}
	f.Path = normPath(f.Path)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &faultState{f: f})
	return nil
}

// FailNext makes the next n calls to path ("" for any API path) answer
// errcode code.
func (s *Server) FailNext(n, code int, path string) error {
	if n <= 0 {
		return fmt.Errorf("%w: n must be > 0", ErrBadFault)
	}
	return s.AddFault(Fault{Kind: FaultErrcode, Code: code, Count: n, Path: path})
}

// ClearFaults disarms every fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// Faults returns the armed faults, with Count reduced by the hits so far.
func (s *Server) Faults() []Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Fault, 0, len(s.faults))
	for _, fs := range s.faults {
		f := fs.f
		if f.Count > 0 {
			f.Count -= fs.hits
		}
		out = append(out, f)
	}
	return out
}

// SetLatency delays every API reply by d (real time: it is the client's
// timeout that is under test).
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = max(d, 0)
}

// applyFault draws the fault that hits a call to path, spending it.
// Callers hold s.mu.
func (s *Server) applyFault(path string) (Fault, bool) {
	for i, fs := range s.faults {
		if fs.f.Path != "" && fs.f.Path != path {
			continue
		}
		if fs.f.Probability > 0 && s.rng.Float64() >= fs.f.Probability {
			continue
		}
		fs.hits++
		if fs.f.Count > 0 && fs.hits >= fs.f.Count {
			s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
		}
		return fs.f, true
	}
	return Fault{}, false
}

// faultReply is the answer of a fault that does not act on the call.
func faultReply(f Fault) reply {
	switch f.Kind {
	case FaultErrcode:
		return fail(f.Code)
	case FaultHTTP:
		return reply{status: f.Code, errcode: -1, raw: fmt.Appendf(nil, "<html><body><h1>%d %s</h1></body></html>", f.Code, http.StatusText(f.Code))}
	case FaultMalformed:
		return reply{errcode: -1, raw: []byte(`{"errcode":0,"errmsg":"ok","msgid":"`)}
	default: // FaultAbort
		return reply{reset: true}
	}
}
