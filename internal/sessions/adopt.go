package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/internal/catalog"
	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// A worker outlives its host. It registers itself in the home; a host
// that starts for the home adopts every registered worker that still runs
// before it serves, so a host killed or replaced loses no turn, shell run
// or PTY: the worker goes on, and the new host follows its stream again.

// adoptTimeout bounds the adoption of one worker: one that has not
// answered by then (hung, say) is stopped as lost, so that it cannot hold
// the new host back.
const adoptTimeout = 2 * time.Second

// adoptAtOnce is how many workers a host adopts at the same time.
const adoptAtOnce = 16

// errSuperseded ends an adopted worker that closed its connection to this
// host yet runs on: another host took it over.
var errSuperseded = errors.New("another host took the worker over")

// adoptAll adopts the workers registered in the home, and removes what
// workers that are gone left behind: their registrations and sockets.
func (s *Service) adoptAll() {
	began := time.Now()
	regs := s.registrations()
	var wg sync.WaitGroup
	slots := make(chan struct{}, adoptAtOnce)
	for _, reg := range regs {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			s.adopt(reg)
		})
	}
	wg.Wait()
	s.removeStaleSockets()
	if len(regs) > 0 {
		s.mu.Lock()
		adopted := len(s.workers)
		s.mu.Unlock()
		s.log.Info("workers adopted", "adopted", adopted, "registered", len(regs), "took", time.Since(began))
	}
}

// registrations reads the workers' registrations; one that cannot be read
// is removed.
func (s *Service) registrations() []protocol.WorkerRegistration {
	dir := protocol.WorkerRegistryDir(s.cfg.Home)
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var regs []protocol.WorkerRegistration
	for _, de := range des {
		id, ok := strings.CutSuffix(de.Name(), ".json")
		if !ok || de.IsDir() {
			continue
		}
		path := filepath.Join(dir, de.Name())
		b, err := os.ReadFile(path)
		var reg protocol.WorkerRegistration
		if err == nil {
			err = json.Unmarshal(b, &reg)
		}
		if err != nil || reg.SessionID != id || reg.PID <= 0 {
			s.log.Warn("removing a worker registration that cannot be read", "path", path, "err", err)
			os.Remove(path)
			continue
		}
		regs = append(regs, reg)
	}
	return regs
}

// adopt takes over the worker reg names, when it still runs: it connects,
// checks that the process answering is the one registered, and follows
// its stream again. A worker that does not answer within adoptTimeout is
// killed as lost; its session's next worker records the turn it left as
// failed.
func (s *Service) adopt(reg protocol.WorkerRegistration) {
	if !proc.RunningSince(reg.PID, reg.ProcessStart) {
		// It exited (killed with its host, say): clean up after it. What
		// it left running in its process session is ended, unless its pid
		// now names another process, whose session that may be.
		if proc.Running(reg.PID) {
			os.Remove(protocol.WorkerRegistrationPath(s.cfg.Home, reg.SessionID))
		} else {
			s.cleanUpAfter(reg.SessionID, reg.PID)
		}
		os.Remove(reg.Endpoint)
		return
	}
	w := &worker{
		s: s, sessionID: reg.SessionID, pid: reg.PID, procStart: reg.ProcessStart,
		ready: make(chan struct{}), exited: make(chan struct{}), subs: map[*subscription]struct{}{},
	}
	ctx, cancel := context.WithTimeout(context.Background(), adoptTimeout)
	defer cancel()
	feed, err := w.connect(ctx, reg.Endpoint)
	if err != nil {
		s.log.Warn("a worker did not answer the host adopting it; it is stopped as lost", "session", reg.SessionID, "pid", reg.PID, "err", err)
		s.host.Diagnostic(slog.LevelWarn, fmt.Sprintf("session %s: its worker (pid %d) did not answer in time and was stopped", reg.SessionID, reg.PID))
		s.stopLost(reg)
		return
	}
	s.restoreHeader(w)
	w.stat = openStat(w.pid) // the process that answered as w.pid
	s.mu.Lock()
	s.workers[w.sessionID] = w
	s.mu.Unlock()
	exited := s.exitOf(w)
	s.wg.Go(func() {
		defer s.forget(w)
		s.serve(w, feed, exited)
	})
	s.log.Info("worker adopted", "session", w.sessionID, "pid", w.pid)
}

// connect dials the worker at endpoint, checks it is w's process, and
// opens its stream.
func (w *worker) connect(ctx context.Context, endpoint string) (*link.Stream, error) {
	c, err := link.Dial(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	st, err := c.Status(ctx)
	if err == nil && st.PID != w.pid {
		err = fmt.Errorf("another process (pid %d) answers at its socket", st.PID)
	}
	var feed *link.Stream
	if err == nil {
		w.conn = c
		feed, err = w.openFeed(ctx)
	}
	var res []protocol.Resource
	if err == nil {
		// Asked once the stream is open: its frames, applied after, are
		// as new as this or newer.
		res, err = resources(ctx, c, w.sessionID)
		if err != nil {
			feed.Close()
		}
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	w.mu.Lock()
	for _, r := range res {
		if r.State == protocol.ResourceRunning {
			w.live[r.Ref] = true
		}
	}
	w.mu.Unlock()
	return feed, nil
}

// stopLost kills the worker reg names, when it is still that process, and
// cleans up after it. Why it was stopped is kept for its session's next
// worker to record.
func (s *Service) stopLost(reg protocol.WorkerRegistration) {
	if fd, err := unix.PidfdOpen(reg.PID, 0); err == nil {
		if proc.RunningSince(reg.PID, reg.ProcessStart) {
			unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		}
		unix.Close(fd)
	}
	awaitExit(reg.PID, reg.ProcessStart, nil)
	s.cleanUpAfter(reg.SessionID, reg.PID)
	os.Remove(reg.Endpoint)
	os.WriteFile(s.previousExitPath(reg.SessionID), []byte("its worker did not answer the host that took over, and was stopped"), 0o600)
}

// exitOf reports when an adopted worker, which is not this host's child,
// exits: its connection closes, then the process is gone. One whose
// connection closed but that runs on was taken over by another host.
func (s *Service) exitOf(w *worker) <-chan error {
	exited := make(chan error, 1)
	s.wg.Go(func() {
		select {
		case <-w.conn.Done():
		case <-s.detached:
			return
		}
		if awaitExit(w.pid, w.procStart, s.detached) {
			exited <- nil
			return
		}
		select {
		case <-s.detached:
		default:
			exited <- errSuperseded
		}
	})
	return exited
}

// awaitExit waits, at most adoptTimeout and until stop is closed, for the
// process pid that started at start to be gone, and reports whether it
// is.
func awaitExit(pid int, start uint64, stop <-chan struct{}) bool {
	for deadline := time.Now().Add(adoptTimeout); proc.RunningSince(pid, start); {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-stop:
			return false
		}
	}
	return true
}

// restoreHeader puts an adopted worker's session back in the catalog when
// the catalog lost it, from the worker's own copy of the header.
func (s *Service) restoreHeader(w *worker) {
	if h, err := s.cat.Get(w.sessionID); err == nil && !h.Damaged {
		return
	}
	w.mu.Lock()
	sess := w.proj.Session()
	w.mu.Unlock()
	h, err := s.cat.Restore(catalog.Header{
		ID: sess.SessionID, Title: sess.Title, Cwd: sess.Cwd, Model: sess.Model,
		Thinking: sess.Thinking, Approval: sess.Approval, CreatedAt: sess.CreatedAt,
		LastActivityAt: sess.LastActivityAt, Archived: sess.Archived, MetadataRevision: sess.MetadataRevision,
	})
	if err != nil {
		s.log.Warn("the session of an adopted worker cannot be put back in the catalog", "session", w.sessionID, "err", err)
		return
	}
	s.log.Warn("the session of an adopted worker was missing from the catalog; its header is restored", "session", h.ID)
}

// removeStaleSockets removes the sockets of this host's workers that no
// worker serves any more: those of workers killed with their host.
func (s *Service) removeStaleSockets() {
	socks, _ := filepath.Glob(filepath.Join(s.cfg.RuntimeDir, s.cfg.HostID+"-w-*.sock"))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sock := range socks {
		id := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(sock), s.cfg.HostID+"-w-"), ".sock")
		if _, live := s.workers[id]; !live {
			os.Remove(sock)
		}
	}
}

// BeginHandOff implements server.HandOff: the host is handing its home to
// the host replacing it. Every subscription closes as host_replaced (its
// client reconnects and resumes there); the workers are neither stopped
// nor stopped when idle, and are let go of when the host closes.
func (s *Service) BeginHandOff() {
	s.handingOff.Store(true)
	var ended []*subscription
	defer func() { awaitEnds(ended) }()
	for _, w := range s.stopStarting() {
		w.mu.Lock()
		if w.idle != nil {
			w.idle.Stop()
			w.idle = nil
		}
		w.mu.Unlock()
		ended = append(ended, w.endSubscriptions(protocol.ClosedHostReplaced)...)
	}
}
