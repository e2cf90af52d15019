package main

import "net"

// ownHosts are the names and addresses a node without tokens answers to
// besides loopback ones (engine/api local.go refuses any other Host): its
// http_addr host, and the host the other members reach it at (the Raft
// host, when http_addr listens everywhere). A wildcard http_addr
// (0.0.0.0:8101, :8101) is reached at any of the machine's addresses, so
// those count too. A name that resolves here but is none of these (one an
// attacker re-pointed at this machine) is refused.
func ownHosts(cfg nodeConfig) []string {
	hosts := []string{cfg.HTTPAddr, advertisedHTTPAddr(cfg.HTTPAddr, cfg.RaftAddr)}
	host, _, err := net.SplitHostPort(cfg.HTTPAddr)
	if ip := net.ParseIP(host); err == nil && (host == "" || (ip != nil && ip.IsUnspecified())) {
		addrs, _ := net.InterfaceAddrs() // none: only the names above
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				hosts = append(hosts, ipn.IP.String())
			}
		}
	}
	return hosts
}
