package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
)

// ErrMissingEnv is returned by New when a channel's configuration refers to
// an environment variable that is not set.
var ErrMissingEnv = errors.New("environment variable not set")

// envRef matches ${NAME}; $${NAME} is the escape for a literal ${NAME}.
var envRef = regexp.MustCompile(`\$?\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// minSecretLen is the shortest value the redactor hides: hiding a one- or
// two-character value would mangle every log line and protects nothing.
const minSecretLen = 4

// secretKey matches configuration keys whose literal string values are
// treated as secrets too, in case someone wrote a secret inline. A key
// named *_key (robot_key, api_key) is a credential: a WeCom robot's key is
// all it takes to post to its group.
var secretKey = regexp.MustCompile(`(?i)secret|token|passw|credential|api_?key|private|(^|_)key$`)

// resolveConfig returns a copy of cfg with ${NAME} references in string
// values (at any depth) replaced from lookup, and the values that must never
// be shown: every resolved reference and every string under a secret-looking
// key.
func resolveConfig(cfg map[string]any, lookup func(string) (string, bool)) (map[string]any, []string, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	r := &resolver{lookup: lookup}
	out, err := r.value("", cfg, false)
	if err != nil {
		return nil, nil, err
	}
	m, _ := out.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	return m, r.secrets, nil
}

type resolver struct {
	lookup  func(string) (string, bool)
	secrets []string
}

func (r *resolver) value(path string, v any, secret bool) (any, error) {
	switch v := v.(type) {
	case string:
		s, err := r.expand(path, v)
		if err != nil {
			return nil, err
		}
		if secret {
			r.secrets = append(r.secrets, s)
		}
		return s, nil
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			x, err := r.value(join(path, k), e, secret || secretKey.MatchString(k))
			if err != nil {
				return nil, err
			}
			m[k] = x
		}
		return m, nil
	case []any:
		s := make([]any, len(v))
		for i, e := range v {
			x, err := r.value(fmt.Sprintf("%s[%d]", path, i), e, secret)
			if err != nil {
				return nil, err
			}
			s[i] = x
		}
		return s, nil
	}
	return v, nil
}

func (r *resolver) expand(path, s string) (string, error) {
	var err error
	out := envRef.ReplaceAllStringFunc(s, func(ref string) string {
		if strings.HasPrefix(ref, "$$") {
			return ref[1:]
		}
		name := ref[2 : len(ref)-1]
		val, ok := r.lookup(name)
		if !ok && err == nil {
			err = fmt.Errorf("config key %s: %w: %s", path, ErrMissingEnv, name)
		}
		r.secrets = append(r.secrets, val)
		return val
	})
	return out, err
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// newRedactor returns a function that replaces every secret in a text with
// [REDACTED]. Longer secrets are replaced first so that one secret holding
// another is hidden whole.
func newRedactor(secrets []string) func(string) string {
	var keep []string
	seen := map[string]bool{}
	for _, s := range secrets {
		if len(s) < minSecretLen {
			continue
		}
		// A plugin may quote the secret JSON-escaped, as in a config dump,
		// or percent-encoded in a URL, as net/http's errors quote the
		// request's URL.
		q, _ := json.Marshal(s)
		for _, form := range []string{s, string(q[1 : len(q)-1]), url.QueryEscape(s), url.PathEscape(s)} {
			if !seen[form] {
				seen[form] = true
				keep = append(keep, form)
			}
		}
	}
	if len(keep) == 0 {
		return func(s string) string { return s }
	}
	sort.Slice(keep, func(i, j int) bool { return len(keep[i]) > len(keep[j]) })
	pairs := make([]string, 0, 2*len(keep))
	for _, s := range keep {
		pairs = append(pairs, s, "[REDACTED]")
	}
	rep := strings.NewReplacer(pairs...)
	return rep.Replace
}

// ExpandEnv replaces the ${NAME} references of one configuration value
// (key names it in errors), as channel configurations are resolved:
// $${NAME} is a literal ${NAME}, an unset variable is ErrMissingEnv.
func ExpandEnv(key, s string) (string, error) {
	r := &resolver{lookup: os.LookupEnv}
	return r.expand(key, s)
}
