package rules

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestJSONSharedTablesBounded: a table that holds the same table twice,
// forty levels deep, is 2^40 values once written out, though it takes
// forty steps to build. Converting it must stop at the size limit, not
// allocate until the node runs out of memory (inside one Go call the time
// limit cannot interrupt; for a message's payload, outside any call).
func TestJSONSharedTablesBounded(t *testing.T) {
	t.Parallel()
	const dag = `local t = { "x" } for i = 1, 40 do t = { t, t } end`
	s := load(t, newDir(t, map[string]string{
		"encode.lua": exprRule("encode", `(function() `+dag+` return json.encode(t) end)()`),
		"payload.lua": `return rule {
  name = "payload", channel = "mock",
  recipients = function(run) return { "alice" } end,
  message = function(run, to) ` + dag + ` return { content = t } end,
}`,
		"wide.lua": exprRule("wide", `(function()
      local s = string.rep("x", 2^19)
      local t = {} for i = 1, 1000 do t[i] = s end
      return json.encode(t)
    end)()`),
	}), func(c *Config) { c.CallTimeout = 5 * time.Second })
	for rule, want := range map[string]string{
		"encode":  "json.encode: its JSON is over the 1048576 byte limit",
		"payload": "message for alice: its JSON is over the 65536 byte limit",
		"wide":    "json.encode: its JSON is over the 1048576 byte limit",
	} {
		t.Run(rule, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := s.Plan(context.Background(), rule, runAt(time.Now()))
				done <- err
			}()
			select {
			case err := <-done:
				require.ErrorIs(t, err, ErrRule)
				require.ErrorContains(t, err, want)
			case <-time.After(waitTimeout):
				t.Fatalf("%s: converting a table of shared tables did not stop", rule)
			}
		})
	}
}

// TestJSONLimitExact: the running count never refuses a value whose JSON
// fits: a payload of exactly 64 KiB goes, one byte more does not.
func TestJSONLimitExact(t *testing.T) {
	t.Parallel()
	for _, extra := range []int{0, 1} {
		// {"a":[1,{"b":"xxx…"}],"c":null} with json.null
		v := map[string]string{"r.lua": `return rule {
  name = "r", channel = "mock",
  recipients = function(run) return { "alice" } end,
  message = function(run, to)
    local fixed = #'{"a":[1,{"b":""}],"c":null}'
    return { a = { 1, { b = string.rep("x", 65536 - fixed + ` + string(rune('0'+extra)) + `) } }, c = json.null }
  end,
}`}
		s := load(t, newDir(t, v))
		out, err := plan(t, s, "r", "")
		if extra == 0 {
			require.NoError(t, err)
			require.Len(t, out[0].Payload, maxPayload)
		} else {
			require.ErrorContains(t, err, "over the 65536 byte limit")
		}
	}
}

// TestJSONKeyOrderIndependent: gopher-lua's ForEach walks a table's hash
// part in Go map order, which differs from run to run. Nothing a payload
// or an error says may depend on it: two leaders must agree. A number key
// and a string key that JSON writes alike are an error, not a coin toss.
func TestJSONKeyOrderIndependent(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{
		"clash.lua": exprRule("clash", `json.encode({ [1.5] = "number", ["1.5"] = "string" })`),
		"bad.lua": exprRule("bad", `(function()
      local t = {}
      for i = 1, 20 do t["k" .. i] = i end
      t.f = tostring
      t.n = 0/0
      return json.encode(t)
    end)()`),
	}))
	for range 20 {
		_, err := plan(t, s, "clash", "")
		require.ErrorContains(t, err, `json.encode: key "1.5" is both a number and a string`)
		_, err = plan(t, s, "bad", "")
		require.ErrorContains(t, err, "json.encode: value has no JSON form: function")
	}
}

// TestPayloadStringMustBeObject: a message may return its JSON as a
// string, but, as for a table, only an object is a message body: a list,
// a number or null would be refused by the channel after it was planned.
func TestPayloadStringMustBeObject(t *testing.T) {
	t.Parallel()
	msg := func(name, ret string) string {
		return `return rule {
  name = "` + name + `", channel = "mock",
  recipients = function(run) return { "alice" } end,
  message = function(run, to) return ` + ret + ` end,
}`
	}
	s := load(t, newDir(t, map[string]string{
		"obj.lua":  msg("obj", `' {"msgtype": "text", "text": {"content": "hi"}}'`),
		"list.lua": msg("list", `'[1, 2]'`),
		"null.lua": msg("null", `'null'`),
		"num.lua":  msg("num", `'42'`),
		"bad.lua":  msg("bad", `'{'`),
	}))
	out, err := plan(t, s, "obj", "")
	require.NoError(t, err)
	require.Equal(t, "hi", content(t, out[0].Payload))
	for _, rule := range []string{"list", "null", "num", "bad"} {
		_, err := plan(t, s, rule, "")
		require.ErrorContains(t, err, "message for alice: message returned a string that is not a JSON object", rule)
	}
}
