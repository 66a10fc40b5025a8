package worker

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/agentd-dev/agentd/internal/fanout"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/internal/redact"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/internal/transport"
	"github.com/agentd-dev/agentd/protocol"
)

// Bounds of a subscription's deltas.
const (
	// maxChunk bounds the text (or tool output) one update delta carries,
	// and the output one waiting PTY item gathers: a longer update is
	// split when it is written.
	maxChunk = 64 << 10
	// maxDeltaBytes bounds one encoded delta, leaving room for the frame
	// the host wraps around it inside the wire limit.
	maxDeltaBytes = protocol.MaxMessageBytes - 16<<10
)

// queueConfig bounds a subscription's queue. The worker's host reads its
// one stream as fast as it comes, so its bounds are room for the host's
// pauses, not flow control: past 4 MiB of a tool's output or a model's
// text, or once some waited 50 ms with newer behind it, the oldest is
// skipped (the transcript and the resource log keep it), so that every
// subscriber sees the newest soon; a PTY's output is never skipped but
// holds its reader back (maxPTYPending). A host is never evicted for
// pausing; records past 64 MiB, which no model writes so fast, evict it.
var queueConfig = fanout.Config{
	LiveBytes:   4 << 20,
	LiveAge:     50 * time.Millisecond,
	RecordBytes: 64 << 20,
	BatchBytes:  256 << 10,
	BatchItems:  512,
}

// subscription delivers a session's deltas to one connection, in order,
// with its own sequence, through a fanout queue whose promise it keeps:
// records lossless, output merged and, past the bounds, skipped ahead.
// The worker's host opens exactly one, whatever the number of its own
// subscribers, and fans it out.
//
// Its pump writes one batch at a time, encoding it outside the session's
// lock, and waits for the connection to take it; meanwhile new deltas
// wait, consecutive updates of one message's text (or one tool call's
// output, or one PTY's) merging into one of at most maxChunk.
type subscription struct {
	id      string                       // constant
	conn    *connection                  // constant
	epoch   string                       // constant
	release func()                       // constant: ends the residency the subscription holds
	q       *fanout.Queue[*pendingDelta] // constant
	logger  *slog.Logger                 // constant

	sessionID string          // constant
	ptyOnly   bool            // constant: a connection to the worker's PTY stream, which carries no session delta
	ptys      map[string]bool // guarded by session.mu: the PTYs whose output it carries
	choice    uint64          // guarded by session.mu: counts the PTY choices made for it (sendScreens)

	// lent is the terminal the subscription's PTY output is written to,
	// not its connection, while its client lends it (terminal.go).
	lent atomic.Pointer[lentTerminal]

	mu       sync.Mutex
	ptyBytes int           // guarded by mu: PTY output waiting in q
	ptyRoom  chan struct{} // guarded by mu: closed once the PTY output waiting falls within its bound
	seq      uint64        // pump only
}

// pendingDelta is a delta not yet encoded, its text growing as updates of
// its message merge into it; or one of the other frames a subscription
// carries: a runtime resource's state, or a PTY's output (in ptyData).
// It is the subscription's fanout item.
type pendingDelta struct {
	kind                   itemKind
	stream                 string // fanout.Item.Stream: "" for a record
	d                      protocol.SessionDelta
	text, thinking, output []byte
	skipped                int64 // bytes of its stream left out before it

	res       protocol.Resource // itemResource
	ref       string            // itemPTY
	ptySeq    uint64            // itemPTY: the sequence of its output's last piece
	screen    bool              // itemPTY: the output redraws the whole screen
	ptyData   []byte            // itemPTY: the output, a JSON string (transport.GetBuffer's)
	ptyPushed int               // itemPTY: the bytes pushed into it, as the subscription counted them
}

// itemKind is what a pendingDelta carries.
type itemKind int

const (
	itemDelta    itemKind = iota // a session delta
	itemResource                 // a runtime_resource_update frame
	itemPTY                      // a runtime_resource_pty_data frame
)

// newPendingDelta returns d's item: a message's text and a tool call's
// output are live streams; every other delta is a record.
func newPendingDelta(d protocol.SessionDelta) *pendingDelta {
	p := &pendingDelta{d: d, text: []byte(d.Text), thinking: []byte(d.Thinking)}
	if d.ToolCall != nil {
		p.output = []byte(d.ToolCall.Output)
	}
	switch {
	case d.Event == protocol.EventMessageUpdate:
		p.stream = "message " + d.MessageID
	case d.Event == protocol.EventToolCallUpdate && d.ToolCall != nil:
		p.stream = "tool " + d.ToolCall.ID
	}
	return p
}

// Stream implements fanout.Item.
func (p *pendingDelta) Stream() string { return p.stream }

// Merge implements fanout.Item: updates of one stream merge up to
// maxChunk, so a frame of them never needs cutting.
func (p *pendingDelta) Merge(next *pendingDelta) bool {
	if p.Size()+next.Size() > maxChunk || next.skipped > 0 {
		return false
	}
	if p.kind == itemPTY {
		p.ptyData = protocol.JoinJSONStrings(transport.GrowBuffer(p.ptyData, len(next.ptyData)), next.ptyData)
		transport.PutBuffer(next.ptyData)
		p.ptySeq = next.ptySeq
		p.ptyPushed += next.ptyPushed
		return true
	}
	p.text = append(p.text, next.text...)
	p.thinking = append(p.thinking, next.thinking...)
	p.output = append(p.output, next.output...)
	return true
}

// Size implements fanout.Item.
func (p *pendingDelta) Size() int {
	return len(p.text) + len(p.thinking) + len(p.output) + len(p.ptyData)
}

// Skip implements fanout.Item: an update loses its oldest text (thinking
// first, then text, then output), on rune boundaries. A PTY's output is
// never skipped: its reader waits instead.
func (p *pendingDelta) Skip(n int) int {
	if p.kind != itemDelta {
		return 0
	}
	left := fanout.SkipText(n, &p.thinking, &p.text, &p.output)
	p.skipped += int64(left)
	return left
}

// Skipped implements fanout.Item.
func (p *pendingDelta) Skipped() int64 { return p.skipped }

// Carry implements fanout.Item.
func (p *pendingDelta) Carry(n int64) { p.skipped += n }

// Whole implements fanout.Item: a PTY's output is never skipped.
func (p *pendingDelta) Whole() bool { return p.kind == itemPTY }

// Release implements fanout.Item.
func (p *pendingDelta) Release() {
	if p.ptyData != nil {
		transport.PutBuffer(p.ptyData)
		p.ptyData = nil
	}
}

func (p *pendingDelta) delta() protocol.SessionDelta {
	d := p.d
	d.Text, d.Thinking, d.Skipped = string(p.text), string(p.thinking), p.skipped
	if d.ToolCall != nil {
		tc := *d.ToolCall
		tc.Output = string(p.output)
		d.ToolCall = &tc
	}
	return d
}

func updateSize(d protocol.SessionDelta) int {
	n := len(d.Text) + len(d.Thinking)
	if d.ToolCall != nil {
		n += len(d.ToolCall.Output)
	}
	return n
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
			if len(out) > 0 {
				p.Skipped = 0 // told once, by the first piece
			}
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
//
// No key the worker holds is in what it returns: a record's text, a
// message's, a tool call's arguments or output.
func encodeDelta(d protocol.SessionDelta) ([]byte, bool) {
	b, err := json.Marshal(d)
	if err != nil {
		return nil, false
	}
	b = redact.Bytes(b)
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
	b = redact.Bytes(b)
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
	// direct is the controller a ticket bound the connection to, if any
	// (direct.go). Guarded by session.direct.mu.
	direct *directBinding
}

// AttachConnection implements server.ConnectionAttacher. A host's
// connection supersedes the host connections before it: a host that
// adopts the worker is its only host from then on, and what an earlier
// one (replaced, or thought dead) still sends is never applied, as its
// connection is closed. The registration names the new host before the
// earlier one's connection closes, so that the earlier host, reading it
// then, knows it was taken over, however long the worker runs on.
func (s *session) AttachConnection(id server.Identity, out *server.OutboundWriter) server.Attachment {
	c := &connection{s: s, id: id, out: out}
	s.mu.Lock()
	s.claimed = true
	prev := s.host
	if id.Surface == link.SurfaceHost {
		s.host = c
		s.reg.Host = id.ClientInstanceID
		if err := home.WriteWorkerRegistration(s.homeDir, s.reg); err != nil {
			s.logger.Warn("naming the host in the worker's registration", "err", err)
		}
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
	c.s.unbind(c, "")
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
	// The host opens its one subscription of a worker plainly, then
	// chooses PTYs and starts it by their own calls.
	switch {
	case len(in.Ptys) > 0:
		return protocol.SubscriptionOpenResult{}, protocol.InvalidField("input.ptys", "is for a host: a worker's subscription chooses PTYs through subscription.pty_interest.set")
	case in.Ready:
		return protocol.SubscriptionOpenResult{}, protocol.InvalidField("input.ready", "is for a host: a worker's subscription starts through subscription.ready")
	}
	conn, err := s.connection(call)
	if err != nil {
		return protocol.SubscriptionOpenResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if conn.id.Surface == link.SurfaceHost && s.host != conn {
		// Dispatched before another host superseded this one's connection,
		// which is closing: its hydration is fenced off.
		return protocol.SubscriptionOpenResult{}, protocol.Errorf(protocol.CodeOperationConflict, "another host took the worker over")
	}
	snap, err := json.Marshal(s.projectionLocked())
	if err != nil {
		return protocol.SubscriptionOpenResult{}, err
	}
	snap = redact.Bytes(snap)
	s.nextSub++
	sub := &subscription{
		id: s.id + "." + s.epoch[:6] + "." + strconv.Itoa(s.nextSub), conn: conn, epoch: s.epoch, sessionID: s.id, ptys: map[string]bool{},
		release: call.AcquireResidency(), q: fanout.New[*pendingDelta](queueConfig, &s.fanout), logger: s.logger,
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
	sub.q.Start()
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
	s.deliverLocked(func() *pendingDelta { return newPendingDelta(d) }, nil)
}

// deliverLocked queues an item for every subscription to wants (every one
// when nil).
func (s *session) deliverLocked(item func() *pendingDelta, to func(*subscription) bool) {
	for _, sub := range s.subs {
		if to == nil || to(sub) {
			p := item()
			if sub.ptyOnly && p.kind == itemDelta {
				continue
			}
			sub.queue(p)
		}
	}
}

// forget drops a subscription that ended by itself.
func (s *session) forget(sub *subscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs[sub.id] == sub {
		delete(s.subs, sub.id)
	}
}

// queue pushes p to the subscription's queue, counting a PTY's output.
func (sub *subscription) queue(p *pendingDelta) {
	if p.kind == itemPTY {
		p.ptyPushed = len(p.ptyData)
		sub.mu.Lock()
		sub.ptyBytes += p.ptyPushed
		sub.mu.Unlock()
	}
	sub.q.Push(p)
}

// close ends the subscription: with reason, a closed frame follows what is
// pending; with no reason the connection has gone and nothing more is
// written.
func (sub *subscription) close(reason string) {
	if reason != "" {
		sub.q.Close(fanout.Reason(reason))
		return
	}
	sub.q.Abort(fanout.ErrGone)
	sub.tookPTY(-1) // nobody waits on a subscription that has gone
}

// pump writes the subscription's batches, one at a time, until it closes.
func (sub *subscription) pump() {
	defer sub.release()
	var batch []*pendingDelta
	for {
		var err error
		batch, err = sub.q.Next(context.Background(), batch)
		if err != nil {
			var reason fanout.Reason
			switch {
			case errors.As(err, &reason):
			case errors.Is(err, fanout.ErrEvicted):
				sub.logger.Error("a subscription fell too far behind and is closed", "subscription", sub.id)
				sub.conn.s.forget(sub)
				reason = protocol.ClosedSlowConsumer
			default:
				sub.giveBack(protocol.TerminalReturned)
				return // the connection has gone
			}
			// A terminal lent gets all that was queued before the close,
			// and is given back before the client learns of it.
			sub.giveBack(lentEnd(string(reason)))
			sub.seq++
			b, _ := json.Marshal(protocol.SubscriptionClosedFrame{
				Pushed: protocol.Pushed{Kind: protocol.KindSubscriptionClosed, HostEpoch: sub.epoch, SubscriptionID: sub.id, Sequence: sub.seq},
				Reason: string(reason),
			})
			sub.conn.out.Enqueue(server.Fence, b)
			return
		}
		taken := 0
		for _, p := range batch {
			taken += p.ptyPushed
		}
		sub.tookPTY(taken)
		ok := sub.write(batch)
		clear(batch)
		if !ok {
			sub.q.Abort(fanout.ErrGone)
		}
	}
}

// giveBack gives back the terminal lent for the subscription, if any.
func (sub *subscription) giveBack(reason string) {
	if t := sub.lent.Load(); t != nil {
		t.end(reason)
	}
}

// lentEnd is why a terminal lent is given back when its subscription
// closes for reason.
func lentEnd(reason string) string {
	if reason == protocol.ClosedSlowConsumer {
		return protocol.TerminalSlow
	}
	return protocol.TerminalControlEnded
}

// write encodes and writes batch, an update longer than maxChunk as
// several, and waits for the connection to take it; it reports false when
// the connection is going away. It releases the batch's items.
func (sub *subscription) write(batch []*pendingDelta) bool {
	var last *server.Receipt
	failed := false
	for _, p := range batch {
		if failed {
			p.Release()
			continue
		}
		if t := sub.lent.Load(); t != nil && p.kind == itemPTY {
			t.write(p.ptyData)
			p.Release()
			continue
		}
		if p.kind != itemDelta {
			b, err := sub.frame(p)
			p.Release()
			if err != nil {
				sub.logger.Error("a runtime resource frame cannot be encoded and is left out", "subscription", sub.id, "err", err)
				continue
			}
			var r *server.Receipt
			if len(batch) == 1 {
				// A key's echo, most often: written here when the
				// connection's writer is idle, with no hand-over to it
				// and back. The receipt is waited for below either way.
				r, err = sub.conn.out.WritePooled(b)
			} else {
				r, err = sub.conn.out.EnqueuePooled(server.Control, b, nil)
			}
			if err != nil {
				failed = true
				continue
			}
			last = r
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
				failed = true
				break
			}
			last = r
		}
	}
	if failed {
		return false
	}
	if last == nil {
		return true
	}
	select {
	case <-last.Done():
		return last.Err() == nil
	case <-sub.q.Done():
		return false
	}
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
		res = redact.Bytes(res)
		pushed.Kind = protocol.KindRuntimeResourceUpdate
		return json.Marshal(protocol.RuntimeResourceUpdateFrame{Pushed: pushed, RuntimeResourceUpdate: protocol.RuntimeResourceUpdate{SessionID: sub.sessionID, Ref: p.res.Ref, Resource: res}})
	}
	f := protocol.PtyDataFields{SessionID: sub.sessionID, Ref: p.ref, PtySequence: p.ptySeq, Data: p.ptyData, Screen: p.screen}
	return protocol.AppendPtyDataFrame(transport.GetBuffer(192+len(sub.epoch)+len(sub.id)+len(sub.sessionID)+len(p.ref)+len(p.ptyData)), pushed, &f), nil
}

// watches reports whether the subscription carries PTY ref's output.
// Call with session.mu held.
func (sub *subscription) watches(ref string) bool { return sub.ptys[ref] }

// maxPTYPending bounds the PTY output a subscription holds before the
// PTY's reader waits: a PTY prints faster than a host can carry, and the
// kernel's buffer then holds the program back, as a terminal does.
const maxPTYPending = 1 << 20

// tookPTY notes that n bytes of the PTY output waiting went out (every
// byte, with n < 0), waking the readers that wait for room.
func (sub *subscription) tookPTY(n int) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if n < 0 || n > sub.ptyBytes {
		n = sub.ptyBytes
	}
	sub.ptyBytes -= n
	if sub.ptyRoom != nil && sub.ptyBytes <= maxPTYPending {
		close(sub.ptyRoom)
		sub.ptyRoom = nil
	}
}

// pendingPTY returns the bytes of PTY output waiting in the subscription.
func (sub *subscription) pendingPTY() int {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.ptyBytes
}

// waitPTYRoom waits while the subscription holds more than maxPTYPending
// of PTY output, until done closes.
func (sub *subscription) waitPTYRoom(done <-chan struct{}) {
	for {
		sub.mu.Lock()
		if sub.ptyBytes <= maxPTYPending {
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
		case <-sub.q.Done():
			return
		case <-done:
			return
		}
	}
}
