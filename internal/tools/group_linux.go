package tools

import (
	"os"
	"syscall"
)

// groupRunning reports whether a process of the group is still running.
// Members that have exited but wait to be reaped do not count: where the
// init process does not reap orphans (a container without an init), they
// would otherwise count for ever.
func groupRunning(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	proc, err := os.Open("/proc")
	if err != nil {
		return true
	}
	defer proc.Close()
	names, err := proc.Readdirnames(-1)
	if err != nil {
		return true
	}
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		stat, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // it ended meanwhile
		}
		state, pgrp, ok := parseStat(stat)
		if ok && pgrp == pgid && state != 'Z' && state != 'X' {
			return true
		}
	}
	return false
}
