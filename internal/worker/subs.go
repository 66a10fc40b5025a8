package worker

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/agentd-dev/agentd/internal/host"
	"github.com/agentd-dev/agentd/protocol"
)

// maxBacklog bounds the frames a subscription holds before it is ready;
// past it the subscription is closed as a slow consumer.
const maxBacklog = 4096

// subscription delivers a session's deltas to one connection, in order,
// with its own sequence. Guarded by session.mu.
type subscription struct {
	id      string
	conn    *connection
	ready   bool
	seq     uint64
	backlog [][]byte
}

// connection is the worker's state for one attached connection (normally
// its host's).
type connection struct {
	s   *session
	id  host.Identity
	out *host.OutboundWriter
}

// AttachConnection implements host.ConnectionAttacher.
func (s *session) AttachConnection(id host.Identity, out *host.OutboundWriter) host.Attachment {
	return &connection{s: s, id: id, out: out}
}

// Close drops the connection's subscriptions.
func (c *connection) Close(context.Context) error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	for id, sub := range c.s.subs {
		if sub.conn == c {
			delete(c.s.subs, id)
		}
	}
	return nil
}

func (s *session) connection(call *host.Call) (*connection, error) {
	att, ok := call.Attachment().(*connection)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeInternalFailure, "connection not attached")
	}
	return att, nil
}

func (s *session) openSubscription(_ context.Context, call *host.Call, in *protocol.SubscriptionOpenInput) (protocol.SubscriptionOpenResult, error) {
	if in.SessionID != s.id {
		return protocol.SubscriptionOpenResult{}, protocol.Errorf(protocol.CodeNotFound, "this worker serves session %s, not %s", s.id, in.SessionID)
	}
	conn, err := s.connection(call)
	if err != nil {
		return protocol.SubscriptionOpenResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextSub++
	sub := &subscription{id: s.id + "." + s.epoch[:6] + "." + strconv.Itoa(s.nextSub), conn: conn}
	s.subs[sub.id] = sub
	snap, err := json.Marshal(s.projectionLocked())
	if err != nil {
		return protocol.SubscriptionOpenResult{}, err
	}
	return protocol.SubscriptionOpenResult{HostEpoch: s.epoch, SubscriptionID: sub.id, NextSequence: 1, Snapshot: snap}, nil
}

func (s *session) readySubscription(_ context.Context, call *host.Call, in *protocol.SubscriptionRef) (protocol.SubscriptionRef, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub, ok := s.subs[in.SubscriptionID]
	if !ok {
		return protocol.SubscriptionRef{}, protocol.Errorf(protocol.CodeNotFound, "no subscription %q", in.SubscriptionID)
	}
	if !sub.ready {
		sub.ready = true
		for _, f := range sub.backlog {
			if _, err := sub.conn.out.Enqueue(host.Control, f); err != nil {
				break
			}
		}
		sub.backlog = nil
	}
	return *in, nil
}

func (s *session) closeSubscription(_ context.Context, call *host.Call, in *protocol.SubscriptionRef) (protocol.SubscriptionRef, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub, ok := s.subs[in.SubscriptionID]
	if !ok {
		return protocol.SubscriptionRef{}, protocol.Errorf(protocol.CodeNotFound, "no subscription %q", in.SubscriptionID)
	}
	s.closeSubLocked(sub, protocol.ClosedClientClosed)
	return *in, nil
}

// closeSubLocked ends sub with a closed frame, fenced after its deltas.
func (s *session) closeSubLocked(sub *subscription, reason string) {
	delete(s.subs, sub.id)
	sub.seq++
	b, _ := json.Marshal(protocol.SubscriptionClosedFrame{
		Pushed: protocol.Pushed{Kind: protocol.KindSubscriptionClosed, HostEpoch: s.epoch, SubscriptionID: sub.id, Sequence: sub.seq},
		Reason: reason,
	})
	if sub.ready {
		sub.conn.out.Enqueue(host.Fence, b)
	}
}

// emitLocked applies nothing itself: callers change the projection under
// mu, then emit the delta that describes the change, so every subscriber
// sees changes in the order they happened.
func (s *session) emitLocked(d protocol.SessionDelta) {
	if len(s.subs) == 0 {
		return
	}
	raw, err := json.Marshal(d)
	if err != nil {
		s.logger.Error("encoding a delta", "event", d.Event, "err", err)
		return
	}
	for _, sub := range s.subs {
		sub.seq++
		frame := deltaFrame(s.epoch, sub.id, sub.seq, raw)
		if !sub.ready {
			if len(sub.backlog) >= maxBacklog {
				s.closeSubLocked(sub, protocol.ClosedSlowConsumer)
				continue
			}
			sub.backlog = append(sub.backlog, frame)
			continue
		}
		sub.conn.out.Enqueue(host.Control, frame)
	}
}

// deltaFrame encodes a session delta frame around an encoded delta.
func deltaFrame(epoch, subID string, seq uint64, delta []byte) []byte {
	b := make([]byte, 0, 128+len(subID)+len(delta))
	b = append(b, `{"kind":"`+protocol.KindSessionDelta+`","hostEpoch":"`...)
	b = append(b, epoch...)
	b = append(b, `","subscriptionId":`...)
	b = strconv.AppendQuote(b, subID)
	b = append(b, `,"sequence":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"delta":`...)
	b = append(b, delta...)
	return append(b, '}')
}
