package rules

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckUnknownChannel: a typo in a rule's channel is an error at once,
// with the file, the channel's line and the channels there are.
func TestCheckUnknownChannel(t *testing.T) {
	t.Parallel()
	bad := strings.Replace(simpleRule("typo", `return {"a"}`), `channel = "mock"`, `channel = "mokc"`, 1)
	dir := newDir(t, map[string]string{"good.lua": simpleRule("good", `return {}`), "typo.lua": bad})
	require.Empty(t, Check(dir), "without a channel list nothing is checked")
	errs := CheckChannels(dir, []string{"wecom_sales", "mock"})
	require.Len(t, errs, 1)
	require.Equal(t, `typo.lua:3: channel "mokc" is not configured (have: mock, wecom_sales)`, errs[0].String())
	require.Empty(t, CheckChannels(dir, []string{"mock", "mokc"}))
}

// TestUnknownChannelKeepsLastGood: a reload that brings a channel typo
// keeps the rule's last good version in force and marks the file broken.
func TestUnknownChannelKeepsLastGood(t *testing.T) {
	t.Parallel()
	dir := newDir(t, map[string]string{"r.lua": versionRule("r", "v1")})
	s := load(t, dir, func(c *Config) { c.Channels = []string{"mock"} })
	hash := s.Hash()
	writeFiles(t, dir, map[string]string{"r.lua": strings.Replace(versionRule("r", "v2"), `channel = "mock"`, `channel = "mokc"`, 1)})
	_, err := s.Reload()
	require.NoError(t, err)
	st, ok := statusOf(s, "r.lua")
	require.True(t, ok)
	require.Equal(t, `channel "mokc" is not configured (have: mock)`, st.Error)
	require.Positive(t, st.Line)
	require.True(t, hasMessage(t, s, "r", "v1")(), "the last good version still plans")
	require.Equal(t, hash, s.Hash())
}

// TestSetChannelsLoadsARuleForANewChannel: a rule refused for naming a
// channel the node lacks loads as soon as a config reload adds it, with no
// change to the file.
func TestSetChannelsLoadsARuleForANewChannel(t *testing.T) {
	t.Parallel()
	dir := newDir(t, map[string]string{"r.lua": strings.Replace(versionRule("r", "v1"), `channel = "mock"`, `channel = "added"`, 1)})
	s := load(t, dir, func(c *Config) { c.Channels = []string{"mock"} })
	st, _ := statusOf(s, "r.lua")
	require.Contains(t, st.Error, `channel "added" is not configured`)
	require.NoError(t, s.SetChannels([]string{"added", "mock"}, 0))
	st, _ = statusOf(s, "r.lua")
	require.Empty(t, st.Error)
	require.True(t, hasMessage(t, s, "r", "v1")())
}
