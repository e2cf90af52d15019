package host

import "golang.org/x/sys/unix"

// HideProcess makes this process non-dumpable (PR_SET_DUMPABLE 0): its
// /proc/PID/environ, mem, maps and fd become root's, so a process of the
// same user — a channel plugin among them — can neither read the tokens,
// the cluster secret and the channels' secrets in its environment nor
// ptrace it. It costs core dumps. It does not hold back root (an agent run
// as root needs plugin_user for that), and it is reset by exec: the
// plugins themselves stay dumpable. The agent calls it first thing.
func HideProcess() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
