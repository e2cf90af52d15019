package engine

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// plannedDelivery is a delivery as AddDeliveries makes it: all UTC, no
// monotonic reading (as commands decode).
func plannedDelivery() *Delivery {
	slot := time.Date(2026, 12, 3, 1, 0, 0, 0, time.UTC)
	return &Delivery{ID: "d1", RunKey: "daily@2026-12-03T01:00:00Z", Rule: "daily", Slot: slot, Recipient: "ann",
		Channel: "wecom", Payload: json.RawMessage(`{"content":"hi"}`), Priority: heraldtype.PriorityHigh,
		NotBefore: slot, Deadline: slot.Add(time.Hour), State: StatePending}
}

// TestDeliveryRecordGivesBackWhatItTook: every delivery comes back from
// the state's form equal to what went in, whichever of its fields is set
// (each field of Delivery in turn, found by reflection, so a field added
// later that the compact form forgets fails here), and the usual ones (a
// planned, a sent, an expired delivery) take the compact form.
func TestDeliveryRecordGivesBackWhatItTook(t *testing.T) {
	t.Parallel()
	require.LessOrEqual(t, unsafe.Sizeof(deliveryRec{}), uintptr(144))
	roundTrip := func(t *testing.T, d *Delivery) *deliveryRec {
		t.Helper()
		r := compactDelivery(d)
		require.Equal(t, d, r.delivery())
		return r
	}
	planned := plannedDelivery()
	require.Nil(t, roundTrip(t, planned).full, "a planned delivery is held whole")

	sent := *planned
	sent.State, sent.Attempts, sent.Claim, sent.ProviderID = StateSent, 1, settledClaim(3), "msg-1"
	sent.SentAt = planned.Slot.Add(1500 * time.Millisecond)
	sent.EndedAt = sent.SentAt
	sent.Retry, sent.NoRetry = []time.Duration{time.Minute}, false
	require.Nil(t, roundTrip(t, &sent).full, "a sent delivery is held whole")
	// A retry list comes back as it went in: none (nil), do not retry
	// (empty), waits; the run's fields are shared, not mixed up.
	for _, retry := range [][]time.Duration{nil, {}, {time.Second, -time.Nanosecond, 90 * time.Minute}} {
		again := sent
		again.Retry = retry
		require.Nil(t, roundTrip(t, &again).full)
	}
	other := sent
	other.Rule, other.Channel = "other", "wecom"
	require.Equal(t, "other", roundTrip(t, &other).getRule())
	require.Equal(t, sent.Rule, roundTrip(t, &sent).getRule())
	late := sent
	late.Claim = &Claim{Seq: 1000} // beyond the shared settled claims
	require.Nil(t, roundTrip(t, &late).full)

	expired := *planned
	expired.State, expired.EndedAt, expired.NoRetry, expired.Retry = StateExpired, planned.Deadline, true, nil
	expired.Slot = time.Unix(0, 0).UTC() // the epoch is an instant, not the zero time
	require.Nil(t, roundTrip(t, &expired).full)

	// Instants the compact form cannot give back exactly are held whole.
	shanghai := time.FixedZone("CST", 8*3600)
	for name, slot := range map[string]time.Time{
		"zone":           planned.Slot.In(shanghai),
		"monotonic":      time.Now(),
		"1677":           time.Unix(0, noInstant).UTC(),
		"year 3000":      time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC),
		"zero in a zone": time.Time{}.In(shanghai),
	} {
		d := *planned
		d.Slot = slot
		require.NotNil(t, roundTrip(t, &d).full, name)
	}
	leased := *planned
	leased.State, leased.Claim = StateClaimed, &Claim{Seq: 1, Leader: "n1", Term: 2, At: planned.Slot, ExpiresAt: planned.Slot.Add(time.Minute)}
	require.NotNil(t, roundTrip(t, &leased).full)

	// Each field of Delivery set on its own.
	typ := reflect.TypeFor[Delivery]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			d := *planned
			v := reflect.ValueOf(&d).Elem().Field(i)
			setSample(t, v)
			roundTrip(t, &d)
		})
	}
}

// setSample sets v to a value other than the one plannedDelivery gives.
func setSample(t *testing.T, v reflect.Value) {
	t.Helper()
	switch x := v.Addr().Interface().(type) {
	case *time.Time:
		*x = time.Date(2026, 12, 4, 2, 3, 4, 5, time.UTC)
	case *json.RawMessage:
		*x = json.RawMessage(`{"content":"other"}`)
	case *[]time.Duration:
		*x = []time.Duration{time.Second, time.Minute}
	case *[]string:
		*x = []string{"m1", "m2"}
	case *[]AttemptFailure:
		*x = []AttemptFailure{{At: time.Unix(1, 0).UTC(), Attempt: 1, Status: heraldtype.StatusRetryable, Code: "45009", Error: "busy"}}
	case *[]CardClick:
		*x = []CardClick{{Event: "e1", UserID: "ann"}}
	case *Claim:
		*x = Claim{Seq: 7}
	case **Claim:
		*x = &Claim{Seq: 7}
	case **Recall:
		*x = &Recall{}
	default:
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Int, reflect.Int64, reflect.Int32:
			v.SetInt(v.Int() + 3)
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			v.SetUint(v.Uint() + 1)
		default:
			t.Fatalf("no sample for a field of type %s: add one", v.Type())
		}
	}
}
