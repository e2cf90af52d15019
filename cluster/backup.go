package cluster

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/heraldhq/herald/engine"
)

// A backup file (herald snapshot save) is the replicated state as one
// stream, in an envelope of Herald's own:
//
//	HERALD-BACKUP 1\n                 magic and envelope version
//	{"cluster_id":…,"size":N,…}\n     BackupHeader, one line of JSON
//	N bytes                            the state: an engine snapshot
//	{"sha256":"…"}\n                  the SHA-256 of everything before it
//
// The size up front lets a reader find the trailer without understanding
// the state; the checksum at the end lets the writer stream (nothing is
// buffered to hash first). A reader refuses anything else: another magic, a
// newer envelope, a short or long body, trailing bytes, a checksum that
// differs.
const (
	backupMagic = "HERALD-BACKUP"
	// BackupVersion is the envelope's version; readers refuse newer ones.
	BackupVersion = 1
	// maxBackupLine bounds the magic, header and trailer lines, so that a
	// file of another kind (one long line) is refused without being read
	// whole.
	maxBackupLine = 64 << 10
)

// ErrBadBackup is the cause of every refusal of a file as a backup: not
// one, damaged, truncated, or written by a newer build.
var ErrBadBackup = errors.New("not a usable Herald backup")

// BackupHeader is the second line of a backup file.
type BackupHeader struct {
	// ClusterID is the cluster the state was taken from, NodeID the
	// member that wrote it.
	ClusterID string `json:"cluster_id"`
	NodeID    string `json:"node_id"`
	// Index and Term are the Raft position the state is at.
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// FSMVersion is the FSM version of the build that wrote the state
	// (engine.FSMVersion); Build names that build.
	FSMVersion uint16 `json:"fsm_version"`
	Build      string `json:"build"`
	// Created is when the backup was taken, in UTC.
	Created time.Time `json:"created"`
	// Size is the length of the state stream that follows, in bytes.
	Size int64 `json:"size"`
}

type backupTrailer struct {
	SHA256 string `json:"sha256"`
}

// WriteBackup writes h and exactly h.Size bytes of state from the stream
// state, in the envelope, to w.
func WriteBackup(w io.Writer, h BackupHeader, state io.Reader) error {
	sum := sha256.New()
	out := io.MultiWriter(w, sum)
	line, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("write backup header: %w", err)
	}
	if _, err := fmt.Fprintf(out, "%s %d\n%s\n", backupMagic, BackupVersion, line); err != nil {
		return fmt.Errorf("write backup header: %w", err)
	}
	if n, err := io.CopyN(out, state, h.Size); err != nil {
		return fmt.Errorf("write backup: state stream ended after %d of %d bytes: %w", n, h.Size, err)
	}
	t, err := json.Marshal(backupTrailer{SHA256: hex.EncodeToString(sum.Sum(nil))})
	if err != nil {
		return fmt.Errorf("write backup trailer: %w", err)
	}
	if _, err := w.Write(append(t, '\n')); err != nil {
		return fmt.Errorf("write backup trailer: %w", err)
	}
	return nil
}

// OpenBackup reads a backup's magic and header from r. The state stream is
// read from the returned reader, which checks the trailer once the stream
// is read to its end: its last Read returns io.EOF only if the checksum
// matches and nothing follows; otherwise an error wrapping ErrBadBackup.
// Nothing read from it is to be trusted before that.
func OpenBackup(r io.Reader) (BackupHeader, io.Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	sum := sha256.New()
	magic, err := readBackupLine(br, sum, "the first line")
	if err != nil {
		return BackupHeader{}, nil, err
	}
	var version int
	if n, err := fmt.Sscanf(string(magic), backupMagic+" %d", &version); err != nil || n != 1 {
		return BackupHeader{}, nil, fmt.Errorf("%w: it does not start with %q (is it a Herald backup, written by herald snapshot save?)", ErrBadBackup, backupMagic)
	}
	if version < 1 || version > BackupVersion {
		return BackupHeader{}, nil, fmt.Errorf("%w: envelope version %d; this build (%s) reads 1 to %d: restore it with a newer build", ErrBadBackup, version, engine.Build, BackupVersion)
	}
	line, err := readBackupLine(br, sum, "the header")
	if err != nil {
		return BackupHeader{}, nil, err
	}
	var h BackupHeader
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return BackupHeader{}, nil, fmt.Errorf("%w: the header does not decode: %v", ErrBadBackup, err)
	}
	if h.Size <= 0 {
		return BackupHeader{}, nil, fmt.Errorf("%w: the header gives a state of %d bytes", ErrBadBackup, h.Size)
	}
	return h, &backupBody{r: br, left: h.Size, size: h.Size, sum: sum}, nil
}

// readBackupLine reads one line (without its newline) of at most
// maxBackupLine bytes, adding it to sum.
func readBackupLine(br *bufio.Reader, sum hash.Hash, what string) ([]byte, error) {
	var line []byte
	for {
		part, err := br.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > maxBackupLine {
			return nil, fmt.Errorf("%w: %s is longer than %d bytes", ErrBadBackup, what, maxBackupLine)
		}
		if err == nil {
			sum.Write(line)
			return line[:len(line)-1], nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) {
			if len(line) == 0 && what == "the first line" {
				return nil, fmt.Errorf("%w: the file is empty", ErrBadBackup)
			}
			return nil, fmt.Errorf("%w: truncated in %s", ErrBadBackup, what)
		}
		return nil, err
	}
}

// backupBody reads the state stream and checks the trailer at its end.
type backupBody struct {
	r          *bufio.Reader
	left, size int64
	sum        hash.Hash
	err        error // once the end was reached: nil (io.EOF) or the refusal
	done       bool
}

func (b *backupBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, b.final()
	}
	if b.left == 0 {
		b.done, b.err = true, b.checkTrailer()
		return 0, b.final()
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.sum.Write(p[:n])
	b.left -= int64(n)
	if errors.Is(err, io.EOF) {
		if b.left > 0 {
			b.done = true
			b.err = fmt.Errorf("%w: truncated: the state ends after %d of %d bytes, and the checksum is missing", ErrBadBackup, b.size-b.left, b.size)
			return n, b.err
		}
		err = nil
	}
	return n, err
}

func (b *backupBody) final() error {
	if b.err != nil {
		return b.err
	}
	return io.EOF
}

func (b *backupBody) checkTrailer() error {
	want := hex.EncodeToString(b.sum.Sum(nil))
	line, err := readBackupLine(b.r, sha256.New(), "the checksum")
	if err != nil {
		return err
	}
	var t backupTrailer
	if err := json.Unmarshal(line, &t); err != nil || t.SHA256 == "" {
		return fmt.Errorf("%w: the checksum line does not decode (a damaged or spliced file)", ErrBadBackup)
	}
	if t.SHA256 != want {
		return fmt.Errorf("%w: the checksum does not match (SHA-256 %s, the file says %s): the file is damaged", ErrBadBackup, want, t.SHA256)
	}
	if n, _ := io.Copy(io.Discard, io.LimitReader(b.r, 1<<20)); n > 0 {
		return fmt.Errorf("%w: bytes follow the checksum (two files joined?)", ErrBadBackup)
	}
	return nil
}

// BackupInfo is a backup file read whole and checked (InspectBackup).
type BackupInfo struct {
	Header BackupHeader
	State  engine.SnapshotInfo
	// SHA256 is the checksum, verified.
	SHA256 string
}

// InspectBackup reads a whole backup from r: the envelope, the checksum,
// and every record of the state, as a restore would. Any error wraps
// ErrBadBackup; a damaged file is named by its checksum first.
func InspectBackup(r io.Reader) (BackupInfo, error) {
	h, body, err := OpenBackup(r)
	if err != nil {
		return BackupInfo{}, err
	}
	info := BackupInfo{Header: h}
	if err := checkBackupVersion(h); err != nil {
		return info, err
	}
	info.State, err = engine.InspectSnapshot(body)
	// The checksum covers what the state reader may not have reached (gob
	// stops at the end section): read to the end either way.
	if _, derr := io.Copy(io.Discard, body); derr != nil {
		return info, derr
	}
	if err != nil {
		return info, fmt.Errorf("%w: the checksum matches but the state does not read: %v", ErrBadBackup, err)
	}
	info.SHA256 = body.(*backupBody).sumHex()
	return info, nil
}

func (b *backupBody) sumHex() string { return hex.EncodeToString(b.sum.Sum(nil)) }

// checkBackupVersion refuses a state this build could not apply.
func checkBackupVersion(h BackupHeader) error {
	if h.FSMVersion > engine.FSMVersion {
		return fmt.Errorf("%w: it was written by build %s, which applies FSM version %d; this build (%s) applies %d: restore it with build %s or newer",
			ErrBadBackup, h.Build, h.FSMVersion, engine.Build, engine.FSMVersion, h.Build)
	}
	return nil
}
