package rules

import "strings"

// DisplayName is the name the people file gives userid, "" when it has
// none: the dashboard and the API show 李娜, not lina.
func (s *Set) DisplayName(userid string) string {
	if p, ok := s.cur.Load().people.Get(userid); ok {
		return p.Name
	}
	return ""
}

// Find returns the userids whose userid or name equals query, ignoring
// case and surrounding space, in the people file's order, at most limit.
func (s *Set) Find(query string, limit int) []string {
	d := s.cur.Load().people
	query = strings.TrimSpace(query)
	if d == nil || query == "" {
		return nil
	}
	var out []string
	for _, p := range d.people {
		if len(out) >= limit {
			break
		}
		if strings.EqualFold(p.UserID, query) || strings.EqualFold(p.Name, query) {
			out = append(out, p.UserID)
		}
	}
	return out
}
