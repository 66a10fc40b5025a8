package worker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"sync"
	"time"

	"github.com/agentd-dev/agentd/internal/fanout"
	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/internal/transport"
	"github.com/agentd-dev/agentd/protocol"
)

// A PTY's controller may type into the PTY, and read it, on a connection
// of its own to the worker, without the host between: a key's echo then
// wakes two processes fewer. The host decides who may, as for every call:
// it forwards runtime.resource.controller.direct only for the owner's
// connections of its socket, once its access check has passed, and the
// worker gives a ticket only for a controller the caller holds. The
// connection the ticket opens (runtime.resource.direct.open) carries that
// controller's calls, with the controller's own sequences and fence, and
// the PTY's output; its part ends as soon as the controller ends, however
// it ends: released, its host connection closed, the PTY exited, the
// worker taken over by another host or stopped.

// ticketLifetime is how long a ticket may wait for its connection.
const ticketLifetime = 10 * time.Second

// directs are the tickets given and the connections they bound.
type directs struct {
	mu      sync.Mutex
	tickets map[[sha256.Size]byte]directTicket // guarded by mu: by the ticket's digest
	bound   map[string]*connection             // guarded by mu: by controller id
}

// directTicket is a ticket given and not yet used.
type directTicket struct {
	binding directBinding
	expires time.Time
}

// directBinding is a connection's part in one controller.
type directBinding struct {
	owner        string // the controller's owner, as the host's calls name it
	ref          string
	controllerID string
	sub          *subscription // the PTY's output on the connection; set once opened
}

// giveTicket answers runtime.resource.controller.direct, which the host
// forwards for the end client holding controller in.ControllerID.
func (s *session) giveTicket(_ context.Context, call *server.Call, in *protocol.ControllerRef) (protocol.ControllerDirectResult, error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.ControllerDirectResult{}, err
	}
	if call.Identity.Surface != link.SurfaceHost {
		return protocol.ControllerDirectResult{}, protocol.Errorf(protocol.CodeUnauthorized, "a ticket to the worker is asked for through the host")
	}
	owner := controllerOwner(call)
	if err := s.res.Holds(owner, in.Ref, in.ControllerID); err != nil {
		return protocol.ControllerDirectResult{}, err
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	ticket := hex.EncodeToString(secret)
	now := time.Now()
	s.direct.mu.Lock()
	if s.direct.tickets == nil {
		s.direct.tickets = map[[sha256.Size]byte]directTicket{}
		s.direct.bound = map[string]*connection{}
	}
	for k, t := range s.direct.tickets {
		if now.After(t.expires) {
			delete(s.direct.tickets, k)
		}
	}
	s.direct.tickets[sha256.Sum256([]byte(ticket))] = directTicket{
		binding: directBinding{owner: owner, ref: in.Ref, controllerID: in.ControllerID},
		expires: now.Add(ticketLifetime),
	}
	s.direct.mu.Unlock()
	return protocol.ControllerDirectResult{Endpoint: s.endpoint, CompositionID: link.CompositionWorker, Ticket: ticket}, nil
}

// openDirect answers runtime.resource.direct.open: it binds the calling
// connection to the ticket's controller and opens a subscription of the
// PTY on it, started once the response is written, the screen first.
func (s *session) openDirect(_ context.Context, call *server.Call, in *protocol.DirectOpenInput) (protocol.DirectOpenResult, error) {
	conn, err := s.connection(call)
	if err != nil {
		return protocol.DirectOpenResult{}, err
	}
	if conn.id.Surface == link.SurfaceHost {
		return protocol.DirectOpenResult{}, protocol.Errorf(protocol.CodeUnauthorized, "a host's connection carries no controller of its own")
	}
	digest := sha256.Sum256([]byte(in.Ticket))
	s.direct.mu.Lock()
	t, ok := s.direct.tickets[digest]
	delete(s.direct.tickets, digest)
	switch {
	case !ok || time.Now().After(t.expires):
		s.direct.mu.Unlock()
		return protocol.DirectOpenResult{}, protocol.Errorf(protocol.CodeUnauthorized, "the ticket is unknown, used or expired: ask runtime.resource.controller.direct for another")
	case conn.direct != nil:
		s.direct.mu.Unlock()
		return protocol.DirectOpenResult{}, protocol.Errorf(protocol.CodeOperationConflict, "this connection carries controller %s already", conn.direct.controllerID)
	}
	b := &t.binding
	prev := s.direct.bound[b.controllerID]
	conn.direct = b
	s.direct.bound[b.controllerID] = conn
	s.direct.mu.Unlock()
	if prev != nil {
		s.unbind(prev, protocol.ClosedClientClosed) // superseded by this one
	}
	// The controller may have ended since the ticket was given: then the
	// binding is gone, or goes now.
	if err := s.res.Holds(b.owner, b.ref, b.controllerID); err != nil {
		s.unbind(conn, "")
		return protocol.DirectOpenResult{}, protocol.Errorf(protocol.CodeUnauthorized, "the ticket's controller has ended: %v", err)
	}
	sub := s.newSubscription(call, conn, true)
	s.direct.mu.Lock()
	bound := conn.direct == b
	if bound {
		b.sub = sub
	}
	s.direct.mu.Unlock()
	if !bound {
		s.forget(sub)
		sub.close("")
		return protocol.DirectOpenResult{}, protocol.Errorf(protocol.CodeUnauthorized, "the ticket's controller has ended")
	}
	if err := s.screenFirst(sub, b.ref); err != nil {
		s.unbind(conn, "")
		return protocol.DirectOpenResult{}, err
	}
	call.AfterResponse(sub.q.Start)
	return protocol.DirectOpenResult{SessionID: s.id, Ref: b.ref, ControllerID: b.controllerID, SubscriptionID: sub.id}, nil
}

// screenFirst chooses PTY ref for sub, if it is not chosen already, and
// queues its screen there. The screen is queued with the PTY's output
// held back, so the output after it follows it, none missing.
func (s *session) screenFirst(sub *subscription, ref string) error {
	return s.res.Screen(ref, func(screen string, seq uint64) {
		s.mu.Lock()
		defer s.mu.Unlock()
		sub.ptys[ref] = true
		quoted := protocol.AppendJSONString(transport.GetBuffer(len(screen)+len(screen)/8+2), screen)
		s.deliverLocked(ptyItems(ref, seq, quoted, true, 1), func(other *subscription) bool { return other == sub })
	})
}

// newSubscription opens a subscription of the session on conn, not yet
// started, choosing no PTY; one ptyOnly carries no session delta.
func (s *session) newSubscription(call *server.Call, conn *connection, ptyOnly bool) *subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextSub++
	sub := &subscription{
		id: s.id + "." + s.epoch[:6] + "." + strconv.Itoa(s.nextSub), conn: conn, epoch: s.epoch, sessionID: s.id, ptys: map[string]bool{},
		release: call.AcquireResidency(), q: fanout.New[*pendingDelta](queueConfig, &s.fanout), logger: s.logger, ptyOnly: ptyOnly,
	}
	s.subs[sub.id] = sub
	s.pumps.Go(sub.pump)
	return sub
}

// controlEnded ends the part of the connection bound to controller id,
// which has ended: its subscription closes once what waits in it is
// written (the PTY's end among it), and its calls are no longer the
// controller's. The resource manager calls it with its lock held.
func (s *session) controlEnded(id string) {
	s.direct.mu.Lock()
	conn := s.direct.bound[id]
	s.direct.mu.Unlock()
	if conn != nil {
		s.unbind(conn, protocol.ClosedAccessRevoked)
	}
}

// unbind ends conn's part in its controller: its subscription is closed
// with reason, or at once without one.
func (s *session) unbind(conn *connection, reason string) {
	s.direct.mu.Lock()
	b := conn.direct
	conn.direct = nil
	if b != nil && s.direct.bound[b.controllerID] == conn {
		delete(s.direct.bound, b.controllerID)
	}
	s.direct.mu.Unlock()
	if b == nil || b.sub == nil {
		return
	}
	s.forget(b.sub)
	b.sub.close(reason)
}

// controlOwner returns the owner of controller id of PTY ref as call's
// connection names it: the end client the host forwards the call for, or
// the controller a connection to the worker was bound to by its ticket.
func (s *session) controlOwner(call *server.Call, ref, id string) (string, error) {
	conn, _ := call.Attachment().(*connection)
	if conn == nil || conn.id.Surface == link.SurfaceHost {
		return controllerOwner(call), nil
	}
	s.direct.mu.Lock()
	b := conn.direct
	s.direct.mu.Unlock()
	switch {
	case b == nil:
		return controllerOwner(call), nil
	case b.ref != ref || b.controllerID != id:
		return "", protocol.Errorf(protocol.CodeOperationConflict, "this connection carries controller %s of %s, not %s of %s", b.controllerID, b.ref, id, ref)
	}
	return b.owner, nil
}

// slowDirect ends the part of a connection to the worker whose reader
// holds more of a PTY's output than maxPTYPending: the PTY is never held
// back for it, and its client goes on through the host, which skips a
// slow reader to the screen.
func (s *session) slowDirect(sub *subscription) {
	conn := sub.conn
	s.direct.mu.Lock()
	mine := conn.direct != nil && conn.direct.sub == sub
	s.direct.mu.Unlock()
	if mine {
		s.logger.Info("a connection to the worker fell behind a PTY's output; its client goes on through the host", "subscription", sub.id)
		// A terminal lent may be blocked in a write: given back at once.
		sub.giveBack(protocol.TerminalSlow)
		s.unbind(conn, protocol.ClosedSlowConsumer)
	}
}
