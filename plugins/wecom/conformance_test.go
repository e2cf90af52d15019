package wecom_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/plugins/conformance"
	"github.com/heraldhq/herald/plugins/host"
	"github.com/heraldhq/herald/plugins/sdk"
	"github.com/heraldhq/herald/plugins/wecom"
	"github.com/heraldhq/herald/plugins/wecomfake"
)

// delivered counts what members really received of the message with key:
// the body carries the key (the channel's key_field).
func delivered(f *wecomfake.Server) func(t *testing.T, key string) int {
	return func(t *testing.T, key string) int {
		n := 0
		for _, m := range f.Messages() {
			var body struct {
				Key string `json:"herald_key"`
			}
			require.NoError(t, json.Unmarshal(m.Body, &body))
			if body.Key == key {
				n++
			}
		}
		return n
	}
}

func badConfigs() []json.RawMessage {
	return []json.RawMessage{
		json.RawMessage(`{"corp_id":"c","agent_id":1}`),
		json.RawMessage(`{"robot_key":"k","corp_id":"c"}`),
		json.RawMessage(`{"robot_key":"k","typo":1}`),
	}
}

func TestConformanceInProcess(t *testing.T) {
	t.Parallel()
	conformance.Run(t, func(t *testing.T) conformance.Subject {
		e := fakeOnly(t, wecomfake.Config{})
		fresh := func(t *testing.T) sdk.Channel {
			ch := wecom.New()
			ch.NowFunc = e.clock.Now
			ch.Logger = slog.New(slog.DiscardHandler)
			t.Cleanup(func() { _ = ch.Close() })
			return ch
		}
		return conformance.Subject{
			Channel:       fresh(t),
			Config:        json.RawMessage(appConfig(e.api.URL, wecomfake.DemoSecret, "")),
			BadConfigs:    badConfigs(),
			DeliveredFunc: delivered(e.fake),
			RestartFunc:   fresh,
		}
	})
}

func TestConformanceThroughPlugin(t *testing.T) {
	t.Parallel()
	conformance.Run(t, func(t *testing.T) conformance.Subject {
		e := fakeOnly(t, wecomfake.Config{})
		launch := func(t *testing.T) sdk.Channel {
			p, err := host.Launch(context.Background(), pluginCmd(t), nil)
			require.NoError(t, err)
			t.Cleanup(p.Close)
			return p.Channel()
		}
		return conformance.Subject{
			Channel:       launch(t),
			Config:        json.RawMessage(appConfig(e.api.URL, wecomfake.DemoSecret, "")),
			BadConfigs:    badConfigs(),
			DeliveredFunc: delivered(e.fake),
			RestartFunc:   launch,
		}
	})
}
