package worker

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// Bounds of a subscription's deltas.
const (
	// maxChunk bounds the text (or tool output) one update delta carries:
	// a longer one is split when it is written.
	maxChunk = 64 << 10
	// batchBytes bounds what the pump writes before it waits for the
	// connection to take it: a connection's outbound queue holds at most
	// one such batch of a subscription.
	batchBytes = 256 << 10
	// batchFrames bounds the frames the pump writes before it waits: a
	// PTY's output may come in pieces of a few bytes.
	batchFrames = 512
	// maxMerged bounds the text or output one waiting update gathers
	// while its subscriber lags; past it the middle is left out, and the
	// update says how much. The host reads its stream as fast as it comes,
	// so only a stalled host meets it.
	maxMerged = 16 << 20
	// maxDeltaBytes bounds one encoded delta, leaving room for the frame
	// the host wraps around it inside the wire limit.
	maxDeltaBytes = protocol.MaxMessageBytes - 16<<10
	// maxBacklog bounds the deltas a subscription holds undelivered; past
	// it the subscription is closed as a slow consumer. The worker's host
	// reads its one stream as fast as it arrives, so this is a last
	// resort, not flow control: flow control is the merging of updates
	// while a batch is on its way.
	maxBacklog = 1 << 14
)

// subscription delivers a session's deltas to one connection, in order,
// with its own sequence. The worker's host opens exactly one, whatever the
// number of its own subscribers, and fans it out.
//
// Delivery is lossless and paced: the subscription's pump writes one batch
// at a time, encoding it outside the session's lock, and while a batch is
// on its way new deltas wait, consecutive text (or tool output) updates of
// one message merging into one (written again as pieces of at most
// maxChunk), so a subscriber that reads slowly gets fewer, larger deltas
// rather than an ever longer queue.
type subscription struct {
	id      string        // constant
	conn    *connection   // constant
	epoch   string        // constant
	release func()        // constant: ends the residency the subscription holds
	wake    chan struct{} // buffered 1: there is work for the pump
	logger  *slog.Logger  // constant

	sessionID string          // constant
	ptys      map[string]bool // guarded by session.mu: the PTYs whose output it carries

	// Lock order: session.mu before mu.
	mu       sync.Mutex
	ptyBytes int             // guarded by mu: PTY output pending
	ptyRoom  chan struct{}   // guarded by mu: closed when the pending PTY output is taken
	ready    bool            // guarded by mu
	pending  []*pendingDelta // guarded by mu
	closing  string          // guarded by mu: the reason to close with, once set
	seq      uint64          // pump only
}

// pendingDelta is a delta not yet encoded; text updates grow in builders so
// merging many small ones stays linear. It is also one of the other frames
// a subscription carries: a runtime resource's state, or a PTY's output
// (in output).
type pendingDelta struct {
	kind           itemKind
	d              protocol.SessionDelta
	text, thinking strings.Builder
	output         strings.Builder

	res     protocol.Resource // itemResource
	ref     string            // itemPTY
	ptySeq  uint64            // itemPTY: the sequence of its output's last piece
	screen  bool              // itemPTY: the output redraws the whole screen
	ptyData []byte            // itemPTY: the output, a JSON string (protocol.GetBuffer's)
}

// itemKind is what a pendingDelta carries.
type itemKind int

const (
	itemDelta    itemKind = iota // a session delta
	itemResource                 // a runtime_resource_update frame
	itemPTY                      // a runtime_resource_pty_data frame
)

// absorb folds next into p when the two travel as one: updates of one
// message's text or one tool call's output, or output of one PTY (up to
// maxChunk, so a frame of it never needs cutting).
func (p *pendingDelta) absorb(next *pendingDelta) bool {
	switch {
	case p.kind == itemDelta && next.kind == itemDelta && p.mergeable(next.d):
		p.add(next.d)
	case p.kind == itemPTY && next.kind == itemPTY && p.ref == next.ref && !next.screen &&
		len(p.ptyData)+len(next.ptyData) <= maxChunk:
		p.ptyData = protocol.JoinJSONStrings(protocol.GrowBuffer(p.ptyData, len(next.ptyData)), next.ptyData)
		protocol.PutBuffer(next.ptyData)
		p.ptySeq = next.ptySeq
	default:
		return false
	}
	return true
}

func (p *pendingDelta) size() int {
	return p.text.Len() + p.thinking.Len() + p.output.Len() + len(p.ptyData)
}

// mergeable reports whether next can be folded into p: both update the
// same message's text, or the same tool call's output.
func (p *pendingDelta) mergeable(next protocol.SessionDelta) bool {
	return p.d.Continues(&next)
}

func updateSize(d protocol.SessionDelta) int {
	n := len(d.Text) + len(d.Thinking)
	if d.ToolCall != nil {
		n += len(d.ToolCall.Output)
	}
	return n
}

func (p *pendingDelta) add(d protocol.SessionDelta) {
	p.text.WriteString(d.Text)
	p.thinking.WriteString(d.Thinking)
	if d.ToolCall != nil {
		p.output.WriteString(d.ToolCall.Output)
	}
	if p.size() > maxMerged {
		p.text = squeezed(p.text)
		p.thinking = squeezed(p.thinking)
		p.output = squeezed(p.output)
	}
}

// squeezed keeps the head and tail of a builder past maxMerged/2, with
// how much of its middle it left out.
func squeezed(b strings.Builder) strings.Builder {
	if b.Len() <= maxMerged/2 {
		return b
	}
	s := b.String()
	head, tail := s[:cut(s, maxMerged/8)], tailOf(s, maxMerged/8)
	var out strings.Builder
	out.WriteString(head)
	out.WriteString("\n… (" + strconv.Itoa(len(s)-len(head)-len(tail)) + " bytes left out while the host lagged)\n")
	out.WriteString(tail)
	return out
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

// splitUpdate cuts an update carrying more than maxChunk of text or output
// into updates of at most maxChunk each, on rune boundaries; any other
// delta is returned as it is.
func splitUpdate(d protocol.SessionDelta) []protocol.SessionDelta {
	if (d.Event != protocol.EventMessageUpdate && d.Event != protocol.EventToolCallUpdate) || updateSize(d) <= maxChunk {
		return []protocol.SessionDelta{d}
	}
	var out []protocol.SessionDelta
	piece := func(set func(*protocol.SessionDelta, string), s string) {
		for len(s) > 0 {
			n := cut(s, maxChunk)
			p := d
			p.Text, p.Thinking = "", ""
			if d.ToolCall != nil {
				tc := *d.ToolCall
				tc.Output = ""
				p.ToolCall = &tc
			}
			set(&p, s[:n])
			out = append(out, p)
			s = s[n:]
		}
	}
	piece(func(p *protocol.SessionDelta, s string) { p.Thinking = s }, d.Thinking)
	piece(func(p *protocol.SessionDelta, s string) { p.Text = s }, d.Text)
	if d.ToolCall != nil {
		piece(func(p *protocol.SessionDelta, s string) { p.ToolCall.Output = s }, d.ToolCall.Output)
	}
	return out
}

// cut returns the length of the longest prefix of s of at most n bytes
// that ends on a rune boundary (at least one rune).
func cut(s string, n int) int {
	if len(s) <= n {
		return len(s)
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	if i == 0 {
		_, i = utf8.DecodeRuneInString(s)
	}
	return i
}

// encodeDelta encodes d within maxDeltaBytes. What cannot fit is left out,
// and the delta says so: a whole message's text at its end (its record
// follows in entry_added), a tool call's arguments or result (the
// transcript has them), a record's data (session.transcript.page reads
// it). It reports false for a delta that still does not fit.
func encodeDelta(d protocol.SessionDelta) ([]byte, bool) {
	b, err := json.Marshal(d)
	if err != nil {
		return nil, false
	}
	if len(b) <= maxDeltaBytes {
		return b, true
	}
	switch {
	case d.Event == protocol.EventMessageEnd:
		d.Text = ""
	case d.ToolCall != nil:
		tc := *d.ToolCall
		tc.Arguments = nil
		if len(tc.Output) > maxChunk {
			tc.Output = "… (" + strconv.Itoa(len(tc.Output)) + " bytes: the whole output is in the transcript)\n" + tailOf(tc.Output, maxChunk)
		}
		d.ToolCall = &tc
	case d.Entry != nil:
		d.Entry = protocol.FitRecord(d.Entry)
	}
	b, err = json.Marshal(d)
	return b, err == nil && len(b) <= maxDeltaBytes
}

// tailOf returns the longest suffix of s of at most n bytes that starts on
// a rune boundary.
func tailOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// connection is the worker's state for one attached connection (normally
// its host's).
type connection struct {
	s   *session
	id  server.Identity
	out *server.OutboundWriter
}

// AttachConnection implements server.ConnectionAttacher. A host's
// connection supersedes the host connections before it: a host that
// adopts the worker is its only host from then on, and what an earlier
// one (replaced, or thought dead) still sends is never applied, as its
// connection is closed.
func (s *session) AttachConnection(id server.Identity, out *server.OutboundWriter) server.Attachment {
	c := &connection{s: s, id: id, out: out}
	s.mu.Lock()
	s.claimed = true
	prev := s.host
	if id.Surface == protocol.SurfaceHost {
		s.host = c
	} else {
		prev = nil
	}
	s.mu.Unlock()
	if prev != nil {
		s.logger.Info("a host adopted the worker; the earlier host's connection is closed", "connection", prev.id.ConnectionID)
		prev.out.Abort(errSuperseded)
	}
	return c
}

// Close drops the connection's subscriptions and ends the control of the
// PTYs its clients held: those clients are gone with it.
func (c *connection) Close(context.Context) error {
	c.s.res.ReleaseConnections(c.id.ConnectionID + "/")
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.s.host == c {
		c.s.host = nil
	}
	for id, sub := range c.s.subs {
		if sub.conn == c {
			delete(c.s.subs, id)
			sub.close("")
		}
	}
	return nil
}

// errSuperseded closes the connection of a host that another host took
// the worker over from.
var errSuperseded = errors.New("another host took the worker over")

// controllerOwner names the end client of call as a PTY controller: its
// connection, qualified by the host connection it came through, since
// two hosts number their connections alike.
func controllerOwner(call *server.Call) string {
	return call.Identity.ConnectionID + "/" + call.Caller.ConnectionID
}

func (s *session) connection(call *server.Call) (*connection, error) {
	att, ok := call.Attachment().(*connection)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeInternalFailure, "connection not attached")
	}
	return att, nil
}

func (s *session) openSubscription(_ context.Context, call *server.Call, in *protocol.SubscriptionOpenInput) (protocol.SubscriptionOpenResult, error) {
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
	sub := &subscription{
		id: s.id + "." + s.epoch[:6] + "." + strconv.Itoa(s.nextSub), conn: conn, epoch: s.epoch, sessionID: s.id, ptys: map[string]bool{},
		release: call.AcquireResidency(), wake: make(chan struct{}, 1), logger: s.logger,
	}
	s.subs[sub.id] = sub
	s.pumps.Go(sub.pump)
	return protocol.SubscriptionOpenResult{HostEpoch: s.epoch, SubscriptionID: sub.id, NextSequence: 1, Snapshot: snap}, nil
}

func (s *session) readySubscription(_ context.Context, _ *server.Call, in *protocol.SubscriptionRef) (protocol.SubscriptionRef, error) {
	s.mu.Lock()
	sub, ok := s.subs[in.SubscriptionID]
	s.mu.Unlock()
	if !ok {
		return protocol.SubscriptionRef{}, protocol.Errorf(protocol.CodeNotFound, "no subscription %q", in.SubscriptionID)
	}
	sub.mu.Lock()
	sub.ready = true
	sub.mu.Unlock()
	sub.signal()
	return *in, nil
}

func (s *session) closeSubscription(_ context.Context, _ *server.Call, in *protocol.SubscriptionRef) (protocol.SubscriptionRef, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub, ok := s.subs[in.SubscriptionID]
	if !ok {
		return protocol.SubscriptionRef{}, protocol.Errorf(protocol.CodeNotFound, "no subscription %q", in.SubscriptionID)
	}
	delete(s.subs, sub.id)
	sub.close(protocol.ClosedClientClosed)
	return *in, nil
}

// emitLocked queues d for every subscriber. Callers change the projection
// under mu, then emit the delta that describes the change, so every
// subscriber sees changes in the order they happened; encoding and writing
// happen later, outside mu, on each subscription's pump.
func (s *session) emitLocked(d protocol.SessionDelta) {
	s.live.Apply(d)
	s.deliverLocked(func() *pendingDelta {
		p := &pendingDelta{d: d}
		p.add(d)
		return p
	}, nil)
}

// deliverLocked queues an item for every subscription to wants (every one
// when nil); a subscription whose backlog is full is closed.
func (s *session) deliverLocked(item func() *pendingDelta, to func(*subscription) bool) {
	for id, sub := range s.subs {
		if to != nil && !to(sub) {
			continue
		}
		if !sub.queue(item()) {
			s.logger.Error("a subscription fell too far behind and is closed", "subscription", id, "backlog", maxBacklog)
			delete(s.subs, id)
			sub.close(protocol.ClosedSlowConsumer)
		}
	}
}

// queue queues p, folded into the last item when they travel as one; it
// reports false when the backlog is full.
func (sub *subscription) queue(p *pendingDelta) bool {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.closing != "" {
		return true
	}
	if p.kind == itemPTY {
		sub.ptyBytes += len(p.ptyData)
	}
	if n := len(sub.pending); n == 0 || !sub.pending[n-1].absorb(p) {
		if len(sub.pending) >= maxBacklog {
			return false
		}
		sub.pending = append(sub.pending, p)
	}
	if sub.ready {
		sub.signal()
	}
	return true
}

func (sub *subscription) signal() {
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

// close ends the subscription: with reason, a closed frame follows what is
// pending (all of it, but for a slow consumer, whose backlog is dropped);
// with no reason the connection has gone and nothing more is written.
func (sub *subscription) close(reason string) {
	sub.mu.Lock()
	if sub.closing == "" {
		sub.closing = reason
		if reason == "" {
			sub.closing = "gone"
		}
		if reason == protocol.ClosedSlowConsumer || reason == "" {
			sub.pending = nil
		}
		sub.tookPTYLocked() // nobody waits on a closed subscription
	}
	sub.mu.Unlock()
	sub.signal()
}

// pump writes the subscription's batches, one at a time, until it closes.
func (sub *subscription) pump() {
	defer sub.release()
	for range sub.wake {
		sub.mu.Lock()
		batch := sub.pending
		if !sub.ready {
			batch = nil
		} else {
			sub.pending = nil
			sub.tookPTYLocked()
		}
		closing, ready := sub.closing, sub.ready
		sub.mu.Unlock()
		if !sub.write(batch) {
			closing = "gone"
		}
		if closing != "" {
			if closing != "gone" && ready {
				sub.seq++
				b, _ := json.Marshal(protocol.SubscriptionClosedFrame{
					Pushed: protocol.Pushed{Kind: protocol.KindSubscriptionClosed, HostEpoch: sub.epoch, SubscriptionID: sub.id, Sequence: sub.seq},
					Reason: closing,
				})
				sub.conn.out.Enqueue(server.Fence, b)
			}
			return
		}
	}
}

// write encodes and writes batch, an update longer than maxChunk as
// several, waiting for the connection to take each batchBytes of it; it
// reports false when the connection is going away.
func (sub *subscription) write(batch []*pendingDelta) bool {
	var last *server.Receipt
	written, frames := 0, 0
	for _, p := range batch {
		if p.kind != itemDelta {
			b, err := sub.frame(p)
			if err != nil {
				sub.logger.Error("a runtime resource frame cannot be encoded and is left out", "subscription", sub.id, "err", err)
				continue
			}
			r, err := sub.conn.out.EnqueuePooled(server.Control, b, nil)
			if err != nil {
				return false
			}
			last = r
			frames++
			if written += len(b); written >= batchBytes || frames >= batchFrames {
				if last.Err() != nil {
					return false
				}
				written, frames = 0, 0
			}
			continue
		}
		for _, d := range splitUpdate(p.delta()) {
			raw, ok := encodeDelta(d)
			if !ok {
				sub.logger.Error("a delta does not fit the wire limit and is left out", "subscription", sub.id, "event", d.Event)
				continue
			}
			sub.seq++
			r, err := sub.conn.out.Enqueue(server.Control, protocol.AppendDeltaFrame(make([]byte, 0, 96+len(sub.epoch)+len(sub.id)+len(raw)), sub.epoch, sub.id, sub.seq, raw))
			if err != nil {
				return false
			}
			last = r
			if written += len(raw); written >= batchBytes {
				if last.Err() != nil {
					return false
				}
				written = 0
			}
		}
	}
	return last == nil || last.Err() == nil
}

// frame encodes a runtime resource item as its frame, with the
// subscription's next sequence.
func (sub *subscription) frame(p *pendingDelta) ([]byte, error) {
	sub.seq++
	pushed := protocol.Pushed{HostEpoch: sub.epoch, SubscriptionID: sub.id, Sequence: sub.seq}
	if p.kind == itemResource {
		res, err := json.Marshal(p.res)
		if err != nil {
			return nil, err
		}
		pushed.Kind = protocol.KindRuntimeResourceUpdate
		return json.Marshal(protocol.RuntimeResourceUpdateFrame{Pushed: pushed, RuntimeResourceUpdate: protocol.RuntimeResourceUpdate{SessionID: sub.sessionID, Ref: p.res.Ref, Resource: res}})
	}
	f := protocol.PtyDataFields{SessionID: sub.sessionID, Ref: p.ref, PtySequence: p.ptySeq, Data: p.ptyData, Screen: p.screen}
	b := protocol.AppendPtyDataFrame(protocol.GetBuffer(192+len(sub.epoch)+len(sub.id)+len(sub.sessionID)+len(p.ref)+len(p.ptyData)), pushed, &f)
	protocol.PutBuffer(p.ptyData)
	p.ptyData = nil
	return b, nil
}

// watches reports whether the subscription carries PTY ref's output.
// Call with session.mu held.
func (sub *subscription) watches(ref string) bool { return sub.ptys[ref] }

// maxPTYPending bounds the PTY output a subscription holds before the
// PTY's reader waits: a PTY prints faster than a host can carry, and the
// kernel's buffer then holds the program back, as a terminal does.
const maxPTYPending = 1 << 20

// tookPTYLocked notes that the pending PTY output went out, waking the
// readers that wait for room.
func (sub *subscription) tookPTYLocked() {
	sub.ptyBytes = 0
	if sub.ptyRoom != nil {
		close(sub.ptyRoom)
		sub.ptyRoom = nil
	}
}

// waitPTYRoom waits while the subscription holds more than maxPTYPending
// of PTY output, until done closes.
func (sub *subscription) waitPTYRoom(done <-chan struct{}) {
	for {
		sub.mu.Lock()
		if sub.ptyBytes <= maxPTYPending || sub.closing != "" {
			sub.mu.Unlock()
			return
		}
		if sub.ptyRoom == nil {
			sub.ptyRoom = make(chan struct{})
		}
		room := sub.ptyRoom
		sub.mu.Unlock()
		select {
		case <-room:
		case <-done:
			return
		}
	}
}
