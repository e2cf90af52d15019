package mock_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/plugins/mock"
	"github.com/heraldhq/herald/plugins/sdk"
)

// The mock takes back what it delivered (an outbox line with recall set,
// which is no delivery), and nothing else.
func TestMockRecall(t *testing.T) {
	t.Parallel()
	outbox := filepath.Join(t.TempDir(), "outbox.jsonl")
	ch := mock.New()
	require.NoError(t, ch.Configure(context.Background(), json.RawMessage(`{"outbox":"`+outbox+`","channel":"mock"}`)))
	t.Cleanup(func() { _ = ch.Close() })
	res, err := ch.Send(context.Background(), []sdk.Message{{ID: "d1", IdempotencyKey: "k1", Recipient: "alice", Payload: json.RawMessage(`{}`), Attempt: 1}})
	require.NoError(t, err)
	out, err := ch.Recall(context.Background(), []sdk.RecallMessage{{ID: "d1", ProviderID: res[0].ProviderID}, {ID: "d2", ProviderID: "mock-nope"}})
	require.NoError(t, err)
	require.Equal(t, sdk.RecallDone, out[0].Status)
	require.Equal(t, sdk.RecallNotRecallable, out[1].Status)
	recs, err := mock.ReadOutbox(outbox)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"k1": 1}, mock.Delivered(recs), "a recall is no delivery")
	require.Equal(t, map[string]bool{"k1": true}, mock.Recalled(recs))
}
