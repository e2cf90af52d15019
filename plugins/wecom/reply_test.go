package wecom_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/plugins/sdk"
	"github.com/heraldhq/herald/plugins/wecomfake"
)

// TestRepliesParsedLeniently: WeCom's optional reply fields may be absent,
// empty strings or present, and numbers may come as strings. A success
// must stay a success whatever shape its optional fields take; a reply
// misread as "not WeCom JSON" is retried, and a delivered message sent
// again and again.
func TestRepliesParsedLeniently(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		token    string // gettoken's reply
		send     string // message/send's reply
		status   sdk.Status
		provider string
		code     string
	}{
		{"numbers as strings", `{"errcode":"0","errmsg":"ok","access_token":"tok-1234","expires_in":"7200"}`,
			`{"errcode":"0","errmsg":"ok","msgid":"m1"}`, sdk.StatusSent, "m1", ""},
		{"msgid as a number", `{"errcode":0,"errmsg":"ok","access_token":"tok-1234","expires_in":7200}`,
			`{"errcode":0,"errmsg":"ok","invaliduser":"","msgid":1234567890123}`, sdk.StatusSent, "1234567890123", ""},
		{"optional fields absent", `{"errcode":0,"access_token":"tok-1234"}`,
			`{"errcode":0}`, sdk.StatusSent, "", ""},
		{"empty strings and nulls", `{"errcode":0,"errmsg":"","access_token":"tok-1234","expires_in":""}`,
			`{"errcode":0,"errmsg":"ok","invaliduser":null,"invalidparty":"","unlicenseduser":"","msgid":"m2","response_code":""}`, sdk.StatusSent, "m2", ""},
		{"errcode as a string", `{"errcode":0,"access_token":"tok-1234","expires_in":7200}`,
			`{"errcode":"45009","errmsg":"api freq out of limit"}`, sdk.StatusRateLimited, "", "45009"},
		{"errcode not a number", `{"errcode":0,"access_token":"tok-1234","expires_in":7200}`,
			`{"errcode":"busy","errmsg":"ok"}`, sdk.StatusRetryable, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var tokens atomic.Int32
			stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == wecomfake.PathGetToken {
					tokens.Add(1)
					fmt.Fprint(w, c.token)
					return
				}
				fmt.Fprint(w, c.send)
			}))
			t.Cleanup(stub.Close)
			e := fakeOnly(t, wecomfake.Config{})
			ch := e.channel(t, appConfig(stub.URL, "s3cret", ""))
			r := sendOne(t, ch, msg("a", "alice", text("hi")))
			require.Equal(t, c.status, r.Status, "%+v", r)
			require.Equal(t, c.provider, r.ProviderID)
			require.Equal(t, c.code, r.Code)
			r = sendOne(t, ch, msg("b", "bob", text("hi")))
			require.Equal(t, c.status, r.Status, "%+v", r)
			require.Equal(t, int32(1), tokens.Load(), "the token is cached however its reply was shaped")
		})
	}
}
