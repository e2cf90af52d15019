package wecomfake_test

import (
	"encoding/json"
	stdhtml "html"
	"net/http"
	"net/url"
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

// An interactive card shows its buttons (a form per button, posting the
// click back) until update_template_card replaces it, once per
// response_code; the page then shows the replacement.
func TestMessagesPageCardButtons(t *testing.T) {
	t.Parallel()
	b := setup(t, twoCorps())
	tok := b.token(t)
	r := b.send(t, tok, `{"touser":"alice","msgtype":"template_card","agentid":1000002,"template_card":{"card_type":"button_interaction","task_id":"d1",`+
		`"main_title":{"title":"客户跟进提醒"},"button_list":[{"text":"已跟进","key":"done"},{"text":"稍后","key":"later"}]}}`)
	require.Zero(t, r.errcode())
	code := r.str("response_code")
	require.NotEmpty(t, code)

	_, page := b.adminDo(t, http.MethodGet, "/messages", "")
	html := stdhtml.UnescapeString(string(page))
	require.Contains(t, html, `<button type="submit" data-key="done">已跟进</button>`)
	require.Contains(t, html, `name="task_id" value="d1"`)

	upd := `{"userids":["alice"],"agentid":1000002,"response_code":"` + code + `","template_card":{"card_type":"button_interaction","task_id":"d1","sub_title_text":"✅ 李娜 已跟进"}}`
	require.Zero(t, b.do(t, http.MethodPost, "/cgi-bin/message/update_template_card", url.Values{"access_token": {tok}}, upd).errcode())
	require.Equal(t, 40058, b.do(t, http.MethodPost, "/cgi-bin/message/update_template_card", url.Values{"access_token": {tok}}, upd).errcode(), "once")
	_, page = b.adminDo(t, http.MethodGet, "/messages", "")
	html = stdhtml.UnescapeString(string(page))
	require.Contains(t, html, "card updated")
	require.Contains(t, html, "✅ 李娜 已跟进")
	require.NotContains(t, html, `data-key="done"`, "no buttons once replaced")
}
