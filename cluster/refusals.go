package cluster

import (
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Refusal reasons (herald_auth_refused_total{reason}): a bounded set, so a
// flood of made-up headers cannot grow the metric.
const (
	refusedVoucherHeader = "voucher_header" // malformed, old format, for another node or cluster, stale
	refusedNotMember     = "voucher_not_member"
	refusedVoucherBody   = "voucher_body" // too large or unreadable
	refusedVoucherMAC    = "voucher_mac"  // wrong secret, another request, a replay
	refusedPeerRequest   = "peer_request" // a node-to-node request's proof
)

// refusalLogLimit and refusalLogBurst bound the Warn lines refusals write:
// anyone can cause a refusal, and 500 of them must not be 500 lines.
const (
	refusalLogLimit = rate.Limit(2) // lines a second, after the burst
	refusalLogBurst = 5
)

// refusals counts every refused proof or voucher, and logs them at most a
// few a second; the next line that is logged says how many were not.
type refusals struct {
	log     *slog.Logger
	counter *prometheus.CounterVec

	mu         sync.Mutex
	limiter    *rate.Limiter
	suppressed int
}

func newRefusals(log *slog.Logger, nodeID string) *refusals {
	return &refusals{
		log: log,
		counter: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "herald_auth_refused_total",
			Help:        "Node-to-node proofs and forwarded writes' vouchers this node refused, by reason (the log shows a few a second).",
			ConstLabels: prometheus.Labels{"node_id": nodeID},
		}, []string{"reason"}),
		limiter: rate.NewLimiter(refusalLogLimit, refusalLogBurst),
	}
}

// refuse counts a refusal and logs it unless too many were logged lately.
func (r *refusals) refuse(reason, msg string, args ...any) {
	r.counter.WithLabelValues(reason).Inc()
	r.mu.Lock()
	if !r.limiter.AllowN(time.Now(), 1) {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	n := r.suppressed
	r.suppressed = 0
	r.mu.Unlock()
	args = append(args, "reason", reason)
	if n > 0 {
		args = append(args, "suppressed", n) // "N more suppressed" since the last line
	}
	r.log.Warn(msg, args...)
}

// refuse counts and logs a refusal (a Node built without New, in tests,
// logs only).
func (n *Node) refuse(reason, msg string, args ...any) {
	if n.refused == nil {
		n.log.Warn(msg, append(args, "reason", reason)...)
		return
	}
	n.refused.refuse(reason, msg, args...)
}
