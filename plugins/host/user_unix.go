//go:build unix

package host

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
)

type credential = syscall.Credential

// pluginCredential resolves Config.PluginUser (a name or a uid) to the
// credential the plugins run with: its uid, its primary group, and no
// supplementary groups (not the agent's). Setting another user needs the
// agent to run as root.
func pluginCredential(name string) (*credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if u, err = user.LookupId(name); err != nil {
			return nil, fmt.Errorf("%w: plugin_user %q: no such user", ErrConfig, name)
		}
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%w: plugin_user %q: uid %s, gid %s are not numbers", ErrConfig, name, u.Uid, u.Gid)
	}
	if os.Geteuid() != 0 && uint64(os.Geteuid()) != uid {
		return nil, fmt.Errorf("%w: plugin_user %q: only an agent run as root can start plugins as another user", ErrConfig, name)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// asPluginUser makes cmd run as the plugin user, if one is set.
func (h *Host) asPluginUser(cmd *exec.Cmd) *exec.Cmd {
	if h.cred != nil {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Credential = h.cred
	}
	return cmd
}
