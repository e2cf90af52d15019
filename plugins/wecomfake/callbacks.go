package wecomfake

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/plugins/wecom/callback"
)

// Callbacks: the fake plays WeCom calling Herald back. Tell it where a
// corp's callback URL is (SetCallback, POST /callbacks), then it sends
// signed, encrypted callbacks: customer messages and servicer replies to
// a 微信客服 account (kf_msg_or_event, the messages then served by
// kf/sync_msg with cursors), card clicks (template_card_event) and new
// external contacts (change_external_contact). Faults: the same callback
// sent twice, held and sent out of order, a bad signature.

// PathKfSyncMsg is 微信客服's message pull.
const PathKfSyncMsg = "/cgi-bin/kf/sync_msg"

// callbackTarget is where a corp's callbacks go.
type callbackTarget struct {
	url     string
	crypter *callback.Crypter
}

// kfMsg is one 微信客服 message as kf/sync_msg returns it.
type kfMsg struct {
	MsgID          string         `json:"msgid"`
	OpenKfID       string         `json:"open_kfid"`
	ExternalUserID string         `json:"external_userid"`
	SendTime       int64          `json:"send_time"`
	Origin         int            `json:"origin"`
	ServicerUserID string         `json:"servicer_userid,omitempty"`
	MsgType        string         `json:"msgtype"`
	Text           map[string]any `json:"text,omitempty"`
}

// heldCallback is a callback held for an out-of-order release.
type heldCallback struct {
	corp string
	xml  string
}

// CallbackConfig tells the fake where a corp's callbacks go.
type CallbackConfig struct {
	CorpID string `json:"corp_id"`
	URL    string `json:"url"`
	Token  string `json:"token"`
	AESKey string `json:"aes_key"`
}

// SetCallback registers (or replaces) a corp's callback URL.
func (s *Server) SetCallback(c CallbackConfig) error {
	if c.CorpID == "" {
		c.CorpID = DemoCorpID
	}
	cr, err := callback.New(c.Token, c.AESKey, c.CorpID)
	if err != nil {
		return err
	}
	if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("callback url %q: want http(s)", c.URL)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.callbacks == nil {
		s.callbacks = map[string]*callbackTarget{}
	}
	s.callbacks[c.CorpID] = &callbackTarget{url: c.URL, crypter: cr}
	return nil
}

// CallbackFaults are the faults of one sent callback.
type CallbackFaults struct {
	// Twice sends the same callback twice (as WeCom's retries do).
	Twice bool `json:"twice"`
	// Hold keeps it for ReleaseHeld, which sends the held ones newest
	// first: out of order.
	Hold bool `json:"hold"`
	// BadSignature sends a wrong msg_signature (Herald must answer 403).
	BadSignature bool `json:"bad_signature"`
}

// KfMessage is a message to a 微信客服 account (POST /kf/message).
type KfMessage struct {
	CorpID         string `json:"corp_id"`
	OpenKfID       string `json:"open_kfid"`
	ExternalUserID string `json:"external_userid"`
	// Origin: 3 the customer, 5 a servicer replying from the WeCom client.
	Origin         int    `json:"origin"`
	ServicerUserID string `json:"servicer_userid"`
	Text           string `json:"text"`
	CallbackFaults
}

// CallbackResult is what the callback's receiver answered (HTTP status per
// attempt; none while held) and the message id (kf).
type CallbackResult struct {
	MsgID    string `json:"msgid,omitempty"`
	Statuses []int  `json:"statuses"`
}

// SendKfMessage stores a 微信客服 message (served by kf/sync_msg) and sends
// kf_msg_or_event.
func (s *Server) SendKfMessage(ctx context.Context, m KfMessage) (CallbackResult, error) {
	if m.CorpID == "" {
		m.CorpID = DemoCorpID
	}
	if m.OpenKfID == "" || m.ExternalUserID == "" {
		return CallbackResult{}, errors.New("open_kfid and external_userid are required")
	}
	if m.Origin == 0 {
		m.Origin = 3
	}
	if m.Origin == 5 && m.ServicerUserID == "" {
		return CallbackResult{}, errors.New("a servicer's reply (origin 5) needs servicer_userid")
	}
	s.mu.Lock()
	s.seq++
	now := s.now()
	msg := kfMsg{MsgID: fmt.Sprintf("kfmsg%06d", s.seq), OpenKfID: m.OpenKfID, ExternalUserID: m.ExternalUserID,
		SendTime: now.Unix(), Origin: m.Origin, MsgType: "text", Text: map[string]any{"content": m.Text}}
	if m.Origin == 5 {
		msg.ServicerUserID = m.ServicerUserID
	}
	if s.kf == nil {
		s.kf = map[string][]kfMsg{}
	}
	key := m.CorpID + "/" + m.OpenKfID
	s.kf[key] = append(s.kf[key], msg)
	token := fmt.Sprintf("ENC%08d", s.seq)
	s.mu.Unlock()
	xml := fmt.Sprintf("<xml><ToUserName><![CDATA[%s]]></ToUserName><CreateTime>%d</CreateTime><MsgType><![CDATA[event]]></MsgType>"+
		"<Event><![CDATA[kf_msg_or_event]]></Event><Token><![CDATA[%s]]></Token><OpenKfId><![CDATA[%s]]></OpenKfId></xml>",
		m.CorpID, now.Unix(), token, m.OpenKfID)
	res, err := s.deliver(ctx, m.CorpID, xml, m.CallbackFaults)
	res.MsgID = msg.MsgID
	return res, err
}

// CardClick is a click on an interactive template card (POST /callbacks/card).
type CardClick struct {
	CorpID       string `json:"corp_id"`
	AgentID      int    `json:"agent_id"`
	UserID       string `json:"userid"`
	EventKey     string `json:"event_key"`
	TaskID       string `json:"task_id"`
	CardType     string `json:"card_type"`
	ResponseCode string `json:"response_code"`
	CallbackFaults
}

// SendCardClick sends template_card_event.
func (s *Server) SendCardClick(ctx context.Context, c CardClick) (CallbackResult, error) {
	if c.CorpID == "" {
		c.CorpID = DemoCorpID
	}
	if c.UserID == "" || c.TaskID == "" {
		return CallbackResult{}, errors.New("userid and task_id are required")
	}
	if c.CardType == "" {
		c.CardType = "button_interaction"
	}
	s.mu.Lock()
	s.seq++
	now := s.now()
	if c.ResponseCode == "" {
		c.ResponseCode = fmt.Sprintf("RC%08d", s.seq)
	}
	for _, m := range s.rec.msgs { // the app that sent the card, unless told
		if c.AgentID == 0 && m.TaskID == c.TaskID && m.CorpID == c.CorpID && m.UserID == strings.ToLower(c.UserID) {
			c.AgentID = m.AgentID
		}
	}
	var a *app
	if co := s.corps[c.CorpID]; co != nil {
		a = co.apps[c.AgentID]
	}
	s.codes[c.ResponseCode] = &cardCode{at: now, app: a}
	s.mu.Unlock()
	xml := fmt.Sprintf("<xml><ToUserName><![CDATA[%s]]></ToUserName><FromUserName><![CDATA[%s]]></FromUserName><CreateTime>%d</CreateTime>"+
		"<MsgType><![CDATA[event]]></MsgType><Event><![CDATA[template_card_event]]></Event><EventKey><![CDATA[%s]]></EventKey>"+
		"<TaskId><![CDATA[%s]]></TaskId><CardType><![CDATA[%s]]></CardType><ResponseCode><![CDATA[%s]]></ResponseCode><AgentID>%d</AgentID></xml>",
		c.CorpID, c.UserID, now.Unix(), c.EventKey, c.TaskID, c.CardType, c.ResponseCode, c.AgentID)
	return s.deliver(ctx, c.CorpID, xml, c.CallbackFaults)
}

// ContactChange is change_external_contact (POST /callbacks/contact).
type ContactChange struct {
	CorpID         string `json:"corp_id"`
	ChangeType     string `json:"change_type"`
	UserID         string `json:"userid"`
	ExternalUserID string `json:"external_userid"`
	CallbackFaults
}

// SendContactChange sends change_external_contact (default
// add_external_contact).
func (s *Server) SendContactChange(ctx context.Context, c ContactChange) (CallbackResult, error) {
	if c.CorpID == "" {
		c.CorpID = DemoCorpID
	}
	if c.ChangeType == "" {
		c.ChangeType = "add_external_contact"
	}
	if c.UserID == "" || c.ExternalUserID == "" {
		return CallbackResult{}, errors.New("userid and external_userid are required")
	}
	s.mu.Lock()
	now := s.now()
	s.mu.Unlock()
	xml := fmt.Sprintf("<xml><ToUserName><![CDATA[%s]]></ToUserName><FromUserName><![CDATA[sys]]></FromUserName><CreateTime>%d</CreateTime>"+
		"<MsgType><![CDATA[event]]></MsgType><Event><![CDATA[change_external_contact]]></Event><ChangeType><![CDATA[%s]]></ChangeType>"+
		"<UserID><![CDATA[%s]]></UserID><ExternalUserID><![CDATA[%s]]></ExternalUserID></xml>",
		c.CorpID, now.Unix(), c.ChangeType, c.UserID, c.ExternalUserID)
	return s.deliver(ctx, c.CorpID, xml, c.CallbackFaults)
}

// ReleaseHeld sends the held callbacks, newest first.
func (s *Server) ReleaseHeld(ctx context.Context) ([]int, error) {
	s.mu.Lock()
	held := s.held
	s.held = nil
	s.mu.Unlock()
	var statuses []int
	for i := len(held) - 1; i >= 0; i-- {
		st, err := s.post(ctx, held[i].corp, held[i].xml, false)
		if err != nil {
			return statuses, err
		}
		statuses = append(statuses, st)
	}
	return statuses, nil
}

func (s *Server) deliver(ctx context.Context, corp, xml string, f CallbackFaults) (CallbackResult, error) {
	res := CallbackResult{Statuses: []int{}}
	if f.Hold {
		s.mu.Lock()
		s.held = append(s.held, heldCallback{corp: corp, xml: xml})
		s.mu.Unlock()
		return res, nil
	}
	n := 1
	if f.Twice {
		n = 2
	}
	for range n {
		st, err := s.post(ctx, corp, xml, f.BadSignature)
		if err != nil {
			return res, err
		}
		res.Statuses = append(res.Statuses, st)
	}
	return res, nil
}

// post encrypts and signs xml as WeCom does and POSTs it; each call
// encrypts afresh (a new random prefix), as a retry from WeCom would.
func (s *Server) post(ctx context.Context, corp, xml string, badSig bool) (int, error) {
	s.mu.Lock()
	t := s.callbacks[corp]
	s.seq++
	nonce := strconv.FormatUint(s.seq*2654435761%1e9, 36)
	ts := strconv.FormatInt(s.now().Unix(), 10)
	s.mu.Unlock()
	if t == nil {
		return 0, fmt.Errorf("no callback URL for corp %s: POST /callbacks first", corp)
	}
	enc, err := t.crypter.Encrypt([]byte(xml), rand.Reader)
	if err != nil {
		return 0, err
	}
	sig := t.crypter.Signature(ts, nonce, enc)
	if badSig {
		sig = strings.Repeat("0", len(sig))
	}
	q := url.Values{"msg_signature": {sig}, "timestamp": {ts}, "nonce": {nonce}}
	body := fmt.Sprintf("<xml><ToUserName><![CDATA[%s]]></ToUserName><Encrypt><![CDATA[%s]]></Encrypt><AgentID><![CDATA[]]></AgentID></xml>", corp, enc)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second) // WeCom's own limit
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url+"?"+q.Encode(), strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "text/xml")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("callback to %s: %w", t.url, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// kfSyncMsg serves kf/sync_msg: the account's messages after cursor (an
// opaque string; here the count already read, in base 36), at most limit
// (≤ 1000). Callers hold s.mu.
func (s *Server) kfSyncMsg(q url.Values, body []byte) reply {
	a, rep, ok := s.checkToken(q)
	if !ok {
		return rep
	}
	var req struct {
		Cursor   string `json:"cursor"`
		Token    string `json:"token"`
		Limit    int    `json:"limit"`
		OpenKfID string `json:"open_kfid"`
	}
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&req); err != nil {
		return fail(40058)
	}
	if req.OpenKfID == "" {
		return reply{errcode: 95000, errtext: "invalid open_kfid"}
	}
	if req.Limit <= 0 || req.Limit > 1000 {
		req.Limit = 1000
	}
	from := 0
	if req.Cursor != "" {
		n, err := strconv.ParseInt(req.Cursor, 36, 64)
		if err != nil || n < 0 {
			return reply{errcode: 95001, errtext: "invalid cursor"}
		}
		from = int(n)
	}
	msgs := s.kf[a.corp.id+"/"+req.OpenKfID]
	from = min(from, len(msgs))
	to := min(from+req.Limit, len(msgs))
	page := append([]kfMsg{}, msgs[from:to]...)
	hasMore := 0
	if to < len(msgs) {
		hasMore = 1
	}
	return reply{body: map[string]any{"next_cursor": strconv.FormatInt(int64(to), 36), "has_more": hasMore, "msg_list": page}}
}

func (s *Server) callbackAdmin(mux *http.ServeMux) {
	mux.HandleFunc("POST /callbacks", func(w http.ResponseWriter, r *http.Request) {
		var c CallbackConfig
		if !readAdmin(w, r, &c) {
			return
		}
		if err := s.SetCallback(c); err != nil {
			writeAdminError(w, http.StatusBadRequest, err)
			return
		}
		writeAdmin(w, http.StatusOK, map[string]string{"url": c.URL})
	})
	send := func(w http.ResponseWriter, res CallbackResult, err error) {
		if err != nil {
			writeAdminError(w, http.StatusBadRequest, err)
			return
		}
		writeAdmin(w, http.StatusOK, res)
	}
	mux.HandleFunc("POST /kf/message", func(w http.ResponseWriter, r *http.Request) {
		var m KfMessage
		if readAdmin(w, r, &m) {
			res, err := s.SendKfMessage(r.Context(), m)
			send(w, res, err)
		}
	})
	mux.HandleFunc("POST /callbacks/card", func(w http.ResponseWriter, r *http.Request) {
		var c CardClick
		if readAdmin(w, r, &c) {
			res, err := s.SendCardClick(r.Context(), c)
			send(w, res, err)
		}
	})
	mux.HandleFunc("POST /cards/click", s.cardClickForm)
	mux.HandleFunc("POST /callbacks/contact", func(w http.ResponseWriter, r *http.Request) {
		var c ContactChange
		if readAdmin(w, r, &c) {
			res, err := s.SendContactChange(r.Context(), c)
			send(w, res, err)
		}
	})
	mux.HandleFunc("POST /callbacks/release", func(w http.ResponseWriter, r *http.Request) {
		st, err := s.ReleaseHeld(r.Context())
		send(w, CallbackResult{Statuses: st}, err)
	})
}
