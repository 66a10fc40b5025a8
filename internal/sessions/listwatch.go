package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/agentd-dev/agentd/internal/catalog"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// A subscription to the session list (session.list.watch) tells its
// client, in a subscription.session_list_update frame, each session whose
// entry changed: its header in the catalog, its state as the host knows
// it (idle or running), or its removal.
//
// Its delivery promise is coalescing: what waits for a subscriber is the
// set of sessions changed since it was last told of them, in the order
// they first changed, and each frame tells a session's entry as it is
// when the frame is written. A session that changes while an earlier
// change of it waits is told once; an entry told already, unchanged, is
// not told again. What waits is bounded by the number of sessions, so a
// subscriber is never closed for reading slowly, and none holds the
// catalog, a worker or another connection up.

// listWatch is one subscription to the session list.
type listWatch struct {
	id       string        // constant
	c        *clientConn   // constant
	only     string        // constant: a guest's grant's session, the only one it is told of; "" for the owner
	wake     chan struct{} // constant: buffered 1, told when a session is marked
	started  chan struct{} // constant: closed once its response has been sent
	ended    chan struct{} // constant: closed once it ends
	finished chan struct{} // constant: closed once its pump has written its last frame

	once sync.Once

	mu     sync.Mutex
	dirty  []string        // guarded by mu: the sessions to tell of, in the order they changed
	marked map[string]bool // guarded by mu: the sessions of dirty
	reason string          // guarded by mu: why it ended; "" when its connection has gone

	// The pump's alone.
	seq  uint64
	told map[string]string // the entry last told of each session
}

// listChanged marks session id's entry in every subscription to the
// session list. It takes s.mu: call it with no lock held that comes after
// s.mu (the catalog's, a worker's).
func (s *Service) listChanged(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for lw := range s.lists {
		lw.mark(id)
	}
}

// catalogChanged is the catalog's OnChange: a session's header changed,
// was created or removed.
func (s *Service) catalogChanged(id string) { s.listChanged(id) }

// watchList opens a subscription to the session list for the call's
// connection; its frames start once the response has been sent.
func (s *Service) watchList(_ context.Context, call *server.Call, _ *protocol.SessionListWatchInput) (protocol.SubscriptionRef, error) {
	c, err := clientOf(call)
	if err != nil {
		return protocol.SubscriptionRef{}, err
	}
	lw := &listWatch{
		id: "l-" + c.id.ConnectionID + "." + strconv.FormatUint(s.nextSub.Add(1), 10), c: c,
		wake: make(chan struct{}, 1), started: make(chan struct{}), ended: make(chan struct{}), finished: make(chan struct{}),
		marked: map[string]bool{}, told: map[string]string{},
	}
	if call.Caller.Principal.Kind == protocol.PrincipalGuest {
		g, ok := s.grants.Get(call.Caller.Principal.ID)
		if !ok {
			return protocol.SubscriptionRef{}, protocol.Errorf(protocol.CodeUnauthorized, "session.list.watch: the guest holds no grant in force")
		}
		lw.only = g.SessionID
	}
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		return protocol.SubscriptionRef{}, protocol.Errorf(protocol.CodeDraining, "the host is draining")
	}
	s.lists[lw] = struct{}{}
	s.mu.Unlock()
	c.mu.Lock()
	c.lists[lw.id] = lw
	c.mu.Unlock()
	s.wg.Go(lw.pump)
	call.AfterResponse(func() { close(lw.started) })
	return protocol.SubscriptionRef{SubscriptionID: lw.id}, nil
}

// mark notes that session id's entry changed, unless the subscription
// does not tell of it.
func (lw *listWatch) mark(id string) {
	if lw.only != "" && id != lw.only {
		return
	}
	lw.mu.Lock()
	if !lw.marked[id] {
		lw.marked[id] = true
		lw.dirty = append(lw.dirty, id)
	}
	lw.mu.Unlock()
	select {
	case lw.wake <- struct{}{}:
	default:
	}
}

// end ends the subscription with reason, "" for a connection that has
// gone: its pump writes its closed frame, but for a gone connection, and
// the service and the connection forget it.
func (lw *listWatch) end(s *Service, reason string) {
	lw.once.Do(func() {
		lw.mu.Lock()
		lw.reason = reason
		lw.mu.Unlock()
		close(lw.ended)
		s.mu.Lock()
		delete(s.lists, lw)
		s.mu.Unlock()
		lw.c.mu.Lock()
		if lw.c.lists[lw.id] == lw {
			delete(lw.c.lists, lw.id)
		}
		lw.c.mu.Unlock()
	})
}

// pump writes the subscription's frames, once its response has been
// sent, until it ends: each marked session's entry as it is then, once
// the connection has room for it.
func (lw *listWatch) pump() {
	defer close(lw.finished)
	select {
	case <-lw.started:
	case <-lw.ended:
		lw.finish()
		return
	}
	s := lw.c.s
	for {
		select {
		case <-lw.wake:
		case <-lw.ended:
			lw.finish()
			return
		}
		for {
			lw.mu.Lock()
			if len(lw.dirty) == 0 {
				lw.mu.Unlock()
				break
			}
			id := lw.dirty[0]
			lw.dirty = lw.dirty[1:]
			delete(lw.marked, id)
			lw.mu.Unlock()

			entry := protocol.SessionListUpdateFrame{SessionID: id}
			h, err := s.cat.Get(id)
			switch {
			case errors.Is(err, catalog.ErrNotFound):
				entry.Removed = true
			case err != nil:
				continue // neither there nor gone: a damaged header, which session.list tells
			default:
				entry.Session = ptr(s.session(h))
			}
			body, _ := json.Marshal(entry)
			if lw.told[id] == string(body) {
				continue
			}
			lw.told[id] = string(body)
			if entry.Removed {
				delete(lw.told, id)
			}
			entry.Pushed = protocol.Pushed{Kind: protocol.KindSessionListUpdate, HostEpoch: s.host.Epoch(), SubscriptionID: lw.id, Sequence: lw.seq + 1}
			frame, _ := json.Marshal(entry)
			var werr error
			if !lw.c.send(lw.ended, func() { werr = lw.c.out.EnqueueThen(server.Control, frame, lw.c.flushed) }) {
				lw.finish()
				return
			}
			if werr != nil {
				lw.end(s, "")
				return
			}
			lw.seq++
		}
	}
}

// finish writes the closed frame of a subscription that ended, but for a
// connection that has gone.
func (lw *listWatch) finish() {
	lw.mu.Lock()
	reason := lw.reason
	lw.mu.Unlock()
	if reason == "" {
		return
	}
	lw.seq++
	b, _ := json.Marshal(protocol.SubscriptionClosedFrame{
		Pushed: protocol.Pushed{Kind: protocol.KindSubscriptionClosed, HostEpoch: lw.c.s.host.Epoch(), SubscriptionID: lw.id, Sequence: lw.seq},
		Reason: reason,
	})
	lw.c.out.Enqueue(server.Fence, b)
}

// endLists ends every subscription to the session list with reason, and
// waits, a while at most, for their closed frames to be queued.
func (s *Service) endLists(reason string) {
	s.mu.Lock()
	lists := make([]*listWatch, 0, len(s.lists))
	for lw := range s.lists {
		lists = append(lists, lw)
	}
	s.mu.Unlock()
	for _, lw := range lists {
		lw.end(s, reason)
	}
	awaitFinished(lists)
}

// awaitFinished waits for the pumps of lists to write their last frame,
// for closeWait at most.
func awaitFinished(lists []*listWatch) {
	deadline := time.NewTimer(closeWait)
	defer deadline.Stop()
	for _, lw := range lists {
		select {
		case <-lw.finished:
		case <-deadline.C:
			return
		}
	}
}
