package wecomfake_test

import (
	"encoding/json"
	stdhtml "html"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// GET /messages is a page a person reads: per member, newest first, the
// content decoded (Chinese as it is, no base64 or \u escapes); the
// records stay JSON at ?format=json.
func TestMessagesPage(t *testing.T) {
	t.Parallel()
	b := setup(t, twoCorps())
	tok := b.token(t)
	require.Zero(t, b.send(t, tok, textTo("alice", "第一条：日报已发")).errcode())
	require.Zero(t, b.send(t, tok, textTo("bob", "给 bob 的提醒")).errcode())
	require.Zero(t, b.send(t, tok, textTo("alice", "第二条：请于 18:00 前提交")).errcode())
	require.Zero(t, b.send(t, tok, `{"touser":"alice","msgtype":"textcard","agentid":1000002,"textcard":{"title":"生日快乐","description":"祝李娜生日快乐","url":"https://example.com"}}`).errcode())

	code, page := b.adminDo(t, http.MethodGet, "/messages", "")
	require.Equal(t, http.StatusOK, code)
	html := stdhtml.UnescapeString(string(page))
	require.Contains(t, html, `<html lang="zh-CN">`)
	require.Contains(t, html, "4 messages to 2 members")
	alice := strings.Index(html, `data-member="alice"`)
	bob := strings.Index(html, `data-member="bob"`)
	require.Positive(t, alice)
	require.Less(t, alice, bob, "the member with the newest message first")
	first, second, card := strings.Index(html, "第一条"), strings.Index(html, "第二条"), strings.Index(html, "祝李娜生日快乐")
	require.Less(t, card, second, "newest first within a member")
	require.Less(t, second, first)
	require.Contains(t, html, `"title": "生日快乐"`, "a card's body decoded, Chinese as it is")
	require.NotContains(t, html, `\u`)
	require.Contains(t, html, "2026-03-02 ", "times with the date")

	code, raw := b.adminDo(t, http.MethodGet, "/messages?format=json", "")
	require.Equal(t, http.StatusOK, code)
	var ms []map[string]any
	require.NoError(t, json.Unmarshal(raw, &ms))
	require.Len(t, ms, 4)
	require.Equal(t, "alice", ms[0]["userid"], "JSON keeps the order received")
}
