package sessions

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
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

// processRunning reports whether process pid exists and has not exited:
// a zombie, exited but not yet reaped by its parent, does not count.
func processRunning(pid int) bool {
	if pid <= 0 || unix.Kill(pid, 0) != nil {
		return false
	}
	state, _ := statFields(pid)
	return state != "" && state != "Z"
}

// sessionOf returns the session id of process pid, or -1.
func sessionOf(pid int) int {
	_, f := statFields(pid)
	if len(f) < 4 {
		return -1
	}
	sid, err := strconv.Atoi(f[3])
	if err != nil {
		return -1
	}
	return sid
}

// statFields returns the fields of /proc/<pid>/stat after the command
// name: state, ppid, pgrp, session, … ; none when it cannot be read.
func statFields(pid int) (state string, fields []string) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", nil
	}
	// The command name, in parentheses, may hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return "", nil
	}
	fields = strings.Fields(string(stat[i+1:]))
	if len(fields) == 0 {
		return "", nil
	}
	return fields[0], fields
}
