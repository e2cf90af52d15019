package rules

import (
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the set's Prometheus series; all methods are no-ops without
// a Registerer.
type metrics struct {
	errors  *prometheus.GaugeVec
	reloads *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return &metrics{}
	}
	m := &metrics{
		errors: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "herald_rule_errors",
			Help: "1 while a file of the rules directory fails to load (its last good version, if any, stays in force), else 0.",
		}, []string{"file"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_rule_reloads_total",
			Help: "Rule set reloads, by result: ok (all files good), partial (some files broken), error (directory unreadable).",
		}, []string{"result"}),
	}
	m.errors = register(reg, m.errors)
	m.reloads = register(reg, m.reloads)
	return m
}

// register adds c to reg, or reuses the collector already registered under
// the same name (a second Set in the same process).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		slog.Default().Warn("rules: register metric", "err", err)
	}
	return c
}

func (m *metrics) reload(result string) {
	if m.reloads != nil {
		m.reloads.WithLabelValues(result).Inc()
	}
}

func (m *metrics) fileError(file string, broken bool) {
	if m.errors == nil {
		return
	}
	v := 0.0
	if broken {
		v = 1
	}
	m.errors.WithLabelValues(file).Set(v)
}

func (m *metrics) forget(file string) {
	if m.errors != nil {
		m.errors.DeleteLabelValues(file)
	}
}
