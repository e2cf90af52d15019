package cluster

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStatusTable(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	require.NoError(t, Status{
		NodeID: "n2", LeaderID: "n1", State: "follower", Term: 3, AppliedIndex: 42,
		Members: []MemberStatus{
			{ID: "n1", RaftAddr: "127.0.0.1:7101", HTTPAddr: "127.0.0.1:8101", Voter: true, Leader: true},
			{ID: "n2", RaftAddr: "127.0.0.1:7102", Voter: true},
		},
	}.WriteTable(&buf))
	want := `node n2 is follower; leader n1; term 3; applied index 42

ID  RAFT ADDR       HTTP ADDR       VOTER  LEADER
n1  127.0.0.1:7101  127.0.0.1:8101  yes    yes
n2  127.0.0.1:7102  -               yes    no
`
	require.Equal(t, want, buf.String())
}

// recordHandler keeps the records it is given.
type recordHandler struct{ records []slog.Record }

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.records = append(h.records, r)
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

func TestRaftLogBridge(t *testing.T) {
	t.Parallel()
	h := &recordHandler{}
	level, err := parseLevel("warn")
	require.NoError(t, err)
	hl := newRaftLogger(slog.New(h), level)
	hl.Info("chatter that warn filters out")
	hl.Warn("heartbeat timeout reached", "last-leader-addr", "127.0.0.1:7101", "term", 3)
	hl.Named("net").Error("failed to decode", "error", context.Canceled)

	require.Len(t, h.records, 2)
	r := h.records[0]
	require.Equal(t, slog.LevelWarn, r.Level)
	require.Equal(t, "heartbeat timeout reached", r.Message)
	attrs := map[string]any{}
	r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.Any(); return true })
	require.Equal(t, map[string]any{"component": "raft", "last-leader-addr": "127.0.0.1:7101", "term": 3.0}, attrs)

	r = h.records[1]
	require.Equal(t, slog.LevelError, r.Level)
	var text strings.Builder
	r.Attrs(func(a slog.Attr) bool { text.WriteString(a.String() + " "); return true })
	require.Contains(t, text.String(), "component=raft.net")
	require.Contains(t, text.String(), "error=context canceled")

	// Not JSON: still logged, not lost.
	_, err = (&slogWriter{logger: slog.New(h)}).Write([]byte("plain line\n"))
	require.NoError(t, err)
	require.Equal(t, "plain line", h.records[2].Message)
}
