package proc

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestReadStatOfThisProcess(t *testing.T) {
	s, err := ReadStat(os.Getpid())
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	if s.PID != os.Getpid() || s.PPID != os.Getppid() || s.PGRP != syscall.Getpgrp() || s.Exited() || s.StartTime == 0 {
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

func TestArgsReadsACommandLine(t *testing.T) {
	cmd := exec.Command("sh", "-c", "echo started; exec sleep 30 & wait", "name", "with spaces", "")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Until the shell runs, the pid is a copy of this process on its way
	// to exec, whose command line may read empty.
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	args, err := Args(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(args[1:], "|"), strings.Join(cmd.Args[1:], "|"); got != want {
		t.Fatalf("Args = %q, want %q", args, cmd.Args)
	}
}

func TestUIDIsTheUserAProcessRunsAs(t *testing.T) {
	uid, err := UID(os.Getpid())
	if err != nil || uid != os.Getuid() {
		t.Fatalf("UID(self) = %d, %v; want %d", uid, err, os.Getuid())
	}
	if _, err := UID(-5); err == nil {
		t.Fatal("UID of no process: no error")
	}
}

func TestConfinedMarksAProcessWithNoNewPrivsAndNoBoundingSet(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("emptying the bounding set takes CAP_SETPCAP: run as root")
	}
	for _, tc := range []struct {
		name      string
		nnp, drop bool
	}{
		{"ordinary", false, false},
		{"no_new_privs alone", true, false},
		{"no bounding set alone", false, true},
		{"both", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("sleep", "60")
			if err := startOnAThreadOfItsOwn(cmd, func() error {
				if tc.nnp {
					if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
						return err
					}
				}
				for c := 0; tc.drop && c <= unix.CAP_LAST_CAP; c++ {
					if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			defer cmd.Process.Kill()
			got, err := Confined(cmd.Process.Pid)
			if want := tc.nnp && tc.drop; err != nil || got != want {
				t.Fatalf("Confined = %v, %v; want %v", got, err, want)
			}
		})
	}
	if _, err := Confined(-5); err == nil {
		t.Fatal("Confined of no process: no error")
	}
}

// startOnAThreadOfItsOwn starts cmd from a thread that setup changed
// first: no_new_privs and the bounding set belong to a thread and carry
// to what it forks. The thread is never given back to the Go runtime, so
// it ends with its goroutine.
func startOnAThreadOfItsOwn(cmd *exec.Cmd, setup func() error) error {
	started := make(chan error)
	go func() {
		runtime.LockOSThread()
		if err := setup(); err != nil {
			started <- err
			return
		}
		started <- cmd.Start()
	}()
	return <-started
}
