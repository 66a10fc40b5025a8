//go:build !linux

package tools

import "syscall"

// groupRunning reports whether the group has a process left, including
// ones that have exited and wait to be reaped.
func groupRunning(pgid int) bool {
	return syscall.Kill(-pgid, 0) == nil
}
