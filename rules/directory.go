package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/heraldhq/herald/engine"
)

// ErrDirectory is wrapped by every error reading a directory snapshot.
var ErrDirectory = errors.New("bad directory snapshot")

// DirectorySnapshot is the people of an external directory (WeCom's
// contacts) at one moment, in the form the leader replicates through the
// log and every node merges with its people file. Its JSON (EncodeJSON) is
// the contract between the fetcher and the rules: see DESIGN.md.
type DirectorySnapshot struct {
	// Source names where it was read, e.g. "wecom:ww0000demo0corp".
	Source string `json:"source"`
	// People, sorted by userid.
	People []DirectoryPerson `json:"people"`
}

// DirectoryPerson is one person of a snapshot.
type DirectoryPerson struct {
	UserID string `json:"userid"`
	Name   string `json:"name,omitempty"`
	// Departments are the names of the person's departments, the main one
	// first.
	Departments []string `json:"departments,omitempty"`
	Tags        []string `json:"tags,omitempty"`
	// Manager is the userid of the person's manager, when the source knows
	// one.
	Manager string `json:"manager,omitempty"`
}

// EncodeJSON writes the snapshot in its canonical form (people by userid,
// tags sorted, no HTML escaping), so the same people always make the same
// bytes and the same hash.
func (d *DirectorySnapshot) EncodeJSON() ([]byte, error) {
	c := DirectorySnapshot{Source: d.Source, People: slices.Clone(d.People)}
	for i := range c.People {
		c.People[i].Tags = slices.Compact(slices.Sorted(slices.Values(c.People[i].Tags)))
	}
	slices.SortFunc(c.People, func(a, b DirectoryPerson) int { return strings.Compare(a.UserID, b.UserID) })
	if c.People == nil {
		c.People = []DirectoryPerson{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// DirectoryHash names a snapshot's canonical bytes.
func DirectoryHash(data []byte) string { return contentHash(data) }

// ParseDirectorySnapshot reads a snapshot's JSON and checks it: every
// person has a userid, no userid twice. A manager outside the snapshot is
// dropped (WeCom names leaders outside the app's visible range too).
func ParseDirectorySnapshot(data []byte) (*DirectorySnapshot, error) {
	var d DirectorySnapshot
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDirectory, err)
	}
	seen := make(map[string]bool, len(d.People))
	for i, p := range d.People {
		if strings.TrimSpace(p.UserID) == "" {
			return nil, fmt.Errorf("%w: person %d has no userid", ErrDirectory, i+1)
		}
		if seen[p.UserID] {
			return nil, fmt.Errorf("%w: userid %q twice", ErrDirectory, p.UserID)
		}
		seen[p.UserID] = true
	}
	for i := range d.People {
		if m := d.People[i].Manager; m != "" && (!seen[m] || m == d.People[i].UserID) {
			d.People[i].Manager = ""
		}
	}
	return &d, nil
}

// UserIDs lists the snapshot's userids.
func (d *DirectorySnapshot) UserIDs() []string {
	out := make([]string, len(d.People))
	for i, p := range d.People {
		out[i] = p.UserID
	}
	return out
}

// mergeDirectory builds the directory rules see from the people file and
// a snapshot: the file's people first, in file order, then the snapshot's
// others by userid. The file wins per userid: its fields stay as written,
// and only fields it leaves empty (name, departments, tags, manager) are
// filled from the snapshot, so a file row that only sets a timezone keeps
// the person's WeCom departments and tags.
func mergeDirectory(file *Directory, snap *DirectorySnapshot) *Directory {
	if snap == nil || len(snap.People) == 0 {
		return file
	}
	out := &Directory{File: file.File, people: make([]*Person, 0, len(file.people)+len(snap.People)), extra: file.extra}
	// WeCom userids ignore case: a file row ZhangSan is the directory's
	// zhangsan, not a second person.
	fromSnap := make(map[string]*DirectoryPerson, len(snap.People))
	for i := range snap.People {
		fromSnap[foldID(snap.People[i].UserID)] = &snap.People[i]
	}
	in := newInterner()
	for _, p := range file.people {
		if sp, ok := fromSnap[foldID(p.UserID)]; ok {
			p = fillFromSnapshot(p, sp, in)
		}
		out.people = append(out.people, p)
	}
	added := make(map[string]bool, len(snap.People)) // while merging only
	for i := range snap.People {
		sp := &snap.People[i]
		if _, ok := file.Get(sp.UserID); ok || added[foldID(sp.UserID)] {
			continue // in the file, or twice in the snapshot
		}
		added[foldID(sp.UserID)] = true
		f := &personFields{UserID: sp.UserID, Name: sp.Name, Manager: sp.Manager}
		f.Departments, f.Tags = sp.Departments, sp.Tags
		if len(f.Departments) > 0 {
			f.Department = f.Departments[0]
		}
		out.people = append(out.people, in.person(f))
	}
	out.byID, _, _, _ = indexUsers(out.people) // no repeats: skipped above
	// A file person's manager must be in the file (checked at parse), a
	// snapshot person's in the snapshot (checked at parse): both are here.
	return out
}

// fillFromSnapshot returns a copy of the file's person with the fields it
// leaves empty taken from the snapshot.
func fillFromSnapshot(p *Person, sp *DirectoryPerson, in *interner) *Person {
	n := &personFields{UserID: p.UserID, Name: p.Name, Manager: p.Manager, profile: *p.profile, birthdays: *p.birthdays}
	if n.Name == "" {
		n.Name = sp.Name
	}
	if n.Department == "" && len(sp.Departments) > 0 {
		n.Department = sp.Departments[0]
		n.Departments = sp.Departments
	}
	if len(n.Tags) == 0 {
		n.Tags = sp.Tags
	}
	if n.Manager == "" {
		n.Manager = sp.Manager
	}
	return in.person(n)
}

// SetDirectory puts a directory snapshot (its canonical JSON, as
// replicated) in force beside the people file: the next version merges it.
// A snapshot that does not parse is refused and the one in force stays.
// An empty data removes the snapshot.
func (s *Set) SetDirectory(data []byte) error {
	var snap *DirectorySnapshot
	hash := ""
	if len(data) > 0 {
		var err error
		if snap, err = ParseDirectorySnapshot(data); err != nil {
			return err
		}
		hash = DirectoryHash(data)
	}
	s.reloadMu.Lock()
	if s.dirHash == hash {
		s.reloadMu.Unlock()
		return nil
	}
	if s.dir != nil {
		s.recentDirs[s.dirHash] = s.dir
		s.recentOrder = append(s.recentOrder, s.dirHash)
		for len(s.recentOrder) > keepDirectories {
			delete(s.recentDirs, s.recentOrder[0])
			s.recentOrder = s.recentOrder[1:]
		}
	}
	s.dir, s.dirHash = snap, hash
	s.reloadMu.Unlock()
	_, err := s.reload()
	return err
}

// keepDirectories is how many earlier snapshots a set keeps, so that a
// run started just before a refresh came into force is still planned with
// the snapshot it started with.
const keepDirectories = 4

// peopleFor returns the directory a run started with directory snapshot
// hash sees: nil (the version's own) when it is the one in force, the
// people file merged with an earlier snapshot the set still keeps, or
// engine.ErrDirectoryPending when the set does not have it (a newer
// snapshot still being applied on this node).
func (s *Set) peopleFor(v *version, hash string) (*Directory, error) {
	if hash == v.dirHash {
		return nil, nil
	}
	if hash == "" {
		return v.filePeople, nil
	}
	s.reloadMu.Lock()
	snap := s.recentDirs[hash]
	s.reloadMu.Unlock()
	if snap == nil {
		return nil, fmt.Errorf("%w: snapshot %s (this node has %q)", engine.ErrDirectoryPending, hash, v.dirHash)
	}
	return mergeDirectory(v.filePeople, snap), nil
}

// DirectoryHash is the hash of the directory snapshot in force ("" when
// none): recorded on every run beside the rule set's hash.
func (s *Set) DirectoryHash() string { return s.cur.Load().dirHash }

// DirectoryPeople is how many people the snapshot in force holds.
func (s *Set) DirectoryPeople() int {
	if d := s.cur.Load().dir; d != nil {
		return len(d.People)
	}
	return 0
}
