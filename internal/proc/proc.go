// Package proc reads what agentd needs to know of a process from Linux's
// /proc/<pid>/stat — its state, parent, process group, session, CPU time
// and start time — and decides from them whether a process, or a process
// group, still runs; and from /proc/<pid>/cmdline and status its command
// line, user and whether it is confined (Confined). A zombie (exited, not yet reaped by its parent) does
// not run: where the init process does not reap orphans (a container
// without an init) it would otherwise count for ever.
//
// Where there is no /proc (another system), Running and GroupRunning fall
// back to whether kill(2) finds the process, zombies included, and
// ReadStat fails.
//
// On Linux it also holds a process by a pidfd: waiting for its exit as an
// event (WaitExit, AwaitPidfd) and signalling it without the risk of a
// reused pid (SignalPidfd).
//
// It knows nothing of hosts, workers or tools.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrMalformed is returned by ParseStat for content that is not a stat
// line.
var ErrMalformed = errors.New("malformed /proc stat line")

// Stat is what /proc/<pid>/stat says of a process.
type Stat struct {
	PID int
	// Comm is the command name, at most 15 bytes; it may hold spaces
	// and parentheses.
	Comm string
	// State is one of R (running), S (sleeping), D (waiting on disk),
	// T (stopped), t (traced), Z (zombie), X (dead), I (idle) and the
	// like.
	State   byte
	PPID    int
	PGRP    int
	Session int
	// MinFlt is how many minor page faults the process took.
	MinFlt uint64
	// UTime and STime are the user and system CPU time, all threads, in
	// clock ticks.
	UTime, STime uint64
	// StartTime is when the process started, in clock ticks since boot.
	// With the pid it names a process for as long as the system runs: a
	// pid reused by a later process comes with a later start time.
	StartTime uint64
}

// ClockTick is the length of the clock tick /proc counts times in
// (USER_HZ, 100 on every Linux).
const ClockTick = 10 * time.Millisecond

// Exited reports whether the process has exited: a zombie or dead.
func (s Stat) Exited() bool { return s.State == 'Z' || s.State == 'X' }

// CPU returns the user plus system CPU time of the process.
func (s Stat) CPU() time.Duration { return time.Duration(s.UTime+s.STime) * ClockTick }

// ReadStat reads and parses /proc/<pid>/stat. A process that does not
// exist (or has been reaped) gives an error satisfying
// errors.Is(err, fs.ErrNotExist).
func ReadStat(pid int) (Stat, error) {
	if pid <= 0 {
		return Stat{}, fmt.Errorf("read stat of pid %d: %w", pid, os.ErrNotExist)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	s, err := ParseStat(b)
	if err != nil {
		return Stat{}, fmt.Errorf("read stat of pid %d: %w", pid, err)
	}
	return s, nil
}

// ParseStat parses the content of a /proc/<pid>/stat file:
// "pid (comm) state ppid pgrp session … utime stime … starttime …".
func ParseStat(b []byte) (Stat, error) {
	open := bytes.IndexByte(b, '(')
	// The command name may hold ')': it ends at the last one.
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return Stat{}, ErrMalformed
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return Stat{}, ErrMalformed
	}
	// f[0] is field 3 of proc(5) (state); f[i] is field i+3.
	f := bytes.Fields(b[end+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, ErrMalformed
	}
	s := Stat{PID: pid, Comm: string(b[open+1 : end]), State: f[0][0]}
	ints := []struct {
		field int
		to    *int
	}{{1, &s.PPID}, {2, &s.PGRP}, {3, &s.Session}}
	for _, x := range ints {
		if *x.to, err = strconv.Atoi(string(f[x.field])); err != nil {
			return Stat{}, ErrMalformed
		}
	}
	uints := []struct {
		field int
		to    *uint64
	}{{7, &s.MinFlt}, {11, &s.UTime}, {12, &s.STime}, {19, &s.StartTime}}
	for _, x := range uints {
		if *x.to, err = strconv.ParseUint(string(f[x.field]), 10, 64); err != nil {
			return Stat{}, ErrMalformed
		}
	}
	return s, nil
}

// Running reports whether process pid exists and has not exited. Where
// /proc is mounted a process of any user counts; compare a StartTime read
// earlier to tell a reused pid from the process that had it.
func Running(pid int) bool {
	if pid <= 0 {
		return false
	}
	if !haveProc() {
		return exists(pid)
	}
	s, err := ReadStat(pid)
	return err == nil && !s.Exited()
}

// Args reads the command line process pid was started with, from
// /proc/<pid>/cmdline.
func Args(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("read the command line of pid %d: %w", pid, ErrMalformed)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), nil
}

// UID reads the real user id process pid runs as, from
// /proc/<pid>/status, which is readable of any process.
func UID(pid int) (int, error) {
	f, err := statusFields(pid, "Uid")
	if err != nil {
		return -1, err
	}
	if uid, err := strconv.Atoi(firstField(f["Uid"])); err == nil {
		return uid, nil
	}
	return -1, fmt.Errorf("read the user of pid %d: %w", pid, ErrMalformed)
}

// Confined reports whether process pid runs with no_new_privs and an
// empty capability bounding set, from /proc/<pid>/status. Both carry to
// every process it starts and neither can be undone: an ordinary process,
// root's or a user's, has a full bounding set, so the two together mark
// a process walled in on purpose (agentd's sandbox sets both).
func Confined(pid int) (bool, error) {
	f, err := statusFields(pid, "NoNewPrivs", "CapBnd")
	if err != nil {
		return false, err
	}
	nnp, bnd := firstField(f["NoNewPrivs"]), firstField(f["CapBnd"])
	if nnp == "" || bnd == "" {
		return false, fmt.Errorf("read the privileges of pid %d: %w", pid, ErrMalformed)
	}
	caps, err := strconv.ParseUint(bnd, 16, 64)
	if err != nil {
		return false, fmt.Errorf("read the privileges of pid %d: %w", pid, ErrMalformed)
	}
	return nnp == "1" && caps == 0, nil
}

// statusFields reads the values of the named fields of
// /proc/<pid>/status; a field it does not hold is absent.
func statusFields(pid int, names ...string) (map[string]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, err
	}
	fields := make(map[string]string, len(names))
	for line := range strings.Lines(string(b)) {
		name, value, ok := strings.Cut(line, ":")
		if ok && slices.Contains(names, name) {
			fields[name] = value
		}
	}
	return fields, nil
}

// firstField returns the first whitespace-separated field of s.
func firstField(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return ""
}

// RunningSince reports whether pid runs and is the process that started
// at start (Stat.StartTime): a pid reused by a later process is not it.
func RunningSince(pid int, start uint64) bool {
	s, err := ReadStat(pid)
	return err == nil && start != 0 && s.StartTime == start && !s.Exited()
}

// GroupRunning reports whether a process of the process group pgid exists
// and has not exited.
func GroupRunning(pgid int) bool {
	if pgid <= 0 || !exists(-pgid) {
		return false
	}
	if !haveProc() {
		return true
	}
	d, err := os.Open("/proc")
	if err != nil {
		return true
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return true
	}
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		s, err := ReadStat(pid)
		if err == nil && s.PGRP == pgid && !s.Exited() {
			return true
		}
	}
	return false
}

// exists reports whether kill(2) finds process (or, negative, process
// group) id, zombies included.
func exists(id int) bool {
	err := syscall.Kill(id, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// haveProc reports whether /proc is mounted.
var haveProc = sync.OnceValue(func() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
})

// SelfExe is the path that names this process's own executable on Linux.
const SelfExe = "/proc/self/exe"

// SelfExecutable names this program's own binary in a way that keeps
// working after the file is replaced or removed (an upgrade, or `go run`
// cleaning up): SelfExe where there is one, else os.Executable. A process
// it starts runs this same program.
func SelfExecutable() (string, error) {
	if _, err := os.Stat(SelfExe); err == nil {
		return SelfExe, nil
	}
	return os.Executable()
}
