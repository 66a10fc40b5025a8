package agentdtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Holders returns the processes, other than this one, that have the file
// at path (a terminal's, say) open, by their ids, as /proc shows them.
func Holders(t testing.TB, path string) []int {
	t.Helper()
	procs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)) // gone, or another user's
		for _, fd := range fds {
			if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); target == path {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// Polled returns the descriptors of process pid that refer to path and
// are in one of its epoll instances (the Go runtime's poller among
// them): what wakes the process when path is read or written.
func Polled(t testing.TB, pid int, path string) []int {
	t.Helper()
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		t.Fatal(err)
	}
	var polled []int
	for _, fd := range fds {
		if target, _ := os.Readlink(filepath.Join(fdDir, fd.Name())); target != "anon_inode:[eventpoll]" {
			continue
		}
		info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		for line := range strings.Lines(string(info)) {
			// tfd:        7 events:   8000201d data: ...
			fields := strings.Fields(line)
			if len(fields) < 2 || fields[0] != "tfd:" {
				continue
			}
			if target, _ := os.Readlink(filepath.Join(fdDir, fields[1])); target == path {
				n, _ := strconv.Atoi(fields[1])
				polled = append(polled, n)
			}
		}
	}
	return polled
}
