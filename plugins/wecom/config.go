package wecom

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Defaults of Config.
const (
	// BaseURLDefault is WeCom's API host.
	BaseURLDefault = "https://qyapi.weixin.qq.com"
	// TimeoutDefault bounds one HTTP call.
	TimeoutDefault = 10 * time.Second
	// DuplicateCheckIntervalDefault is WeCom's longest duplicate-check
	// window; it must cover the retry horizon (1m+5m+15m by default, plus
	// rate-limit waits and leader changes).
	DuplicateCheckIntervalDefault = 4 * time.Hour
	// ConcurrencyDefault bounds the HTTP calls in flight within one batch.
	ConcurrencyDefault = 8
	// CallsPerSecondDefault is the channel-wide send rate declared to the
	// host (WeCom answers 45033 to too many concurrent calls).
	CallsPerSecondDefault = 50
	// ConfigHoldDefault is how long a configuration failure (wrong secret,
	// disabled app, …) is remembered: meanwhile sends fail at once without
	// calling WeCom, which blocks an IP that repeats a wrong secret.
	ConfigHoldDefault = 5 * time.Minute
	// KeyFieldDefault is the top-level body field that carries the
	// idempotency key (see Config.KeyField).
	KeyFieldDefault = "herald_key"
)

// duplicateCheckMax is the longest interval WeCom accepts.
const duplicateCheckMax = 4 * time.Hour

// Config is a wecom channel instance's configuration, as the node config
// gives it with secrets already resolved. Exactly one mode: app (corp_id,
// agent_id, secret) or robot (robot_key).
type Config struct {
	// BaseURL defaults to BaseURLDefault; tests point it at the fake.
	BaseURL string `json:"base_url"`
	// CorpID, AgentID and Secret select app mode (message/send).
	CorpID  string  `json:"corp_id"`
	AgentID flexInt `json:"agent_id"`
	Secret  string  `json:"secret"`
	// RobotKey selects robot mode (webhook/send).
	RobotKey string `json:"robot_key"`
	// Timeout bounds one HTTP call; default TimeoutDefault. A Go duration
	// string ("10s") or a number of seconds.
	Timeout Duration `json:"timeout"`
	// DuplicateCheckInterval is sent as duplicate_check_interval; default
	// and maximum 4h. A duration string or seconds.
	DuplicateCheckInterval Duration `json:"duplicate_check_interval"`
	// Channel is the instance name, for logs.
	Channel string `json:"channel"`
	// Concurrency bounds the calls in flight within a batch; default
	// ConcurrencyDefault.
	Concurrency int `json:"concurrency"`
	// CallsPerSecond is the ScopeChannel limit declared in app mode: the
	// host lets no second hold more calls (a burst of half, then half per
	// second sustained). Default CallsPerSecondDefault.
	CallsPerSecond int `json:"calls_per_second"`
	// ConfigHold is how long a configuration failure is remembered; default
	// ConfigHoldDefault.
	ConfigHold Duration `json:"config_hold"`
	// KeyField names the body field that carries the idempotency key in app
	// mode, so that two deliveries with equal content stay two messages to
	// WeCom's duplicate check while every retry of one delivery stays
	// byte-identical. Default KeyFieldDefault; "-" leaves it out.
	KeyField string `json:"key_field"`
}

// ErrBadConfig is returned by Configure for a configuration it cannot use.
// Its text never quotes a secret.
var ErrBadConfig = errors.New("wecom: bad config")

// mode is app or robot.
type mode int

const (
	modeApp mode = iota + 1
	modeRobot
)

// settings is a validated Config with defaults applied.
type settings struct {
	mode           mode
	baseURL        string
	corpID         string
	agentID        int
	secret         string
	robotKey       string
	timeout        time.Duration
	dupInterval    int // seconds
	channel        string
	concurrency    int
	callsPerSecond int
	configHold     time.Duration
	keyField       string
}

func parseConfig(raw json.RawMessage) (settings, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return settings{}, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	if dec.More() {
		return settings{}, fmt.Errorf("%w: trailing data after the JSON object", ErrBadConfig)
	}
	s := settings{
		baseURL:        strings.TrimRight(c.BaseURL, "/"),
		corpID:         c.CorpID,
		agentID:        c.AgentID.v,
		secret:         c.Secret,
		robotKey:       c.RobotKey,
		timeout:        time.Duration(c.Timeout),
		channel:        c.Channel,
		concurrency:    c.Concurrency,
		callsPerSecond: c.CallsPerSecond,
		configHold:     time.Duration(c.ConfigHold),
		keyField:       c.KeyField,
	}
	app := c.CorpID != "" || c.AgentID.set || c.Secret != ""
	switch {
	case app && c.RobotKey != "":
		return settings{}, fmt.Errorf("%w: set either corp_id/agent_id/secret (app mode) or robot_key (robot mode), not both", ErrBadConfig)
	case app:
		s.mode = modeApp
		var missing []string
		if c.CorpID == "" {
			missing = append(missing, "corp_id")
		}
		if !c.AgentID.set {
			missing = append(missing, "agent_id")
		}
		if c.Secret == "" {
			missing = append(missing, "secret")
		}
		if len(missing) > 0 {
			return settings{}, fmt.Errorf("%w: app mode needs %s", ErrBadConfig, strings.Join(missing, ", "))
		}
		if c.AgentID.v <= 0 {
			return settings{}, fmt.Errorf("%w: agent_id must be a positive integer", ErrBadConfig)
		}
	case c.RobotKey != "":
		s.mode = modeRobot
	default:
		return settings{}, fmt.Errorf("%w: set corp_id, agent_id and secret (app mode) or robot_key (robot mode)", ErrBadConfig)
	}
	if s.baseURL == "" {
		s.baseURL = BaseURLDefault
	}
	if u, err := url.Parse(s.baseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return settings{}, fmt.Errorf("%w: base_url %q is not an http(s) URL without a query", ErrBadConfig, c.BaseURL)
	}
	if s.timeout == 0 {
		s.timeout = TimeoutDefault
	}
	dup := time.Duration(c.DuplicateCheckInterval)
	if dup == 0 {
		dup = DuplicateCheckIntervalDefault
	}
	if dup < time.Second || dup > duplicateCheckMax {
		return settings{}, fmt.Errorf("%w: duplicate_check_interval must be within 1s..4h", ErrBadConfig)
	}
	s.dupInterval = int(dup / time.Second)
	if s.concurrency == 0 {
		s.concurrency = ConcurrencyDefault
	}
	if s.callsPerSecond == 0 {
		s.callsPerSecond = CallsPerSecondDefault
	}
	if s.configHold == 0 {
		s.configHold = ConfigHoldDefault
	}
	if s.keyField == "" {
		s.keyField = KeyFieldDefault
	}
	switch {
	case s.timeout < 0 || s.concurrency < 0 || s.callsPerSecond < 0 || s.configHold < 0:
		return settings{}, fmt.Errorf("%w: timeout, concurrency, calls_per_second and config_hold must not be negative", ErrBadConfig)
	case s.keyField != "-" && (reservedFields[s.keyField] || !validName(s.keyField)):
		return settings{}, fmt.Errorf("%w: key_field %q must be a lower-case name WeCom does not use", ErrBadConfig, s.keyField)
	}
	return s, nil
}

// Duration is a JSON duration: a Go duration string or a number of seconds.
type Duration time.Duration

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: want a Go duration like \"10s\"", s)
		}
		*d = Duration(v)
		return nil
	}
	var n float64
	if err := json.Unmarshal(b, &n); err != nil {
		return errors.New("duration: want a string like \"10s\" or a number of seconds")
	}
	*d = Duration(n * float64(time.Second))
	return nil
}

// flexInt is an integer given as a JSON number or, after ${ENV}
// resolution, a string.
type flexInt struct {
	set bool
	v   int
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *flexInt) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		s = string(b)
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return errors.New("agent_id: want an integer")
	}
	f.set, f.v = true, n
	return nil
}
