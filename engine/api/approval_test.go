package api_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/enginetest"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// setupApproval is setupAuth with a rule that needs approval over 1.
func setupApproval(t *testing.T) *apiBundle {
	t.Helper()
	n := enginetest.New()
	rules := enginetest.Rules{SetHash: "h", List: []engine.Rule{{Name: "mass", Schedule: "0 9 * * *", Timezone: "Asia/Shanghai", ApprovalOver: 1}}}
	return &apiBundle{node: n, h: api.New(api.Config{
		FSM: n.FSM, Replicator: n, Rules: rules, NowFunc: func() time.Time { return now0 },
		StatusFunc: func() api.Status { return api.Status{NodeID: "n1"} }, Tokens: testTokens,
	})}
}

// hold plans the fired run for two people and holds it, as the planner
// would.
func (b *apiBundle) hold(t *testing.T, key string) {
	b.apply(t, engine.CmdHoldRun, engine.HoldRun{RunKey: key, Over: 1, Count: 2, Preview: json.RawMessage(`{"msgtype":"text","content":"全员通知"}`), Now: now0})
	var nds []engine.NewDelivery
	for _, who := range []string{"a", "b"} {
		nds = append(nds, engine.NewDelivery{ID: engine.DeliveryID(key, who), Recipient: who, Channel: "mock", Payload: json.RawMessage(`{}`), NotBefore: now0, Deadline: now0.Add(time.Hour)})
	}
	b.apply(t, engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: nds})
	b.apply(t, engine.CmdFinishPlan, engine.FinishPlan{RunKey: key, Now: now0})
}

// A run fired by hand by one token is approved by another, never by the
// same, never by a read token; a second decision is 409; each accepted
// decision is audited.
func TestApproveAPI(t *testing.T) {
	t.Parallel()
	b := setupApproval(t)
	rec := b.call(http.MethodPost, "/v1/rules/mass/fire", "", "10.0.0.9:1", operateSecret)
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	var fired api.FireResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &fired))
	run, _ := b.node.FSM.Run(fired.Run)
	require.Equal(t, "ops", run.FiredToken, "the fire records its token")
	b.hold(t, fired.Run)

	rec = b.call(http.MethodGet, "/v1/runs", "", "10.0.0.9:1", readSecret)
	require.Contains(t, rec.Body.String(), `"state":"awaiting_approval"`)
	require.Contains(t, rec.Body.String(), `全员通知`, "the preview is listed")

	path := "/v1/runs/" + pathEscape(fired.Run)
	rec = b.call(http.MethodPost, path+"/approve", "", "10.0.0.9:1", operateSecret)
	require.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
	require.Contains(t, errorOf(t, rec), "another token must")
	rec = b.call(http.MethodPost, path+"/approve", "", "10.0.0.9:1", readSecret)
	require.Equal(t, http.StatusForbidden, rec.Code, "a read token may not decide")
	rec = b.call(http.MethodPost, path+"/approve", "", "10.0.0.9:1", adminSecret)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), `"released":2`)
	rec = b.call(http.MethodPost, path+"/reject", "", "10.0.0.9:1", adminSecret)
	require.Equal(t, http.StatusConflict, rec.Code, rec.Body.String())
	rec = b.call(http.MethodPost, "/v1/runs/nope/approve", "", "10.0.0.9:1", adminSecret)
	require.Equal(t, http.StatusNotFound, rec.Code)

	page := b.node.FSM.Audit(engine.AuditQuery{Limit: 10, Action: "run.approve"})
	require.NotEmpty(t, page.Records)
	require.Equal(t, "root", page.Records[0].Actor)
	require.Equal(t, fired.Run, page.Records[0].Target)
}

// Recall through the API: what is sent with a message id is asked for
// (answered pending when no leader recalls it in time), the rest refused
// one by one with the reason; bad requests are 400 and cost nothing.
func TestRecallAPI(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	key := engine.RunKey("daily", now0.Add(-time.Hour))
	b.apply(t, engine.CmdStartRun, engine.StartRun{Key: key, Rule: "daily", Slot: now0.Add(-time.Hour), Now: now0.Add(-time.Hour)})
	ids := []string{"aaaaaaaa00000000", "bbbbbbbb00000000", "cccccccc00000000"}
	var nds []engine.NewDelivery
	for i, id := range ids {
		nds = append(nds, engine.NewDelivery{ID: id, Recipient: string(rune('a' + i)), Channel: "mock", NotBefore: now0.Add(-time.Hour), Deadline: now0.Add(time.Hour)})
	}
	b.apply(t, engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: nds})
	claim := b.apply(t, engine.CmdClaim, engine.ClaimDeliveries{IDs: ids[:2], Leader: "n1", Now: now0.Add(-30 * time.Minute), Timeout: time.Minute}).(engine.ClaimResult)
	var res []engine.Settlement
	for i, c := range claim.Claimed {
		provider := ""
		if i == 0 {
			provider = "msg-1" // the second is a robot's: no msgid
		}
		res = append(res, engine.Settlement{ID: c.ID, Seq: c.Seq, Status: heraldtype.StatusSent, ProviderID: provider})
	}
	b.apply(t, engine.CmdRecordResults, engine.RecordResults{Leader: "n1", Now: now0.Add(-30 * time.Minute), Results: res})

	code, out := b.do(t, http.MethodPost, "/v1/deliveries/recall", `{"run":"`+key+`","wait":"0s","by":"ops"}`)
	require.Equal(t, http.StatusOK, code, out)
	pending := out["pending"].([]any)
	require.Len(t, pending, 1)
	require.Equal(t, ids[0], pending[0].(map[string]any)["id"])
	reasons := map[string]string{}
	for _, x := range out["not_recallable"].([]any) {
		m := x.(map[string]any)
		reasons[m["id"].(string)] = m["reason"].(string)
	}
	require.Contains(t, reasons[ids[1]], "robot")
	require.Contains(t, reasons[ids[2]], "not sent (pending)")
	d, _ := b.node.FSM.Delivery(ids[0])
	require.Equal(t, "loopback", d.Recall.By, "the verified actor, not the body's by")
	u, _ := b.node.FSM.Delivery(ids[2])
	require.Nil(t, u.Recall, "nothing changes for what cannot be recalled")

	for body, field := range map[string]string{
		`{}`:                                "body",
		`{"rule":"daily"}`:                  "since",
		`{"run":"nope"}`:                    "run",
		`{"ids":["zz"],"run":"x"}`:          "body",
		`{"run":"` + key + `","wait":"2h"}`: "wait",
	} {
		code, out := b.do(t, http.MethodPost, "/v1/deliveries/recall", body)
		require.Equal(t, http.StatusBadRequest, code, body)
		require.Equal(t, field, out["field"], body)
	}
}
