package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd-dev/agentd/internal/fanout"
	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/internal/transport"
	"github.com/agentd-dev/agentd/protocol"
)

// The host's fan-out keeps the fanout package's promise for every client
// subscription, as docs/protocol.md states it: records reach it in order,
// each once; a tool's output, a model's text and a PTY's output merge
// while it lags and, past DefaultBacklogBytes or once older than liveAge
// with newer output behind them, are skipped ahead (a delta's Skipped
// says how much; a PTY gets its screen again, and its exit, a record,
// waits for that screen); a subscriber that takes nothing for its stall
// age (DefaultBacklogAge), or whose records pass recordBytes, is closed
// with slow_consumer, and neither its connection, nor its sibling
// subscriptions, nor the session notice.
const (
	// DefaultBacklogBytes bounds the live output a subscription holds.
	DefaultBacklogBytes = 1 << 20
	// DefaultBacklogAge bounds how long a subscriber may take nothing
	// while its deltas wait.
	DefaultBacklogAge = 4 * time.Second
	// liveAge bounds how long output waits with newer output of its
	// stream behind it: a reader slower than its producer sees the
	// newest, not what it printed long ago.
	liveAge = 25 * time.Millisecond
	// recordBytes bounds the records a subscription holds.
	recordBytes = 16 << 20
	// batchBytes bounds the deltas handed to a connection at once: a
	// connection's outbound queue holds at most one batch of each of its
	// subscriptions.
	batchBytes = 64 << 10
	// batchFrames bounds the frames of one batch.
	batchFrames = 256
	// mergeCap bounds the output one merged PTY frame carries.
	mergeCap = 64 << 10
	// updateCap bounds the text (or tool output) one merged update
	// carries: smaller, so that a reader slower than the tool, who reads
	// a delta's bytes before the newest after it, stays within liveAge of
	// it.
	updateCap = 8 << 10
	// pageBytes bounds a transcript page read for a resuming subscriber.
	pageBytes = 256 << 10
)

// counters count the fan-out's work for host.diagnostics.query.
type counters struct {
	deltas, encodes, frames atomic.Uint64
	queues                  fanout.Counters
}

func (c *counters) snapshot() protocol.FanoutCounters {
	return protocol.FanoutCounters{
		Deltas: c.deltas.Load(), Encodes: c.encodes.Load(), Frames: c.frames.Load(),
		Coalesced: c.queues.Merged.Load(), SlowConsumers: c.queues.Evictions.Load(),
		SkippedBytes: c.queues.SkippedBytes.Load(),
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

	// stream names the live stream the item is output of, "" for a
	// record (fanout.Item.Stream).
	stream string

	// raw is the worker's frame that pty's data shares, from
	// transport.GetBuffer: given back when the last of those who hold
	// the item (refs), the publisher and each queued entry, lets go.
	raw  []byte
	refs atomic.Int32
}

// newDeltaItem returns delta d's item, body its JSON: a message's text
// and a tool call's output are live streams; every other delta is a
// record.
func newDeltaItem(body []byte, d *protocol.SessionDelta) *item {
	it := &item{body: body, d: d}
	switch {
	case d.Event == protocol.EventMessageUpdate:
		it.stream = "message " + d.MessageID
	case d.Event == protocol.EventToolCallUpdate && d.ToolCall != nil:
		it.stream = "tool " + d.ToolCall.ID
	}
	return it
}

// ptyStream is the stream of PTY ref's output.
func ptyStream(ref string) string { return "pty " + ref }

// hold takes a hold of the item for a queued entry.
func (it *item) hold() {
	if it.raw != nil {
		it.refs.Add(1)
	}
}

// release lets a hold of the item go.
func (it *item) release() {
	if it.raw != nil && it.refs.Add(-1) == 0 {
		transport.PutBuffer(it.raw)
	}
}

// pending is an item in one subscription's queue, its fanout item. A
// merged or skipped one owns the text it gathered and is encoded when it
// is delivered.
type pending struct {
	*item
	merged         bool   // text, thinking, output or ptyData hold its content
	text, thinking []byte // a message's
	output         []byte // a tool call's
	ptyData        []byte // a PTY's merged output, a JSON string (transport.GetBuffer's)
	ptySeq         uint64 // the sequence of a PTY's merged output
	skipped        int64  // bytes of its stream left out before it, here
	dropped        bool   // its holds are let go
}

func newPending(it *item) *pending {
	it.hold()
	return &pending{item: it}
}

// Release implements fanout.Item: it lets go of what p holds, once it is
// written or left out.
func (p *pending) Release() {
	if p.dropped {
		return
	}
	p.dropped = true
	p.item.release()
	if p.ptyData != nil {
		transport.PutBuffer(p.ptyData)
		p.ptyData = nil
	}
}

// Size implements fanout.Item.
func (p *pending) Size() int {
	switch {
	case p.merged:
		return len(p.text) + len(p.thinking) + len(p.output) + len(p.ptyData)
	case p.pty != nil:
		return len(p.pty.Data)
	}
	return len(p.body)
}

// Stream implements fanout.Item.
func (p *pending) Stream() string { return p.stream }

// Skipped implements fanout.Item: what the worker skipped, and the host.
func (p *pending) Skipped() int64 {
	if p.d != nil {
		return p.d.Skipped + p.skipped
	}
	return p.skipped
}

// Carry implements fanout.Item.
func (p *pending) Carry(n int64) { p.skipped += n }

// Whole implements fanout.Item: a PTY's output is skipped with the rest
// of it, for its screen.
func (p *pending) Whole() bool { return p.pty != nil }

// Merge implements fanout.Item: text of one message, output of one tool
// call (up to updateCap), or of one PTY (up to mergeCap).
func (p *pending) Merge(next *pending) bool {
	if next.Skipped() > 0 || p.pty != nil && p.Size()+next.Size() > mergeCap || p.pty == nil && p.Size()+next.Size() > updateCap {
		return false
	}
	if p.pty != nil {
		if !p.merged {
			p.merged = true
			p.ptyData = append(transport.GetBuffer(mergeCap), p.pty.Data...)
		}
		p.ptyData = protocol.JoinJSONStrings(transport.GrowBuffer(p.ptyData, len(next.pty.Data)), next.pty.Data)
		p.ptySeq = next.pty.PtySequence
		next.Release()
		return true
	}
	if p.d == nil || next.d == nil || !p.d.Continues(next.d) {
		return false
	}
	p.own()
	d := next.d
	p.text = append(p.text, d.Text...)
	p.thinking = append(p.thinking, d.Thinking...)
	if d.ToolCall != nil {
		p.output = append(p.output, d.ToolCall.Output...)
	}
	next.Release()
	return true
}

// own copies a delta's text into p, for p to change it.
func (p *pending) own() {
	if p.merged {
		return
	}
	p.merged = true
	p.text = append(p.text, p.d.Text...)
	p.thinking = append(p.thinking, p.d.Thinking...)
	if p.d.ToolCall != nil {
		p.output = append(p.output, p.d.ToolCall.Output...)
	}
}

// Skip implements fanout.Item. A PTY's output is left out whole: the
// subscriber gets the PTY's screen instead, never a cut escape sequence.
// An update loses its oldest text, on rune boundaries.
func (p *pending) Skip(n int) int {
	if p.pty != nil {
		size := p.Size()
		p.Release()
		p.merged, p.ptyData = true, nil
		return size
	}
	before := p.Size()
	p.own()
	p.skipped += int64(fanout.SkipText(n, &p.thinking, &p.text, &p.output))
	return before - p.Size()
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
	if !p.merged && p.skipped == 0 {
		return p.body
	}
	d := *p.d
	d.Skipped = p.Skipped()
	if p.merged {
		d.Text, d.Thinking = string(p.text), string(p.thinking)
		if d.ToolCall != nil {
			tc := *d.ToolCall
			tc.Output = string(p.output)
			d.ToolCall = &tc
		}
	}
	b, _ := json.Marshal(d)
	return b
}

// subscription is one client subscription to a session: the worker's
// deltas, wrapped with the subscription's own id and sequence, through a
// fanout queue of its own, written by a pump of its own once it is ready.
type subscription struct {
	id    string                  // constant
	c     *clientConn             // constant
	w     *worker                 // constant
	s     *Service                // constant
	after *uint64                 // constant: resume after this record
	upTo  uint64                  // constant: the last record of the opening snapshot
	q     *fanout.Queue[*pending] // constant
	ended chan struct{}           // closed once it has closed

	ptys map[string]ptyState // guarded by w.mu: the PTYs whose output it chose
	held []heldUpdate        // guarded by w.mu: updates of PTYs awaiting their screen, in order

	once     sync.Once     // ends it once
	readied  sync.Once     // starts its pump once
	started  atomic.Bool   // its pump runs, or ran
	finished chan struct{} // closed once its pump has queued its last frame
	seq      uint64        // pump only: the last sequence handed to the connection
}

// queueConfig is a subscription's queue's bounds.
func (s *Service) queueConfig() fanout.Config {
	return fanout.Config{
		LiveBytes: s.cfg.BacklogBytes, LiveAge: liveAge, RecordBytes: recordBytes, StallAge: s.cfg.BacklogAge,
		BatchBytes: batchBytes, BatchItems: batchFrames,
	}
}

// push queues it for the subscription. A PTY whose output it skipped
// waits for its screen, the rest of its output left out; the worker is
// asked for it. Call with w.mu held.
func (sub *subscription) push(it *item) {
	skipped := sub.q.Push(newPending(it))
	if len(skipped) > 0 {
		// A reader slower than its session: what is on its way to it is
		// output it sees late, so less goes at once.
		sub.q.LimitBatch(updateCap)
		sub.c.slow()
	}
	for _, stream := range skipped {
		ref, ok := ptyRef(stream)
		if !ok || sub.ptys[ref] != ptyStreaming {
			continue
		}
		sub.ptys[ref] = ptyAwaiting
		w := sub.w
		w.s.wg.Go(func() { w.redraw(ref) })
	}
}

// heldUpdate is a PTY's update a subscription holds until the PTY's
// screen has gone out.
type heldUpdate struct {
	ref string
	it  *item
}

// pushUpdateLocked queues resource ref's update it for the
// subscription. That of a PTY whose screen the subscription awaits (it
// chose the PTY, or skipped its output) waits for the screen, so that the
// PTY's exit never overtakes it: a client that stops at the exit ends on
// the last screen, not on output torn where the skip cut it. Call with
// w.mu held.
func (sub *subscription) pushUpdateLocked(ref string, it *item) {
	if sub.ptys[ref] == ptyAwaiting {
		sub.held = append(sub.held, heldUpdate{ref, it})
		return
	}
	sub.push(it)
}

// releaseHeldLocked queues, in the order they came, the updates held for
// PTYs whose screen the subscription no longer awaits: the screen has
// been queued, or the subscription let the PTY go.
func (sub *subscription) releaseHeldLocked() {
	kept := sub.held[:0]
	for _, h := range sub.held {
		if sub.ptys[h.ref] == ptyAwaiting {
			kept = append(kept, h)
			continue
		}
		sub.push(h.it)
	}
	clear(sub.held[len(kept):])
	sub.held = kept
}

// ptyRef returns the PTY a stream is the output of.
func ptyRef(stream string) (string, bool) {
	return strings.CutPrefix(stream, ptyStream(""))
}

// close ends the subscription with reason: its closed frame follows what
// it holds, once it is ready, the updates of PTYs whose screen it awaits
// among them. The worker and the connection forget it.
func (sub *subscription) close(reason string) {
	sub.end(func() {
		sub.w.mu.Lock()
		for _, h := range sub.held {
			sub.q.Push(newPending(h.it))
		}
		sub.held = nil
		sub.w.mu.Unlock()
		sub.q.Close(fanout.Reason(reason))
	})
}

// abort ends the subscription of a connection that has gone: what it
// holds is dropped, and nothing more is written.
func (sub *subscription) abort() {
	sub.end(func() { sub.q.Abort(fanout.ErrGone) })
}

func (sub *subscription) end(how func()) {
	sub.once.Do(func() {
		close(sub.ended)
		how()
		sub.s.wg.Go(func() {
			sub.w.dropSubscription(sub)
			sub.c.forget(sub)
		})
	})
}

// markReady starts the subscription's frames: transcript records first
// when it resumes, then its queue.
func (sub *subscription) markReady() {
	sub.readied.Do(func() {
		sub.started.Store(true)
		sub.s.wg.Go(sub.pump)
	})
}

// pump writes the subscription's frames until it ends: the records a
// resuming subscriber lacks, then its queue, a batch at a time, each once
// the connection has taken the one before and has room.
func (sub *subscription) pump() {
	defer close(sub.finished)
	if sub.after != nil && *sub.after < sub.upTo && !sub.catchUp() {
		sub.q.Abort(fanout.ErrGone)
	}
	sub.q.Start()
	var batch []*pending
	for {
		var err error
		// The queue's own end (closed, aborted) ends the pump, not a
		// context: a closing host lets every pump send its closed frame.
		batch, err = sub.q.Next(context.Background(), batch)
		if err != nil {
			sub.finish(err)
			return
		}
		var r *server.Receipt
		if !sub.c.send(sub.q.Done(), func() { r, err = sub.writeBatch(batch) }) {
			for _, p := range batch {
				p.Release()
			}
			sub.abort()
		}
		clear(batch)
		if err != nil {
			sub.abort()
			continue
		}
		if r != nil {
			select {
			case <-r.Done():
			case <-sub.q.Done():
			}
		}
	}
}

// finish writes the closed frame of a queue that ended, but for a
// connection that has gone.
func (sub *subscription) finish(err error) {
	var reason fanout.Reason
	switch {
	case errors.As(err, &reason):
	case errors.Is(err, fanout.ErrEvicted):
		sub.s.log.Warn("closing a subscription that cannot keep up", "subscription", sub.id)
		reason = protocol.ClosedSlowConsumer
		sub.close(string(reason)) // the worker and the connection forget it
	default:
		return
	}
	sub.seq++
	b, _ := json.Marshal(protocol.SubscriptionClosedFrame{
		Pushed: protocol.Pushed{Kind: protocol.KindSubscriptionClosed, HostEpoch: sub.s.host.Epoch(), SubscriptionID: sub.id, Sequence: sub.seq},
		Reason: string(reason),
	})
	sub.c.out.Enqueue(server.Fence, b)
}

// writeBatch queues batch's frames, releasing its items, and returns the
// receipt of the last one queued (nil when none was).
func (sub *subscription) writeBatch(batch []*pending) (*server.Receipt, error) {
	var last *server.Receipt
	for i, p := range batch {
		var then func()
		if i == len(batch)-1 {
			then = sub.c.flushed
		}
		r, err := sub.write(p, then)
		p.Release()
		if err != nil {
			for _, p := range batch[i+1:] {
				p.Release()
			}
			return nil, err
		}
		if r != nil {
			last = r
		}
	}
	return last, nil
}

// write queues p's frame with the subscription's head, with then to run
// once it is flushed. A frame past the wire limit is left out and logged:
// it returns no receipt then.
func (sub *subscription) write(p *pending, then func()) (*server.Receipt, error) {
	epoch := sub.s.host.Epoch()
	head := protocol.Pushed{HostEpoch: epoch, SubscriptionID: sub.id, Sequence: sub.seq + 1}
	frame := p.appendFrame(transport.GetBuffer(128+len(epoch)+len(sub.id)+p.Size()), head)
	if len(frame) > protocol.MaxMessageBytes {
		sub.s.log.Error("a delta frame passes the wire limit and is left out", "subscription", sub.id, "bytes", len(frame))
		transport.PutBuffer(frame)
		return nil, nil
	}
	r, err := sub.c.out.EnqueuePooled(server.Control, frame, then)
	if err != nil {
		return nil, err
	}
	sub.seq++
	if p.kind == "" {
		sub.s.counters.frames.Add(1)
	}
	return r, nil
}

// catchUp sends a resuming subscriber the transcript records it lacks, up
// to the opening snapshot's last, as entry_added deltas, one page at a
// time; the live deltas gathered meanwhile follow. It reports false when
// the subscription can go no further.
func (sub *subscription) catchUp() bool {
	ctx, cancel := context.WithCancel(sub.s.ctx)
	defer cancel()
	go func() {
		select {
		case <-sub.w.exited:
		case <-sub.q.Done():
		case <-ctx.Done():
		}
		cancel()
	}()
	anchor, through := *sub.after+1, sub.upTo
	in := protocol.TranscriptPageInput{
		SessionID: sub.w.sessionID, Direction: "newer", AnchorSequence: &anchor, ThroughSequence: &through, MaxBytes: pageBytes,
	}
	for {
		page, err := link.Call(ctx, sub.w.conn, protocol.OpSessionTranscriptPage, in)
		if err != nil {
			sub.s.log.Warn("reading the transcript for a resuming subscriber", "subscription", sub.id, "err", err)
			sub.close(protocol.ClosedWorkerExited)
			return true // its closed frame follows
		}
		batch := make([]*pending, len(page.Records))
		for i, rec := range page.Records {
			batch[i] = newPending(&item{body: entryDelta(rec)})
		}
		var last *server.Receipt
		var werr error
		if !sub.c.send(sub.q.Done(), func() { last, werr = sub.writeBatch(batch) }) || werr != nil {
			return false
		}
		if last != nil {
			select {
			case <-last.Done():
			case <-ctx.Done():
				sub.close(protocol.ClosedWorkerExited)
				return true
			}
		}
		sub.q.Progress()
		if page.NextCursor == nil {
			return true
		}
		in.Cursor, in.AnchorSequence = page.NextCursor, nil
	}
}

// entryDelta encodes the entry_added delta of one transcript line. A
// record too large for the wire goes without its data, which a page reads.
func entryDelta(line json.RawMessage) []byte {
	var rec protocol.TranscriptRecord
	json.Unmarshal(line, &rec)
	b, _ := json.Marshal(protocol.SessionDelta{Event: protocol.EventEntryAdded, TurnID: rec.TurnID, Entry: protocol.FitRecord(line)})
	return b
}
