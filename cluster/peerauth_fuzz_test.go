package cluster

import (
	"errors"
	"testing"
	"time"
)

// FuzzPeerProof checks join, node-to-node and voucher proofs
// (PeerAuthHeader, VouchHeader) against what a stranger can send: any
// header text over any request. Properties: no panic; a header the fuzzer
// made never checks (it cannot know the secret) and is refused with
// ErrPeerAuth; a parsed header's fields are bounded; a proof this node
// signs for a message checks once, is refused as a replay the second
// time, and does not check for the same message with another body or for
// another node.
func FuzzPeerProof(f *testing.F) {
	f.Add("v2 ts=1800000000 nonce=00ff cluster=c1 node=n2 mac=00", "POST", "/v1/cluster/join", "alice", "n1", []byte(`{"id":"n3"}`))
	f.Add("v1 ts=1800000000 nonce=a mac=b", "POST", "/v1/tasks", "", "", []byte{})
	f.Add("v2 ts=1800000000 nonce=a nonce=b node=n2 mac=c", "GET", "/", "x", "y", []byte(nil))
	f.Add("v2 ts=-9223372036854775808 nonce=a cluster= node=n2 mac=c", "PUT", "/v1/rules/a/pause?x=1", "bob", "n3", []byte("{}"))
	f.Add("v2  ts=99999999999999999999 nonce==  cluster=c1 node=n2 mac=", "DELETE", "/%zz", "\n", "\x00", []byte("\xff"))
	now := time.Unix(1_800_000_000, 0)
	self := peerTarget{node: "n2", cluster: "c1", version: PeerAuthVersion}
	f.Fuzz(func(t *testing.T, header, method, target, caller, via string, body []byte) {
		if len(header)+len(method)+len(target)+len(caller)+len(via)+len(body) > 64<<10 {
			t.Skip()
		}
		pa := newPeerAuth("the cluster secret")
		pa.nowFunc = func() time.Time { return now }
		pa.started = now.Add(-time.Minute)
		m := signedMsg{kind: kindVouch, method: method, target: target, body: body, extra: []string{caller, via}}

		if p, ok := parseProof(header); ok {
			for _, v := range []string{p.ts, p.nonce, p.mac, p.cluster, p.node} {
				if len(v) > 64 {
					t.Fatalf("parseProof(%q) kept a field of %d bytes", header, len(v))
				}
			}
		}
		if _, err := pa.check(header, m, self); err == nil || !errors.Is(err, ErrPeerAuth) {
			t.Fatalf("a made-up header %q: %v, want a refusal with ErrPeerAuth", header, err)
		}

		signed, nonce, err := pa.sign(m, self)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := pa.check(signed, m, self); err != nil || got != nonce {
			t.Fatalf("own proof %q: nonce %q, %v; want %q", signed, got, err, nonce)
		}
		if _, err := pa.check(signed, m, self); !errors.Is(err, ErrPeerAuth) {
			t.Fatalf("a replayed proof: %v, want ErrPeerAuth", err)
		}
		other := m
		other.body = append(append([]byte(nil), body...), 'x')
		if signed, _, err = pa.sign(m, self); err != nil {
			t.Fatal(err)
		}
		if _, err := pa.check(signed, other, self); !errors.Is(err, ErrPeerAuth) {
			t.Fatalf("a proof over another body: %v, want ErrPeerAuth", err)
		}
		if _, err := pa.check(signed, m, peerTarget{node: "n3", cluster: "c1", version: PeerAuthVersion}); !errors.Is(err, ErrPeerAuth) {
			t.Fatalf("a proof for n2 checked at n3: %v, want ErrPeerAuth", err)
		}
	})
}
