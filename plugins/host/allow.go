package host

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/hashicorp/go-plugin"
)

// ErrNotAllowed marks an external plugin whose executable's SHA-256 is not
// listed in the configuration's plugin_sha256: it is never run.
var ErrNotAllowed = errors.New("plugin is not allowed")

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// CheckSHA256 validates one plugin_sha256 entry: lower-case hex of 32
// bytes (upper case is accepted and lowered).
func CheckSHA256(name, hexsum string) (string, error) {
	sum := strings.ToLower(strings.TrimSpace(hexsum))
	if !sha256Hex.MatchString(sum) {
		return "", fmt.Errorf("plugin_sha256 %s: want 64 hex digits (sha256sum's output), got %q", name, hexsum)
	}
	return sum, nil
}

// FileSHA256 is the hex SHA-256 of the file at path (reading it, never
// running it).
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// AllowLine is the configuration line that allows a plugin with sum.
func AllowLine(name, sum string) string {
	return fmt.Sprintf("plugin_sha256: { %s: %s }", name, sum)
}

// allow decides whether an external plugin may run: its file's SHA-256
// must be the one listed for its name. When it may, it returns the sum's
// bytes, which launch has go-plugin check again right before each start
// (secureConfig), so a file swapped after this check is refused, not run.
func allow(name, path string, listed map[string]string) (string, []byte, error) {
	sum, err := FileSHA256(path)
	if err != nil {
		return "", nil, err
	}
	want, ok := listed[name]
	if !ok {
		return sum, nil, fmt.Errorf("%w: %s is not listed in plugin_sha256, so it is not run; "+
			"if you trust this file, add to the config: %s", ErrNotAllowed, path, AllowLine(name, sum))
	}
	if want != sum {
		return sum, nil, fmt.Errorf("%w: %s has sha256 %s, but plugin_sha256 lists %s for %s (the file changed?); "+
			"if you trust the new file, list its sum instead", ErrNotAllowed, path, sum, want, name)
	}
	raw, err := hex.DecodeString(sum)
	if err != nil {
		return "", nil, err
	}
	return sum, raw, nil
}

// secureConfig is go-plugin's check of an executable against checksum
// (nil: no check), fresh for one start: go-plugin hashes the file into its
// Hash without resetting it, so a SecureConfig used twice refuses the
// second start of an allowed plugin, and with it every restart.
func secureConfig(checksum []byte) *plugin.SecureConfig {
	if checksum == nil {
		return nil
	}
	return &plugin.SecureConfig{Checksum: checksum, Hash: sha256.New()}
}

// changedSinceAllowed words go-plugin's refusal of an executable whose
// SHA-256 is no longer the allowed one (swapped since the node read it) as
// allow words one found changed at startup.
func changedSinceAllowed(path string, checksum []byte, err error) error {
	now, herr := FileSHA256(path)
	if herr != nil {
		now = "unreadable (" + herr.Error() + ")"
	}
	return fmt.Errorf("%w: %s has sha256 %s, but plugin_sha256 lists %s (the file changed since the node started: %v); "+
		"if you trust the new file, list its sum instead and restart the node", ErrNotAllowed, path, now, hex.EncodeToString(checksum), err)
}
