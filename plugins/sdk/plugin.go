package sdk

import (
	"context"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	channelv1 "github.com/heraldhq/herald/plugins/proto/channel/v1"
)

// Handshake is the go-plugin handshake shared by Herald and every channel
// plugin. The magic cookie only tells a user who runs a plugin by hand that
// it is not a command; ProtocolVersion makes the host refuse a plugin built
// against another version of the channel protocol.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "HERALD_PLUGIN",
	MagicCookieValue: "herald-channel-4f1c2a9e",
}

// PluginName is the name under which a channel is dispensed over go-plugin.
const PluginName = "channel"

// Plugin binds Channel to go-plugin's gRPC transport. Serve uses it with
// Impl set; the host uses it with Impl nil to obtain a *Client.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Channel

	stuckAfter time.Duration // Serve's, from EnvStuckAfter; 0: the default
}

// GRPCServer registers Impl's gRPC server.
func (p *Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	after := p.stuckAfter
	if after <= 0 {
		after = DefaultStuckAfter
	}
	channelv1.RegisterChannelServer(s, newServer(p.Impl, after))
	return nil
}

// GRPCClient returns a *Client speaking to the plugin over c.
func (p *Plugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewClient(c), nil
}

// PluginSet is the go-plugin plugin set of a channel plugin.
func PluginSet(impl Channel) plugin.PluginSet {
	return plugin.PluginSet{PluginName: &Plugin{Impl: impl}}
}

var _ plugin.GRPCPlugin = (*Plugin)(nil)
