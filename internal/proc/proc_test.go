package proc

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseStatReadsTheFieldsAfterACommandNameOfAnyShape(t *testing.T) {
	const rest = " 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22"
	cases := []struct {
		line string
		want Stat
	}{
		{"42 (agentd) S 1 42 42 0 -1 4194560 10 0 0 0 250 30 0 0 20 0 7 0 123456 0 0",
			Stat{PID: 42, Comm: "agentd", State: 'S', PPID: 1, PGRP: 42, Session: 42, UTime: 250, STime: 30, StartTime: 123456}},
		{"7 (a b) c)) Z 3 4 5 0 0 0 0 0 0 0 8 9 0 0 0 0 0 0 77\n",
			Stat{PID: 7, Comm: "a b) c)", State: 'Z', PPID: 3, PGRP: 4, Session: 5, UTime: 8, STime: 9, StartTime: 77}},
	}
	for _, c := range cases {
		got, err := ParseStat([]byte(c.line))
		if err != nil || got != c.want {
			t.Errorf("ParseStat(%q) = %+v, %v; want %+v", c.line, got, err, c.want)
		}
	}
	for _, bad := range []string{
		"", "42", "42 agentd S 1", "x (a) S 1 2 3" + rest, "42 (a) S 1 2 3", "42 (a) SS 1 2 3" + rest,
		"42 (a) S x 2 3" + rest, "42 (a) S 1 2 3 0 0 0 0 0 0 0 -1 0 0 0 0 0 0 0 1",
	} {
		if s, err := ParseStat([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseStat(%q) = %+v, %v; want ErrMalformed", bad, s, err)
		}
	}
}

func TestReadStatOfThisProcess(t *testing.T) {
	s, err := ReadStat(os.Getpid())
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	if s.PID != os.Getpid() || s.PPID != os.Getppid() || s.PGRP != syscall.Getpgrp() || s.State != 'R' || s.StartTime == 0 {
		t.Errorf("stat of this process: %+v", s)
	}
	if !Running(os.Getpid()) {
		t.Error("this process does not run")
	}
}

// waitExited blocks until child cmd has exited, leaving it a zombie.
func waitExited(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
}

func TestAZombieDoesNotRunAndAReapedProcessIsGone(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	waitExited(t, cmd)
	s, err := ReadStat(pid)
	if err != nil || s.State != 'Z' || !s.Exited() {
		t.Errorf("stat of a zombie: %+v, %v", s, err)
	}
	if Running(pid) {
		t.Error("a zombie runs")
	}
	cmd.Wait()
	if Running(pid) {
		t.Error("a reaped process runs")
	}
	if _, err := ReadStat(pid); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat of a reaped process: %v; want fs.ErrNotExist", err)
	}
	if Running(0) || Running(-1) {
		t.Error("pid 0 or -1 runs")
	}
}

func TestGroupRunningUntilItsLastMemberExits(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	defer cmd.Wait()
	if !GroupRunning(pgid) {
		t.Error("a group with a sleeping member does not run")
	}
	cmd.Process.Kill()
	waitExited(t, cmd)
	if GroupRunning(pgid) {
		t.Error("a group of one zombie runs")
	}
	cmd.Wait()
	if GroupRunning(pgid) || GroupRunning(0) {
		t.Error("a group with no members runs")
	}
}
