package wecomfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// errText holds the short texts of the codes the fake answers.
var errText = map[int]string{
	-1:     "system busy",
	40001:  "invalid secret",
	40003:  "invalid userid",
	40008:  "invalid message type",
	40013:  "invalid corpid",
	40014:  "invalid access_token",
	40032:  "invalid touser size",
	40033:  "invalid charset. please check your request, if include \\uxxxx will create fail!",
	40056:  "invalid agentid",
	40058:  "invalid Request Parameter",
	40074:  "news message not support safe",
	40091:  "secret is invalid",
	41001:  "access_token missing",
	41002:  "corpid missing",
	41004:  "corpsecret missing",
	41011:  "missing agentid",
	42001:  "access_token expired",
	42052:  "message recall time exceeded",
	44004:  "empty content",
	45002:  "content size out of limit",
	45009:  "api freq out of limit",
	45033:  "api concurrent out of limit",
	50003:  "application is disabled",
	60020:  "not allow to access from your ip",
	60021:  "userid not in app's visible range",
	81013:  "user & party & tag all invalid",
	82001:  "All touser & toparty & totag invalid",
	82002:  "invalid party size",
	82003:  "invalid tag size",
	93000:  "invalid webhook url",
	93004:  "webhook disabled",
	301002: "access_token and agentid mismatch",
}

// ErrText is the short text the fake uses for an errcode.
func ErrText(code int) string {
	if code == 0 {
		return "ok"
	}
	if t, ok := errText[code]; ok {
		return t
	}
	return "unknown error"
}

// fail builds an error reply with the code's standard text.
func fail(code int) reply { return reply{errcode: code, errtext: ErrText(code)} }

// failf builds an error reply with a specific text.
func failf(code int, format string, args ...any) reply {
	return reply{errcode: code, errtext: fmt.Sprintf(format, args...)}
}

// errmsg formats the errmsg as WeCom does today.
func (s *Server) errmsg(code int, text, ip string) string {
	if code == 0 {
		return "ok"
	}
	if s.cfg.ErrmsgStyle == ErrmsgBare {
		return text
	}
	s.mu.Lock()
	s.seq++
	hint := fmt.Sprintf("%d_%d_%08x", s.now().Unix(), s.seq, uint32(s.seq*2654435761))
	s.mu.Unlock()
	return fmt.Sprintf("%s, hint: [%s], from ip: %s, more info at https://open.work.weixin.qq.com/devtool/query?e=%d", text, hint, ip, code)
}

// write answers a reply: JSON with errcode and errmsg first, plus the
// Error-Code and Error-Msg headers.
func (s *Server) write(w http.ResponseWriter, rep reply, ip string) {
	status := rep.status
	if status == 0 {
		status = http.StatusOK
	}
	if rep.raw != nil {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(status)
		_, _ = w.Write(rep.raw)
		return
	}
	text := rep.errtext
	if text == "" {
		text = ErrText(rep.errcode)
	}
	msg := s.errmsg(rep.errcode, text, ip)
	var buf bytes.Buffer
	buf.WriteString(`{"errcode":`)
	buf.WriteString(strconv.Itoa(rep.errcode))
	buf.WriteString(`,"errmsg":`)
	writeJSON(&buf, msg)
	if rep.body != nil {
		// The extra fields follow errcode and errmsg, as in WeCom's replies.
		var extra bytes.Buffer
		writeJSON(&extra, rep.body)
		b := bytes.TrimSpace(extra.Bytes())
		if len(b) > 2 { // not "{}"
			buf.WriteByte(',')
			buf.Write(b[1 : len(b)-1])
		}
	}
	buf.WriteByte('}')
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.Header().Set("Error-Code", strconv.Itoa(rep.errcode))
	w.Header().Set("Error-Msg", text)
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// writeJSON encodes v without HTML escaping and without the trailing newline.
func writeJSON(buf *bytes.Buffer, v any) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	if n := buf.Len(); n > 0 && buf.Bytes()[n-1] == '\n' {
		buf.Truncate(n - 1)
	}
}
