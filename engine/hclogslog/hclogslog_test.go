package hclogslog_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/hclogslog"
)

// recordHandler keeps the records it is given.
type recordHandler struct{ records []slog.Record }

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.records = append(h.records, r)
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

// Raft's records arrive as structured slog records: the logger's name as
// component, pairs as attributes of their own type, below Level dropped.
func TestRecordsStayStructured(t *testing.T) {
	t.Parallel()
	h := &recordHandler{}
	hl := hclogslog.New(slog.New(h), hclogslog.Options{Name: "raft", Level: hclog.Warn})
	require.Equal(t, hclog.Warn, hl.GetLevel())
	hl.Info("chatter that warn filters out")
	hl.Warn("heartbeat timeout reached", "last-leader-addr", "127.0.0.1:7101", "term", 3)
	hl.Named("net").Error("failed to decode", "error", context.Canceled)

	require.Len(t, h.records, 2)
	r := h.records[0]
	require.Equal(t, slog.LevelWarn, r.Level)
	require.Equal(t, "heartbeat timeout reached", r.Message)
	attrs := map[string]any{}
	r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.Any(); return true })
	require.Equal(t, map[string]any{"component": "raft", "last-leader-addr": "127.0.0.1:7101", "term": int64(3)}, attrs)

	r = h.records[1]
	require.Equal(t, slog.LevelError, r.Level)
	var text strings.Builder
	r.Attrs(func(a slog.Attr) bool { text.WriteString(a.String() + " "); return true })
	require.Contains(t, text.String(), "component=raft.net")
	require.Contains(t, text.String(), "error=context canceled")
}

// With a RedactFunc, no message, value, implied argument or standard
// logger line carries the secret; the slog handler's level is obeyed.
func TestRedactsEverything(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	redact := func(s string) string { return strings.ReplaceAll(s, "topsecret", "[REDACTED]") }
	h := hclogslog.New(l, hclogslog.Options{RedactFunc: redact}).Named("plugin").With("pid", 42, "token", "topsecret")
	require.Equal(t, hclog.Info, h.GetLevel())
	require.False(t, h.IsDebug())
	h.Debug("hidden")
	h.Warn("token topsecret refused", "detail", "was topsecret", "n", 3)
	h.StandardLogger(nil).Print("std topsecret line")
	out := buf.String()
	require.NotContains(t, out, "hidden")
	require.NotContains(t, out, "topsecret")
	require.Contains(t, out, `level=WARN msg="token [REDACTED] refused" pid=42 token=[REDACTED] component=plugin detail="was [REDACTED]" n=3`)
	require.Contains(t, out, `msg="std [REDACTED] line"`)
	require.Equal(t, 1, strings.Count(out, "level=WARN"))
}
