package leader

import "time"

// Reloadable are the settings a node's config reload (SIGHUP) changes
// while the loops run: the next prune and the next directory refresh use
// them, and no loop restarts (a restart of the leader's loops would be a
// gap in sending). Zero values take the defaults, as in Config.
type Reloadable struct {
	Retention, LedgerRetention, AuditRetention time.Duration
	// Directory is nil when the config has no directory section.
	Directory           DirectorySource
	DirectoryInterval   time.Duration
	DirectoryMaxRemoval float64
}

// Reconfigure applies r. Safe to call while Run runs.
func (l *Leader) Reconfigure(r Reloadable) {
	hk := HousekeeperConfig{Retention: r.Retention, LedgerRetention: r.LedgerRetention, AuditRetention: r.AuditRetention}
	hk.setDefaults()
	dc := DirectoryConfig{DirectoryInterval: r.DirectoryInterval, DirectoryMaxRemoval: r.DirectoryMaxRemoval}
	dc.setDefaults()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg.Retention, l.cfg.LedgerRetention, l.cfg.AuditRetention = hk.Retention, hk.LedgerRetention, hk.AuditRetention
	l.cfg.Directory, l.cfg.DirectoryInterval, l.cfg.DirectoryMaxRemoval = r.Directory, dc.DirectoryInterval, dc.DirectoryMaxRemoval
}

// retentions are the housekeeper's horizons in force.
func (l *Leader) retentions() (retention, ledger, audit time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg.Retention, l.cfg.LedgerRetention, l.cfg.AuditRetention
}

// directory is the directory refresher's settings in force (src nil: no
// directory section).
func (l *Leader) directory() (src DirectorySource, interval time.Duration, maxRemoval float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg.Directory, l.cfg.DirectoryInterval, l.cfg.DirectoryMaxRemoval
}
