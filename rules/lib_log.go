package rules

import (
	"context"
	"log/slog"
	"sort"

	lua "github.com/yuin/gopher-lua"
)

// The `log` module: log.info("msg", {key = value}) and debug, warn, error.
// Records go to the node's slog logger with the rule and file attached.
func (sb *sandbox) openLog() {
	mk := func(level slog.Level) lua.LGFunction {
		return func(L *lua.LState) int {
			sb.log(level)
			return 0
		}
	}
	sb.register("log", map[string]lua.LGFunction{
		"debug": mk(slog.LevelDebug),
		"info":  mk(slog.LevelInfo),
		"warn":  mk(slog.LevelWarn),
		"error": mk(slog.LevelError),
	})
}

// maxLogMessage keeps one rule from flooding the node's log with a huge
// line; longer messages are cut.
const maxLogMessage = 4 << 10

// maxLogLines is how many lines one run (or one load of a file) may log: a
// log call in a loop would otherwise write a line per turn for the whole
// time limit, for every call of every run.
const maxLogLines = 1000

func (sb *sandbox) log(level slog.Level) {
	L := sb.L
	logger := sb.env.logger
	if !logger.Enabled(context.Background(), level) {
		return
	}
	if sb.logLines++; sb.logLines > maxLogLines {
		if sb.logLines == maxLogLines+1 {
			logger.Warn("rules: further log lines of this run are dropped", sb.logAttrs(slog.Int("limit", maxLogLines))...)
		}
		return
	}
	msg := luaString(L.CheckAny(1))
	if len(msg) > maxLogMessage {
		msg = msg[:maxLogMessage] + "…"
	}
	attrs := sb.logAttrs()
	if t, ok := L.Get(2).(*lua.LTable); ok {
		var keys []string
		vals := map[string]string{}
		eachPair(sb.filled(t), func(k, v lua.LValue) bool {
			ks := luaString(k)
			keys = append(keys, ks)
			s := luaString(v)
			if len(s) > maxLogMessage {
				s = s[:maxLogMessage] + "…"
			}
			vals[ks] = s
			return len(keys) < 32
		})
		sort.Strings(keys)
		for _, k := range keys {
			attrs = append(attrs, slog.String(k, vals[k]))
		}
	}
	logger.Log(context.Background(), level, msg, attrs...)
}

// logAttrs are the rule and file of the run being evaluated, then extra.
func (sb *sandbox) logAttrs(extra ...any) []any {
	attrs := []any{}
	if sb.run != nil {
		attrs = append(attrs, slog.String("rule", sb.run.rule), slog.String("file", sb.run.file))
	}
	return append(attrs, extra...)
}
