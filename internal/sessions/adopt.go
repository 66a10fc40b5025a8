package sessions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentd-dev/agentd/internal/atomicfile"
	"github.com/agentd-dev/agentd/internal/catalog"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/internal/supervisor"
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

// adoptAll adopts the workers registered in the home, and removes what
// workers that are gone left behind: their registrations and sockets.
func (s *Service) adoptAll() {
	began := time.Now()
	regs := s.sup.Registrations()
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
	s.mu.Lock()
	s.sup.RemoveStaleSockets(func(id string) bool { _, live := s.workers[id]; return live })
	adopted := len(s.workers)
	s.mu.Unlock()
	if len(regs) > 0 {
		s.log.Info("workers adopted", "adopted", adopted, "registered", len(regs), "took", time.Since(began))
	}
}

// adopt takes over the worker reg names, when it still runs, and follows
// its stream again. A worker that does not answer within adoptTimeout is
// killed as lost; its session's next worker records the turn it left as
// failed.
func (s *Service) adopt(reg home.WorkerRegistration) {
	ctx, cancel := context.WithTimeout(s.ctx, adoptTimeout)
	defer cancel()
	p, err := s.sup.Adopt(ctx, reg)
	if errors.Is(err, supervisor.ErrGone) {
		return
	}
	w := &worker{s: s, sessionID: reg.SessionID, ready: make(chan struct{}), exited: make(chan struct{}), subs: map[*subscription]struct{}{}}
	var feed *link.Stream
	if err == nil {
		w.proc, w.conn = p, p.Conn
		feed, err = w.connect(ctx)
		if err != nil {
			p.Kill()
		}
	}
	if err != nil {
		s.log.Warn("a worker did not answer the host adopting it; it is stopped as lost", "session", reg.SessionID, "pid", reg.PID, "err", err)
		s.host.Diagnostic(slog.LevelWarn, fmt.Sprintf("session %s: its worker (pid %d) did not answer in time and was stopped", reg.SessionID, reg.PID))
		atomicfile.Write(s.previousExitPath(reg.SessionID), []byte("its worker did not answer the host that took over, and was stopped"), 0o600)
		return
	}
	s.restoreHeader(w)
	s.mu.Lock()
	s.workers[w.sessionID] = w
	s.mu.Unlock()
	s.wg.Go(func() {
		defer s.forget(w)
		s.serve(w, feed)
	})
	s.log.Info("worker adopted", "session", w.sessionID, "pid", p.PID)
}

// connect opens an adopted worker's stream, and learns the runtime
// resources it runs.
func (w *worker) connect(ctx context.Context) (*link.Stream, error) {
	feed, err := w.openFeed(ctx)
	if err != nil {
		return nil, err
	}
	// Asked once the stream is open: its frames, applied after, are as
	// new as this or newer.
	res, err := resources(ctx, w.conn, w.sessionID)
	if err != nil {
		feed.Close()
		return nil, err
	}
	w.mu.Lock()
	for _, r := range res {
		if holdsWorker(r) {
			w.live[r.Ref] = true
		}
	}
	w.mu.Unlock()
	w.s.listChanged(w.sessionID)
	return feed, nil
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
		Thinking: sess.Thinking, Approval: sess.Approval, Sandbox: sess.Sandbox, Network: sess.Network, Plugins: sess.Plugins, CreatedAt: sess.CreatedAt,
		LastActivityAt: sess.LastActivityAt, Archived: sess.Archived, MetadataRevision: sess.MetadataRevision,
	})
	if err != nil {
		s.log.Warn("the session of an adopted worker cannot be put back in the catalog", "session", w.sessionID, "err", err)
		return
	}
	s.log.Warn("the session of an adopted worker was missing from the catalog; its header is restored", "session", h.ID)
}

// BeginHandOff implements server.HandOff: the host is handing its home to
// the host replacing it. Every subscription closes as host_replaced (its
// client reconnects and resumes there); the workers are neither stopped
// nor stopped when idle, and are let go of when the host closes.
func (s *Service) BeginHandOff() {
	s.handingOff.Store(true)
	var ended []*subscription
	defer func() { awaitEnds(ended) }()
	workers := s.stopStarting()
	s.endLists(protocol.ClosedHostReplaced)
	for _, w := range workers {
		w.mu.Lock()
		if w.idle != nil {
			w.idle.Stop()
			w.idle = nil
		}
		w.mu.Unlock()
		ended = append(ended, w.endSubscriptions(protocol.ClosedHostReplaced)...)
	}
}
