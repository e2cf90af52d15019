package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/plugins/host"
	"github.com/heraldhq/herald/plugins/wecom"
	"github.com/heraldhq/herald/plugins/wecom/callback"
)

// The keys of a wecom channel that the node reads for WeCom's callbacks
// (the plugin never sees them): the callback's Token and EncodingAESKey,
// both ${ENV} references in practice.
const (
	keyCallbackToken  = "callback_token"
	keyCallbackAESKey = "callback_aes_key"
)

// nodeOnlyChannelKeys are channel keys consumed by the node, left out of
// the plugin's configuration.
var nodeOnlyChannelKeys = []string{"plugin", keyCallbackToken, keyCallbackAESKey}

// wecomCallbacks are the wecom channels with a callback: their crypters
// (for the receiver) and credentials (for kf/sync_msg on the leader).
type wecomCallbacks struct {
	crypters map[string]*callback.Crypter
	clients  map[string]*wecom.ContactsClient
}

// callbackSettings reads the callback keys of every wecom channel. A
// channel with one key and not the other, or without corp_id (the
// receiver id every callback is checked against), is refused.
func callbackSettings(channels map[string]map[string]any) (wecomCallbacks, error) {
	out := wecomCallbacks{crypters: map[string]*callback.Crypter{}, clients: map[string]*wecom.ContactsClient{}}
	for name, ch := range channels {
		if p, _ := ch["plugin"].(string); p != "wecom" {
			continue
		}
		tok, _ := ch[keyCallbackToken].(string)
		key, _ := ch[keyCallbackAESKey].(string)
		if tok == "" && key == "" {
			continue
		}
		if tok == "" || key == "" {
			return out, fmt.Errorf("config: channel %q: give both callback_token and callback_aes_key (WeCom's callback Token and EncodingAESKey) or neither", name)
		}
		str := func(k string) (string, error) {
			v, _ := ch[k].(string)
			return host.ExpandEnv("channels."+name+"."+k, v)
		}
		var err error
		if tok, err = str(keyCallbackToken); err != nil {
			return out, fmt.Errorf("config: %w", err)
		}
		if key, err = str(keyCallbackAESKey); err != nil {
			return out, fmt.Errorf("config: %w", err)
		}
		corp, err := str("corp_id")
		if err != nil || corp == "" {
			return out, fmt.Errorf("config: channel %q: a callback needs corp_id (WeCom checks each callback's receiver id against it)", name)
		}
		c, err := callback.New(tok, key, corp)
		if err != nil {
			return out, fmt.Errorf("config: channel %q: %w", name, err)
		}
		out.crypters[name] = c
		secret, _ := str("secret")
		base, _ := ch["base_url"].(string)
		if secret != "" {
			kc, err := wecom.NewContactsClient(wecom.ContactsConfig{BaseURL: base, CorpID: corp, Secret: secret,
				Client: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}})
			if err != nil {
				return out, fmt.Errorf("config: channel %q: %w", name, err)
			}
			out.clients[name] = kc
		}
	}
	return out, nil
}

// callbackHandler is the receiver of /v1/wecom/callback/{channel}: each
// verified callback becomes a RecordEvent, replicated through this node
// (a follower's POST reaches it forwarded to the leader).
func (n *node) callbackHandler(cb wecomCallbacks, reg prometheus.Registerer) (http.Handler, error) {
	if len(cb.crypters) == 0 {
		return nil, nil
	}
	h, err := callback.NewHandler(callback.HandlerConfig{
		Channels: cb.crypters, Logger: n.log, Registerer: reg,
		RecordFunc: func(ctx context.Context, channel string, ev callback.Event) (bool, error) {
			cmd, err := engine.Encode(engine.CmdRecordEvent, engine.RecordEvent{
				NewEvent: engine.NewEvent{ID: ev.ID, Type: ev.Type, Source: "wecom:" + channel, Data: ev.Data}, Now: time.Now()})
			if err != nil {
				return false, err
			}
			res, err := n.raft.Apply(ctx, cmd)
			if err != nil {
				return false, err
			}
			if e, ok := res.(error); ok {
				return false, e
			}
			return res.(engine.RecordEventResult).Created, nil
		},
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// kfSync is the leader's kf/sync_msg, through the channel's credentials.
func (cb wecomCallbacks) kfSync() engine.KfSyncFunc {
	if len(cb.clients) == 0 {
		return nil
	}
	return func(ctx context.Context, channel, openKfID, token, cursor string) (engine.KfPage, error) {
		c, ok := cb.clients[channel]
		if !ok {
			return engine.KfPage{}, fmt.Errorf("channel %s has no secret to call kf/sync_msg with", channel)
		}
		p, err := c.SyncKfMsg(ctx, openKfID, token, cursor)
		if err != nil {
			return engine.KfPage{}, err
		}
		out := engine.KfPage{NextCursor: p.NextCursor, HasMore: p.HasMore}
		for _, m := range p.Messages {
			out.Messages = append(out.Messages, engine.KfMessage{ID: m.MsgID, Data: m.Raw})
		}
		return out, nil
	}
}

// nodeOnlyKey reports a channel key the plugin is not given.
func nodeOnlyKey(k string) bool { return slices.Contains(nodeOnlyChannelKeys, strings.ToLower(k)) }
