package worker

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/agentd-dev/agentd/internal/host"
	"github.com/agentd-dev/agentd/protocol"
)

// maxBacklog bounds the deltas a subscription holds undelivered; past it
// the subscription is closed as a slow consumer.
const maxBacklog = 4096

// subscription delivers a session's deltas to one connection, in order,
// with its own sequence. Delivery is lossless and paced: one batch of
// frames is on its way at a time, and while it is, new deltas wait —
// consecutive text (or tool output) updates of one message merging into
// one — so a subscriber that reads slowly gets fewer, larger deltas
// rather than an ever longer queue. Guarded by session.mu.
type subscription struct {
	id       string
	conn     *connection
	ready    bool
	seq      uint64
	pending  []*pendingDelta
	inflight bool // a batch is on its way
	closed   bool
	// release ends the residency the subscription holds in the worker's
	// host: its status counts the subscriptions open.
	release func()
}

// pendingDelta is a delta not yet encoded; text updates grow in builders so
// merging many small ones stays linear.
type pendingDelta struct {
	d              protocol.SessionDelta
	text, thinking strings.Builder
	output         strings.Builder
}

// mergeable reports whether next can be folded into p: both update the
// same message's text, or the same tool call's output.
func (p *pendingDelta) mergeable(next protocol.SessionDelta) bool {
	switch {
	case p.d.Event != next.Event || p.d.TurnID != next.TurnID:
		return false
	case next.Event == protocol.EventMessageUpdate:
		return p.d.MessageID == next.MessageID
	case next.Event == protocol.EventToolCallUpdate:
		return p.d.ToolCall != nil && next.ToolCall != nil && p.d.ToolCall.ID == next.ToolCall.ID
	}
	return false
}

func (p *pendingDelta) add(d protocol.SessionDelta) {
	p.text.WriteString(d.Text)
	p.thinking.WriteString(d.Thinking)
	if d.ToolCall != nil {
		p.output.WriteString(d.ToolCall.Output)
	}
}

func (p *pendingDelta) delta() protocol.SessionDelta {
	d := p.d
	d.Text, d.Thinking = p.text.String(), p.thinking.String()
	if d.ToolCall != nil {
		tc := *d.ToolCall
		tc.Output = p.output.String()
		d.ToolCall = &tc
	}
	return d
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
	s.mu.Lock()
	s.claimed = true
	s.mu.Unlock()
	return &connection{s: s, id: id, out: out}
}

// Close drops the connection's subscriptions.
func (c *connection) Close(context.Context) error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	for id, sub := range c.s.subs {
		if sub.conn == c {
			delete(c.s.subs, id)
			sub.release()
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
	snap, err := json.Marshal(s.projectionLocked())
	if err != nil {
		return protocol.SubscriptionOpenResult{}, err
	}
	s.nextSub++
	sub := &subscription{id: s.id + "." + s.epoch[:6] + "." + strconv.Itoa(s.nextSub), conn: conn, release: call.AcquireResidency()}
	s.subs[sub.id] = sub
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
		s.deliverLocked(sub)
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
	sub.release()
	sub.closed = true
	if sub.ready && !sub.inflight {
		s.deliverLocked(sub) // what is pending goes before the closing frame
	}
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
	for _, sub := range s.subs {
		if n := len(sub.pending); n > 0 && sub.pending[n-1].mergeable(d) {
			sub.pending[n-1].add(d)
		} else {
			if n >= maxBacklog {
				s.closeSubLocked(sub, protocol.ClosedSlowConsumer)
				continue
			}
			p := &pendingDelta{d: d}
			p.add(d)
			sub.pending = append(sub.pending, p)
		}
		if sub.ready && !sub.inflight {
			s.deliverLocked(sub)
		}
	}
}

// deliverLocked hands sub's pending deltas to its connection as one batch
// and, while the batch is on its way, lets the next one gather.
func (s *session) deliverLocked(sub *subscription) {
	if len(sub.pending) == 0 {
		return
	}
	var last *host.Receipt
	for _, p := range sub.pending {
		raw, err := json.Marshal(p.delta())
		if err != nil {
			s.logger.Error("encoding a delta", "event", p.d.Event, "err", err)
			continue
		}
		sub.seq++
		r, err := sub.conn.out.Enqueue(host.Control, deltaFrame(s.epoch, sub.id, sub.seq, raw))
		if err != nil {
			break // the connection is going away
		}
		last = r
	}
	sub.pending = sub.pending[:0]
	if last == nil {
		return
	}
	sub.inflight = true
	s.pumps.Go(func() {
		<-last.Done()
		s.mu.Lock()
		defer s.mu.Unlock()
		sub.inflight = false
		if last.Err() == nil && !sub.closed {
			s.deliverLocked(sub)
		}
	})
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
