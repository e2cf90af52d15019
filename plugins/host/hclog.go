package host

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// hclogger makes an slog.Logger look like the hclog.Logger that go-plugin
// requires, so that go-plugin's own records and the log lines a plugin
// writes to stderr end up in Herald's slog log. redact scrubs the channel's
// secrets from every message and value on the way.
type hclogger struct {
	l       *slog.Logger
	name    string
	implied []any
	redact  func(string) string
}

func newHCLogger(l *slog.Logger, redact func(string) string) hclog.Logger {
	if redact == nil {
		redact = func(s string) string { return s }
	}
	return &hclogger{l: l, redact: redact}
}

const levelTrace = slog.LevelDebug - 4

func toSlog(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return levelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (h *hclogger) Log(level hclog.Level, msg string, args ...any) {
	lvl := toSlog(level)
	if !h.l.Enabled(context.Background(), lvl) {
		return
	}
	attrs := make([]any, 0, len(args)+2)
	if h.name != "" {
		attrs = append(attrs, slog.String("logger", h.name))
	}
	for i := 0; i < len(args); i += 2 {
		key := fmt.Sprint(args[i])
		if i+1 >= len(args) {
			attrs = append(attrs, slog.String("extra", h.redact(key)))
			break
		}
		attrs = append(attrs, slog.Any(key, h.scrub(args[i+1])))
	}
	h.l.Log(context.Background(), lvl, h.redact(msg), attrs...)
}

// scrub redacts a value, turning it into its text when that text held a
// secret.
func (h *hclogger) scrub(v any) any {
	switch v := v.(type) {
	case string:
		return h.redact(v)
	case error:
		return h.redact(v.Error())
	case nil, bool, int, int64, float64:
		return v
	}
	s := fmt.Sprint(v)
	if r := h.redact(s); r != s {
		return r
	}
	return v
}

func (h *hclogger) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogger) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogger) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogger) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogger) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hclogger) enabled(l hclog.Level) bool {
	return h.l.Enabled(context.Background(), toSlog(l))
}

func (h *hclogger) IsTrace() bool { return h.enabled(hclog.Trace) }
func (h *hclogger) IsDebug() bool { return h.enabled(hclog.Debug) }
func (h *hclogger) IsInfo() bool  { return h.enabled(hclog.Info) }
func (h *hclogger) IsWarn() bool  { return h.enabled(hclog.Warn) }
func (h *hclogger) IsError() bool { return h.enabled(hclog.Error) }

func (h *hclogger) ImpliedArgs() []any { return h.implied }

func (h *hclogger) With(args ...any) hclog.Logger {
	c := *h
	c.implied = append(append([]any(nil), h.implied...), args...)
	scrubbed := make([]any, len(args))
	for i, a := range args {
		if i%2 == 1 {
			a = h.scrub(a)
		}
		scrubbed[i] = a
	}
	c.l = h.l.With(scrubbed...)
	return &c
}

func (h *hclogger) Name() string { return h.name }

func (h *hclogger) Named(name string) hclog.Logger {
	c := *h
	if c.name != "" {
		name = c.name + "." + name
	}
	c.name = name
	return &c
}

func (h *hclogger) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	return &c
}

// SetLevel is ignored: the slog handler decides.
func (h *hclogger) SetLevel(hclog.Level) {}

// GetLevel reports the lowest level the slog handler lets through; go-plugin
// uses it to skip parsing plugin log lines nobody would see.
func (h *hclogger) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if h.enabled(l) {
			return l
		}
	}
	return hclog.Off
}

func (h *hclogger) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return log.New(lineWriter{h}, "", 0)
}

func (h *hclogger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return lineWriter{h}
}

// lineWriter logs what is written to it at info level, redacted.
type lineWriter struct{ h *hclogger }

func (w lineWriter) Write(p []byte) (int, error) {
	w.h.Info(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var _ hclog.Logger = (*hclogger)(nil)
