package host

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/heraldtype"
	"github.com/heraldhq/herald/plugins/mock"
	"github.com/heraldhq/herald/plugins/sdk"
)

// payloadOf is a JSON payload of exactly n bytes, mostly three-byte runes,
// so that a cut anywhere but at the end would show.
func payloadOf(n int) json.RawMessage {
	head, tail := `{"t":"`, `"}`
	body := n - len(head) - len(tail)
	return json.RawMessage(head + strings.Repeat("汉", body/3) + strings.Repeat("x", body%3) + tail)
}

// sizedTo is m with a payload making its share of a Send request exactly
// n bytes.
func sizedTo(t *testing.T, m heraldtype.Message, n int) heraldtype.Message {
	t.Helper()
	m.Payload = payloadOf(n - (sdk.SendSize([]sdk.Message{m}) - len(m.Payload)))
	for d := sdk.SendSize([]sdk.Message{m}) - n; d != 0; d = sdk.SendSize([]sdk.Message{m}) - n {
		m.Payload = payloadOf(len(m.Payload) - d) // the length's varint grew or shrank
	}
	return m
}

// A batch is one gRPC message of the plugin protocol, which the plugin's
// server takes up to sdk.MaxSendBytes. A batch over that used to fail
// whole ("received message larger than max"), as retryable, on every
// attempt, taking the messages that fit down with it. Now it goes in parts
// that fit, whole and byte for byte; a message that cannot fit alone is
// refused, permanently, with its size; one of exactly the limit goes.
func TestBatchOverTheWireLimitIsSplitNotFailed(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]ChannelConfig{"m": mockChannel(nil)}, nil)

	batch := outgoing(8, "size")
	for i := range 5 {
		batch[i].Payload = payloadOf(1 << 20) // 5 MiB together
	}
	batch[5] = sizedTo(t, batch[5], sdk.MaxSendBytes)
	batch[6] = sizedTo(t, batch[6], sdk.MaxSendBytes+1)
	require.Greater(t, sdk.SendSize(batch), sdk.MaxSendBytes)

	out, err := b.h.Send(context.Background(), "m", batch)
	require.NoError(t, err)
	require.Len(t, out, len(batch))
	got := map[string]heraldtype.Result{}
	for _, o := range out {
		got[o.ID] = o
	}
	for i, m := range batch {
		r := got[m.ID]
		if i == 6 {
			require.Equal(t, heraldtype.StatusPermanent, r.Status, "%+v", r)
			require.Contains(t, r.Error, fmt.Sprintf("%d bytes", sdk.MaxSendBytes+1))
			require.Contains(t, r.Error, fmt.Sprint(sdk.MaxSendBytes))
			continue
		}
		require.Equal(t, heraldtype.StatusSent, r.Status, "message %d: %.200v", i, r)
	}

	recs, err := mock.ReadOutbox(b.outbox("m"))
	require.NoError(t, err)
	require.Len(t, recs, 7)
	byKey := map[string][]byte{}
	for _, r := range recs {
		byKey[r.Key] = r.Payload
	}
	for i, m := range batch {
		if i != 6 {
			require.Equal(t, []byte(m.Payload), byKey[m.IdempotencyKey], "message %d arrived whole", i)
		}
	}
}

// A plugin's texts go into the replicated log with every result (one
// RecordResults holds a whole batch of up to 200). A plugin that quoted a
// proxy's HTML error page in Error used to put all of it there, 200 times
// over. The host keeps the start of each text, cut on a rune boundary,
// and says how long it was; secrets are removed before the cut, so no
// part of one survives it.
func TestLongResultTextsAreCut(t *testing.T) {
	t.Parallel()
	const secret = "secret-xyz-0123456789"
	in := &instance{name: "m", redact: newRedactor([]string{secret})}
	page := strings.Repeat("汉", (MaxResultText-5)/3) + secret + strings.Repeat("<p>502 Bad Gateway</p>", 50_000)
	out, err := in.checked([]sdk.Message{{ID: "a"}, {ID: "b"}}, []sdk.Result{
		{ID: "a", Status: sdk.StatusRetryable, Code: strings.Repeat("9", 10_000), Error: page},
		{ID: "b", Status: sdk.StatusPermanent, Code: "40003", Error: "short"},
	})
	require.NoError(t, err)
	r := out[0]
	for _, s := range []string{r.Error, r.Code} {
		require.LessOrEqual(t, len(s), MaxResultText+64, "%.100s…", s)
		require.True(t, utf8.ValidString(s))
	}
	require.NotContains(t, r.Error, secret[:5], "no piece of the secret survives the cut")
	require.True(t, strings.HasPrefix(r.Error, strings.Repeat("汉", (MaxResultText-5)/3)))
	require.Contains(t, r.Error, fmt.Sprintf("%d bytes in all", len(in.redact(page))))
	require.Equal(t, "40003", out[1].Code)
	require.Equal(t, "short", out[1].Error)
}

// verbose is a channel that answers every message Retryable with an
// error text of 40 KiB, as a plugin quoting a provider's error page
// would: 200 of them make an answer of 8 MiB.
type verbose struct{}

func (verbose) Info(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "verbose", Version: "1"}, nil
}

func (verbose) Configure(context.Context, json.RawMessage) error { return nil }

func (verbose) Send(_ context.Context, batch []sdk.Message) ([]sdk.Result, error) {
	page := strings.Repeat("<p>502 Bad Gateway</p>", 40<<10/22)
	out := make([]sdk.Result, len(batch))
	for i, m := range batch {
		out[i] = sdk.Result{ID: m.ID, Status: sdk.StatusRetryable, Error: page}
	}
	return out, nil
}

// The answer to a batch crosses the same gRPC boundary as the batch, but
// not under its 4 MiB limit: go-plugin's client takes answers of any size.
// Were it to stop, 200 long error texts would fail the whole answer, and
// messages the plugin had sent would be reported unsent and go again.
// The host reads the answer whole and keeps each text to MaxResultText.
func TestLongAnswerIsReadNotFailed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	linkPlugin(t, dir, "verbose")
	b := setup(t, map[string]ChannelConfig{"v": {Plugin: "verbose"}},
		func(c *Config) { c.PluginsDir, c.PluginSHA256 = dir, allowAll(t, dir) })
	batch := outgoing(200, "verbose")
	out, err := b.h.Send(context.Background(), "v", batch)
	require.NoError(t, err)
	require.Len(t, out, 200)
	for _, r := range out {
		require.Equal(t, heraldtype.StatusRetryable, r.Status)
		require.Contains(t, r.Error, "bytes in all]")
	}
}
