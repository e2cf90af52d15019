package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// RaiseAlert body version 1 (cause key, message) and version 2 (with the
// kind and the occurrence's params) both raise the alert of the same id;
// a version 1 body's kind is read from its cause key.
func TestRaiseAlertBodyVersions(t *testing.T) {
	t.Parallel()
	f := NewFSM()
	v1 := "\x0a\x01" + `{"cause":"late-run:daily@2026-12-01T01:00:00Z","rule":"daily","message":"run daily@2026-12-01T01:00:00Z is still planning 3m0s after it started","now":"2026-12-01T01:03:00Z"}`
	require.NoError(t, stopOf(t, f, 1, []byte(v1)))
	al, ok := f.Alert(AlertID("late-run:daily@2026-12-01T01:00:00Z"))
	require.True(t, ok)
	require.Equal(t, AlertRunLate, al.Kind)
	require.Equal(t, "run daily@2026-12-01T01:00:00Z is still planning 3m0s after it started", al.Message)

	at := time.Date(2026, 12, 1, 1, 5, 0, 0, time.UTC)
	cmd, err := Encode(CmdRaiseAlert, NewRaiseAlert(AlertCause{AlertRunLate, "daily@2026-12-01T01:00:00Z"}, "daily",
		AlertParams{Run: "daily@2026-12-01T01:00:00Z", Late: 5 * time.Minute}, "run … still planning 5m0s", at))
	require.NoError(t, err)
	require.Equal(t, byte(2), cmd[1])
	require.NoError(t, stopOf(t, f, 2, cmd))
	al, _ = f.Alert(al.ID)
	require.Equal(t, 2, al.Count, "the same cause: one alert, counted")
	require.Equal(t, AlertRunLate, al.Kind)
	require.Equal(t, 5*time.Minute, al.Params.Late)

	// A cluster with a version 1 member gets it as version 1: that build
	// ignores the kind and params, this one reads the same kind back.
	f.Apply(3, 1, mustEncode(t, CmdUpsertMember, Member{ID: "old"}))
	out, err := f.Admit(cmd)
	require.NoError(t, err)
	require.Equal(t, byte(1), out[1])
	require.NoError(t, stopOf(t, f, 4, out))
	al, _ = f.Alert(al.ID)
	require.Equal(t, AlertRunLate, al.Kind)

	// Kinds and params survive a snapshot.
	r := roundTrip(t, f)
	got, _ := r.Alert(al.ID)
	require.Equal(t, al, got)
}

func TestAlertCauseKeys(t *testing.T) {
	t.Parallel()
	for kind, prefix := range causePrefixes {
		c := AlertCause{kind, "x@2026-12-01T01:00:00Z"}
		require.Equal(t, prefix+":x@2026-12-01T01:00:00Z", c.Key())
		require.Equal(t, c, ParseAlertCause(c.Key()))
	}
	require.Equal(t, "rules-mismatch", AlertCause{Kind: AlertRulesMismatch}.Key())
	require.Equal(t, AlertCause{Subject: "channel:wecom_sales:token"}, ParseAlertCause("channel:wecom_sales:token"), "an unknown kind stays a plain key")
}
