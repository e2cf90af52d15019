package wecomfake

import (
	"bytes"
	"encoding/json"
	"html/template"
	"net/http"
	"slices"
	"time"
)

// memberMessages is one member's (or robot's) messages, newest first.
type memberMessages struct {
	Who      string // userid, or "robot KEY"
	Messages []pageMsg
}

type pageMsg struct {
	Msg
	Text string // the content as the member reads it, or the decoded body
	// Buttons are an interactive card's, clickable until it is replaced;
	// UpdatedText is the replacement card, decoded.
	Buttons     []cardButton
	UpdatedText string
}

// groupMessages groups ms by member, newest message first, and members
// by their newest message.
func groupMessages(ms []Msg) []memberMessages {
	by := map[string]*memberMessages{}
	var order []*memberMessages
	for i := len(ms) - 1; i >= 0; i-- { // newest first
		m := ms[i]
		who := m.UserID
		if m.Robot != "" {
			who = "robot " + m.Robot
		}
		g, ok := by[who]
		if !ok {
			g = &memberMessages{Who: who}
			by[who] = g
			order = append(order, g)
		}
		pm := pageMsg{Msg: m, Text: readable(m)}
		if m.TaskID != "" && m.Updated == nil {
			pm.Buttons = buttonsOf(m.Body)
		}
		if m.Updated != nil {
			pm.UpdatedText = indented(m.Updated)
		}
		g.Messages = append(g.Messages, pm)
	}
	slices.SortStableFunc(order, func(a, b *memberMessages) int { return b.Messages[0].Time.Compare(a.Messages[0].Time) })
	out := make([]memberMessages, len(order))
	for i, g := range order {
		out[i] = *g
	}
	return out
}

// readable is what a person reads of m: a text's or markdown's content,
// else (cards, news, files) its body as indented JSON with Chinese left
// as it is (no \u escapes).
func readable(m Msg) string {
	if m.Content != "" && (m.MsgType == "text" || m.MsgType == "markdown") {
		return m.Content
	}
	return indented(m.Body)
}

// indented is JSON indented, with Chinese left as it is (no \u escapes).
func indented(raw []byte) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if enc.Encode(v) != nil {
		return string(raw)
	}
	return b.String()
}

var messagesPage = template.Must(template.New("messages").Funcs(template.FuncMap{
	"stamp": func(t time.Time) string { return t.Format("2006-01-02 15:04:05 -07:00") },
}).Parse(`<!doctype html>
<html lang="zh-CN"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>fake WeCom: messages received</title>
<style>
body{font-family:system-ui,"PingFang SC","Microsoft YaHei","Noto Sans CJK SC","WenQuanYi Micro Hei",sans-serif;margin:0;background:#f4f6f9;color:#1d2533}
header{background:#17233b;color:#e9eef8;padding:10px 20px}header a{color:#9fc0ff}
main{max-width:1100px;margin:0 auto;padding:14px}section{background:#fff;border:1px solid #e3e7ee;border-radius:8px;margin:0 0 14px;padding:10px 14px}
h2{font-size:16px;margin:4px 0 8px}.m{border-top:1px solid #eef1f5;padding:6px 0}.meta{color:#6b7588;font-size:12px}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:4px 0 0;font-family:inherit;font-size:14px}.tag{background:#eef1f6;border-radius:9px;padding:0 7px;font-size:12px}
.bad{background:#fdecec;color:#c62828}form.btn{display:inline-block;margin:6px 6px 0 0}form.btn button{padding:4px 12px}
pre.upd{background:#eef7ee;border-radius:6px;padding:4px 8px}
</style></head><body>
<header><b>fake WeCom</b> · {{.Total}} messages to {{len .Members}} members, newest first · times {{.Zone}} · <a href="?format=json">JSON</a></header>
<main>{{if not .Members}}<section>No messages received yet.</section>{{end}}
{{range .Members}}<section data-member="{{.Who}}"><h2>{{.Who}} <span class="tag">{{len .Messages}}</span></h2>
{{range .Messages}}<div class="m"><div class="meta">{{stamp .Time}} · {{.MsgType}}{{if .MsgID}} · {{.MsgID}}{{end}}{{if .Truncated}} · <span class="tag bad">truncated</span>{{end}}{{if .Recalled}} · <span class="tag bad">recalled</span>{{end}}</div><pre>{{.Text}}</pre>{{$m := .}}{{range .Buttons}}<form method="post" action="/cards/click" class="btn"><input type="hidden" name="corp_id" value="{{$m.CorpID}}"><input type="hidden" name="userid" value="{{$m.UserID}}"><input type="hidden" name="task_id" value="{{$m.TaskID}}"><input type="hidden" name="key" value="{{.Key}}"><button type="submit" data-key="{{.Key}}">{{.Text}}</button></form>{{end}}{{if .UpdatedText}}<div class="meta">card updated {{stamp .UpdatedAt}}</div><pre class="upd">{{.UpdatedText}}</pre>{{end}}</div>
{{end}}</section>{{end}}</main></body></html>
`))

// serveMessages answers GET /messages: a page per member, newest first,
// decoded; the records as JSON with ?format=json.
func (s *Server) serveMessages(w http.ResponseWriter, r *http.Request) {
	ms := s.Messages()
	if r.URL.Query().Get("format") == "json" {
		writeAdmin(w, http.StatusOK, nonNil(ms))
		return
	}
	zone := time.Local
	for i := range ms {
		ms[i].Time = ms[i].Time.In(zone)
	}
	var page bytes.Buffer
	if err := messagesPage.Execute(&page, map[string]any{"Total": len(ms), "Members": groupMessages(ms), "Zone": time.Now().In(zone).Format("MST (UTC-07:00)")}); err != nil {
		writeAdminError(w, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'")
	_, _ = w.Write(page.Bytes()) // a client gone away is not our error
}
