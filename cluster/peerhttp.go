package cluster

import "net/http"

// peerIdleConnsPerHost is how many idle connections node-to-node HTTP
// keeps to one member. A follower passes every write it is sent on to the
// leader over one of these: with net/http's default of two, 64 clients
// writing through a follower at once made it dial (and the leader accept)
// a TCP connection for nearly every write, 15 % of the follower's CPU in
// `herald bench tasks`. A member has a few peers, so this bounds the idle
// connections a node keeps at a few hundred.
const peerIdleConnsPerHost = 256

// PeerTransport is a transport for node-to-node HTTP (join, forwarding,
// status fan-out): net/http's default transport, keeping enough idle
// connections to each member for the writes a follower forwards at once.
// The caller sets TLS on it when the cluster has certificates.
func PeerTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0 // no limit over all hosts; per host below
	t.MaxIdleConnsPerHost = peerIdleConnsPerHost
	return t
}
