package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// hostOptions are the options of the host's connection to a worker.

// Start starts the worker of session sessionID, with args after the flags
// the supervisor gives (--session, --socket, --home, --ready-fd), and
// returns it once it serves and answers at its socket as that process.
// ctx bounds the start; the worker outlives it.
func (s *Supervisor) Start(ctx context.Context, sessionID string, args []string) (*Worker, error) {
	sock := s.SocketPath(sessionID)
	argv := append(append([]string(nil), s.cfg.Command[1:]...), "--session", sessionID, "--socket", sock, "--home", s.cfg.Home)
	cmd := exec.Command(s.cfg.Command[0], append(argv, args...)...)
	if cmd.Path == selfExe {
		// ps shows the program's name, not the path it was started by.
		cmd.Args[0] = os.Args[0]
	}
	cmd.Stdout, cmd.Stderr = s.cfg.Log, s.cfg.Log
	cmd.Dir = "/"
	// A session of its own: what the worker starts stays in it, so what a
	// killed worker leaves behind can be found and ended.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// The worker says it serves by writing to a pipe it inherits (fd 3);
	// an end of file says it exited first.
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("starting the worker: %w", err)
	}
	defer readyR.Close()
	cmd.ExtraFiles = []*os.File{readyW}
	cmd.Args = append(cmd.Args, "--ready-fd", "3")
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return nil, fmt.Errorf("starting the worker: %w", err)
	}
	pid := cmd.Process.Pid
	// Not waited for yet, the child keeps its pid: the pidfd names it.
	pidfd, err := proc.OpenPidfd(pid)
	var conn *link.Conn
	if err == nil {
		conn, err = dial(ctx, readyR, sock, pid)
	}
	if err != nil {
		cmd.Process.Kill()
		werr := cmd.Wait()
		if pidfd != nil {
			pidfd.Close()
		}
		s.cleanUpAfter(sessionID, pid)
		return nil, fmt.Errorf("%w (%s)", err, describeExit(werr))
	}
	w := s.newWorker(sessionID, pid, conn, pidfd, sock)
	w.cmd = cmd
	s.wg.Go(w.watch)
	return w, nil
}

func (s *Supervisor) newWorker(sessionID string, pid int, conn *link.Conn, pidfd *os.File, endpoint string) *Worker {
	return &Worker{
		SessionID: sessionID, PID: pid, Conn: conn, sup: s, pidfd: pidfd, endpoint: endpoint,
		release: make(chan struct{}), done: make(chan struct{}),
	}
}

// dial waits until a starting worker says it serves, then connects to its
// socket: to the worker of process pid alone, so another process answering
// there (one an earlier host left) is not taken for it.
func dial(ctx context.Context, ready *os.File, sock string, pid int) (*link.Conn, error) {
	if deadline, ok := ctx.Deadline(); ok {
		ready.SetReadDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { ready.SetReadDeadline(time.Now()) })
	_, err := ready.Read(make([]byte, 1))
	stop()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("it exited before it served")
		}
		return nil, fmt.Errorf("it did not say it serves: %w", err)
	}
	c, err := link.Dial(ctx, sock)
	if err != nil {
		return nil, err
	}
	st, err := c.Status(ctx)
	if err == nil && (st.State != protocol.StateReady || st.PID != pid) {
		err = fmt.Errorf("another process (pid %d, %s) answers at its socket", st.PID, st.State)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
