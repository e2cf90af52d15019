package wecom_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/plugins/wecom"
	"github.com/heraldhq/herald/plugins/wecomfake"
)

func contactsCorp() wecomfake.CorpConfig {
	return wecomfake.CorpConfig{
		ID:   "wwcontacts",
		Apps: []wecomfake.AppConfig{{AgentID: 1000002, Secret: "contacts-secret-0123456789"}},
		Departments: []wecomfake.DepartmentConfig{
			{ID: 1, Name: "总部"},
			{ID: 2, Name: "销售部", Parent: 1, Order: 10, Leaders: []string{"wangfang"}},
			{ID: 3, Name: "华东销售", Parent: 2, Order: 5, Leaders: []string{"lisi"}},
		},
		Members: []wecomfake.MemberConfig{
			{UserID: "boss", Name: "老板", Departments: []int{1}},
			{UserID: "wangfang", Name: "王芳", Departments: []int{2}},
			{UserID: "lisi", Name: "李四", Departments: []int{3, 2}},
			{UserID: "zhangsan", Name: "张三", Departments: []int{3}},
			{UserID: "ghost", Name: "离职", Departments: []int{3}, Hidden: true},
		},
		Tags: []wecomfake.TagConfig{
			{ID: 7, Name: "region-east", UserIDs: []string{"zhangsan", "ghost"}, Departments: []int{3}},
			{ID: 8, Name: "managers", UserIDs: []string{"wangfang", "lisi"}},
		},
	}
}

func startContacts(t *testing.T) (*wecomfake.Server, *wecom.ContactsClient) {
	t.Helper()
	fake := wecomfake.New(wecomfake.Config{Corps: []wecomfake.CorpConfig{contactsCorp()}})
	srv := httptest.NewServer(fake.Handler())
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() {
		hc.CloseIdleConnections()
		srv.Close()
	})
	c, err := wecom.NewContactsClient(wecom.ContactsConfig{BaseURL: srv.URL, CorpID: "wwcontacts",
		Secret: "contacts-secret-0123456789", Timeout: 2 * time.Second, Client: hc})
	require.NoError(t, err)
	return fake, c
}

func TestContactsFetch(t *testing.T) {
	t.Parallel()
	_, c := startContacts(t)
	got, err := c.Fetch(context.Background())
	require.NoError(t, err)
	require.Equal(t, []wecom.Department{
		{ID: 1, Name: "总部"},
		{ID: 2, ParentID: 1, Order: 10, Name: "销售部", Leaders: []string{"wangfang"}},
		{ID: 3, ParentID: 2, Order: 5, Name: "华东销售", Leaders: []string{"lisi"}},
	}, got.Departments)
	require.Equal(t, []wecom.User{
		{UserID: "boss", Name: "老板", Departments: []int{1}},
		{UserID: "lisi", Name: "李四", Departments: []int{3, 2}},
		{UserID: "wangfang", Name: "王芳", Departments: []int{2}},
		{UserID: "zhangsan", Name: "张三", Departments: []int{3}},
	}, got.Users, "a hidden member (outside the app's visible range) is not listed")
	require.Equal(t, []wecom.Tag{
		{ID: 7, Name: "region-east", UserIDs: []string{"zhangsan"}, Departments: []int{3}},
		{ID: 8, Name: "managers", UserIDs: []string{"lisi", "wangfang"}},
	}, got.Tags)
}

func TestContactsFetchFollowsMove(t *testing.T) {
	t.Parallel()
	fake, c := startContacts(t)
	require.NoError(t, fake.MoveMember("", "zhangsan", []int{2}))
	got, err := c.Fetch(context.Background())
	require.NoError(t, err)
	require.Contains(t, got.Users, wecom.User{UserID: "zhangsan", Name: "张三", Departments: []int{2}})
}

func TestContactsFetchFaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault wecomfake.Fault
		want  string
	}{
		{"errcode", wecomfake.Fault{Kind: wecomfake.FaultErrcode, Code: 60011, Path: "user/simplelist", Count: 1}, "errcode 60011"},
		{"busy", wecomfake.Fault{Kind: wecomfake.FaultErrcode, Code: -1, Path: "tag/get", Count: 1}, "errcode -1"},
		{"5xx", wecomfake.Fault{Kind: wecomfake.FaultHTTP, Code: 502, Path: "department/simplelist", Count: 1}, "HTTP 502"},
		{"malformed", wecomfake.Fault{Kind: wecomfake.FaultMalformed, Path: "department/get", Count: 1}, "not WeCom JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake, c := startContacts(t)
			require.NoError(t, fake.AddFault(tc.fault))
			_, err := c.Fetch(context.Background())
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "contacts-secret")
			got, err := c.Fetch(context.Background())
			require.NoError(t, err, "the fault was spent: the next fetch works")
			require.Len(t, got.Users, 4)
		})
	}
}

func TestContactsFetchTimeout(t *testing.T) {
	t.Parallel()
	fake, c := startContacts(t)
	_, err := c.Fetch(context.Background()) // a token first
	require.NoError(t, err)
	fake.SetLatency(3 * time.Second) // over the client's 2s
	_, err = c.Fetch(context.Background())
	require.ErrorContains(t, err, "timeout after 2s")
	fake.SetLatency(0)
}

func TestContactsFetchRefreshesRevokedToken(t *testing.T) {
	t.Parallel()
	fake, c := startContacts(t)
	_, err := c.Fetch(context.Background())
	require.NoError(t, err)
	require.Positive(t, fake.RevokeTokens("wwcontacts", 0))
	_, err = c.Fetch(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, fake.Calls(wecomfake.PathGetToken))
}

func TestContactsWrongSecret(t *testing.T) {
	t.Parallel()
	fake := wecomfake.New(wecomfake.Config{Corps: []wecomfake.CorpConfig{contactsCorp()}})
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	c, err := wecom.NewContactsClient(wecom.ContactsConfig{BaseURL: srv.URL, CorpID: "wwcontacts", Secret: "wrong-secret-value"})
	require.NoError(t, err)
	_, err = c.Fetch(context.Background())
	var ae *wecom.APIError
	require.True(t, errors.As(err, &ae))
	require.Equal(t, 40001, ae.Code)
	require.NotContains(t, err.Error(), "wrong-secret-value")
}
