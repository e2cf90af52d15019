package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/heraldhq/herald/engine"
)

// fuzzRoutes are the write routes whose JSON bodies come from outside:
// task submit and replace, events, fire, pause, retry, recall, approval
// and the directory's confirm.
var fuzzRoutes = []struct{ method, target string }{
	{http.MethodPost, "/v1/tasks"},
	{http.MethodPut, "/v1/tasks/enq-1"},
	{http.MethodPost, "/v1/events"},
	{http.MethodPost, "/v1/rules/daily/fire"},
	{http.MethodPost, "/v1/rules/daily/pause"},
	{http.MethodPost, "/v1/rules/daily/resume"},
	{http.MethodPost, "/v1/deliveries/retry"},
	{http.MethodPost, "/v1/deliveries/recall"},
	{http.MethodPost, "/v1/runs/r1/approve"},
	{http.MethodPost, "/v1/directory/confirm"},
}

// persistState is a snapshot's state without the header line, to tell
// whether a request changed it: a command the FSM refuses (no held
// directory refresh) still moves the applied index in the header.
func persistState(t *testing.T, s engine.Snapshot) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := s.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	_, state, _ := bytes.Cut(buf.Bytes(), []byte("\n"))
	return state
}

// FuzzWriteBodies sends arbitrary bodies to the write routes, through the
// whole handler (auth, body decoding, validation, the command) with the
// fake replicator. Properties: no panic; never a 5xx (bad input is the
// caller's: a 4xx); every answer is one JSON object, and a 4xx carries a
// reason; a 4xx costs no data (the state is what it was).
func FuzzWriteBodies(f *testing.F) {
	for route, body := range []string{
		`{"key":"enq-1","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00","data":{"b":1,"a":"x"}}`,
		`{"due_at":"2026-12-01T10:15:00Z","data":[1,2,{"x":null}]}`,
		`{"id":"e1","type":"signup","data":{"user":"zhangsan"}}`,
		`{"slot":"2026-12-01T09:00:00+08:00"}`,
		`{"reason":"maintenance 维护"}`,
		`{}`,
		`{"ids":["d1","d2"],"deadline":"2h"}`,
		`{"rule":"daily","since":"2026-11-30T00:00:00Z"}`,
		``,
		`{"hash":"abc","by":"ops"}`,
	} {
		f.Add(uint8(route), "application/json", []byte(body))
	}
	f.Add(uint8(0), "", []byte(`{"key":"a","rule":"daily","due_at":"2026-12-01T10:15:00Z"}{"key":"b"}`))
	f.Add(uint8(2), "text/plain", []byte(`{"id":"e1"}`))
	f.Add(uint8(0), "application/merge-patch+json", []byte(`{"key":"a","rule":"nope","due_at":"9999-99-99","data":{"a":{"a":{"a":{"a":1}}}}}`))
	f.Add(uint8(3), "application/json; charset=\"", []byte(`{"slot":1e400}`))
	b := setupAPI(f) // one node for every input: inputs that succeed move the state on, as a live one would
	f.Fuzz(func(t *testing.T, route uint8, contentType string, body []byte) {
		if len(body) > 64<<10 || len(contentType) > 256 {
			t.Skip()
		}
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		req := httptest.NewRequest(rt.method, rt.target, bytes.NewReader(body))
		req.RemoteAddr = "127.0.0.1:40000"
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		// Taking a snapshot is cheap (it freezes the maps); persisting
		// one allocates 1 MiB, so it is done only for a refusal that
		// reached the FSM.
		before, err := b.node.FSM.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		was := b.node.FSM.AppliedIndex()
		rec := httptest.NewRecorder()
		b.h.ServeHTTP(rec, req)
		if rec.Code >= 500 || rec.Code < 200 {
			t.Fatalf("%s %s %q: %d %s", rt.method, rt.target, body, rec.Code, rec.Body)
		}
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %s %q: %d, the answer is not a JSON object: %v: %q", rt.method, rt.target, body, rec.Code, err, rec.Body)
		}
		if rec.Code >= 400 {
			if reason, _ := out["error"].(string); reason == "" {
				t.Fatalf("%s %s %q: %d without a reason: %s", rt.method, rt.target, body, rec.Code, rec.Body)
			}
			if b.node.FSM.AppliedIndex() == was {
				return
			}
			after, err := b.node.FSM.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(persistState(t, before), persistState(t, after)) {
				t.Fatalf("%s %s %q: refused with %d %s, and the state changed", rt.method, rt.target, body, rec.Code, rec.Body)
			}
		}
	})
}
