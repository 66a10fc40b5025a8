package sessions

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// The fan-out's delivery promise, as docs/protocol.md states it: a
// subscription receives every delta of its session, in order, each once.
// While a subscriber lags (its previous batch is not yet written to its
// connection), consecutive text updates of one message, or output updates
// of one tool call, merge into one delta, up to mergeCap. A subscriber
// whose backlog still passes its bound (bytes or age) is closed with
// slow_consumer: its backlog is dropped, and neither its connection, nor
// its sibling subscriptions, nor the session notice.
const (
	// DefaultBacklogBytes bounds the bytes a subscription may hold
	// undelivered.
	DefaultBacklogBytes = 1 << 20
	// DefaultBacklogAge bounds how long its oldest undelivered delta may
	// wait.
	DefaultBacklogAge = 4 * time.Second
	// batchBytes bounds the deltas handed to a connection at once: a
	// connection's outbound queue holds at most one batch of each of its
	// subscriptions.
	batchBytes = 64 << 10
	// batchFrames bounds the frames of one batch.
	batchFrames = 256
	// mergeCap bounds the text one merged update carries.
	mergeCap = 64 << 10
	// pageBytes bounds a transcript page read for a resuming subscriber.
	pageBytes = 256 << 10
)

// counters count the fan-out's work for host.diagnostics.query.
type counters struct {
	deltas, encodes, frames, coalesced, slowConsumers atomic.Uint64
}

func (c *counters) snapshot() protocol.FanoutCounters {
	return protocol.FanoutCounters{
		Deltas: c.deltas.Load(), Encodes: c.encodes.Load(), Frames: c.frames.Load(),
		Coalesced: c.coalesced.Load(), SlowConsumers: c.slowConsumers.Load(),
	}
}

// item is one delta on its way to subscribers. body is the delta's JSON,
// shared by every subscriber; d is its decoded form, read-only. An item
// of another kind has no d: body is then its frame's fields beside the
// pushed header (a runtime resource's state), or pty holds them (a PTY's
// output).
type item struct {
	body []byte
	d    *protocol.SessionDelta
	kind string                  // the frame's kind: "" for a delta
	pty  *protocol.PtyDataFields // a PTY's output, its data still encoded; read-only
	at   time.Time               // when it reached the host

	// raw is the worker's frame that pty's data shares, from
	// protocol.GetBuffer: given back when the last of those who hold
	// the item (refs), the publisher and each backlog entry, lets go.
	raw  []byte
	refs atomic.Int32
}

// hold takes a hold of the item for a backlog entry.
func (it *item) hold() {
	if it.raw != nil {
		it.refs.Add(1)
	}
}

// release lets a hold of the item go.
func (it *item) release() {
	if it.raw != nil && it.refs.Add(-1) == 0 {
		protocol.PutBuffer(it.raw)
	}
}

// pending is an item in one subscription's backlog. A merged one owns
// the text it gathered and is encoded when it is delivered.
type pending struct {
	*item
	merged         bool
	text, thinking strings.Builder
	output         strings.Builder // a tool call's output
	ptyData        []byte          // a PTY's merged output, a JSON string (protocol.GetBuffer's)
	ptySeq         uint64          // the sequence of a PTY's merged output
	dropped        bool            // its holds are let go
}

// drop lets go of what p holds, once it is written or left out.
func (p *pending) drop() {
	if p.dropped {
		return
	}
	p.dropped = true
	p.item.release()
	if p.ptyData != nil {
		protocol.PutBuffer(p.ptyData)
		p.ptyData = nil
	}
}

// dropBacklogLocked leaves out what the backlog holds.
func (sub *subscription) dropBacklogLocked() {
	for _, p := range sub.backlog {
		p.drop()
	}
	sub.backlog, sub.bytes = nil, 0
}

func (p *pending) size() int {
	if p.merged {
		return p.text.Len() + p.thinking.Len() + p.output.Len() + len(p.ptyData) + 128
	}
	return p.item.size()
}

func (it *item) size() int {
	if it.pty != nil {
		return len(it.pty.Data) + 128
	}
	return len(it.body)
}

// mergeable reports whether next may be folded into p: text of one
// message, output of one tool call, or output of one PTY.
func (p *pending) mergeable(next *item) bool {
	if p.pty != nil && next.pty != nil {
		return next.pty.Ref == p.pty.Ref && !next.pty.Screen && p.size()+len(next.pty.Data) <= mergeCap
	}
	d := next.d
	return p.d != nil && d != nil && p.size()+len(d.Text)+len(d.Thinking)+outputLen(d) <= mergeCap && p.d.Continues(d)
}

func outputLen(d *protocol.SessionDelta) int {
	if d.ToolCall == nil {
		return 0
	}
	return len(d.ToolCall.Output)
}

func (p *pending) merge(next *item) {
	if p.pty != nil {
		if !p.merged {
			p.merged = true
			p.ptyData = append(protocol.GetBuffer(mergeCap), p.pty.Data...)
		}
		p.ptyData = protocol.JoinJSONStrings(protocol.GrowBuffer(p.ptyData, len(next.pty.Data)), next.pty.Data)
		p.ptySeq = next.pty.PtySequence
		return
	}
	d := next.d
	if !p.merged {
		p.merged = true
		p.text.WriteString(p.d.Text)
		p.thinking.WriteString(p.d.Thinking)
		if p.d.ToolCall != nil {
			p.output.WriteString(p.d.ToolCall.Output)
		}
	}
	p.text.WriteString(d.Text)
	p.thinking.WriteString(d.Thinking)
	if d.ToolCall != nil {
		p.output.WriteString(d.ToolCall.Output)
	}
}

// appendFrame appends to b the pending item's frame with head.
func (p *pending) appendFrame(b []byte, head protocol.Pushed) []byte {
	switch {
	case p.pty != nil:
		f := *p.pty
		if p.merged {
			f.Data, f.PtySequence = p.ptyData, p.ptySeq
		}
		return protocol.AppendPtyDataFrame(b, head, &f)
	case p.kind == "":
		return protocol.AppendDeltaFrame(b, head.HostEpoch, head.SubscriptionID, head.Sequence, p.encoded())
	}
	return protocol.AppendPushedFrame(b, p.kind, head.HostEpoch, head.SubscriptionID, head.Sequence, p.encoded())
}

// encoded returns the pending delta's JSON (or the fields of its frame).
func (p *pending) encoded() []byte {
	if !p.merged {
		return p.body
	}
	d := *p.d
	d.Text, d.Thinking = p.text.String(), p.thinking.String()
	if d.ToolCall != nil {
		tc := *d.ToolCall
		tc.Output = p.output.String()
		d.ToolCall = &tc
	}
	b, _ := json.Marshal(d)
	return b
}

// subscription is one client subscription to a session: the worker's
// deltas, wrapped with the subscription's own id and sequence, through a
// bounded backlog of its own.
type subscription struct {
	id    string        // constant
	c     *clientConn   // constant
	w     *worker       // constant
	s     *Service      // constant
	after *uint64       // constant: resume after this record
	upTo  uint64        // constant: the last record of the opening snapshot
	ended chan struct{} // closed once it has closed

	ptys map[string]ptyState // guarded by w.mu: the PTYs whose output it chose

	mu       sync.Mutex
	readied  bool        // guarded by mu
	catching bool        // guarded by mu: transcript records are still being sent
	seq      uint64      // guarded by mu: the last sequence handed to the connection
	backlog  []*pending  // guarded by mu
	bytes    int         // guarded by mu: the backlog's size
	inflight bool        // guarded by mu: a batch is on its way
	closed   string      // guarded by mu: the reason it closed, once it has
	sentEnd  bool        // guarded by mu: its closed frame is queued
	timer    *time.Timer // guarded by mu: checks the backlog's age when no delta comes
}

// push adds it to the backlog and delivers what the subscriber can take.
// It never blocks on the subscriber.
func (sub *subscription) push(it *item) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.closed != "" {
		return
	}
	if n := len(sub.backlog); n > 0 && sub.backlog[n-1].mergeable(it) {
		last := sub.backlog[n-1]
		before := last.size()
		last.merge(it)
		sub.bytes += last.size() - before
		if it.d != nil {
			sub.s.counters.coalesced.Add(1)
		}
	} else {
		p := &pending{item: it}
		it.hold()
		sub.backlog = append(sub.backlog, p)
		sub.bytes += p.size()
	}
	if sub.overdueLocked(it.at) {
		sub.evictLocked()
		return
	}
	sub.deliverLocked()
	if len(sub.backlog) > 0 && sub.timer == nil {
		sub.timer = time.AfterFunc(sub.s.cfg.BacklogAge, sub.checkAge)
	}
}

// pushPTY adds a PTY's output like push, unless the backlog would pass
// its bound: then the PTY's output it holds is dropped, and it reports
// false, for the subscriber to be sent the PTY's screen instead. A PTY
// prints faster than a person reads; its screen is what matters.
func (sub *subscription) pushPTY(it *item) bool {
	sub.mu.Lock()
	if sub.closed == "" && sub.bytes+it.size() > sub.s.cfg.BacklogBytes {
		kept := sub.backlog[:0]
		for _, p := range sub.backlog {
			if p.pty != nil && p.pty.Ref == it.pty.Ref {
				sub.bytes -= p.size()
				p.drop()
				continue
			}
			kept = append(kept, p)
		}
		sub.backlog = kept
		sub.mu.Unlock()
		return false
	}
	sub.mu.Unlock()
	sub.push(it)
	return true
}

// overdueLocked reports whether the backlog passed its bound at now.
func (sub *subscription) overdueLocked(now time.Time) bool {
	if len(sub.backlog) == 0 {
		return false
	}
	return sub.bytes > sub.s.cfg.BacklogBytes || now.Sub(sub.backlog[0].at) > sub.s.cfg.BacklogAge
}

// checkAge evicts a subscriber whose oldest delta waited too long, when no
// new delta came to notice it.
func (sub *subscription) checkAge() {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	sub.timer = nil
	if sub.closed != "" || len(sub.backlog) == 0 {
		return
	}
	if sub.overdueLocked(time.Now()) {
		sub.evictLocked()
		return
	}
	sub.timer = time.AfterFunc(sub.backlog[0].at.Add(sub.s.cfg.BacklogAge).Sub(time.Now())+time.Millisecond, sub.checkAge)
}

// evictLocked closes a subscriber that cannot keep up: its backlog is
// dropped, and its closed frame follows what it was already given.
func (sub *subscription) evictLocked() {
	sub.s.counters.slowConsumers.Add(1)
	sub.s.log.Warn("closing a subscription that cannot keep up", "subscription", sub.id,
		"backlogBytes", sub.bytes, "backlogDeltas", len(sub.backlog))
	sub.dropBacklogLocked()
	sub.endLocked(protocol.ClosedSlowConsumer)
}

// endLocked closes the subscription with reason: its closed frame goes
// after whatever it was given, once it is ready. The worker and the
// connection forget it.
func (sub *subscription) endLocked(reason string) {
	if sub.closed != "" {
		return
	}
	sub.closed = reason
	close(sub.ended)
	if sub.timer != nil {
		sub.timer.Stop()
		sub.timer = nil
	}
	sub.sendEndLocked()
	sub.s.wg.Go(func() {
		sub.w.dropSubscription(sub)
		sub.c.forget(sub)
	})
}

// sendEndLocked queues the closed frame once the subscription is ready and
// nothing of it is still on its way.
func (sub *subscription) sendEndLocked() {
	if sub.closed == "" || sub.sentEnd || !sub.readied || sub.catching || sub.inflight || len(sub.backlog) > 0 {
		return
	}
	sub.sentEnd = true
	sub.seq++
	b, _ := json.Marshal(protocol.SubscriptionClosedFrame{
		Pushed: protocol.Pushed{Kind: protocol.KindSubscriptionClosed, HostEpoch: sub.s.host.Epoch(), SubscriptionID: sub.id, Sequence: sub.seq},
		Reason: sub.closed,
	})
	sub.c.out.Enqueue(server.Fence, b)
}

// close ends the subscription with reason; what its backlog holds is
// delivered first, but for a subscriber that cannot keep up.
func (sub *subscription) close(reason string) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	sub.endLocked(reason)
}

// markReady starts the subscription's frames: transcript records first
// when it resumes, then the backlog.
func (sub *subscription) markReady() {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.readied {
		return
	}
	sub.readied = true
	if sub.after != nil && *sub.after < sub.upTo {
		sub.catching = true
		sub.s.wg.Go(sub.catchUp)
		return
	}
	sub.deliverLocked()
	sub.sendEndLocked()
}

// deliverLocked hands the connection the next batch of the backlog when
// the subscriber is ready for it; the connection's writer asks for the
// next once it has flushed the batch.
func (sub *subscription) deliverLocked() {
	for sub.readied && !sub.catching && !sub.inflight && len(sub.backlog) > 0 {
		if !sub.c.hasRoom(sub) {
			return
		}
		n, size := 0, 0
		for n < len(sub.backlog) && (n == 0 || size < batchBytes && n < batchFrames) {
			size += sub.backlog[n].size()
			n++
		}
		batch := sub.backlog[:n]
		sub.backlog = sub.backlog[n:]
		sub.bytes -= size
		for i, p := range batch {
			var then func()
			if i == len(batch)-1 {
				then = sub.flushed
			}
			queued, err := sub.writeLocked(p, then)
			if err != nil {
				sub.dropBacklogLocked()
				sub.endLocked(protocol.ClosedClientClosed) // the connection is going; nothing more is written
				return
			}
			if queued && then != nil {
				sub.inflight = true
			}
		}
	}
}

// flushed runs on the connection's writer once a batch is written: the
// next one may go.
func (sub *subscription) flushed() {
	sub.mu.Lock()
	sub.inflight = false
	sub.deliverLocked()
	sub.sendEndLocked()
	sub.mu.Unlock()
	// The connection took a batch: those its queue held back go on.
	sub.c.wake()
}

// resume delivers what a subscription held back for its connection holds,
// and its closed frame once nothing more is on its way.
func (sub *subscription) resume() {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	sub.deliverLocked()
	sub.sendEndLocked()
}

// writeLocked queues p's frame with the subscription's head, with then to
// run once it is flushed. A frame past the wire limit is left out and
// logged: it reports false then.
func (sub *subscription) writeLocked(p *pending, then func()) (bool, error) {
	epoch := sub.s.host.Epoch()
	head := protocol.Pushed{HostEpoch: epoch, SubscriptionID: sub.id, Sequence: sub.seq + 1}
	frame := p.appendFrame(protocol.GetBuffer(128+len(epoch)+len(sub.id)+p.size()), head)
	p.drop()
	if len(frame) > protocol.MaxMessageBytes {
		sub.s.log.Error("a delta frame passes the wire limit and is left out", "subscription", sub.id, "bytes", len(frame))
		protocol.PutBuffer(frame)
		return false, nil
	}
	if _, err := sub.c.out.EnqueuePooled(server.Control, frame, then); err != nil {
		return false, err
	}
	sub.seq++
	if p.kind == "" {
		sub.s.counters.frames.Add(1)
	}
	return true, nil
}

// catchUp sends a resuming subscriber the transcript records it lacks, up
// to the opening snapshot's last, as entry_added deltas, one page at a
// time; the live deltas gathered meanwhile follow.
func (sub *subscription) catchUp() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-sub.w.exited:
		case <-sub.ended:
		case <-ctx.Done():
		}
		cancel()
	}()
	anchor, through := *sub.after+1, sub.upTo
	in := protocol.TranscriptPageInput{
		SessionID: sub.w.sessionID, Direction: "newer", AnchorSequence: &anchor, ThroughSequence: &through, MaxBytes: pageBytes,
	}
	for {
		var page protocol.TranscriptPage
		err := sub.w.conn.Request(ctx, protocol.OpSessionTranscriptPage, in, &page)
		if err != nil {
			sub.s.log.Warn("reading the transcript for a resuming subscriber", "subscription", sub.id, "err", err)
			sub.close(protocol.ClosedWorkerExited)
			return
		}
		flushed, ok := sub.sendRecords(page.Records)
		if !ok {
			return
		}
		select {
		case <-flushed:
		case <-ctx.Done():
			// The worker went, or the connection failed: the subscription
			// is closed meanwhile.
			sub.close(protocol.ClosedWorkerExited)
			return
		}
		if page.NextCursor == nil {
			break
		}
		in.Cursor, in.AnchorSequence = page.NextCursor, nil
	}
	sub.mu.Lock()
	defer sub.mu.Unlock()
	sub.catching = false
	sub.deliverLocked()
	sub.sendEndLocked()
}

// sendRecords queues records as entry_added deltas, and reports, with
// done closed once they are flushed, whether the subscription is still
// open.
func (sub *subscription) sendRecords(records []json.RawMessage) (done chan struct{}, ok bool) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.closed != "" {
		sub.catching = false
		sub.dropBacklogLocked()
		sub.sendEndLocked()
		return nil, false
	}
	done = make(chan struct{})
	flushed := func() {
		close(done)
		sub.c.wake()
	}
	sent := false
	for i, rec := range records {
		var then func()
		if i == len(records)-1 {
			then = flushed
		}
		queued, err := sub.writeLocked(&pending{item: &item{body: entryDelta(rec)}}, then)
		if err != nil {
			sub.catching = false
			sub.dropBacklogLocked()
			sub.endLocked(protocol.ClosedClientClosed)
			return nil, false
		}
		sent = sent || queued && then != nil
	}
	if !sent {
		close(done)
	}
	return done, true
}

// entryDelta encodes the entry_added delta of one transcript line. A
// record too large for the wire goes without its data, which a page reads.
func entryDelta(line json.RawMessage) []byte {
	var rec protocol.TranscriptRecord
	json.Unmarshal(line, &rec)
	b, _ := json.Marshal(protocol.SessionDelta{Event: protocol.EventEntryAdded, TurnID: rec.TurnID, Entry: protocol.FitRecord(line)})
	return b
}
