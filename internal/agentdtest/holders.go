package agentdtest

import (
	"fmt"
	"os"
	"strconv"
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
