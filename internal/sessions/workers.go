package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/catalog"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// workerStartTimeout bounds a worker's start until it answers.
const workerStartTimeout = 30 * time.Second

// worker is one session's worker process, as the host sees it.
type worker struct {
	s         *Service
	sessionID string
	pid       int           // constant once started
	stat      *os.File      // constant once started: its main thread's /proc stat file, or nil
	procStart uint64        // constant once started: the process's start time, for an adopted worker
	conn      *client.Conn  // constant once started
	ready     chan struct{} // closed once started or failed
	startErr  error         // set before ready is closed
	exited    chan struct{} // closed when the process has exited

	// Lock order: mu before subscription.mu.
	mu       sync.Mutex
	cause    string                     // guarded by mu: why the process exited
	stopping bool                       // guarded by mu: the host asked it to stop
	subs     map[*subscription]struct{} // guarded by mu: client subscriptions
	proj     *protocol.Projector        // guarded by mu: the session as the worker's stream says
	uses     int                        // guarded by mu: requests holding the worker
	idle     *time.Timer                // guarded by mu
	busy     bool                       // guarded by mu: a turn runs or waits, as the stream says
	live     map[string]bool            // guarded by mu: the runtime resources running, as the stream says
	feedID   string                     // constant once started: the worker's one subscription
	watched  []string                   // guarded by interest: the PTYs the worker's stream carries

	interest sync.Mutex // serializes changes of the PTYs the worker's stream carries
}

func (w *worker) running() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.activeLocked()
}

// activeLocked reports whether a turn or a runtime resource runs: the
// worker is not idle.
func (w *worker) activeLocked() bool { return w.busy || len(w.live) > 0 }

func (w *worker) exitCause() string {
	select {
	case <-w.exited:
	case <-time.After(time.Second):
		return "it did not answer"
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cause
}

// socketPath is where the worker of a session listens: beside the host's
// own socket, named after it.
func (s *Service) socketPath(sessionID string) string {
	return filepath.Join(s.cfg.RuntimeDir, s.cfg.HostID+"-w-"+sessionID+".sock")
}

// previousExitPath keeps why a session's last worker died, for the next
// one to record.
func (s *Service) previousExitPath(sessionID string) string {
	return filepath.Join(s.cat.Dir(sessionID), "worker-exit")
}

// ensureWorker returns the session's live worker, starting one if none
// runs, held for the caller's request: an idle stop waits until the caller
// calls release. A worker on its way out is waited for and replaced.
func (s *Service) ensureWorker(ctx context.Context, h catalog.Header) (*worker, error) {
	for {
		s.mu.Lock()
		if s.draining {
			s.mu.Unlock()
			return nil, protocol.Errorf(protocol.CodeDraining, "the host is draining")
		}
		w, ok := s.workers[h.ID]
		if ok {
			select {
			case <-w.exited:
				ok = false // gone, though not yet forgotten: start its replacement
			default:
			}
		}
		if ok && w.dead() {
			// Its process has ended; the host is still letting go of it.
			s.mu.Unlock()
			select {
			case <-w.exited:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			continue
		}
		if !ok {
			w = &worker{s: s, sessionID: h.ID, ready: make(chan struct{}), exited: make(chan struct{}), subs: map[*subscription]struct{}{}}
			s.workers[h.ID] = w
			s.wg.Go(func() { s.start(w, h) })
		}
		s.mu.Unlock()
		select {
		case <-w.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if w.startErr != nil {
			return nil, w.startErr
		}
		if w.hold() {
			return w, nil
		}
		// Stopping: wait for it to go, then start another.
		select {
		case <-w.exited:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// dead reports whether a started worker's process has ended: its main
// thread has exited, as proc.Running has it. It is asked before every
// request forwarded to the worker (a key typed into its PTY among them),
// so it reads again the stat file of the worker's main thread, held open
// from the start: one system call, where reading /proc/<pid>/stat anew
// costs a path lookup, an open and the sum of the times of every thread.
// A pidfd will not do: it is readable only once the last thread has
// exited, a moment after the main one, while requests sent meanwhile are
// lost.
func (w *worker) dead() bool {
	select {
	case <-w.ready:
	default:
		return false
	}
	if w.startErr != nil {
		return false
	}
	if w.stat == nil {
		return !proc.Running(w.pid)
	}
	var line [1 << 10]byte
	n, _ := w.stat.ReadAt(line[:], 0)
	st, err := proc.ParseStat(line[:n]) // nothing to read once the process is gone
	return err != nil || st.Exited()
}

// openStat opens the /proc stat file of process pid's main thread, or
// returns nil where there is none.
func openStat(pid int) *os.File {
	f, err := os.Open(fmt.Sprintf("/proc/%d/task/%d/stat", pid, pid))
	if err != nil {
		return nil
	}
	return f
}

// hold keeps the worker from an idle stop until release; it fails once
// the worker is stopping.
func (w *worker) hold() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopping {
		return false
	}
	w.uses++
	if w.idle != nil {
		w.idle.Stop()
		w.idle = nil
	}
	return true
}

// release ends a hold; the idle grace starts again when nothing holds the
// worker.
func (w *worker) release() {
	w.mu.Lock()
	w.uses--
	w.mu.Unlock()
	w.armIdle()
}

// start runs the worker process and watches it until it exits.
func (s *Service) start(w *worker, h catalog.Header) {
	defer s.forget(w)
	model := h.Model
	if model == "" {
		model = s.cfg.Models.Default()
	}
	sock := s.socketPath(h.ID)
	args := append(append([]string(nil), s.cfg.WorkerCommand[1:]...),
		"--session", h.ID, "--socket", sock, "--home", s.cfg.Home,
		"--cwd", h.Cwd, "--model", model, "--thinking", h.Thinking, "--approval", h.Approval,
		"--transcript", s.cat.TranscriptPath(h.ID), "--orphan-grace", s.cfg.WorkerIdleGrace.String(),
		"--log-format", s.cfg.WorkerLogFormat)
	prev, _ := os.ReadFile(s.previousExitPath(h.ID))
	if len(prev) > 0 {
		args = append(args, "--previous-exit", string(prev))
	}
	cmd := exec.Command(s.cfg.WorkerCommand[0], args...)
	if cmd.Path == selfExe {
		// ps shows the program's name, not the path it was started by.
		cmd.Args[0] = os.Args[0]
	}
	cmd.Stdout, cmd.Stderr = s.cfg.WorkerLog, s.cfg.WorkerLog
	cmd.Dir = "/"
	// A session of its own: what the worker starts stays in it, so what a
	// killed worker leaves behind can be found and ended.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// The worker says it serves by writing to a pipe it inherits (fd 3);
	// an end of file says it exited first.
	readyR, readyW, err := os.Pipe()
	if err != nil {
		w.startErr = protocol.Errorf(protocol.CodeInternalFailure, "starting the session's worker: %v", err)
		close(w.ready)
		close(w.exited)
		return
	}
	cmd.ExtraFiles = []*os.File{readyW}
	cmd.Args = append(cmd.Args, "--ready-fd", "3")
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		readyR.Close()
		w.startErr = protocol.Errorf(protocol.CodeInternalFailure, "starting the session's worker: %v", err)
		close(w.ready)
		close(w.exited)
		return
	}
	w.pid = cmd.Process.Pid
	w.stat = openStat(w.pid)
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	conn, err := s.dialWorker(readyR, sock, w.pid)
	readyR.Close()
	var feed *client.Watcher
	if err == nil {
		w.conn = conn
		ctx, cancel := context.WithTimeout(context.Background(), workerStartTimeout)
		feed, err = w.openFeed(ctx)
		cancel()
		if err != nil {
			conn.Close()
		}
	}
	if err != nil {
		cmd.Process.Kill()
		werr := <-waited
		s.cleanUpAfter(h.ID, w.pid)
		w.startErr = protocol.Errorf(protocol.CodeInternalFailure, "the session's worker did not start: %v (%s)", err, describeExit(werr))
		close(w.ready)
		close(w.exited)
		return
	}
	os.Remove(s.previousExitPath(h.ID))
	s.log.Info("worker started", "session", h.ID, "pid", w.pid)
	s.serve(w, feed, waited)
}

// serve follows a started or adopted worker until its process exits
// (exited says how), or until the host hands it to the host replacing it.
func (s *Service) serve(w *worker, feed *client.Watcher, exited <-chan error) {
	followed := make(chan struct{})
	s.wg.Go(func() {
		defer close(followed)
		w.follow(feed)
	})
	close(w.ready)
	w.armIdle()

	var werr error
	select {
	case werr = <-exited:
	case <-s.detached:
		// The host replacing this one adopts it: it runs on.
		w.conn.Close()
		<-followed
		close(w.exited)
		return
	}
	w.conn.Close()
	<-followed // every delta the worker sent has reached its subscribers
	if errors.Is(werr, errSuperseded) {
		s.log.Warn("another host took the worker over", "session", w.sessionID, "pid", w.pid)
		close(w.exited)
		w.endSubscriptions(protocol.ClosedWorkerExited)
		return
	}
	s.cleanUpAfter(w.sessionID, w.pid)
	w.mu.Lock()
	w.cause = describeExit(werr)
	stopping := w.stopping
	if w.idle != nil {
		w.idle.Stop()
	}
	w.mu.Unlock()
	if !stopping || werr != nil {
		// Kept for the replacement to record, before anyone can start it.
		s.log.Warn("worker exited", "session", w.sessionID, "pid", w.pid, "cause", w.cause)
		os.WriteFile(s.previousExitPath(w.sessionID), []byte(w.cause), 0o600)
		s.host.Diagnostic(slog.LevelWarn, fmt.Sprintf("session %s: %s", w.sessionID, w.cause))
	}
	close(w.exited)
	w.endSubscriptions(protocol.ClosedWorkerExited)
}

// cleanUpAfter ends the processes an exited worker left in its session and
// removes its registration when it still names that worker: a worker that
// was killed could do neither.
func (s *Service) cleanUpAfter(session string, pid int) {
	if n := killSession(pid); n > 0 {
		s.log.Warn("killed processes left by an exited worker", "session", session, "pid", pid, "processes", n)
	}
	path := protocol.WorkerRegistrationPath(s.cfg.Home, session)
	if b, err := os.ReadFile(path); err == nil {
		var reg protocol.WorkerRegistration
		if json.Unmarshal(b, &reg) == nil && reg.PID == pid {
			os.Remove(path)
		}
	}
}

// describeExit says how a worker process ended: "worker exited: signal 9".
func describeExit(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok {
			if ws.Signaled() {
				return fmt.Sprintf("worker exited: signal %d", int(ws.Signal()))
			}
			return fmt.Sprintf("worker exited: status %d", ws.ExitStatus())
		}
	}
	if err != nil {
		return "worker exited: " + err.Error()
	}
	return "worker exited"
}

// dialWorker waits until a starting worker says it serves, then
// connects to its socket: to the worker of process pid alone, so another
// process answering there (one an earlier host left) is not taken for it.
func (s *Service) dialWorker(ready *os.File, sock string, pid int) (*client.Conn, error) {
	ready.SetReadDeadline(time.Now().Add(workerStartTimeout))
	if _, err := ready.Read(make([]byte, 1)); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("it exited before it served")
		}
		return nil, fmt.Errorf("it did not say it serves: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), workerStartTimeout)
	defer cancel()
	c, err := client.Dial(ctx, sock, client.Options{CompositionID: protocol.CompositionWorker, Surface: protocol.SurfaceHost})
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

// forget drops w once its process has ended.
func (s *Service) forget(w *worker) {
	s.mu.Lock()
	if s.workers[w.sessionID] == w {
		delete(s.workers, w.sessionID)
	}
	// Out of the map, w is asked no more whether it is dead.
	if w.stat != nil {
		w.stat.Close()
		w.stat = nil
	}
	s.mu.Unlock()
	s.host.CheckIdle()
}

// stop asks the worker to drain and exit; it kills it if it does not.
func (w *worker) stop() {
	<-w.ready
	if w.startErr != nil {
		return
	}
	w.mu.Lock()
	w.stopping = true
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client.Call(ctx, w.conn, protocol.OpHostShutdown, protocol.ShutdownInput{})
	select {
	case <-w.exited:
	case <-ctx.Done():
		syscall.Kill(w.pid, syscall.SIGKILL)
		<-w.exited
	}
}

// armIdle starts the idle timer when nothing holds the worker: no
// subscriber, no request, and its stream says no turn runs.
func (w *worker) armIdle() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.s.handingOff.Load() || w.stopping || w.activeLocked() || len(w.subs) > 0 || w.uses > 0 {
		return
	}
	if w.idle == nil {
		w.idle = time.AfterFunc(w.s.cfg.WorkerIdleGrace, w.idleFired)
	}
}

// idleFired stops the worker if it is still idle.
func (w *worker) idleFired() {
	w.mu.Lock()
	w.idle = nil
	if w.s.handingOff.Load() || w.stopping || w.activeLocked() || len(w.subs) > 0 || w.uses > 0 {
		w.mu.Unlock()
		return
	}
	w.stopping = true
	w.mu.Unlock()
	w.s.log.Info("stopping idle worker", "session", w.sessionID)
	w.s.wg.Go(w.stop)
}
