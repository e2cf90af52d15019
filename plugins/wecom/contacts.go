package wecom

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// The contacts endpoints the directory reads. They are the ones a
// self-built app may still call since WeCom's 2022 restrictions; see
// WECOM_CONTACTS.md for what each returns and why user/get, user/list and
// user/list_id are not used.
const (
	pathDepartmentSimpleList = "/cgi-bin/department/simplelist"
	pathDepartmentGet        = "/cgi-bin/department/get"
	pathUserSimpleList       = "/cgi-bin/user/simplelist"
	pathTagList              = "/cgi-bin/tag/list"
	pathTagGet               = "/cgi-bin/tag/get"
)

// Defaults of ContactsConfig.
const (
	// ContactsConcurrencyDefault bounds the calls in flight during a fetch
	// (WeCom answers 45033 to too many concurrent calls).
	ContactsConcurrencyDefault = 4
	// maxContactsReply bounds one reply: user/simplelist of a department
	// of 30,000 people is a few MB.
	maxContactsReply = 64 << 20
)

// ContactsConfig configures a ContactsClient: an app's (or the contacts
// sync) credentials.
type ContactsConfig struct {
	BaseURL string // default BaseURLDefault
	CorpID  string
	Secret  string
	// Timeout bounds one HTTP call; default TimeoutDefault.
	Timeout time.Duration
	// Concurrency bounds the calls in flight; default
	// ContactsConcurrencyDefault.
	Concurrency int
	// Client is the HTTP client; default a new one.
	Client *http.Client
}

// ContactsClient reads a corp's contacts: departments, their members,
// tags and theirs. It is safe for concurrent use.
type ContactsClient struct {
	cfg ContactsConfig

	mu      sync.Mutex
	token   string
	expires time.Time
}

// ErrContactsConfig is returned for a ContactsConfig that cannot work.
var ErrContactsConfig = errors.New("wecom contacts: bad config")

// NewContactsClient validates cfg.
func NewContactsClient(cfg ContactsConfig) (*ContactsClient, error) {
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.BaseURL == "" {
		cfg.BaseURL = BaseURLDefault
	}
	if u, err := url.Parse(cfg.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: base_url %q is not an http(s) URL", ErrContactsConfig, cfg.BaseURL)
	}
	if cfg.CorpID == "" || cfg.Secret == "" {
		return nil, fmt.Errorf("%w: corp_id and secret are required", ErrContactsConfig)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = TimeoutDefault
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = ContactsConcurrencyDefault
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	return &ContactsClient{cfg: cfg}, nil
}

// Contacts is what one fetch read, sorted by id (userid) so that the same
// contacts always encode to the same bytes.
type Contacts struct {
	Departments []Department `json:"departments"`
	Users       []User       `json:"users"`
	Tags        []Tag        `json:"tags"`
}

// Department is one department (department/simplelist + department/get).
type Department struct {
	ID       int      `json:"id"`
	ParentID int      `json:"parentid"`
	Order    int      `json:"order"`
	Name     string   `json:"name"`
	Leaders  []string `json:"leaders"` // department_leader, within the app's visible range
}

// User is one member (user/simplelist): its departments in WeCom's order.
type User struct {
	UserID      string `json:"userid"`
	Name        string `json:"name"`
	Departments []int  `json:"departments"`
}

// Tag is one tag (tag/list + tag/get): its members and tagged departments.
type Tag struct {
	ID          int      `json:"id"`
	Name        string   `json:"name"`
	UserIDs     []string `json:"userids"`
	Departments []int    `json:"departments"`
}

// APIError is a business error answered by a contacts endpoint.
type APIError struct {
	Path string
	Code int
	Msg  string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("wecom %s: errcode %d: %s", e.Path, e.Code, e.Msg)
}

// Fetch reads the whole visible directory. Any failed call fails the
// fetch: a partial directory would look like people leaving.
func (c *ContactsClient) Fetch(ctx context.Context) (*Contacts, error) {
	var list struct {
		Departments []struct {
			ID       flexNum `json:"id"`
			ParentID flexNum `json:"parentid"`
			Order    flexNum `json:"order"`
		} `json:"department_id"`
	}
	if err := c.get(ctx, pathDepartmentSimpleList, nil, &list); err != nil {
		return nil, err
	}
	out := &Contacts{Departments: make([]Department, len(list.Departments))}
	users := map[string]*User{}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.cfg.Concurrency)
	for i, d := range list.Departments {
		out.Departments[i] = Department{ID: int(d.ID), ParentID: int(d.ParentID), Order: int(d.Order)}
		g.Go(func() error {
			var det struct {
				Department struct {
					Name    string   `json:"name"`
					Leaders []string `json:"department_leader"`
				} `json:"department"`
			}
			id := strconv.Itoa(int(d.ID))
			if err := c.get(gctx, pathDepartmentGet, url.Values{"id": {id}}, &det); err != nil {
				return err
			}
			var members struct {
				UserList []struct {
					UserID      string    `json:"userid"`
					Name        string    `json:"name"`
					Departments []flexNum `json:"department"`
				} `json:"userlist"`
			}
			if err := c.get(gctx, pathUserSimpleList, url.Values{"department_id": {id}}, &members); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			out.Departments[i].Name = det.Department.Name
			if len(det.Department.Leaders) > 0 {
				out.Departments[i].Leaders = slices.Clone(det.Department.Leaders)
			}
			for _, u := range members.UserList {
				if u.UserID == "" || users[u.UserID] != nil {
					continue
				}
				nu := &User{UserID: u.UserID, Name: u.Name}
				for _, dep := range u.Departments {
					nu.Departments = append(nu.Departments, int(dep))
				}
				users[u.UserID] = nu
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	tags, err := c.fetchTags(ctx)
	if err != nil {
		return nil, err
	}
	out.Tags = tags
	for _, u := range users {
		out.Users = append(out.Users, *u)
	}
	slices.SortFunc(out.Users, func(a, b User) int { return strings.Compare(a.UserID, b.UserID) })
	slices.SortFunc(out.Departments, func(a, b Department) int { return a.ID - b.ID })
	return out, nil
}

func (c *ContactsClient) fetchTags(ctx context.Context) ([]Tag, error) {
	var list struct {
		Tags []struct {
			ID   flexNum `json:"tagid"`
			Name string  `json:"tagname"`
		} `json:"taglist"`
	}
	if err := c.get(ctx, pathTagList, nil, &list); err != nil {
		return nil, err
	}
	out := make([]Tag, len(list.Tags))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.cfg.Concurrency)
	for i, t := range list.Tags {
		out[i] = Tag{ID: int(t.ID), Name: t.Name}
		g.Go(func() error {
			var det struct {
				UserList []struct {
					UserID string `json:"userid"`
				} `json:"userlist"`
				PartyList []flexNum `json:"partylist"`
			}
			if err := c.get(gctx, pathTagGet, url.Values{"tagid": {strconv.Itoa(int(t.ID))}}, &det); err != nil {
				return err
			}
			for _, u := range det.UserList {
				out[i].UserIDs = append(out[i].UserIDs, u.UserID)
			}
			for _, p := range det.PartyList {
				out[i].Departments = append(out[i].Departments, int(p))
			}
			slices.Sort(out[i].UserIDs)
			slices.Sort(out[i].Departments)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Tag) int { return a.ID - b.ID })
	return out, nil
}

// get calls a contacts endpoint with the app's token (see send).
func (c *ContactsClient) get(ctx context.Context, path string, q url.Values, into any) error {
	return c.send(ctx, http.MethodGet, path, q, nil, into)
}

// send calls an endpoint with the app's token and decodes a successful
// reply into into. A token WeCom rejects (40014 invalid, 42001 expired) is
// dropped and fetched again, once.
func (c *ContactsClient) send(ctx context.Context, method, path string, q url.Values, body []byte, into any) error {
	for attempt := 0; ; attempt++ {
		tok, err := c.accessToken(ctx)
		if err != nil {
			return err
		}
		qq := url.Values{}
		for k, v := range q {
			qq[k] = v
		}
		qq.Set("access_token", tok)
		raw, err := c.call(ctx, method, path, qq, body)
		if err != nil {
			return err
		}
		code, msg, err := envelope(path, raw)
		if err != nil {
			return err
		}
		if (code == 40014 || code == 42001) && attempt == 0 {
			c.dropToken(tok)
			continue
		}
		if code != 0 {
			return &APIError{Path: path, Code: code, Msg: msg}
		}
		if err := json.Unmarshal(raw, into); err != nil {
			return fmt.Errorf("wecom %s: reply does not have the expected shape: %v", path, err)
		}
		return nil
	}
}

func (c *ContactsClient) accessToken(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != "" && time.Now().Before(c.expires) {
		return c.token, nil
	}
	raw, err := c.call(ctx, http.MethodGet, pathGetToken, url.Values{"corpid": {c.cfg.CorpID}, "corpsecret": {c.cfg.Secret}}, nil)
	if err != nil {
		return "", err
	}
	code, msg, err := envelope(pathGetToken, raw)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return "", &APIError{Path: pathGetToken, Code: code, Msg: msg}
	}
	var r struct {
		Token     string  `json:"access_token"`
		ExpiresIn flexNum `json:"expires_in"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.Token == "" {
		return "", fmt.Errorf("wecom %s: ok without a token", pathGetToken)
	}
	life := time.Duration(r.ExpiresIn) * time.Second
	if life <= 0 {
		life = 7200 * time.Second
	}
	// Refresh a little early: a fetch takes a while.
	c.token, c.expires = r.Token, time.Now().Add(life-min(life/10, 5*time.Minute))
	return c.token, nil
}

func (c *ContactsClient) dropToken(tok string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token == tok {
		c.token = ""
	}
}

// call makes one GET and returns the body of a 200 answer. Its errors
// never hold the URL: it carries the secret or the token.
func (c *ContactsClient) call(ctx context.Context, method, path string, q url.Values, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.cfg.BaseURL+path+"?"+q.Encode(), rd)
	if err != nil {
		return nil, fmt.Errorf("wecom %s: build request: %w", path, ErrContactsConfig)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.cfg.Client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("wecom %s: timeout after %s", path, c.cfg.Timeout)
		}
		return nil, fmt.Errorf("wecom %s: %s", path, c.redact(err.Error()))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxContactsReply))
	if err != nil {
		return nil, fmt.Errorf("wecom %s: reading reply: %s", path, c.redact(err.Error()))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("wecom %s: HTTP %s", path, resp.Status)
	}
	return raw, nil
}

func (c *ContactsClient) redact(s string) string {
	c.mu.Lock()
	tok := c.token
	c.mu.Unlock()
	for _, secret := range []string{c.cfg.Secret, tok} {
		if len(secret) >= 4 {
			s = strings.ReplaceAll(s, secret, "[redacted]")
			s = strings.ReplaceAll(s, url.QueryEscape(secret), "[redacted]")
		}
	}
	return s
}

// envelope reads errcode and errmsg.
func envelope(path string, raw []byte) (int, string, error) {
	var e struct {
		ErrCode *flexNum `json:"errcode"`
		ErrMsg  string   `json:"errmsg"`
	}
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&e); err != nil || e.ErrCode == nil {
		return 0, "", fmt.Errorf("wecom %s: reply is not WeCom JSON (%d bytes)", path, len(raw))
	}
	return int(*e.ErrCode), e.ErrMsg, nil
}

// flexNum is an integer sent as a JSON number or a string.
type flexNum int64

// UnmarshalJSON implements json.Unmarshaler.
func (n *flexNum) UnmarshalJSON(b []byte) error {
	s := strings.Trim(strings.TrimSpace(string(b)), `"`)
	if s == "" || s == "null" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("want an integer, got %s", b)
	}
	*n = flexNum(v)
	return nil
}
