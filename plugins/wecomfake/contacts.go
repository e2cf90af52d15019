package wecomfake

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Contacts API paths the fake answers: the ones a self-built app may
// still call since WeCom's 2022 restrictions (see plugins/wecom's
// WECOM_CONTACTS.md). user/get, user/list and user/list_id are not served
// (404): Herald does not call them.
const (
	PathDepartmentSimpleList = "/cgi-bin/department/simplelist"
	PathDepartmentGet        = "/cgi-bin/department/get"
	PathUserSimpleList       = "/cgi-bin/user/simplelist"
	PathTagList              = "/cgi-bin/tag/list"
	PathTagGet               = "/cgi-bin/tag/get"
)

var contactsPaths = map[string]bool{
	PathDepartmentSimpleList: true, PathDepartmentGet: true, PathUserSimpleList: true,
	PathTagList: true, PathTagGet: true,
}

// Contacts error codes.
const (
	errDepartmentNotFound = 60003
	errInvalidTagID       = 40068
	errMissingParam       = 40058
)

func init() {
	errText[errDepartmentNotFound] = "department not found"
	errText[errInvalidTagID] = "invalid tagid"
}

type department struct {
	id, parent, order int
	name              string
	leaders           []string // lower-cased userids
}

func newDepartment(d DepartmentConfig) *department {
	dep := &department{id: d.ID, parent: d.Parent, order: d.Order, name: cmp.Or(d.Name, strconv.Itoa(d.ID))}
	for _, l := range d.Leaders {
		dep.leaders = append(dep.leaders, strings.ToLower(l))
	}
	return dep
}

type deptRef struct {
	ID       int `json:"id"`
	ParentID int `json:"parentid"`
	Order    int `json:"order"`
}

type deptDetail struct {
	ID       int      `json:"id"`
	Name     string   `json:"name"`
	Leaders  []string `json:"department_leader"`
	ParentID int      `json:"parentid"`
	Order    int      `json:"order"`
}

type simpleUser struct {
	UserID      string `json:"userid"`
	Name        string `json:"name"`
	Departments []int  `json:"department"`
}

type tagUser struct {
	UserID string `json:"userid"`
	Name   string `json:"name"`
}

type tagRef struct {
	ID   int    `json:"tagid"`
	Name string `json:"tagname"`
}

// contacts answers the contacts endpoints with an app's token. The app
// sees the members inside its visible range (not Hidden). Callers hold
// s.mu.
func (s *Server) contacts(path string, q url.Values, ip string) reply {
	a, rep, ok := s.checkToken(q)
	if !ok {
		return rep
	}
	if a.trusted != nil && !a.trusted[ip] {
		return fail(60020)
	}
	if !a.enabled {
		return fail(50003)
	}
	c := a.corp
	switch path {
	case PathDepartmentSimpleList:
		ids := slices.Sorted(maps.Keys(c.deptInfo))
		if v := q.Get("id"); v != "" {
			root, err := strconv.Atoi(v)
			if err != nil || c.deptInfo[root] == nil {
				return fail(errDepartmentNotFound)
			}
			ids = c.subtree(root)
		}
		out := make([]deptRef, 0, len(ids))
		for _, id := range ids {
			d := c.deptInfo[id]
			out = append(out, deptRef{ID: d.id, ParentID: d.parent, Order: d.order})
		}
		return reply{body: map[string]any{"department_id": out}}
	case PathDepartmentGet:
		id, err := strconv.Atoi(q.Get("id"))
		if q.Get("id") == "" {
			return failf(errMissingParam, "invalid Request Parameter: id is required")
		}
		if err != nil || c.deptInfo[id] == nil {
			return fail(errDepartmentNotFound)
		}
		d := c.deptInfo[id]
		leaders := []string{}
		for _, l := range d.leaders {
			if m, ok := c.members[l]; ok && m.visible {
				leaders = append(leaders, l)
			}
		}
		return reply{body: map[string]any{"department": deptDetail{ID: d.id, Name: d.name, Leaders: leaders, ParentID: d.parent, Order: d.order}}}
	case PathUserSimpleList:
		id, err := strconv.Atoi(q.Get("department_id"))
		if err != nil || c.deptInfo[id] == nil {
			return fail(errDepartmentNotFound)
		}
		in := []int{id}
		if q.Get("fetch_child") == "1" {
			in = c.subtree(id)
		}
		out := []simpleUser{}
		for _, u := range slices.Sorted(maps.Keys(c.members)) {
			m := c.members[u]
			if !m.visible || !slices.ContainsFunc(m.departments, func(d int) bool { return slices.Contains(in, d) }) {
				continue
			}
			out = append(out, simpleUser{UserID: m.userID, Name: c.nameOf[u], Departments: slices.Clone(m.departments)})
		}
		return reply{body: map[string]any{"userlist": out}}
	case PathTagList:
		out := []tagRef{}
		for _, id := range slices.Sorted(maps.Keys(c.tags)) {
			out = append(out, tagRef{ID: id, Name: c.tagNames[id]})
		}
		return reply{body: map[string]any{"taglist": out}}
	case PathTagGet:
		id, err := strconv.Atoi(q.Get("tagid"))
		userids, ok := c.tags[id]
		if err != nil || !ok {
			return fail(errInvalidTagID)
		}
		users := []tagUser{}
		for _, u := range userids {
			if m, ok := c.members[u]; ok && m.visible {
				users = append(users, tagUser{UserID: u, Name: c.nameOf[u]})
			}
		}
		parties := append([]int{}, c.tagDepts[id]...)
		return reply{body: map[string]any{"tagname": c.tagNames[id], "userlist": users, "partylist": parties}}
	}
	return fail(errMissingParam)
}

// subtree lists a department and every department below it, sorted.
func (c *corp) subtree(root int) []int {
	out := []int{root}
	for i := 0; i < len(out); i++ {
		for _, id := range slices.Sorted(maps.Keys(c.deptInfo)) {
			if c.deptInfo[id].parent == out[i] && id != out[i] && !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	slices.Sort(out)
	return out
}

// ErrUnknownMember is returned by knobs naming a member the fake does not
// have.
var ErrUnknownMember = errors.New("wecomfake: unknown member")

// MoveMember puts a member into other departments (as an admin would in
// the console); the next contacts calls see the move.
func (s *Server) MoveMember(corpID, userID string, departments []int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, m, err := s.member(corpID, userID)
	if err != nil {
		return err
	}
	for _, d := range departments {
		if c.deptInfo[d] == nil {
			return fmt.Errorf("%w: department %d", ErrBadConfig, d)
		}
	}
	n := *m
	n.departments = slices.Clone(departments)
	c.members[n.userID] = &n
	return nil
}

// SetMemberVisible puts a member inside (true) or outside (false) every
// app's visible range: outside, the contacts endpoints leave the member out
// and sends list them invalid, as when someone leaves the company.
func (s *Server) SetMemberVisible(corpID, userID string, visible bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, m, err := s.member(corpID, userID)
	if err != nil {
		return err
	}
	n := *m
	n.visible = visible
	c.members[n.userID] = &n
	return nil
}

// member finds a member; corpID "" means the only corp.
func (s *Server) member(corpID, userID string) (*corp, *member, error) {
	c, ok := s.corps[corpID]
	if corpID == "" && len(s.corps) == 1 {
		for _, only := range s.corps {
			c, ok = only, true
		}
	}
	if !ok {
		return nil, nil, fmt.Errorf("%w: corp %q", ErrUnknownApp, corpID)
	}
	m, ok := c.members[strings.ToLower(userID)]
	if !ok {
		return nil, nil, fmt.Errorf("%w: %q", ErrUnknownMember, userID)
	}
	return c, m, nil
}
