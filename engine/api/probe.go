package api

import "net/http"

// The probes: GET /v1/health and GET /v1/ready, for load balancers,
// container health checks and Kubernetes. Both are public (no token, even
// with tokens configured: a probe carries none) and answer small bodies
// that name no address, token or member.

// Readiness is the body of GET /v1/ready: 200 when Ready, else 503.
type Readiness struct {
	Ready bool `json:"ready"`
	// Checks are the conditions, each true when it holds.
	Checks ReadyChecks `json:"checks"`
	// Reasons say why each failed check failed ("check: why").
	Reasons []string `json:"reasons,omitempty"`
}

// ReadyChecks are the conditions of readiness.
type ReadyChecks struct {
	// Member: the node is in the cluster's configuration.
	Member bool `json:"member"`
	// Leader: the cluster has a leader this node knows.
	Leader bool `json:"leader"`
	// CaughtUp: the node leads, or has applied the log to within a small
	// bound of the leader (cluster.ReadyLag entries).
	CaughtUp bool `json:"caught_up"`
	// Rules: the rule set is loaded.
	Rules bool `json:"rules"`
	// Channels: the channels are configured and their plugins launched.
	Channels bool `json:"channels"`
}

// All reports whether every check holds.
func (c ReadyChecks) All() bool {
	return c.Member && c.Leader && c.CaughtUp && c.Rules && c.Channels
}

// health answers 200 whenever the process serves HTTP: a liveness probe.
// It checks nothing else on purpose: a node without a leader is alive and
// must not be restarted for it.
func (s *server) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// ready answers 200 when the node can serve reads that are current and
// forward writes (ReadyFunc), else 503 with the failed checks' reasons.
func (s *server) ready(w http.ResponseWriter, r *http.Request) {
	var rd Readiness
	if s.cfg.ReadyFunc == nil {
		rd.Reasons = []string{"this node reports no readiness"}
	} else {
		rd = s.cfg.ReadyFunc(r.Context())
	}
	rd.Ready = rd.Checks.All()
	code := http.StatusOK
	if !rd.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, rd)
}
