package sessions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentd-dev/agentd/internal/atomicfile"
	"github.com/agentd-dev/agentd/internal/catalog"
	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/internal/supervisor"
	"github.com/agentd-dev/agentd/protocol"
)

// workerStartTimeout bounds a worker's start until it answers.
const workerStartTimeout = 30 * time.Second

// worker is one session's worker process, as the host sees it.
type worker struct {
	s         *Service
	sessionID string
	proc      *supervisor.Worker // constant once started: its process
	conn      *link.Conn         // constant once started: the connection to its process
	ready     chan struct{}      // closed once started or failed
	startErr  error              // set before ready is closed
	exited    chan struct{}      // closed when the process has ended for this host

	// Lock order: mu before subscription.mu.
	mu       sync.Mutex
	cause    string                     // guarded by mu: why the process exited
	stopping bool                       // guarded by mu: the host asked it to stop
	subs     map[*subscription]struct{} // guarded by mu: client subscriptions
	proj     *protocol.Projector        // guarded by mu: the session as the worker's stream says
	uses     int                        // guarded by mu: requests holding the worker
	holds    uint64                     // guarded by mu: requests that held the worker, ever
	idle     *time.Timer                // guarded by mu
	busy     bool                       // guarded by mu: a turn runs or waits, as the stream says
	live     map[string]bool            // guarded by mu: the runtime resources running, as the stream says
	ended    map[string]bool            // guarded by mu: the runtime resources the stream said ended (refs are not reused)
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

// exitCause says why the worker's process ended, once it has: it is
// asked once the connection to the worker ended, and its end follows.
func (w *worker) exitCause(ctx context.Context) string {
	select {
	case <-w.exited:
	case <-ctx.Done():
		return "it did not answer"
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cause
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
		if s.archived[h.ID] && !h.Archived {
			// h was read before the session's archive began.
			s.mu.Unlock()
			return nil, protocol.Errorf(protocol.CodeSessionArchived, "session %s was archived while the request was on its way", h.ID)
		}
		w, ok := s.workers[h.ID]
		if ok {
			select {
			case <-w.exited:
				ok = false // gone, though not yet forgotten: start its replacement
			default:
			}
		}
		if ok && w.connEnded() {
			// Its connection ended, and its process with it: the host is
			// still letting go of it.
			s.mu.Unlock()
			select {
			case <-w.exited:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			continue
		}
		if !ok && s.removedLocked(h.ID) {
			// h was read before the session's remove began.
			s.mu.Unlock()
			return nil, protocol.Errorf(protocol.CodeNotFound, "session %s was removed while the request was on its way", h.ID)
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

// removedLocked reports whether session id is being removed, or is no
// longer in the catalog: no worker may start for it.
func (s *Service) removedLocked(id string) bool {
	if s.removing[id] > 0 {
		return true
	}
	_, err := s.cat.Get(id)
	return err != nil
}

// connEnded reports whether the connection to a started worker has
// ended: it exits, or has exited, and a request sent to it is lost. It is
// asked before every request forwarded to the worker (a key typed into its
// PTY among them), so it only looks at a channel. A request sent between
// the worker's end and its connection's is cut off with the connection,
// never lost unanswered (see forward).
func (w *worker) connEnded() bool {
	select {
	case <-w.ready:
	default:
		return false
	}
	if w.startErr != nil {
		return false
	}
	select {
	case <-w.conn.Done():
		return true
	default:
		return false
	}
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
	w.holds++
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
	args := []string{
		"--cwd", h.Cwd, "--model", model, "--thinking", h.Thinking, "--approval", h.Approval,
		"--sandbox", h.Sandbox, "--network", h.Network,
		"--transcript", s.cat.TranscriptPath(h.ID), "--orphan-grace", s.cfg.WorkerIdleGrace.String(),
		"--log-format", s.cfg.WorkerLogFormat,
	}
	for _, dir := range h.Plugins {
		args = append(args, "--plugin", dir)
	}
	prev, _ := os.ReadFile(s.previousExitPath(h.ID))
	if len(prev) > 0 {
		args = append(args, "--previous-exit", string(prev))
	}
	ctx, cancel := context.WithTimeout(s.ctx, workerStartTimeout)
	defer cancel()
	p, err := s.sup.Start(ctx, h.ID, args)
	var feed *link.Stream
	if err == nil {
		w.proc, w.conn = p, p.Conn
		feed, err = w.openFeed(ctx)
		if err != nil {
			p.Kill()
			err = fmt.Errorf("%w (%s)", err, p.Cause())
		}
	}
	if err != nil {
		w.startErr = protocol.Errorf(protocol.CodeInternalFailure, "the session's worker did not start: %v", err)
		close(w.ready)
		close(w.exited)
		return
	}
	os.Remove(s.previousExitPath(h.ID))
	s.log.Info("worker started", "session", h.ID, "pid", p.PID)
	s.serve(w, feed)
}

// serve follows a started or adopted worker until its process ends for
// this host: it exits, another host takes it over, or this host hands it
// to the host replacing it.
func (s *Service) serve(w *worker, feed *link.Stream) {
	followed := make(chan struct{})
	s.wg.Go(func() {
		defer close(followed)
		w.follow(feed)
	})
	close(w.ready)
	w.armIdle()

	select {
	case <-w.proc.Done():
	case <-s.detached:
		// The host replacing this one adopts it: it runs on.
		w.proc.Release()
	}
	<-followed // every delta the worker sent has reached its subscribers
	if !w.proc.Exited() {
		close(w.exited)
		if errors.Is(w.proc.Err(), supervisor.ErrSuperseded) {
			w.endSubscriptions(protocol.ClosedWorkerExited)
		}
		return
	}
	werr := w.proc.Err()
	w.mu.Lock()
	w.cause = w.proc.Cause()
	stopping := w.stopping
	if w.idle != nil {
		w.idle.Stop()
	}
	w.mu.Unlock()
	if !stopping || werr != nil {
		// Kept for the replacement to record, before anyone can start it.
		s.log.Warn("worker exited", "session", w.sessionID, "pid", w.proc.PID, "cause", w.cause)
		atomicfile.Write(s.previousExitPath(w.sessionID), []byte(w.cause), 0o600)
		s.host.Diagnostic(slog.LevelWarn, fmt.Sprintf("session %s: %s", w.sessionID, w.cause))
	}
	close(w.exited)
	w.endSubscriptions(protocol.ClosedWorkerExited)
}

// forget drops w once its process has ended.
func (s *Service) forget(w *worker) {
	s.mu.Lock()
	if s.workers[w.sessionID] == w {
		delete(s.workers, w.sessionID)
	}
	s.mu.Unlock()
	s.listChanged(w.sessionID) // idle now, if it ran
	s.host.CheckIdle()
}

// workerStopTimeout bounds a worker's drain when it is asked to stop; it
// is killed after.
const workerStopTimeout = 10 * time.Second

// stop asks the worker to drain and exit; it kills it if it does not. A
// stop runs to its end after the service closes: what it cleans up after
// the worker must be.
func (w *worker) stop() {
	<-w.ready
	if w.startErr != nil {
		return
	}
	w.mu.Lock()
	w.stopping = true
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.s.ctx), workerStopTimeout)
	defer cancel()
	w.proc.Stop(ctx)
	<-w.exited
}

// armIdle starts the idle timer when nothing holds the worker: no
// subscriber, no request, and its stream says no turn runs.
func (w *worker) armIdle() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.idleLocked() {
		return
	}
	if w.idle == nil {
		w.idle = time.AfterFunc(w.s.cfg.WorkerIdleGrace, w.idleFired)
	}
}

// idleFired stops the worker if it is still idle, once the worker has
// said so too.
func (w *worker) idleFired() {
	w.mu.Lock()
	w.idle = nil
	if !w.idleLocked() {
		w.mu.Unlock()
		return
	}
	holds := w.holds
	w.mu.Unlock()
	w.s.wg.Go(func() { w.stopIfIdle(holds) })
}

// idleLocked reports whether nothing holds the worker, as far as the host
// knows: no subscriber, no request, no stop under way, and its stream says
// no turn or runtime resource runs.
func (w *worker) idleLocked() bool {
	return !w.s.handingOff.Load() && !w.stopping && !w.activeLocked() && len(w.subs) == 0 && w.uses == 0
}

// stopIfIdle stops the worker when it says it is idle and nothing held it
// since its idle timer fired (holds is the count of holds then). The
// host's view of the worker comes from its stream, which may lag behind
// the worker's answers: a turn.start is answered before the stream says
// the turn runs, and the request's release would otherwise find the
// worker idle and stop it under its new turn. The worker itself is asked.
// A worker that does not answer is stopped (and killed if it does not
// stop then either).
func (w *worker) stopIfIdle(holds uint64) {
	ctx, cancel := context.WithTimeout(w.s.ctx, hostRequestTimeout)
	idle, err := w.idleNow(ctx)
	cancel()
	if w.s.ctx.Err() != nil {
		return // the service stops its workers itself
	}
	w.mu.Lock()
	if !w.idleLocked() || w.holds != holds || w.idle != nil || (err == nil && !idle) {
		// Held since, or busy: its stream's end of the turn, or the
		// hold's release, arms the timer again.
		w.mu.Unlock()
		return
	}
	w.stopping = true
	w.mu.Unlock()
	w.s.log.Info("stopping idle worker", "session", w.sessionID)
	w.stop()
}

// idleNow asks the worker whether a turn or a runtime resource of its
// session runs.
func (w *worker) idleNow(ctx context.Context) (bool, error) {
	sess, err := link.Call(ctx, w.conn, protocol.OpSessionGet, protocol.SessionRef{SessionID: w.sessionID})
	if err != nil {
		return false, err
	}
	if sess.Status != protocol.SessionIdle {
		return false, nil
	}
	res, err := resources(ctx, w.conn, w.sessionID)
	if err != nil {
		return false, err
	}
	for _, r := range res {
		if holdsWorker(r) {
			return false, nil
		}
	}
	return true, nil
}

// hostRequestTimeout bounds a request the host makes of a worker on its
// own account, with no client waiting.
const hostRequestTimeout = 10 * time.Second
