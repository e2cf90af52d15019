package mock

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Record is one line of the outbox: one message the mock accepted.
type Record struct {
	Key        string          `json:"key"` // idempotency key
	ID         string          `json:"id"`  // delivery id
	Recipient  string          `json:"recipient"`
	Channel    string          `json:"channel"` // channel instance name
	Payload    json.RawMessage `json:"payload"`
	Attempt    int             `json:"attempt"`
	ReceivedAt time.Time       `json:"received_at"` // RFC 3339
	// Duplicate is true when the key had been received before: the message
	// was not delivered again, only recorded.
	Duplicate bool `json:"duplicate"`
	// Recall marks a line that takes back the message of Key (Recall):
	// not a delivery.
	Recall bool `json:"recall,omitempty"`
}

// ReadOutbox reads every record of an outbox file. A torn last line (a
// process killed mid-write) is skipped.
func ReadOutbox(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Record
	_, err = scanRecords(f, func(r Record) { out = append(out, r) })
	return out, err
}

// Delivered counts, per idempotency key, the records that were delivered
// (not duplicates). A correct system shows 1 for every key.
func Delivered(records []Record) map[string]int {
	n := make(map[string]int)
	for _, r := range records {
		if !r.Duplicate && !r.Recall {
			n[r.Key]++
		}
	}
	return n
}

// Recalled lists the keys whose messages were taken back.
func Recalled(records []Record) map[string]bool {
	n := make(map[string]bool)
	for _, r := range records {
		if r.Recall {
			n[r.Key] = true
		}
	}
	return n
}

// scanRecords calls fn for each complete, well-formed line of r and returns
// how many bytes of r it consumed (up to the end of the last complete line).
func scanRecords(r io.Reader, fn func(Record)) (int64, error) {
	br := bufio.NewReader(r)
	var n int64
	for {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return n, nil // a partial last line is not consumed
		}
		if err != nil {
			return n, err
		}
		n += int64(len(line))
		var rec Record
		if json.Unmarshal(bytes.TrimSpace(line), &rec) != nil || rec.Key == "" {
			continue // torn or foreign line: nothing to learn from it
		}
		fn(rec)
	}
}

// outbox is an append-only JSON-lines file shared by every mock process
// that is configured with it (the nodes of a test cluster may share one, so
// that a new leader's mock knows what the old leader's delivered). Every
// batch holds an exclusive file lock while it catches up on lines others
// appended and appends its own.
type outbox struct {
	f      *os.File
	offset int64           // bytes of f already read into seen
	seen   map[string]bool // idempotency keys delivered so far
	count  int             // delivered records so far
}

func openOutbox(path string) (*outbox, error) {
	// 0600: the outbox holds every message's content (issue 19: it was
	// 0644, readable by every user of the machine). One an older build
	// made is narrowed too; a file of another user's we cannot narrow is
	// left as it is (the open would have failed had we no access).
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("mock: outbox: %w", err)
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm()&0o077 != 0 {
		_ = f.Chmod(fi.Mode().Perm() &^ 0o077)
	}
	return &outbox{f: f, seen: make(map[string]bool)}, nil
}

// lockAndCatchUp takes the file lock and reads what others appended since
// the last call. The caller must call unlock.
func (o *outbox) lockAndCatchUp() error {
	if err := lockFile(o.f); err != nil {
		return fmt.Errorf("mock: lock outbox: %w", err)
	}
	if err := o.catchUp(); err != nil {
		_ = unlockFile(o.f)
		return err
	}
	return nil
}

func (o *outbox) catchUp() error {
	n, err := scanRecords(io.NewSectionReader(o.f, o.offset, 1<<62), o.learn)
	o.offset += n
	if err != nil {
		return fmt.Errorf("mock: read outbox: %w", err)
	}
	end, err := o.f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("mock: read outbox: %w", err)
	}
	if end == o.offset {
		return nil
	}
	// A process died mid-write. Learn from the torn line if it is whole
	// but for its newline, then end it so that the next record starts on a
	// line of its own.
	tail := make([]byte, end-o.offset)
	if _, err := o.f.ReadAt(tail, o.offset); err != nil {
		return fmt.Errorf("mock: read outbox: %w", err)
	}
	var rec Record
	if json.Unmarshal(tail, &rec) == nil && rec.Key != "" {
		o.learn(rec)
	}
	if _, err := o.f.Write([]byte("\n")); err != nil {
		return fmt.Errorf("mock: repair outbox: %w", err)
	}
	o.offset = end + 1
	return nil
}

// remember counts keys as delivered once their lines are written.
func (o *outbox) remember(keys map[string]bool) {
	for k := range keys {
		if !o.seen[k] {
			o.seen[k] = true
			o.count++
		}
	}
}

func (o *outbox) learn(r Record) {
	if !r.Duplicate && !r.Recall && !o.seen[r.Key] {
		o.seen[r.Key] = true
		o.count++
	}
}

// append writes lines (each ending in '\n') and syncs them to disk. It is
// called under the lock.
func (o *outbox) append(lines []byte) error {
	if len(lines) == 0 {
		return nil
	}
	if _, err := o.f.Write(lines); err != nil {
		return fmt.Errorf("mock: write outbox: %w", err)
	}
	o.offset += int64(len(lines))
	if err := o.f.Sync(); err != nil {
		return fmt.Errorf("mock: sync outbox: %w", err)
	}
	return nil
}

func (o *outbox) unlock() error { return unlockFile(o.f) }

func (o *outbox) close() error { return o.f.Close() }
