package rules

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// withCatchup is versionRule with a catchup field.
func withCatchup(name, ver, catchup string) string {
	return strings.Replace(versionRule(name, ver), `channel = "mock",`, `channel = "mock", catchup = "`+catchup+`",`, 1)
}

// TestCatchupLongerThanLedgerKeepsLastGood: a reload that brings a catchup
// not shorter than the node's ledger_retention (MaxCatchup) is refused with
// the catchup's line and why, and the rule's last good version stays.
func TestCatchupLongerThanLedgerKeepsLastGood(t *testing.T) {
	t.Parallel()
	dir := newDir(t, map[string]string{"r.lua": withCatchup("r", "v1", "2h")})
	s := load(t, dir, func(c *Config) { c.MaxCatchup = 48 * time.Hour })
	require.Empty(t, s.CatchupErrors())
	hash := s.Hash()

	writeFiles(t, dir, map[string]string{"r.lua": withCatchup("r", "v2", "48h")})
	_, err := s.Reload()
	require.NoError(t, err)
	st, ok := statusOf(s, "r.lua")
	require.True(t, ok)
	require.Equal(t, "catchup 48h0m0s is not shorter than ledger_retention 48h0m0s: a slot caught up after the ledger forgot its run would be sent again (shorten catchup or raise ledger_retention)", st.Error)
	require.Equal(t, 2, st.Line, "the catchup field's line")
	require.True(t, hasMessage(t, s, "r", "v1")(), "the last good version still plans")
	require.Equal(t, hash, s.Hash())
	errs := s.CatchupErrors()
	require.Len(t, errs, 1)
	require.True(t, errors.Is(errs[0], ErrCatchup))
	require.ErrorContains(t, errs[0], "r.lua:2: catchup 48h0m0s")

	writeFiles(t, dir, map[string]string{"r.lua": withCatchup("r", "v3", "47h")})
	_, err = s.Reload()
	require.NoError(t, err)
	require.True(t, hasMessage(t, s, "r", "v3")(), "a catchup shorter than the ledger loads")
	require.Empty(t, s.CatchupErrors())
}

// TestCatchupDefaultCounts: a rule that names no catchup has the default
// (engine.DefaultCatchup, 1h), which is checked like a written one.
func TestCatchupDefaultCounts(t *testing.T) {
	t.Parallel()
	dir := newDir(t, map[string]string{"r.lua": versionRule("r", "v1")})
	s := load(t, dir, func(c *Config) { c.MaxCatchup = time.Hour })
	require.Len(t, s.CatchupErrors(), 1)
	require.Empty(t, s.Rules(), "no last good version: the rule is not loaded")
}
