package cluster

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
)

// Reads between nodes carry no operator's token. A node asks the other
// members for their status (the leader for builds, joins and moves for ids
// and addresses), their reports, and their rule sets (the status fan-out,
// every 5 s from the dashboard); it once sent its strongest token (admin)
// on each, readable off plain HTTP. With a cluster secret such a read now
// carries NodeReadHeader, an HMAC keyed by the secret over the method and
// the path, which the API takes as role read for these paths only; and a
// token no stronger than read when one is configured (Config.ReadToken),
// which a member on an older build needs. The credential has no time or
// nonce: captured, it replays only the read it was seen on, whose answer
// the wire already showed.

// NodeReadHeader carries a member's read credential: "v1 mac=HEX".
const NodeReadHeader = "X-Herald-Node-Read"

// nodeReadPaths are the reads the node credential stands for: what one
// member asks of another, and nothing an operator's read token would
// show besides.
var nodeReadPaths = map[string]bool{
	clusterPrefix + "status": true,
	reportPath:               true,
	"/v1/rules/hash":         true, // the API's, asked by cmd/herald's status fan-out
}

// nodeReadMAC is the credential of a read of path with method.
func nodeReadMAC(secret, method, path string) string {
	h := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(h, "herald-node-read-v1\n%s\n%s", method, path)
	return hex.EncodeToString(h.Sum(nil))
}

// nodeRead is the NodeReadHeader value of a read by a node holding secret,
// or "" when the path is not one of nodeReadPaths.
func nodeRead(secret, method, path string) string {
	if secret == "" || method != http.MethodGet || !nodeReadPaths[path] {
		return ""
	}
	return "v1 mac=" + nodeReadMAC(secret, method, path)
}

// PeerRead reports whether r is another member's read that proves this
// cluster's secret (NodeReadHeader): the API's auth takes it as role read
// without a token.
func (n *Node) PeerRead(r *http.Request) bool {
	got := r.Header.Get(NodeReadHeader)
	want := nodeRead(n.cfg.ClusterSecret, r.Method, r.URL.Path)
	return got != "" && want != "" && hmac.Equal([]byte(got), []byte(want))
}
