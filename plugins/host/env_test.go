package host

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/plugins/sdk"
)

func TestResolveConfig(t *testing.T) {
	t.Parallel()
	env := map[string]string{"CORP": "ww1234", "SECRET": "s3cr3t-value", "SHORT": "ab"}
	lookup := func(n string) (string, bool) { v, ok := env[n]; return v, ok }
	cfg := map[string]any{
		"corp_id":  "${CORP}",
		"secret":   "${SECRET}",
		"agent_id": 1000002,
		"robots":   []any{map[string]any{"url": "https://x/${SHORT}"}},
		"note":     "costs $5, literal $${CORP}",
		"token":    "inline-token-value",
		// A WeCom robot's key is its credential (the webhook URL's key).
		"robot_key": "inline-robot-key",
		"key_field": "herald_key",
	}
	out, secrets, err := resolveConfig(cfg, lookup)
	require.NoError(t, err)
	require.Equal(t, map[string]any{
		"corp_id":   "ww1234",
		"secret":    "s3cr3t-value",
		"agent_id":  1000002,
		"robots":    []any{map[string]any{"url": "https://x/ab"}},
		"note":      "costs $5, literal ${CORP}",
		"token":     "inline-token-value",
		"robot_key": "inline-robot-key",
		"key_field": "herald_key",
	}, out)
	require.Equal(t, "${CORP}", cfg["corp_id"], "the input is not changed")

	redact := newRedactor(secrets)
	require.Equal(t, "[REDACTED] and [REDACTED] and [REDACTED]", redact("ww1234 and s3cr3t-value and inline-token-value"))
	require.Equal(t, "[REDACTED], key_field herald_key", redact("inline-robot-key, key_field herald_key"))
	require.Equal(t, "ab stays: too short to hide", redact("ab stays: too short to hide"))

	_, _, err = resolveConfig(map[string]any{"a": map[string]any{"b": "${NOPE}"}}, lookup)
	require.ErrorIs(t, err, ErrMissingEnv)
	require.ErrorContains(t, err, "a.b")
	require.ErrorContains(t, err, "NOPE")
}

func TestRedactorHidesJSONEscapedForm(t *testing.T) {
	t.Parallel()
	redact := newRedactor([]string{`pa"ss\word`})
	require.Equal(t, `config: {"secret":"[REDACTED]"}`, redact(`config: {"secret":"pa\"ss\\word"}`))
}

func TestRedactorHidesURLEscapedForm(t *testing.T) {
	t.Parallel()
	// The classic leak: net/http quotes the request URL in its errors, and
	// a secret in a query or path is percent-encoded there.
	redact := newRedactor([]string{"p+ss/w=rd&x"})
	require.Equal(t, `Post "https://api.test/send?key=[REDACTED]": dial tcp 127.0.0.1:9: connect: connection refused`,
		redact(`Post "https://api.test/send?key=p%2Bss%2Fw%3Drd%26x": dial tcp 127.0.0.1:9: connect: connection refused`))
	require.Equal(t, `Get "https://api.test/hook/[REDACTED]/send": EOF`, redact(`Get "https://api.test/hook/p+ss%2Fw=rd&x/send": EOF`))
}

func TestResultsMustMatchBatch(t *testing.T) {
	t.Parallel()
	in := &instance{name: "m", redact: newRedactor([]string{"secret-xyz"})}
	batch := []sdk.Message{{ID: "a"}, {ID: "b"}}
	ok := []sdk.Result{
		{ID: "b", Status: sdk.StatusRateLimited, RetryAfter: 5e9},
		{ID: "a", Status: sdk.StatusPermanent, Code: "40003", Error: "bad user, token secret-xyz"},
	}
	out, err := in.checked(batch, ok)
	require.NoError(t, err)
	require.Len(t, out, 2)
	require.Equal(t, "bad user, token [REDACTED]", out[1].Error)
	require.Equal(t, "40003", out[1].Code)

	for name, res := range map[string][]sdk.Result{
		"missing":    {{ID: "a", Status: sdk.StatusSent}},
		"unknown id": {{ID: "a", Status: sdk.StatusSent}, {ID: "b", Status: sdk.StatusSent}, {ID: "c", Status: sdk.StatusSent}},
		"twice":      {{ID: "a", Status: sdk.StatusSent}, {ID: "a", Status: sdk.StatusSent}},
		"bad status": {{ID: "a", Status: sdk.StatusSent}, {ID: "b", Status: 9}},
		"zero":       {{ID: "a", Status: sdk.StatusSent}, {ID: "b"}},
	} {
		_, err := in.checked(batch, res)
		require.ErrorIs(t, err, ErrBadResponse, name)
	}
}
