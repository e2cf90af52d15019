//go:build !unix

package host

import (
	"fmt"
	"os/exec"
)

type credential struct{}

func pluginCredential(name string) (*credential, error) {
	return nil, fmt.Errorf("%w: plugin_user %q: not supported on this system", ErrConfig, name)
}

func (h *Host) asPluginUser(cmd *exec.Cmd) *exec.Cmd { return cmd }
