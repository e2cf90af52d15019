package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	channelv1 "github.com/heraldhq/herald/plugins/proto/channel/v1"
)

// Client is a Channel reached over gRPC: the host's side of the protocol.
// It is safe for concurrent use.
type Client struct {
	rpc channelv1.ChannelClient
}

// NewClient returns a Client speaking the channel protocol over conn.
func NewClient(conn grpc.ClientConnInterface) *Client {
	return &Client{rpc: channelv1.NewChannelClient(conn)}
}

// InfoVersion is like Info and also returns the protocol version the plugin
// was built with.
func (c *Client) InfoVersion(ctx context.Context) (Info, int, error) {
	resp, err := c.rpc.Info(ctx, &channelv1.InfoRequest{})
	if err != nil {
		return Info{}, 0, fromStatus(ctx, "info", err)
	}
	info := Info{Name: resp.GetName(), Version: resp.GetVersion()}
	for _, l := range resp.GetLimits() {
		info.Limits = append(info.Limits, limitFromWire(l))
	}
	return info, int(resp.GetProtocolVersion()), nil
}

// Info implements Channel.
func (c *Client) Info(ctx context.Context) (Info, error) {
	info, _, err := c.InfoVersion(ctx)
	return info, err
}

// Configure implements Channel.
func (c *Client) Configure(ctx context.Context, config json.RawMessage) error {
	_, err := c.rpc.Configure(ctx, &channelv1.ConfigureRequest{ConfigJson: config})
	return fromStatus(ctx, "configure", err)
}

// Send implements Channel.
func (c *Client) Send(ctx context.Context, batch []Message) ([]Result, error) {
	req := &channelv1.SendRequest{Batch: make([]*channelv1.Message, len(batch))}
	for i, m := range batch {
		req.Batch[i] = messageToWire(m)
	}
	resp, err := c.rpc.Send(ctx, req)
	if err != nil {
		return nil, fromStatus(ctx, "send", err)
	}
	results := make([]Result, len(resp.GetResults()))
	for i, r := range resp.GetResults() {
		results[i] = resultFromWire(r)
	}
	return results, nil
}

// Health asks the plugin whether it can deliver. A transport error (the
// plugin does not answer) comes back as the error; a channel that answers
// but cannot deliver comes back as a nil error and a non-empty reason.
func (c *Client) Health(ctx context.Context) (reason string, err error) {
	resp, err := c.rpc.Health(ctx, &channelv1.HealthRequest{})
	if err != nil {
		return "", fromStatus(ctx, "health", err)
	}
	return resp.GetError(), nil
}

// fromStatus turns a gRPC error back into a plain one: the caller's own
// cancellation or deadline as ctx.Err() (so errors.Is works across the
// plugin boundary), anything else with the plugin's message and the RPC's
// name. The gRPC status stays reachable with status.FromError.
func fromStatus(ctx context.Context, rpc string, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("plugin %s: %w", rpc, ctxErr)
	}
	if _, ok := ctx.Deadline(); ok && status.Code(err) == codes.DeadlineExceeded {
		// The plugin's side ends a call at the deadline the caller sent
		// it (a plugin's own deadline errors cross as Unknown), and its
		// reset may come back before the caller's own timer has fired.
		return fmt.Errorf("plugin %s: %w", rpc, context.DeadlineExceeded)
	}
	return &RPCError{RPC: rpc, Err: err}
}

// RPCError is a failed call to a plugin that the caller did not cancel.
type RPCError struct {
	RPC string // "info", "configure", "send" or "health"
	Err error  // the gRPC status error
}

// Error gives the plugin's own message, prefixed with the RPC's name.
func (e *RPCError) Error() string {
	if s, ok := status.FromError(e.Err); ok {
		if s.Code() == codes.Unknown {
			return "plugin " + e.RPC + ": " + s.Message()
		}
		return fmt.Sprintf("plugin %s: %s: %s", e.RPC, s.Code(), s.Message())
	}
	return "plugin " + e.RPC + ": " + e.Err.Error()
}

// Unwrap returns the gRPC status error.
func (e *RPCError) Unwrap() error { return e.Err }

// GRPCStatus lets status.FromError and status.Code see through the wrapper.
func (e *RPCError) GRPCStatus() *status.Status {
	s, _ := status.FromError(e.Err)
	return s
}

// server is the plugin's side of the protocol.
type server struct {
	channelv1.UnimplementedChannelServer
	impl Channel
	// stuckAfter is how long a Send may go on after its call was
	// cancelled before the plugin counts as stuck.
	stuckAfter time.Duration
	stuck      atomic.Int64 // Sends running past stuckAfter since their cancel
}

// NewServer returns the gRPC server of the channel protocol for impl.
func NewServer(impl Channel) channelv1.ChannelServer {
	return newServer(impl, DefaultStuckAfter)
}

func newServer(impl Channel, stuckAfter time.Duration) *server {
	return &server{impl: impl, stuckAfter: stuckAfter}
}

// watchStuck counts the Send of ctx as stuck while it goes on longer than
// stuckAfter after ctx ended; call the returned func when it returns.
// Health then fails, and the host restarts the plugin: a Send that ignores
// its cancellation (a deadlock in the plugin's send path) would otherwise
// hold every later batch until its claim ran out, in a plugin that
// answers Health and looks well.
func (s *server) watchStuck(ctx context.Context) (returned func()) {
	var mu sync.Mutex
	var timer *time.Timer
	done, counted := false, false
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		timer = time.AfterFunc(s.stuckAfter, func() {
			mu.Lock()
			defer mu.Unlock()
			if !done {
				counted = true
				s.stuck.Add(1)
			}
		})
	})
	return func() {
		stop()
		mu.Lock()
		defer mu.Unlock()
		done = true
		if timer != nil {
			timer.Stop()
		}
		if counted {
			s.stuck.Add(-1)
		}
	}
}

func (s *server) Info(ctx context.Context, _ *channelv1.InfoRequest) (*channelv1.InfoResponse, error) {
	info, err := s.impl.Info(ctx)
	if err != nil {
		return nil, toStatus(ctx, err)
	}
	resp := &channelv1.InfoResponse{
		Name:            info.Name,
		Version:         info.Version,
		ProtocolVersion: ProtocolVersion,
	}
	for _, l := range info.Limits {
		resp.Limits = append(resp.Limits, limitToWire(l))
	}
	return resp, nil
}

func (s *server) Configure(ctx context.Context, req *channelv1.ConfigureRequest) (*channelv1.ConfigureResponse, error) {
	if err := s.impl.Configure(ctx, req.GetConfigJson()); err != nil {
		return nil, toStatus(ctx, err)
	}
	return &channelv1.ConfigureResponse{}, nil
}

func (s *server) Send(ctx context.Context, req *channelv1.SendRequest) (*channelv1.SendResponse, error) {
	defer s.watchStuck(ctx)()
	batch := make([]Message, len(req.GetBatch()))
	for i, m := range req.GetBatch() {
		batch[i] = messageFromWire(m)
	}
	results, err := s.impl.Send(ctx, batch)
	if err != nil {
		return nil, toStatus(ctx, err)
	}
	resp := &channelv1.SendResponse{Results: make([]*channelv1.Result, len(results))}
	for i, r := range results {
		resp.Results[i] = resultToWire(r)
	}
	return resp, nil
}

func (s *server) Health(ctx context.Context, _ *channelv1.HealthRequest) (*channelv1.HealthResponse, error) {
	if n := s.stuck.Load(); n > 0 {
		// An error, not a reason: the process is stuck, and a restart cures it.
		return nil, status.Errorf(codes.Internal, "%d Send call(s) still running %s after they were cancelled: the plugin is stuck", n, s.stuckAfter)
	}
	hc, ok := s.impl.(HealthChecker)
	if !ok {
		return &channelv1.HealthResponse{}, nil
	}
	if err := hc.Health(ctx); err != nil {
		return &channelv1.HealthResponse{Error: err.Error()}, nil
	}
	return &channelv1.HealthResponse{}, nil
}

// toStatus keeps the call's own end recognisable on the host's side: an
// error of a call whose context ended crosses as Canceled or
// DeadlineExceeded. Any other error, a context error of the plugin's own
// among them (an upstream call it gave up on), crosses as Unknown: the host
// reads Canceled without its own cancellation as the plugin dying under
// the call, and would kill a healthy plugin and send the batch again.
func toStatus(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		switch {
		case errors.Is(err, context.Canceled):
			return status.Error(codes.Canceled, err.Error())
		case errors.Is(err, context.DeadlineExceeded):
			return status.Error(codes.DeadlineExceeded, err.Error())
		}
	}
	return status.Error(codes.Unknown, err.Error())
}

var (
	_ Channel                 = (*Client)(nil)
	_ channelv1.ChannelServer = (*server)(nil)
)
