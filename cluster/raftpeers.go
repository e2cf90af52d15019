package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"time"
)

// Who may open a Raft connection. The CA decides whether a peer is a
// Herald node of this cluster's PKI; it cannot tell a member from a node
// that was removed (`herald cluster remove`) and still holds a valid
// certificate: through the Raft port such a node could ask for votes or
// claim to lead with a higher term. So, with TLS, an inbound connection is
// also checked against the Raft configuration: its certificate's common
// name must be the id of a server in it.
//
// The check applies only where it cannot lock a member out:
//   - when this node's own certificate's common name is its node id
//     (`herald tls init` names each node so). A cluster whose
//     certificates name hosts instead is checked by CA alone, as before:
//     its peers' names say nothing of their ids.
//   - when this node is in its own configuration and knows a live leader
//     (or leads) that is in it too. A node that is not in a cluster yet
//     (empty configuration: the leader that adds it connects first), that
//     has no leader (just restarted, an election), or whose leader is not
//     in its configuration (restarted or re-added with a data dir whose
//     configuration predates the current leader: raft takes the leader
//     from its first RPC, before the entries that add it, which may take a
//     snapshot and many RPCs to arrive), takes any peer the CA signed: it
//     must hear from a leader its configuration does not know of yet.
//
// The configuration read is raft's latest, committed or not, so a node
// being added is a member to the leader from the moment it is appended;
// followers learn of it with the entry (a vote request from it before
// that is refused, and retried). Connections accepted before a member was
// removed are closed by sweepRaftPeers.

// admitRaftPeer reports why the peer whose certificate is given may not
// open a Raft connection to this node, or nil.
func (n *Node) admitRaftPeer(peer *x509.Certificate) error {
	if own := ownCertificate(n.cfg.TLS); own == nil || !certNames(own, n.cfg.NodeID) {
		return nil
	}
	// A removed member is refused whatever this node knows of its leader:
	// it may be the one asking for votes.
	if _, removed := n.sm.RemovedMember(peer.Subject.CommonName); removed {
		return fmt.Errorf("its certificate's common name %q is a removed member's id (an admin readmits it: herald cluster readmit)", peer.Subject.CommonName)
	}
	_, leader := n.raft.LeaderWithID()
	if leader == "" {
		return nil
	}
	servers := n.raft.GetConfiguration().Configuration().Servers
	ids := make([]string, 0, len(servers))
	self, led := false, false
	for _, s := range servers {
		if certNames(peer, string(s.ID)) {
			return nil
		}
		self = self || string(s.ID) == n.cfg.NodeID
		led = led || s.ID == leader
		ids = append(ids, string(s.ID))
	}
	if !self || !led {
		return nil
	}
	return fmt.Errorf("its certificate's common name %q is the id of no member of this cluster (%s): a removed member, or a node not added yet",
		peer.Subject.CommonName, strings.Join(ids, ", "))
}

// certNames reports whether c is node id's certificate: its common name
// is id (`herald tls init` names each node so). DNS names do not count:
// they are the hosts a certificate may serve, and `--hosts` puts every
// host in every node's certificate, so when node ids are host names every
// certificate would name every member.
func certNames(c *x509.Certificate, id string) bool {
	return c.Subject.CommonName == id
}

// ownCertificate is the certificate this node presents on the Raft port
// now (a CertStore's current one), or nil if it cannot be told.
func ownCertificate(c *tls.Config) *x509.Certificate {
	if c == nil {
		return nil
	}
	if c.GetConfigForClient != nil {
		if conf, err := c.GetConfigForClient(&tls.ClientHelloInfo{}); err == nil && conf != nil {
			c = conf
		}
	}
	var cert *tls.Certificate
	switch {
	case len(c.Certificates) > 0:
		cert = &c.Certificates[0]
	case c.GetCertificate != nil:
		cert, _ = c.GetCertificate(&tls.ClientHelloInfo{})
	}
	if cert == nil || len(cert.Certificate) == 0 {
		return nil
	}
	if cert.Leaf != nil {
		return cert.Leaf
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil
	}
	return leaf
}

// refusedRaftPeer logs a refused Raft connection, once a minute per
// certificate name: a removed node that still runs retries every election
// timeout.
func (n *Node) refusedRaftPeer(peer *x509.Certificate, remote string, why error) {
	name := peer.Subject.CommonName
	now := time.Now()
	n.refusedMu.Lock()
	last, seen := n.refusedAt[name]
	due := !seen || now.Sub(last) >= time.Minute
	if due {
		n.refusedAt[name] = now
	}
	n.refusedMu.Unlock()
	if due {
		n.log.Warn("refused a raft connection", "remote", remote, "why", why)
	}
}

// sweepRaftPeers closes, every ReconcileInterval, the inbound Raft
// connections whose peer is no longer admitted: a member removed after it
// connected keeps no connection.
func (n *Node) sweepRaftPeers(ctx context.Context) {
	t := time.NewTicker(n.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n.stream.sweep()
	}
}
