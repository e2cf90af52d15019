package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/enginetest"
	"github.com/heraldhq/herald/plugins/wecomfake"
)

func TestWecomFakeCommand(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &enginetest.Buffer{}
	cmd := newWecomFakeCmd()
	cmd.SetOut(out)
	cmd.SetArgs([]string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	apiRe := regexp.MustCompile(`API\s+(http://\S+)`)
	var base string
	require.Eventually(t, func() bool {
		m := apiRe.FindStringSubmatch(out.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	}, 10*time.Second, 10*time.Millisecond)
	require.Contains(t, out.String(), "secret="+wecomfake.DemoSecret)
	require.Contains(t, out.String(), "robot_key="+wecomfake.DemoRobotKey)

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(base + "/cgi-bin/gettoken?corpid=" + wecomfake.DemoCorpID + "&corpsecret=" + wecomfake.DemoSecret)
	require.NoError(t, err)
	var r struct {
		ErrCode     int    `json:"errcode"`
		AccessToken string `json:"access_token"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
	resp.Body.Close()
	require.Zero(t, r.ErrCode)
	require.NotEmpty(t, r.AccessToken)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("wecom-fake did not stop")
	}
}

func TestWecomFakeCommandBadConfig(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "fake.yaml")
	require.NoError(t, os.WriteFile(path, []byte("token_mode: wobbly\n"), 0o600))
	cmd := newWecomFakeCmd()
	cmd.SetOut(&enginetest.Buffer{})
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--config", path, "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"})
	err := cmd.ExecuteContext(context.Background())
	require.ErrorIs(t, err, wecomfake.ErrBadConfig)
	require.Contains(t, err.Error(), "token_mode")
}
