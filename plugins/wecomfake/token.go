package wecomfake

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// tokenReply is gettoken's success body.
type tokenReply struct {
	AccessToken string `json:"access_token"`
	ExpiresIn   int    `json:"expires_in"`
}

// getToken answers GET /cgi-bin/gettoken. Callers hold s.mu.
func (s *Server) getToken(q url.Values) reply {
	corpID, secret := q.Get("corpid"), q.Get("corpsecret")
	if corpID == "" {
		return fail(41002)
	}
	if secret == "" {
		return fail(41004)
	}
	c, ok := s.corps[corpID]
	if !ok {
		return fail(40013)
	}
	a, ok := s.bySecret[secret]
	if !ok {
		return fail(40001)
	}
	if a.corp != c {
		return fail(40091)
	}
	if !a.enabled {
		return failf(40001, "application is disabled")
	}
	now := s.now()
	if s.cfg.TokenMode == TokenSticky && a.current != nil && !a.current.revoked && now.Before(a.current.expires) {
		return reply{body: tokenReply{AccessToken: a.current.value, ExpiresIn: int(a.current.expires.Sub(now) / time.Second)}}
	}
	s.forgetOldTokens(now)
	s.seq++
	sum := sha256.Sum256(fmt.Appendf(nil, "%s|%d|%d|%d", corpID, a.agentID, s.seq, now.UnixNano()))
	t := &token{value: "fk_" + hex.EncodeToString(sum[:]), app: a, expires: now.Add(s.cfg.TokenLifetime)}
	s.tokens[t.value] = t
	a.current = t
	return reply{body: tokenReply{AccessToken: t.value, ExpiresIn: int(s.cfg.TokenLifetime / time.Second)}}
}

// forgetOldTokens drops tokens expired for a day, so that a long-running
// fake does not grow without bound; until then an old token still answers
// 42001 rather than 40014.
func (s *Server) forgetOldTokens(now time.Time) {
	if len(s.tokens) < 1024 {
		return
	}
	for v, t := range s.tokens {
		if now.Sub(t.expires) > 24*time.Hour {
			delete(s.tokens, v)
		}
	}
}

// checkToken validates the access_token of a business call. Callers hold
// s.mu.
func (s *Server) checkToken(q url.Values) (*app, reply, bool) {
	v := q.Get("access_token")
	if v == "" {
		return nil, fail(41001), false
	}
	t, ok := s.tokens[v]
	if !ok || t.revoked {
		return nil, fail(40014), false
	}
	if !s.now().Before(t.expires) {
		return nil, fail(42001), false
	}
	return t.app, reply{}, true
}

// RevokeTokens invalidates the live tokens of an app (agentID 0: of every
// app of the corp; corpID "": of every corp), as WeCom may do early. Business
// calls with them get 40014. It returns how many it revoked.
func (s *Server) RevokeTokens(corpID string, agentID int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, t := range s.tokens {
		if t.revoked || (corpID != "" && t.app.corp.id != corpID) || (agentID != 0 && t.app.agentID != agentID) {
			continue
		}
		t.revoked = true
		n++
	}
	return n
}

// SetTokenLifetime changes the lifetime of tokens issued from now on.
func (s *Server) SetTokenLifetime(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d > 0 {
		s.cfg.TokenLifetime = d
	}
}

// SetTokenMode switches between sticky and rotating tokens.
func (s *Server) SetTokenMode(m TokenMode) error {
	if m != TokenSticky && m != TokenRotate {
		return fmt.Errorf("%w: token mode %q", ErrBadConfig, m)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.TokenMode = m
	return nil
}

// SetUnknownFields switches how message/send treats unknown top-level
// fields (accept or reject with 40058).
func (s *Server) SetUnknownFields(m UnknownFieldsMode) error {
	if m != UnknownFieldsAccept && m != UnknownFieldsReject {
		return fmt.Errorf("%w: unknown_fields %q (want accept or reject)", ErrBadConfig, m)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.UnknownFields = m
	return nil
}

// Token returns the app's current token, "" when none was issued; tests use
// it to call the API directly.
func (s *Server) Token(corpID string, agentID int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.corps[corpID]
	if !ok {
		return ""
	}
	a, ok := c.apps[agentID]
	if !ok || a.current == nil {
		return ""
	}
	return a.current.value
}

// ErrUnknownApp is returned by knobs naming an app the fake does not have.
var ErrUnknownApp = errors.New("wecomfake: unknown app")

// SetAppEnabled enables or disables an app at run time; a disabled app's
// live tokens then get 50003 on sends, and gettoken answers 40001.
func (s *Server) SetAppEnabled(corpID string, agentID int, enabled bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.corps[corpID]
	if !ok || c.apps[agentID] == nil {
		return fmt.Errorf("%w: corp %q agent %d", ErrUnknownApp, corpID, agentID)
	}
	c.apps[agentID].enabled = enabled
	return nil
}
