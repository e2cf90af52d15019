package rules

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Size limits for the files a scan reads.
const (
	maxRuleFile = 1 << 20  // one .lua file
	maxDataFile = 64 << 20 // a calendar
	// maxPeopleFile: a million people with every documented column is
	// about 75 MiB (herald bench people), and a file is read and parsed
	// row by row (people.go), never held twice as field maps.
	maxPeopleFile = 256 << 20
	maxScanDepth  = 8
	maxScanFiles  = 10_000
)

// A rescan first stats the directory (scanDir without reading): when no
// file's stamp (where it resolves, its inode, size, mode, modification
// and change times) changed since the last read, and each had been still
// for racyWindow before it, nothing is read. A rescan every 30 s read
// and hashed the whole people file (77 MB at a million people, on every
// node) to learn that it had not changed.
const (
	// racyWindow: a file changed this close to a stat may change again
	// within its file system's timestamp granularity (a second or two on
	// some) without a new stamp; it is read until it has been still longer.
	racyWindow = 2 * time.Second
	// fullReadInterval: a read at least this often whatever the stamps say,
	// for a change no stamp shows (a network file system's cached
	// attributes, a write through a mapping).
	fullReadInterval = 10 * time.Minute
)

// calendarDir is where company calendar files live, in the rules
// directory's top level: calendars/NAME.yaml defines calendar NAME.
const calendarDir = "calendars"

// scanned is one file found by a scan.
type scanned struct {
	kind string // KindRule, KindPeople or KindCalendar
	data []byte
	hash string
	err  error // could not be read (too big, unreadable)
	// readFailed: the read itself failed (EMFILE, EIO, ESTALE), which may
	// pass without the file's stamp changing: the next rescan reads again.
	readFailed bool
}

// readFile reads a file of the rules directory; tests make it fail.
var readFile = (*os.Root).ReadFile

// scanResult is the relevant content of the directory at one moment, by
// path relative to the directory (forward slashes), and the directories a
// watcher should watch.
type scanResult struct {
	files map[string]*scanned
	dirs  []string
	// lastChange is the latest modification or change time of the files
	// (a stamp pass's; see stillSince).
	lastChange time.Time
}

// readFailed reports whether a file's read failed (see scanned).
func (r *scanResult) readFailed() bool {
	for _, f := range r.files {
		if f.readFailed {
			return true
		}
	}
	return false
}

// stillSince reports whether no file of a stamp pass changed within
// window before at.
func (r *scanResult) stillSince(at time.Time, window time.Duration) bool {
	return r.lastChange.Add(window).Before(at)
}

// fingerprint identifies the scanned content; equal fingerprints need no
// reload.
func (r *scanResult) fingerprint() string {
	keys := make([]string, 0, len(r.files))
	for k := range r.files {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		f := r.files[k]
		fmt.Fprintf(&b, "%s\x00%s\x00%v\n", k, f.hash, f.err)
	}
	return contentHash([]byte(b.String()))
}

// kindOf says whether a file (relative path) is one the rules use.
func kindOf(rel string) string {
	dir, base := path.Split(rel)
	switch {
	case dir == "" && slices.Contains(PeopleFiles, base):
		return KindPeople
	case dir == calendarDir+"/" && (strings.HasSuffix(base, ".yaml") || strings.HasSuffix(base, ".yml")):
		return KindCalendar
	case strings.HasSuffix(base, ".lua"):
		return KindRule
	}
	return ""
}

// scanDir reads every relevant file under dir. Names starting with a dot
// are skipped: editors' swap files, and the timestamped directories and
// ..data link of a Kubernetes ConfigMap volume (whose files are reached
// through the top-level symlinks). Symlinks are followed, with a depth and
// a loop guard, but only within dir: a file or directory that resolves
// outside it (a link to /etc/shadow, a link to ..) is refused with its
// path and its target, never read (issue 19: its content reached
// /v1/status through a parse error). Files are read through an os.Root
// of dir, so a link swapped after the check cannot lead out either.
//
// With read false it reads no file: each file's hash is its stamp
// (fileStamp), for the cheap pass of a rescan.
func scanDir(dir string, read bool) (*scanResult, error) {
	res := &scanResult{files: map[string]*scanned{}}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDir, err)
	}
	root, err := os.OpenRoot(realDir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDir, err)
	}
	defer root.Close()
	seen := map[string]bool{}
	var walk func(abs, rel string, depth int) error
	walk = func(abs, rel string, depth int) error {
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil // vanished mid-scan: the next scan sees the result
		}
		if seen[real] || depth > maxScanDepth {
			return nil
		}
		seen[real] = true
		res.dirs = append(res.dirs, abs)
		entries, err := os.ReadDir(abs)
		if err != nil {
			if rel == "" {
				return fmt.Errorf("%w: %v", ErrNoDir, err)
			}
			return nil
		}
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, ".") {
				continue
			}
			childAbs := filepath.Join(abs, name)
			childRel := path.Join(rel, name)
			fi, err := os.Stat(childAbs) // follows symlinks
			if err != nil {
				continue // dangling link, or removed since ReadDir
			}
			kind := kindOf(childRel)
			if !fi.IsDir() && (kind == "" || !fi.Mode().IsRegular()) {
				continue // not a file the rules use (or a device): never read
			}
			target, inside := within(realDir, childAbs)
			if !inside {
				if fi.IsDir() {
					kind = KindRule // shown like a broken rule file
				}
				res.files[childRel] = &scanned{kind: kind, hash: "outside-" + contentHash([]byte(target)),
					err: fmt.Errorf("refused: %s resolves to %s, outside the rules directory %s", childRel, target, realDir)}
				continue
			}
			if fi.IsDir() {
				if err := walk(childAbs, childRel, depth+1); err != nil {
					return err
				}
				continue
			}
			if len(res.files) >= maxScanFiles {
				return fmt.Errorf("more than %d rule files under %s", maxScanFiles, dir)
			}
			if !read {
				stamp, changed := fileStamp(target, fi)
				res.files[childRel] = &scanned{kind: kind, hash: stamp}
				if changed.After(res.lastChange) {
					res.lastChange = changed
				}
				continue
			}
			res.files[childRel] = readScanned(root, filepath.FromSlash(childRel), kind, fi.Size())
		}
		return nil
	}
	if err := walk(dir, "", 0); err != nil {
		return nil, err
	}
	return res, nil
}

// within resolves abs and says whether it is inside realDir (itself
// resolved), with the resolved path.
func within(realDir, abs string) (string, bool) {
	target, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return abs, true // vanished: the read reports it
	}
	rel, err := filepath.Rel(realDir, target)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return target, false
	}
	return target, true
}

func readScanned(root *os.Root, rel, kind string, size int64) *scanned {
	limit := int64(maxDataFile)
	switch kind {
	case KindRule:
		limit = maxRuleFile
	case KindPeople:
		limit = maxPeopleFile
	}
	f := &scanned{kind: kind}
	if size > limit {
		f.err = fmt.Errorf("file is %d bytes, over the %d byte limit", size, limit)
		f.hash = fmt.Sprintf("size-%d", size)
		return f
	}
	data, err := readFile(root, rel)
	if err != nil {
		f.err, f.readFailed = err, true
		return f
	}
	if int64(len(data)) > limit {
		f.err = fmt.Errorf("file is %d bytes, over the %d byte limit", len(data), limit)
	}
	f.data, f.hash = data, contentHash(data)
	return f
}
