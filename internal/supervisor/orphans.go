package supervisor

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/internal/proc"
)

// killSession kills every process left in the session sid: what a worker,
// the leader of its own session, started and could not end itself because
// it was killed (a command its bash tool ran, and that command's children).
// A process that made a session of its own has left on purpose and is
// spared. It returns how many processes it signalled.
//
// The kernel keeps a session's id from being reused while any of its
// members lives, so every process found is one of the worker's; each is
// signalled through a pidfd, after checking its session once more, so a
// process id reused in between is never hit.
func killSession(sid int) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	killed := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == sid || sessionOf(pid) != sid {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		if sessionOf(pid) == sid && unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil {
			killed++
		}
		unix.Close(fd)
	}
	return killed
}

// sessionOf returns the session id of process pid, or -1.
func sessionOf(pid int) int {
	st, err := proc.ReadStat(pid)
	if err != nil {
		return -1
	}
	return st.Session
}
