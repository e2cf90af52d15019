package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/plugins/wecomfake"
	"github.com/heraldhq/herald/rules"
)

func init() { register(newDevCmd) }

// devPortBaseDefault is `herald dev`'s default --port-base: Raft on
// 7101-7103, HTTP on 8101-8103, the WeCom fake on 8180-8181.
const devPortBaseDefault = 7100

// devPorts are the addresses of `herald dev` for a port base: Raft on
// base+1..3, HTTP on base+1001..1003, the WeCom fake on base+1080 (API) and
// base+1081 (what it received). --port-base moves them all, so a second
// Herald on the machine does not block the first.
type devPorts struct {
	nodes             []struct{ id, raft, http string }
	fourth            struct{ id, raft, http string } // suggested for a node joined by hand
	wecom, wecomAdmin string
}

func newDevPorts(base int) (devPorts, error) {
	if base < 1 || base+1081 > 65535 {
		return devPorts{}, fmt.Errorf("--port-base %d: want 1 to %d (it uses up to base+1081)", base, 65535-1081)
	}
	addr := func(p int) string { return fmt.Sprintf("127.0.0.1:%d", p) }
	var d devPorts
	for i := 1; i <= 3; i++ {
		d.nodes = append(d.nodes, struct{ id, raft, http string }{fmt.Sprintf("n%d", i), addr(base + i), addr(base + 1000 + i)})
	}
	d.fourth = struct{ id, raft, http string }{"n4", addr(base + 4), addr(base + 1004)}
	d.wecom, d.wecomAdmin = addr(base+1080), addr(base+1081)
	return d, nil
}

// The variable that carries the fake WeCom's app secret to the wecom
// channel (secrets travel by ${ENV} reference).
const devWecomSecretEnv = "HERALD_DEV_WECOM_SECRET"

// The fake's callback secrets for wecom_sales (WeCom's callback Token and
// EncodingAESKey), by ${ENV} reference as well.
const (
	devCallbackTokenEnv  = "HERALD_DEV_WECOM_CALLBACK_TOKEN"
	devCallbackAESKeyEnv = "HERALD_DEV_WECOM_CALLBACK_AES_KEY"
	devCallbackToken     = "herald-dev-callback"
	devCallbackAESKey    = "hEraLdDevCallbackAesKey0123456789abcdefghij"
	// devEnquiryWait is enquiry_timeout's WAIT in herald dev: a demo
	// takes a minute, not fifteen.
	devEnquiryWait = "1m"
)

func newDevCmd() *cobra.Command {
	var dataDir, logLevel, logFormat string
	var portBase int
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local three-node cluster with the example rules and the mock channel",
		Long: `Run three Herald nodes in one process (Raft 127.0.0.1:7101-7103, HTTP
127.0.0.1:8101-8103, a fake WeCom on 8180-8181; --port-base N moves them to
N+1..3, N+1001..1003 and N+1080..1081). On first run the example rules are written to
DATA_DIR/rules, where all three nodes watch them: edit them and see the
change. Messages go to the mock channel, whose outbox is DATA_DIR/outbox.jsonl.
Stop with Ctrl-C; run again to restart with the same data.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ports, err := newDevPorts(portBase)
			if err != nil {
				return err
			}
			if err := checkLogFormat(logFormat); err != nil {
				return err
			}
			return runDev(cmd.Context(), dataDir, logLevel, logFormat, ports)
		},
	}
	cmd.Flags().IntVar(&portBase, "port-base", devPortBaseDefault, "move every port: Raft base+1..3, HTTP base+1001..1003, WeCom fake base+1080..1081")
	cmd.Flags().StringVar(&dataDir, "data-dir", ".herald-dev", "where the three nodes keep their data, the rules and the outbox")
	cmd.Flags().StringVar(&logLevel, "log-level", "warn", "debug, info, warn or error")
	cmd.Flags().StringVar(&logFormat, "log-format", "text", "text or json (one JSON object per line on stderr)")
	return cmd
}

func runDev(ctx context.Context, dataDir, logLevel, logFormat string, ports devPorts) error {
	devNodes := ports.nodes
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	dataDir, err := filepath.Abs(dataDir)
	if err != nil {
		return err
	}
	rulesDir := filepath.Join(dataDir, "rules")
	if err := writeExamples(rulesDir); err != nil {
		return err
	}
	outbox := filepath.Join(dataDir, "outbox.jsonl")
	fake, err := startDevWecom(ctx, rulesDir, ports)
	if err != nil {
		return err
	}
	defer fake.stop()
	channels := map[string]map[string]any{
		"mock": {"plugin": "mock", "outbox": outbox},
		// The example rules' WeCom channels, wired to the fake: an app for
		// people, a group robot for operators.
		"wecom_sales": {"plugin": "wecom", "base_url": "http://" + ports.wecom, "corp_id": wecomfake.DemoCorpID,
			"agent_id": wecomfake.DemoAgentID, "secret": "${" + devWecomSecretEnv + "}",
			"callback_token": "${" + devCallbackTokenEnv + "}", "callback_aes_key": "${" + devCallbackAESKeyEnv + "}"},
		"wecom_ops": {"plugin": "wecom", "base_url": "http://" + ports.wecom, "robot_key": wecomfake.DemoRobotKey},
	}

	// While the three nodes stop, each sees its peers vanish; Raft's
	// complaints about that say nothing to a person at the terminal.
	quiet := &quietOnStop{Handler: newLogger(logLevel, logFormat).Handler(), stopping: new(atomic.Bool)}
	var nodes []*node
	defer func() {
		quiet.stopping.Store(true)
		// All at once, so that no node spends its last moments reporting
		// that its peers went away.
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Go(n.stop)
		}
		wg.Wait()
	}()
	applyGCPercent(nodeConfig{}, slog.New(quiet)) // the three nodes share the process
	for i, d := range devNodes {
		cfg := nodeConfig{
			NodeID: d.id, DataDir: filepath.Join(dataDir, d.id), RaftAddr: d.raft, HTTPAddr: d.http,
			Rules: rulesDir, Channels: channels, LogLevel: logLevel, devTimeouts: true, raftLogLevel: "error",
			// People from the fake WeCom's contacts, merged with people.csv.
			Directory: &directoryConfig{Channel: "wecom_sales", Interval: "1m"},
		}
		if i == 0 {
			cfg.Bootstrap = true
		} else {
			cfg.Join = devNodes[0].http
		}
		n, err := startNode(ctx, cfg, slog.New(quiet).With("node", d.id))
		if err != nil {
			return fmt.Errorf("node %s: %w", d.id, err)
		}
		nodes = append(nodes, n)
	}
	// The fake calls WeCom's callbacks back at n1 (a follower forwards
	// them to the leader).
	if err := fake.fake.SetCallback(wecomfake.CallbackConfig{CorpID: wecomfake.DemoCorpID,
		URL: "http://" + devNodes[0].http + "/v1/wecom/callback/wecom_sales", Token: devCallbackToken, AESKey: devCallbackAESKey}); err != nil {
		return err
	}
	addrFlag := "" // the CLI's default --addr is the default base's n1
	if devNodes[0].http != clusterDefaultAddr {
		addrFlag = " --addr " + devNodes[0].http
	}
	fmt.Printf(`Herald dev cluster is up: three nodes, one leader.

  HTTP API     http://%s  http://%s  http://%s   (GET /v1/status, /metrics)
  Raft         %s  %s  %s
  Rules        %s   (edit a .lua file: it reloads; a broken one keeps the last good version)
  Outbox       %s   (the mock channel: one JSON line per message)
  WeCom fake   http://%s   (channels wecom_sales and wecom_ops; what it received: http://%s/messages)
  Enquiries    a customer writes to 微信客服 (the fake calls Herald back); liuyang is alerted after %s unless answered:
                 curl -d '{"open_kfid":"wkdemo","external_userid":"wmcustomer1","text":"在吗？"}' http://%s/kf/message
               a servicer's reply cancels it: add "origin":5,"servicer_userid":"liuyang"
  Cards        a follow-up reminder is a card with buttons; click 已跟进 on http://%s/messages and the card
               changes to say who handled it, and the follow-up's other reminders are cancelled:
                 go run ./cmd/herald task submit follow-8812-1 --rule follow_up --in 10s%s --data '{"owner":"wangfang","customer":"华东机电","followup":"8812"}'
                 go run ./cmd/herald task submit follow-8812-2 --rule follow_up --in 1h%s --data '{"owner":"wangfang","customer":"华东机电","followup":"8812"}'
  Dashboard    http://%s/ui/
  Data         %s

Try, from another terminal:
  go run ./cmd/herald cluster status%s
  tail -f %s
  go run ./cmd/herald deliveries list%s

Join a fourth node:
  go run ./cmd/herald agent --node-id n4 --data-dir %s --raft-addr %s \
    --http-addr %s --join %s --rules %s

Ctrl-C stops all three nodes.
`, devNodes[0].http, devNodes[1].http, devNodes[2].http, devNodes[0].raft, devNodes[1].raft, devNodes[2].raft,
		rulesDir, outbox, ports.wecom, ports.wecomAdmin, devEnquiryWait, ports.wecomAdmin, ports.wecomAdmin, addrFlag, addrFlag,
		devNodes[0].http, dataDir, addrFlag, outbox, addrFlag,
		filepath.Join(dataDir, "n4"), ports.fourth.raft, ports.fourth.http, devNodes[0].http, rulesDir)
	<-ctx.Done()
	fmt.Println("\nstopping…")
	return nil
}

// writeExamples writes the embedded example rules and people file into dir
// the first time; later runs keep the user's edits.
func writeExamples(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.CopyFS(dir, rules.ExamplesFS()); err != nil {
		return err
	}
	// The enquiry demo waits a minute, not the example's fifteen.
	p := filepath.Join(dir, "enquiry_timeout.lua")
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p, bytes.Replace(b, []byte(`local WAIT = "15m"`), []byte(`local WAIT = "`+devEnquiryWait+`"`), 1), 0o644); err != nil {
		return err
	}
	// The card demo sends at any hour: the follow-up's quiet hours would
	// hold a reminder submitted in the evening until 08:00.
	p = filepath.Join(dir, "follow_up.lua")
	if b, err = os.ReadFile(p); err != nil {
		return err
	}
	return os.WriteFile(p, bytes.Replace(b, []byte(`  quiet_hours = { from = "22:00", to = "08:00" },`), []byte(`  -- quiet_hours = { from = "22:00", to = "08:00" }, -- off in herald dev`), 1), 0o644)
}

// devWecom is the fake WeCom server of `herald dev`.
type devWecom struct {
	api, admin *http.Server
	fake       *wecomfake.Server
}

// startDevWecom starts the fake WeCom server with the demo corp, whose
// members are the people of the rules directory, so that the example rules'
// messages reach someone.
func startDevWecom(ctx context.Context, rulesDir string, ports devPorts) (*devWecom, error) {
	corp := wecomfake.DemoCorp()
	rows, err := peopleRows(filepath.Join(rulesDir, "people.csv"))
	if err != nil {
		return nil, err
	}
	addDevDirectory(&corp, rows)
	fake := wecomfake.New(wecomfake.Config{Corps: []wecomfake.CorpConfig{corp}})
	for k, v := range map[string]string{devWecomSecretEnv: corp.Apps[0].Secret, devCallbackTokenEnv: devCallbackToken, devCallbackAESKeyEnv: devCallbackAESKey} {
		if err := os.Setenv(k, v); err != nil {
			return nil, err
		}
	}
	d := &devWecom{
		fake:  fake,
		api:   &http.Server{Handler: fake.Handler(), ReadHeaderTimeout: 10 * time.Second},
		admin: &http.Server{Handler: fake.AdminHandler(), ReadHeaderTimeout: 10 * time.Second},
	}
	for srv, addr := range map[*http.Server]string{d.api: ports.wecom, d.admin: ports.wecomAdmin} {
		ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
		if err != nil {
			d.stop()
			return nil, fmt.Errorf("wecom fake: %w", unwrapInUse(err))
		}
		go func() { _ = srv.Serve(ln) }()
	}
	return d, nil
}

func (d *devWecom) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = d.api.Shutdown(ctx)
	_ = d.admin.Shutdown(ctx)
}

// peopleRows reads the rows of a people CSV file by column; a missing file
// gives no one.
func peopleRows(path string) ([]map[string]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	if !slices.Contains(rows[0], "userid") {
		return nil, fmt.Errorf("%s: no userid column", path)
	}
	var out []map[string]string
	for _, row := range rows[1:] {
		m := map[string]string{}
		for i, h := range rows[0] {
			if i < len(row) {
				m[h] = row[i]
			}
		}
		if m["userid"] != "" {
			out = append(out, m)
		}
	}
	return out, nil
}

// Departments of the dev corp's directory (the demo corp has 1 and 2).
const (
	devDeptSales = 10
	devDeptEast  = 11
	devDeptOps   = 12
)

// addDevDirectory gives the demo corp the people of the rules directory,
// in WeCom departments that match their department column (sales, ops),
// led by their managers, plus two people only WeCom knows (小明 and 小红,
// in 华东销售 under lina) and a region-east tag: `herald dev` reads this
// directory, so weekly_report's preview shows the merge.
func addDevDirectory(corp *wecomfake.CorpConfig, rows []map[string]string) {
	corp.Departments = append(corp.Departments,
		wecomfake.DepartmentConfig{ID: devDeptSales, Name: "sales", Parent: 1, Leaders: []string{"zhangwei"}},
		wecomfake.DepartmentConfig{ID: devDeptEast, Name: "华东销售", Parent: devDeptSales, Leaders: []string{"lina"}},
		wecomfake.DepartmentConfig{ID: devDeptOps, Name: "ops", Parent: 1, Leaders: []string{"sunli"}},
	)
	for _, r := range rows {
		dept := 2
		switch r["department"] {
		case "sales":
			dept = devDeptSales
		case "ops":
			dept = devDeptOps
		}
		corp.Members = append(corp.Members, wecomfake.MemberConfig{UserID: r["userid"], Name: r["name"], Departments: []int{dept}})
	}
	corp.Members = append(corp.Members,
		wecomfake.MemberConfig{UserID: "xiaoming", Name: "小明", Departments: []int{devDeptEast}},
		wecomfake.MemberConfig{UserID: "xiaohong", Name: "小红", Departments: []int{devDeptEast}},
	)
	corp.Tags = append(corp.Tags, wecomfake.TagConfig{ID: 2, Name: "region-east", UserIDs: []string{"wangfang", "liuyang"},
		Departments: []int{devDeptEast}})
}

// quietOnStop drops Raft's log records once stopping is set.
type quietOnStop struct {
	slog.Handler
	stopping *atomic.Bool
}

func (h *quietOnStop) Handle(ctx context.Context, r slog.Record) error {
	if h.stopping.Load() {
		raft := false
		r.Attrs(func(a slog.Attr) bool {
			raft = a.Key == "component" && a.Value.String() == "raft"
			return !raft
		})
		if raft {
			return nil
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h *quietOnStop) WithAttrs(as []slog.Attr) slog.Handler {
	return &quietOnStop{Handler: h.Handler.WithAttrs(as), stopping: h.stopping}
}

func (h *quietOnStop) WithGroup(name string) slog.Handler {
	return &quietOnStop{Handler: h.Handler.WithGroup(name), stopping: h.stopping}
}
