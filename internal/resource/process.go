package resource

import (
	"os"
	"os/exec"
	"syscall"
	"time"
	"unsafe"

	"github.com/creack/pty"

	"github.com/agentd-dev/agentd/internal/sandbox"
)

// defaultShell returns the shell commands are run with: bash, or sh
// without it.
func defaultShell() string {
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "sh"
}

// started is a process with the file its output is read from.
type started struct {
	cmd *exec.Cmd
	out *os.File // the read end of the output pipe, or the PTY's master
}

// startShell starts command in its own process group, stdin from
// /dev/null, stdout and stderr into one pipe so their order holds, walled
// in by pol.
func startShell(pol *sandbox.Policy, sh, command, dir string, env []string) (*started, error) {
	cmd, pr, err := pol.StartPiped(env, dir, sh, "-c", command)
	if err != nil {
		return nil, err
	}
	return &started{cmd: cmd, out: pr}, nil
}

// startPTY starts command on a new pseudo-terminal of cols × rows, as the
// leader of its own session with the terminal as its controlling one,
// walled in by pol.
func startPTY(pol *sandbox.Policy, sh, command, dir string, env []string, cols, rows int) (*started, error) {
	cmd, release, err := pol.Command(env, sh, "-c", command)
	if err != nil {
		return nil, err
	}
	defer release()
	cmd.Dir = dir
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
	if err != nil {
		return nil, err
	}
	// The pty package's ioctls go through the master's Fd, which puts it
	// in blocking mode: a read waiting then holds a thread, is not ended
	// by Close, and cannot tell that nothing more is ready. The master is
	// put back in nonblocking mode, and nothing calls its Fd again (see
	// setSize).
	if err := withFd(f, func(fd uintptr) error { return syscall.SetNonblock(int(fd), true) }); err != nil {
		f.Close()
		cmd.Process.Kill()
		cmd.Wait()
		return nil, err
	}
	return &started{cmd: cmd, out: f}, nil
}

// setSize sets the size of the terminal of the PTY master f, without
// putting it in blocking mode as pty.Setsize does.
func setSize(f *os.File, cols, rows int) error {
	ws := pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)}
	return withFd(f, func(fd uintptr) error {
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCSWINSZ, uintptr(unsafe.Pointer(&ws))); e != 0 {
			return e
		}
		return nil
	})
}

// withFd calls fn with f's descriptor, as f.SyscallConn's Control does,
// and returns fn's error or Control's.
func withFd(f *os.File, fn func(fd uintptr) error) error {
	c, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := c.Control(func(fd uintptr) { ferr = fn(fd) }); err != nil {
		return err
	}
	return ferr
}

// signalGroup signals the process group pgid leads; false when none of it
// is left.
func signalGroup(pgid int, sig syscall.Signal) bool {
	return syscall.Kill(-pgid, sig) == nil
}

// exitCode is how a shell reports a process's end: its status, or 128 and
// the signal that ended it.
func exitCode(state *os.ProcessState) int {
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return state.ExitCode()
}

// terminate ends the process group pgid: SIGTERM, then SIGKILL if the
// group's leader has not exited (exited closes) within grace.
func terminate(pgid int, exited <-chan struct{}, grace time.Duration) {
	if !signalGroup(pgid, syscall.SIGTERM) {
		return
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-exited:
		// The leader is gone; what it left in its group goes with it.
		signalGroup(pgid, syscall.SIGKILL)
	case <-t.C:
		signalGroup(pgid, syscall.SIGKILL)
	}
}
