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

func (sb *sandbox) log(level slog.Level) {
	L := sb.L
	logger := sb.env.logger
	if !logger.Enabled(context.Background(), level) {
		return
	}
	msg := luaString(L.CheckAny(1))
	if len(msg) > maxLogMessage {
		msg = msg[:maxLogMessage] + "…"
	}
	attrs := []any{}
	if sb.run != nil {
		attrs = append(attrs, slog.String("rule", sb.run.rule), slog.String("file", sb.run.file))
	}
	if t, ok := L.Get(2).(*lua.LTable); ok {
		var keys []string
		vals := map[string]string{}
		eachPair(t, func(k, v lua.LValue) bool {
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
