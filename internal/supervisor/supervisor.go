// Package supervisor starts, adopts and stops the host's worker processes,
// one per active session, and reports each one's end as an event: the end
// of its connection together with the process's exit (cmd.Wait for a
// worker this host started, a pidfd becoming readable for one it adopted),
// never a look at /proc under a lock.
//
// A worker outlives its host. It registers itself in the home
// (home.WorkerRegistration); the next host adopts every registered worker
// that still runs, checking by pid and process start time that the process
// answering is the one registered, and by its user and command line that
// it is the session's worker before it signals it; and it cleans up after
// those that are gone: their registrations, their sockets, and what they
// left running in their process sessions.
//
// It knows how a worker is started and reached, and nothing of sessions,
// their catalog or their streams: the session service asks it for a worker
// process and keeps the session-level state itself.
package supervisor

import (
	"context"
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

	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// ErrSuperseded ends an adopted worker that closed its connection to this
// host for another host's: its registration names that host.
var ErrSuperseded = errors.New("another host took the worker over")

// ErrReleased ends a worker this host let go of (Release) for the host
// replacing it: it runs on.
var ErrReleased = errors.New("the host let go of the worker")

// ErrGone is returned by Adopt when the registered worker no longer runs;
// what it left behind is cleaned up. A process that runs under the
// registered pid and start time but is not the session's worker (a
// registration forged, say) counts as gone too: it is left alone, and
// only its registration removed.
var ErrGone = errors.New("the registered worker no longer runs")

// ErrLost is returned by Adopt when the registered worker runs but did not
// answer as that worker; it was killed, and what it left cleaned up.
var ErrLost = errors.New("the registered worker did not answer, and was stopped")

// exitWait bounds how long the connection of a worker whose process
// exited may take to end, and how long a lost worker killed may take to
// exit. A worker of a version that does not name its host in its
// registration that runs on this long after its connection ended was
// taken over by another host.
const exitWait = 2 * time.Second

// Config configures a supervisor.
type Config struct {
	// Home is where workers register.
	Home string
	// RuntimeDir and HostID place the workers' sockets: beside the
	// host's own, named after it.
	RuntimeDir string
	HostID     string
	// Command is the argv that starts a worker; Start appends its flags.
	// Default: this executable with "worker".
	Command []string
	// Log is where workers write their logs and whatever else they print
	// (a crash's trace). Default: stderr.
	Log    io.Writer
	Logger *slog.Logger
	// Keys are the secrets the host hands each worker it starts (the
	// model providers' keys from its environment, by provider name):
	// through a pipe of the worker's own, read once at its start, never
	// through its environment or argv. A worker adopted keeps the keys
	// of the host that started it.
	Keys map[string]string
	// StopGrace bounds how long a worker of this host may run on once its
	// connection ended before it is killed (one this host started, with
	// its process group): a worker stopping closes its connections first,
	// then drains (its resources have a grace of their own between
	// SIGTERM and SIGKILL). Default: DefaultStopGrace.
	StopGrace time.Duration
}

// DefaultStopGrace is the default of Config.StopGrace.
const DefaultStopGrace = 10 * time.Second

// Supervisor starts and adopts workers and follows their processes.
type Supervisor struct {
	cfg Config // constant
	log *slog.Logger
	wg  sync.WaitGroup // the workers' watchers
}

// New returns a supervisor for cfg.
func New(cfg Config) (*Supervisor, error) {
	if len(cfg.Command) == 0 {
		exe, err := proc.SelfExecutable()
		if err != nil {
			return nil, fmt.Errorf("finding the worker command: %w", err)
		}
		cfg.Command = []string{exe, "worker"}
	}
	if cfg.Log == nil {
		cfg.Log = os.Stderr
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.StopGrace < 0 {
		return nil, fmt.Errorf("supervisor: StopGrace is %v; want a positive duration, or 0 for the default", cfg.StopGrace)
	}
	if cfg.StopGrace == 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	return &Supervisor{cfg: cfg, log: cfg.Logger}, nil
}

// Wait waits until every worker's watcher has ended: each worker has
// exited, been taken over, or been let go of.
func (s *Supervisor) Wait() { s.wg.Wait() }

// SocketPath is where the worker of a session listens.
func (s *Supervisor) SocketPath(sessionID string) string {
	return filepath.Join(s.cfg.RuntimeDir, s.cfg.HostID+"-w-"+sessionID+".sock")
}

// Worker is one worker process, started or adopted, and the host's
// connection to it.
type Worker struct {
	SessionID string
	PID       int
	// Conn is the host's connection to the worker, closed once the
	// worker has ended.
	Conn *link.Conn

	sup      *Supervisor // constant
	pidfd    *os.File    // constant: names the process whatever becomes of its pid
	cmd      *exec.Cmd   // constant: nil for a worker this host did not start
	endpoint string      // constant: its socket

	release     chan struct{} // closed by Release
	releaseOnce sync.Once
	done        chan struct{} // closed once the worker ended for this host
	err         error         // set before done is closed
}

// Done is closed once the worker has ended for this host: its process
// exited (and what it left is cleaned up), another host took it over, or
// this host let go of it. Err says which.
func (w *Worker) Done() <-chan struct{} { return w.done }

// Err says how the worker ended, once Done is closed: ErrSuperseded,
// ErrReleased, or its process's exit (nil, or an *exec.ExitError for a
// worker this host started).
func (w *Worker) Err() error {
	<-w.done
	return w.err
}

// Exited reports whether the worker's process exited, once Done is closed.
func (w *Worker) Exited() bool {
	err := w.Err()
	return !errors.Is(err, ErrSuperseded) && !errors.Is(err, ErrReleased)
}

// Cause says how the worker's process ended: "worker exited: signal 9".
func (w *Worker) Cause() string { return describeExit(w.Err()) }

// Stop asks the worker to drain and exit, kills it when it has not by the
// end of ctx, and returns once it ended.
func (w *Worker) Stop(ctx context.Context) {
	link.Call(ctx, w.Conn, protocol.OpHostShutdown, protocol.ShutdownInput{})
	select {
	case <-w.done:
		return
	case <-ctx.Done():
	}
	w.Kill()
}

// Kill kills the worker's process, and returns once it ended.
func (w *Worker) Kill() {
	proc.SignalPidfd(w.pidfd, syscall.SIGKILL)
	<-w.done
}

// Release lets go of the worker for the host replacing this one: it runs
// on, and its connection closes. It returns once the worker's watcher
// ended.
func (w *Worker) Release() {
	w.releaseOnce.Do(func() { close(w.release) })
	<-w.done
}

// watch follows the worker until it ends for this host. The process's exit
// is a pidfd becoming readable; the connection's end a channel. Whichever
// comes first, the other follows at once for a worker that exits. A worker
// whose connection ended is then waited for unless its registration names
// another host, which took it over (only an adopted one: no other host
// takes over a child of this one before this one lets go of it); it runs
// on for that host. One of this host that runs on after the supervisor's
// StopGrace is killed (a child with its process group), and waited for.
// Release lets go of any at once.
func (w *Worker) watch() {
	waited := make(chan struct{})
	w.sup.wg.Go(func() {
		select {
		case <-w.Conn.Done():
		case <-w.release:
			w.pidfd.SetReadDeadline(time.Now())
			return
		case <-waited:
			return
		}
		grace, unnamed := w.sup.cfg.StopGrace, false
		if w.cmd == nil {
			switch host, ok := w.registeredHost(); {
			case !ok || host == w.Conn.InstanceID():
				// Exiting (its registration goes once it has drained), or
				// still this host's.
			case host == "":
				// A worker that does not name its host: one that runs on
				// after exitWait was taken over.
				grace, unnamed = exitWait, true
			default:
				w.pidfd.SetReadDeadline(time.Now())
				return
			}
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-w.release:
			w.pidfd.SetReadDeadline(time.Now())
			return
		case <-waited:
			return
		}
		switch {
		case unnamed:
			w.pidfd.SetReadDeadline(time.Now())
		case w.cmd == nil:
			w.sup.log.Warn("an adopted worker whose connection ended runs on; it is killed", "session", w.SessionID, "pid", w.PID)
			proc.SignalPidfd(w.pidfd, syscall.SIGKILL)
		default:
			// Not waited for yet, the child keeps its pid, and its process
			// group is its own (it leads a session).
			w.sup.log.Warn("a worker whose connection ended runs on; it is killed", "session", w.SessionID, "pid", w.PID)
			syscall.Kill(-w.PID, syscall.SIGKILL)
		}
	})
	exitErr := proc.AwaitPidfd(w.pidfd)
	close(waited)
	switch {
	case exitErr == nil:
		var err error
		if w.cmd != nil {
			err = w.cmd.Wait() // at once: it has exited
		}
		// Whatever the worker wrote before its end is read before its
		// connection is closed: the kernel ended it with the process.
		t := time.NewTimer(exitWait)
		select {
		case <-w.Conn.Done():
		case <-t.C:
		}
		t.Stop()
		w.Conn.Close()
		w.sup.cleanUpAfter(w.SessionID, w.PID)
		os.Remove(w.endpoint)
		w.err = err
	case isClosed(w.release):
		w.Conn.Close()
		// A child of this host let go of is not waited for: the host exits
		// once it has handed off, and the host adopting the worker sees
		// its exit through a pidfd.
		w.err = ErrReleased
	default:
		w.Conn.Close()
		w.sup.log.Warn("another host took the worker over", "session", w.SessionID, "pid", w.PID)
		w.err = ErrSuperseded
	}
	w.pidfd.Close()
	close(w.done)
}

// registeredHost returns the host the worker's registration names, and
// false when the registration is gone or names another worker.
func (w *Worker) registeredHost() (string, bool) {
	reg, err := home.ReadWorkerRegistration(home.WorkerRegistrationPath(w.sup.cfg.Home, w.SessionID))
	if err != nil || reg.PID != w.PID {
		return "", false
	}
	return reg.Host, true
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// cleanUpAfter ends the processes an exited worker left in its session and
// removes its registration when it still names that worker: a worker that
// was killed could do neither.
func (s *Supervisor) cleanUpAfter(session string, pid int) {
	if n := killSession(pid); n > 0 {
		s.log.Warn("killed processes left by an exited worker", "session", session, "pid", pid, "processes", n)
	}
	home.RemoveWorkerRegistration(s.cfg.Home, session, pid)
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
