package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sort"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// newRaftLogger bridges raft's hclog output to slog. hclog writes one JSON
// object per line; slogWriter turns each back into a structured slog record,
// so raft's key/value pairs stay attributes rather than a formatted string.
// Writing a full hclog.Logger adapter would mean re-implementing its 20-odd
// methods for no gain.
func newRaftLogger(logger *slog.Logger, level hclog.Level) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:        "raft",
		Level:       level,
		Output:      &slogWriter{logger: logger},
		JSONFormat:  true,
		DisableTime: true, // slog stamps its own time
	})
}

// slogWriter forwards hclog JSON lines to an slog.Logger.
type slogWriter struct {
	logger *slog.Logger
}

func (w *slogWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(p, []byte("\n")) {
		if len(bytes.TrimSpace(line)) > 0 {
			w.forward(line)
		}
	}
	return len(p), nil
}

func (w *slogWriter) forward(line []byte) {
	var fields map[string]any
	if err := json.Unmarshal(line, &fields); err != nil {
		// Not JSON (hclog fell back to plain text): keep it anyway.
		w.logger.Warn(strings.TrimSpace(string(line)), "component", "raft")
		return
	}
	level := slog.LevelInfo
	switch fields["@level"] {
	case "trace", "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	msg, _ := fields["@message"].(string)
	module, _ := fields["@module"].(string)
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if !strings.HasPrefix(k, "@") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	attrs := make([]slog.Attr, 0, len(keys)+1)
	attrs = append(attrs, slog.String("component", module))
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, fields[k]))
	}
	w.logger.LogAttrs(context.Background(), level, msg, attrs...)
}
