package api

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// Without tokens, a loopback connection is taken for a person at this
// machine. Two things on this machine are not one: a page in the
// operator's browser whose name an attacker re-pointed at 127.0.0.1 (DNS
// rebinding: the browser sends the attacker's name as Host, and the
// request is "same-origin" to it), and a relay on this machine (a reverse
// proxy, an SSH or kubectl tunnel, a sidecar) that passes on anyone's
// request from a loopback address. The first is told by its Host: this
// node answers, without tokens, only to the names it is reached by on
// purpose. The second announces itself, if it is a proxy, with Forwarded
// or X-Forwarded-For; a tunnel does not, which is why README "Securing
// Herald" says to configure tokens before putting anything in front of a
// node.

// hostSet is the names and addresses this node answers to without tokens,
// besides loopback: its own http_addr host (Config.Hosts).
type hostSet map[string]bool

func newHostSet(hosts []string) hostSet {
	s := hostSet{}
	for _, h := range hosts {
		h = normalHost(h)
		// A wildcard listen address is no name: a page may send a
		// browser to 0.0.0.0, which reaches this machine.
		if ip := net.ParseIP(h); h != "" && (ip == nil || !ip.IsUnspecified()) {
			s[h] = true
		}
	}
	return s
}

// normalHost is a Host header's or an address's host: without the port or
// IPv6 brackets, lower case, without a final dot.
func normalHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// allows reports whether host (a Host header) names this node: a loopback
// name or address (localhost, 127.0.0.0/8, ::1), or one of s.
func (s hostSet) allows(host string) bool {
	h := normalHost(host)
	if h == "" {
		return false
	}
	if h == "localhost" || s[h] {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// probePaths are exempt from the Host check: a load balancer or a
// Kubernetes probe sends the address it dialled (the pod's IP), and they
// say nothing a token guards.
var probePaths = map[string]bool{"/v1/health": true, "/v1/ready": true}

// proxyHeaders are what a reverse proxy adds to the requests it passes on.
var proxyHeaders = []string{"Forwarded", "X-Forwarded-For"}

// notLocal says why a request to a node without tokens is refused (403),
// or "" when it may go on: its Host does not name this node (any method,
// the dashboard's page included: a rebinding page would read the state
// too), or it is a write that a proxy passed on.
func (s hostSet) notLocal(r *http.Request) string {
	if isRead(r) && probePaths[r.URL.Path] {
		return "" // what a probe reads tells a rebinding page nothing
	}
	if IsWecomCallback(r) {
		// WeCom calls from outside, under the public name and often
		// through a proxy; its msg_signature is the credential, checked
		// by the receiver whatever the connection.
		return ""
	}
	if !s.allows(r.Host) {
		return fmt.Sprintf("%s %s: Host %.200q is not this node's name: without API tokens this node answers only to localhost, "+
			"a loopback address or its http_addr host (a page that reached it under another name may be a DNS-rebinding attack); "+
			"address it by one of those, or configure `tokens:` (README, Securing Herald)", r.Method, r.URL.Path, r.Host)
	}
	if isRead(r) {
		return ""
	}
	for _, h := range proxyHeaders {
		if r.Header.Get(h) != "" {
			return fmt.Sprintf("%s %s: the request carries %s, so a proxy passed it on, and without API tokens this node "+
				"cannot tell its client from a person at this machine: configure `tokens:` on every node before putting a proxy "+
				"in front of one (README, Securing Herald)", r.Method, r.URL.Path, h)
		}
	}
	return ""
}
