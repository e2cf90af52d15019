package sdk_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/plugins/sdk"
)

type recaller struct{ *fake }

func (recaller) Recall(_ context.Context, b []sdk.RecallMessage) ([]sdk.RecallResult, error) {
	out := make([]sdk.RecallResult, len(b))
	for i, m := range b {
		out[i] = sdk.RecallResult{ID: m.ID, Status: sdk.RecallDone, Code: m.ProviderID, Error: m.SentAt.UTC().Format(time.RFC3339)}
	}
	return out, nil
}

// Recall crosses the boundary with every field; a channel without it
// (as every plugin built before it) answers ErrRecallUnsupported.
func TestRecallIsOptional(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	batch := []sdk.RecallMessage{{ID: "d1", ProviderID: "msg1", Recipient: "alice", SentAt: at}}
	res, err := connect(t, recaller{&fake{}}).Recall(context.Background(), batch)
	require.NoError(t, err)
	require.Equal(t, []sdk.RecallResult{{ID: "d1", Status: sdk.RecallDone, Code: "msg1", Error: "2026-12-01T01:00:00Z"}}, res)

	_, err = connect(t, &fake{}).Recall(context.Background(), batch)
	require.ErrorIs(t, err, sdk.ErrRecallUnsupported)
}
