package rules

// report logs what a reload changed and updates the metrics. A file's
// error is logged once when it appears (or changes) and once when it is
// fixed, not on every rescan.
func (s *Set) report(prev, v *version) {
	broken := 0
	for f, st := range v.status {
		s.metrics.fileError(f, st.Error != "")
		switch {
		case st.Error != "" && s.logged[f] != st.Error:
			args := []any{"file", f, "line", st.Line, "err", st.Error}
			if st.Hash != "" {
				s.cfg.Logger.Warn("rules: file broken; its last good version stays in force", args...)
			} else {
				s.cfg.Logger.Warn("rules: file broken; not loaded", args...)
			}
			s.logged[f] = st.Error
		case st.Error == "" && s.logged[f] != "":
			s.cfg.Logger.Info("rules: file fixed", "file", f)
			delete(s.logged, f)
		}
		if st.Error != "" {
			broken++
		}
	}
	if prev != nil {
		for f := range prev.status {
			if _, ok := v.status[f]; !ok {
				s.metrics.forget(f)
				delete(s.logged, f)
				s.cfg.Logger.Info("rules: file removed", "file", f)
			}
		}
	}
	result := "ok"
	if broken > 0 {
		result = "partial"
	}
	s.metrics.reload(result)
	s.cfg.Logger.Info("rules: loaded", "dir", s.cfg.Dir, "rules", len(v.order), "people", v.people.Len(),
		"calendars", len(v.cals), "broken", broken, "hash", v.hash)
}
