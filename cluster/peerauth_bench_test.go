package cluster

import (
	"strconv"
	"testing"
	"time"
)

// A leader remembers the nonce of every voucher and join it took for two
// PeerAuthWindows: with many forwarded writes that is many nonces, and
// taking one more must not cost time in proportion to them.
func BenchmarkRememberNonce(b *testing.B) {
	pa := newPeerAuth("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_700_000_000, 0)
	for i := range 100_000 {
		pa.remember("old"+strconv.Itoa(i), now)
	}
	b.ResetTimer()
	for i := range b.N {
		pa.remember("new"+strconv.Itoa(i), now)
	}
}

// Nonces are forgotten once they cannot matter (two windows), so the set
// stays bounded by the rate of signed requests; a replay inside that time
// is still caught.
func TestRememberedNoncesExpire(t *testing.T) {
	t.Parallel()
	pa := newPeerAuth("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_700_000_000, 0)
	if !pa.remember("a", now) || pa.remember("a", now.Add(2*PeerAuthWindow)) {
		t.Fatal("a nonce seen inside two windows is not a replay")
	}
	later := now.Add(2*PeerAuthWindow + time.Minute)
	if !pa.remember("b", later) {
		t.Fatal("a new nonce refused")
	}
	pa.mu.Lock()
	_, kept := pa.seen["a"]
	pa.mu.Unlock()
	if kept {
		t.Fatal("a nonce older than two windows is still remembered")
	}
}
