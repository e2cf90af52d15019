// Package wecomfake is a fake WeCom (企业微信) server for tests and demos. It
// answers gettoken, message/send, message/recall,
// message/update_template_card and webhook/send the way
// the real API does (see the project's WECOM.md), checks requests in the
// real order, enforces the silent per-member limits, and records every
// request and every message each member received, so that a test can assert
// what people actually got. Fault knobs switch failures on at run time.
package wecomfake

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Defaults of Config.
const (
	// TokenLifetimeDefault is how long an issued access token lives.
	TokenLifetimeDefault = 7200 * time.Second
	// MemberPerMinuteDefault is how many app messages a member receives from
	// one app in any minute; the excess is dropped silently.
	MemberPerMinuteDefault = 30
	// MemberPerHourDefault is the same per hour.
	MemberPerHourDefault = 1000
	// RobotPerMinuteDefault is how many messages a robot accepts per minute;
	// the excess is answered 45009.
	RobotPerMinuteDefault = 20
	// ContentLimitDefault is the byte size past which app text and markdown
	// content is truncated.
	ContentLimitDefault = 2048
	// ContentHardCapDefault is the byte size past which app content is
	// refused with 45002 instead of truncated (the real cap is unconfirmed).
	ContentHardCapDefault = 8192
	// MaxRecordsDefault bounds the kept request and message records; the
	// oldest half is forgotten when it is reached (counters stay exact).
	MaxRecordsDefault = 200_000
	// DuplicateIntervalDefault is the duplicate-check window when a request
	// asks for the check without an interval.
	DuplicateIntervalDefault = 1800
	// DuplicateIntervalMax is the longest duplicate-check window.
	DuplicateIntervalMax = 14400
)

// TokenMode says whether gettoken hands out the still-valid token again.
type TokenMode string

const (
	// TokenSticky returns the app's current token while it is valid.
	TokenSticky TokenMode = "sticky"
	// TokenRotate issues a fresh token on every gettoken; earlier ones stay
	// valid until they expire or are revoked.
	TokenRotate TokenMode = "rotate"
)

// DuplicateMode says how a request suppressed by the duplicate check is
// answered (the real reply is unconfirmed).
type DuplicateMode string

const (
	// DuplicateOriginal answers ok with the msgid of the first delivery.
	DuplicateOriginal DuplicateMode = "original"
	// DuplicateFresh answers ok with a new msgid.
	DuplicateFresh DuplicateMode = "fresh"
)

// UnknownFieldsMode says how message/send treats a top-level body field
// WeCom does not define, such as the herald_key the wecom channel adds.
// Whether real WeCom ignores such a field is unconfirmed.
type UnknownFieldsMode string

const (
	// UnknownFieldsAccept ignores unknown top-level fields; they still take
	// part in the duplicate check, which compares whole bodies.
	UnknownFieldsAccept UnknownFieldsMode = "accept"
	// UnknownFieldsReject answers 40058 (invalid Request Parameter) to a
	// body with an unknown top-level field.
	UnknownFieldsReject UnknownFieldsMode = "reject"
)

// ErrmsgStyle says how errmsg texts look.
type ErrmsgStyle string

const (
	// ErrmsgFull is "<text>, hint: [<id>], from ip: <ip>, more info at …".
	ErrmsgFull ErrmsgStyle = "full"
	// ErrmsgBare is the bare text.
	ErrmsgBare ErrmsgStyle = "bare"
)

// Config seeds a Server. The zero value of every field means its default;
// with no corps at all the demo corp of DemoCorp is used.
type Config struct {
	Corps []CorpConfig `yaml:"corps" json:"corps"`

	// TokenLifetime defaults to TokenLifetimeDefault.
	TokenLifetime time.Duration `yaml:"token_lifetime" json:"token_lifetime"`
	// TokenMode defaults to TokenSticky.
	TokenMode TokenMode `yaml:"token_mode" json:"token_mode"`
	// MemberPerMinute defaults to MemberPerMinuteDefault; negative disables.
	MemberPerMinute int `yaml:"member_per_minute" json:"member_per_minute"`
	// MemberPerHour defaults to MemberPerHourDefault; negative disables.
	MemberPerHour int `yaml:"member_per_hour" json:"member_per_hour"`
	// RobotPerMinute defaults to RobotPerMinuteDefault; negative disables.
	RobotPerMinute int `yaml:"robot_per_minute" json:"robot_per_minute"`
	// ContentLimit defaults to ContentLimitDefault.
	ContentLimit int `yaml:"content_limit" json:"content_limit"`
	// ContentHardCap defaults to ContentHardCapDefault.
	ContentHardCap int `yaml:"content_hard_cap" json:"content_hard_cap"`
	// DuplicateMode defaults to DuplicateOriginal.
	DuplicateMode DuplicateMode `yaml:"duplicate_mode" json:"duplicate_mode"`
	// ErrmsgStyle defaults to ErrmsgFull.
	ErrmsgStyle ErrmsgStyle `yaml:"errmsg_style" json:"errmsg_style"`
	// UnknownFields defaults to UnknownFieldsAccept.
	UnknownFields UnknownFieldsMode `yaml:"unknown_fields" json:"unknown_fields"`
	// RejectEscapes answers 40033 to a body holding a \uXXXX escape
	// (unconfirmed for WeCom; off by default).
	RejectEscapes bool `yaml:"reject_escapes" json:"reject_escapes"`
	// MaxRecords defaults to MaxRecordsDefault.
	MaxRecords int `yaml:"max_records" json:"max_records"`
	// Seed seeds the random choices of probabilistic faults; 0 means 1.
	Seed uint64 `yaml:"seed" json:"seed"`

	// NowFunc is the clock; defaults to time.Now. Server.Advance moves the
	// fake's view of time forward on top of it.
	NowFunc func() time.Time `yaml:"-" json:"-"`
}

// CorpConfig is one enterprise.
type CorpConfig struct {
	ID          string             `yaml:"id" json:"id"`
	Apps        []AppConfig        `yaml:"apps" json:"apps"`
	Members     []MemberConfig     `yaml:"members" json:"members"`
	Departments []DepartmentConfig `yaml:"departments" json:"departments"`
	Tags        []TagConfig        `yaml:"tags" json:"tags"`
	Robots      []RobotConfig      `yaml:"robots" json:"robots"`
}

// AppConfig is one self-built app of a corp.
type AppConfig struct {
	AgentID  int    `yaml:"agent_id" json:"agent_id"`
	Secret   string `yaml:"secret" json:"secret"`
	Disabled bool   `yaml:"disabled" json:"disabled"`
	// TrustedIPs, when not empty, are the only caller IPs allowed to send.
	TrustedIPs []string `yaml:"trusted_ips" json:"trusted_ips"`
}

// MemberConfig is one member; userids match case-insensitively.
type MemberConfig struct {
	UserID string `yaml:"userid" json:"userid"`
	// Name is what the contacts endpoints answer as name; default the
	// userid.
	Name        string `yaml:"name" json:"name"`
	Departments []int  `yaml:"departments" json:"departments"`
	// Hidden members are outside every app's visible range: listed invalid.
	Hidden bool `yaml:"hidden" json:"hidden"`
	// Unlicensed members lack the basic licence: listed in unlicenseduser
	// and not delivered to.
	Unlicensed bool `yaml:"unlicensed" json:"unlicensed"`
}

// DepartmentConfig is a department; its members name it in Departments.
type DepartmentConfig struct {
	ID   int    `yaml:"id" json:"id"`
	Name string `yaml:"name" json:"name"`
	// Parent is the parent department's id; 0 for the root (id 1).
	Parent int `yaml:"parent" json:"parent"`
	// Order is the department's order within its parent.
	Order int `yaml:"order" json:"order"`
	// Leaders are the userids of the department's leaders
	// (department_leader).
	Leaders []string `yaml:"leaders" json:"leaders"`
}

// TagConfig is a tag and the userids it holds.
type TagConfig struct {
	ID      int      `yaml:"id" json:"id"`
	Name    string   `yaml:"name" json:"name"`
	UserIDs []string `yaml:"userids" json:"userids"`
	// Departments are tagged departments (tag/get's partylist).
	Departments []int `yaml:"departments" json:"departments"`
}

// RobotConfig is a group robot, addressed by its webhook key.
type RobotConfig struct {
	Key      string `yaml:"key" json:"key"`
	Disabled bool   `yaml:"disabled" json:"disabled"`
}

// Demo corp identity used when a Config names no corp.
const (
	DemoCorpID   = "ww0000demo0corp"
	DemoAgentID  = 1000002
	DemoSecret   = "demo-secret-0123456789abcdefghijklmnopqrstuvwx"
	DemoRobotKey = "00000000-demo-robot-key-000000000000"
)

// DemoCorp is the corp used when a Config names none: one app, a robot, two
// departments, a tag and members alice, bob, carol, dave, erin, frank,
// grace and heidi.
func DemoCorp() CorpConfig {
	names := []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"}
	c := CorpConfig{
		ID:          DemoCorpID,
		Apps:        []AppConfig{{AgentID: DemoAgentID, Secret: DemoSecret}},
		Departments: []DepartmentConfig{{ID: 1, Name: "HQ"}, {ID: 2, Name: "Sales"}},
		Tags:        []TagConfig{{ID: 1, Name: "managers", UserIDs: []string{"alice", "dave"}}},
		Robots:      []RobotConfig{{Key: DemoRobotKey}},
	}
	for i, n := range names {
		deps := []int{1}
		if i%2 == 1 {
			deps = append(deps, 2)
		}
		c.Members = append(c.Members, MemberConfig{UserID: n, Departments: deps})
	}
	return c
}

// ErrBadConfig is returned for a config that cannot seed a server.
var ErrBadConfig = errors.New("wecomfake: bad config")

// LoadConfig reads a YAML or JSON config file. Durations are Go duration
// strings ("2h", "90s").
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("wecomfake: read config: %w", err)
	}
	return ParseConfig(b)
}

// ParseConfig parses a YAML or JSON config and validates it.
func ParseConfig(b []byte) (Config, error) {
	var c Config
	if err := yaml.Unmarshal(b, &c); err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	if err := c.validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

func (c Config) validate() error {
	corps := map[string]bool{}
	secrets := map[string]bool{}
	robots := map[string]bool{}
	for _, corp := range c.Corps {
		if corp.ID == "" {
			return fmt.Errorf("%w: corp without id", ErrBadConfig)
		}
		if corps[corp.ID] {
			return fmt.Errorf("%w: corp %q twice", ErrBadConfig, corp.ID)
		}
		corps[corp.ID] = true
		agents := map[int]bool{}
		for _, a := range corp.Apps {
			if a.AgentID <= 0 || a.Secret == "" {
				return fmt.Errorf("%w: corp %q: app needs agent_id > 0 and a secret", ErrBadConfig, corp.ID)
			}
			if agents[a.AgentID] || secrets[a.Secret] {
				return fmt.Errorf("%w: corp %q: app %d repeats an agent_id or secret", ErrBadConfig, corp.ID, a.AgentID)
			}
			agents[a.AgentID], secrets[a.Secret] = true, true
		}
		users := map[string]bool{}
		for _, m := range corp.Members {
			u := strings.ToLower(m.UserID)
			if u == "" || users[u] {
				return fmt.Errorf("%w: corp %q: empty or repeated userid %q", ErrBadConfig, corp.ID, m.UserID)
			}
			users[u] = true
		}
		for _, r := range corp.Robots {
			if r.Key == "" || robots[r.Key] {
				return fmt.Errorf("%w: corp %q: empty or repeated robot key", ErrBadConfig, corp.ID)
			}
			robots[r.Key] = true
		}
	}
	switch c.TokenMode {
	case "", TokenSticky, TokenRotate:
	default:
		return fmt.Errorf("%w: token_mode %q (want sticky or rotate)", ErrBadConfig, c.TokenMode)
	}
	switch c.DuplicateMode {
	case "", DuplicateOriginal, DuplicateFresh:
	default:
		return fmt.Errorf("%w: duplicate_mode %q (want original or fresh)", ErrBadConfig, c.DuplicateMode)
	}
	switch c.UnknownFields {
	case "", UnknownFieldsAccept, UnknownFieldsReject:
	default:
		return fmt.Errorf("%w: unknown_fields %q (want accept or reject)", ErrBadConfig, c.UnknownFields)
	}
	switch c.ErrmsgStyle {
	case "", ErrmsgFull, ErrmsgBare:
	default:
		return fmt.Errorf("%w: errmsg_style %q (want full or bare)", ErrBadConfig, c.ErrmsgStyle)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if len(c.Corps) == 0 {
		c.Corps = []CorpConfig{DemoCorp()}
	}
	if c.TokenLifetime <= 0 {
		c.TokenLifetime = TokenLifetimeDefault
	}
	if c.TokenMode == "" {
		c.TokenMode = TokenSticky
	}
	if c.MemberPerMinute == 0 {
		c.MemberPerMinute = MemberPerMinuteDefault
	}
	if c.MemberPerHour == 0 {
		c.MemberPerHour = MemberPerHourDefault
	}
	if c.RobotPerMinute == 0 {
		c.RobotPerMinute = RobotPerMinuteDefault
	}
	if c.ContentLimit <= 0 {
		c.ContentLimit = ContentLimitDefault
	}
	if c.ContentHardCap <= 0 {
		c.ContentHardCap = ContentHardCapDefault
	}
	if c.DuplicateMode == "" {
		c.DuplicateMode = DuplicateOriginal
	}
	if c.UnknownFields == "" {
		c.UnknownFields = UnknownFieldsAccept
	}
	if c.ErrmsgStyle == "" {
		c.ErrmsgStyle = ErrmsgFull
	}
	if c.MaxRecords <= 0 {
		c.MaxRecords = MaxRecordsDefault
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.NowFunc == nil {
		c.NowFunc = time.Now
	}
	return c
}
