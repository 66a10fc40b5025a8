package supervisor

import (
	"context"
	"encoding/json"
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
// the supervisor gives (--session, --socket, --home, --ready-fd and, with
// keys to hand, --keys-fd), and returns it once it serves and answers at
// its socket as that process. ctx bounds the start; the worker outlives
// it.
func (s *Supervisor) Start(ctx context.Context, sessionID string, args []string) (*Worker, error) {
	sock := s.SocketPath(sessionID)
	argv := append(append([]string(nil), s.cfg.Command[1:]...), "--session", sessionID, "--socket", sock, "--home", s.cfg.Home)
	cmd := exec.Command(s.cfg.Command[0], append(argv, args...)...)
	if cmd.Path == proc.SelfExe {
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
	// The keys go through a pipe of the worker's own (fd 4), never its
	// environment or argv, which other processes may read; and only once
	// the worker serves, by then undumpable, so that no other process
	// can read them from its pipe either.
	var keysW *os.File
	if len(s.cfg.Keys) > 0 {
		var keysR *os.File
		if keysR, keysW, err = os.Pipe(); err != nil {
			readyW.Close()
			return nil, fmt.Errorf("starting the worker: %w", err)
		}
		defer keysR.Close()
		defer keysW.Close()
		cmd.ExtraFiles = append(cmd.ExtraFiles, keysR)
		cmd.Args = append(cmd.Args, "--keys-fd", "4")
	}
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
	if err == nil && keysW != nil {
		// A few kilobytes at most: the pipe holds them whether or not
		// the worker reads yet.
		if err = handKeys(keysW, s.cfg.Keys); err != nil {
			conn.Close()
		}
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

// handKeys writes keys to a starting worker's keys pipe, as one JSON
// object of name to key, and closes it: the end of file ends the keys.
func handKeys(w *os.File, keys map[string]string) error {
	data, err := json.Marshal(keys)
	if err == nil {
		_, err = w.Write(data)
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("handing the worker its keys: %w", err)
	}
	return nil
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
