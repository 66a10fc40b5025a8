// Package fanout carries one producer's stream to a consumer through a
// bounded queue: the worker's session stream to its host, and the host's
// copy of it to each client subscription, one Queue per subscriber. It
// knows items only through the Item interface (what one weighs, whether it
// is a record or live output, how it merges and skips); the worker and the
// host keep the policy: which items, which bounds.
//
// # Delivery promise
//
//   - Records (items of no stream: everything the transcript keeps, a
//     resource's state) reach the consumer in the order they were pushed,
//     each once. They are never merged or skipped; they are dropped only
//     with the whole queue, when it is evicted or aborted.
//   - Live output (items of a stream: a message's text, a tool call's or
//     a PTY's output) merges while it waits: an item folds into the last
//     one waiting when both are of one stream. Past the live bound
//     (Config.LiveBytes), or once older than Config.LiveAge with newer
//     output of its stream waiting behind it, the oldest output is
//     skipped: dropped, its byte count carried by the next item of its
//     stream, which tells the consumer. The newest output stays. Output
//     that means nothing without what came before it (Item.Whole) is
//     skipped only past the live bound, and then all of its stream at
//     once. Output larger than a batch (Config.BatchBytes, Queue.LimitBatch)
//     goes as its newest part. A consumer that keeps taking is never
//     evicted because its producer is faster than it: it skips ahead
//     instead. Counters count what was merged, skipped and evicted.
//   - A queue is evicted when its consumer has taken nothing for
//     Config.StallAge while items wait (it stalled), or when the records
//     waiting pass Config.RecordBytes (they cannot drain). Its items are
//     dropped and Next reports ErrEvicted; no other queue notices.
//   - Close ends a queue after what waits: Next delivers everything pushed
//     before it, then reports the close's reason. An end is always
//     delivered, after everything before it.
//
// A queue holds at most LiveBytes of output that may be skipped, and
// RecordBytes of records, each plus the item that passed the bound.
//
// Items order in one queue only; a Queue is safe for one producer and one
// consumer at once (and any number of Close, Abort and Evict calls).
package fanout

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Item is what a Queue carries. The queue releases the items it drops;
// the consumer releases those Next gave it.
type Item[T any] interface {
	// Size is the bytes the item holds, as the bounds count them.
	Size() int
	// Stream names the live stream the item is output of; "" marks a
	// record.
	Stream() string
	// Merge folds next, a later item of the same stream, into the item
	// and reports whether it did; when it did, next is spent.
	Merge(next T) bool
	// Skip leaves out the oldest bytes of the item, at least n when it
	// holds as many, keeping the newest, and returns how many it left out;
	// it counts them among those it tells its consumer were skipped. An
	// item that cannot lose part of itself leaves out all or nothing; one
	// that tells nothing of what it skipped (Skipped stays 0) is dropped
	// once empty.
	Skip(n int) int
	// Whole reports whether the item's output means nothing without the
	// output before it, as a terminal's: it is never skipped for its age,
	// and when the live bound skips it, every item of its stream waiting
	// goes with it and Push reports the stream, for its consumer to be
	// sent the whole anew.
	Whole() bool
	// Skipped is how many bytes of the item's stream were left out just
	// before it.
	Skipped() int64
	// Carry adds n bytes left out before the item: those of an earlier
	// item of its stream, dropped once empty.
	Carry(n int64)
	// Release lets go of what the item holds.
	Release()
}

// Config holds a queue's bounds.
type Config struct {
	// LiveBytes bounds the live output waiting; past it the oldest is
	// skipped.
	LiveBytes int
	// LiveAge bounds how long live output waits while newer output of its
	// stream waits behind it; 0 leaves it unbounded.
	LiveAge time.Duration
	// RecordBytes bounds the records waiting; past it the queue is
	// evicted.
	RecordBytes int
	// StallAge bounds how long items wait while the consumer takes
	// nothing; past it the queue is evicted.
	StallAge time.Duration
	// BatchBytes and BatchItems bound what one Next returns (at least one
	// item); output larger than BatchBytes goes as its newest BatchBytes,
	// the rest skipped.
	BatchBytes, BatchItems int
}

// Counters count the work of the queues that share them.
type Counters struct {
	// Pushed counts the items pushed, Merged those folded into another.
	Pushed, Merged atomic.Uint64
	// SkippedBytes counts the live output left out.
	SkippedBytes atomic.Uint64
	// Evictions counts the queues evicted.
	Evictions atomic.Uint64
}

// ErrEvicted is returned by Next once the queue was evicted: its consumer
// stalled, or its records could not drain.
var ErrEvicted = errors.New("fanout: the consumer fell too far behind")

// ErrGone ends a queue whose consumer has gone: Abort it with ErrGone, and
// nothing more is delivered or told.
var ErrGone = errors.New("fanout: the consumer has gone")

// Reason is the end Close gives a queue: Next reports it once what waited
// is delivered, for the consumer to tell its subscriber why it ends.
type Reason string

func (r Reason) Error() string { return "fanout: closed: " + string(r) }

// SkipText leaves out the first n bytes (at least, ending on a rune
// boundary) of the text in bufs, taken as one in their order, and returns
// how many it left out: Item.Skip for an item holding text.
func SkipText(n int, bufs ...*[]byte) int {
	left := 0
	for _, b := range bufs {
		if n-left <= 0 {
			break
		}
		k := len(*b)
		if n-left < k {
			k = n - left
			for k < len(*b) && !utf8.RuneStart((*b)[k]) {
				k++
			}
		}
		*b = (*b)[k:]
		left += k
	}
	return left
}

// entry is an item waiting, with when it was pushed.
type entry[T any] struct {
	it T
	at time.Time
}

// Queue is one consumer's bounded queue.
type Queue[T Item[T]] struct {
	cfg      Config        // constant but for BatchBytes, guarded by mu
	counters *Counters     // constant
	wake     chan struct{} // buffered 1: the consumer has something to look at
	done     chan struct{} // closed once the queue is evicted or aborted

	mu      sync.Mutex
	items   []entry[T]  // guarded by mu
	live    int         // guarded by mu: bytes of live output waiting
	records int         // guarded by mu: bytes of records waiting
	started bool        // guarded by mu: Next may deliver
	taking  bool        // guarded by mu: the consumer waits in Next
	since   time.Time   // guarded by mu: when the stall clock started: the consumer's last progress, or the first item to wait since
	end     error       // guarded by mu: why the queue ends, once it does
	dropped bool        // guarded by mu: its items are dropped; end is final
	timer   *time.Timer // guarded by mu: checks for a stall when nothing else does
}

// New returns a queue with cfg's bounds counting into counters. Next
// delivers nothing before Start.
func New[T Item[T]](cfg Config, counters *Counters) *Queue[T] {
	if cfg.BatchItems <= 0 {
		cfg.BatchItems = 1
	}
	return &Queue[T]{cfg: cfg, counters: counters, wake: make(chan struct{}, 1), done: make(chan struct{}), since: time.Now()}
}

// Start lets Next deliver.
func (q *Queue[T]) Start() {
	q.mu.Lock()
	q.started = true
	q.since = time.Now()
	q.mu.Unlock()
	q.signal()
}

// LimitBatch bounds what one Next returns to n bytes from then on, at
// least one item, and output larger than n to its newest n bytes: for a
// consumer that reads slowly, a smaller batch on its way is fresher output
// behind it.
func (q *Queue[T]) LimitBatch(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.cfg.BatchBytes = min(q.cfg.BatchBytes, n)
}

// Progress tells the queue its consumer made progress outside Next (it
// wrote something else for the subscriber), so it is not stalled.
func (q *Queue[T]) Progress() {
	q.mu.Lock()
	q.since = time.Now()
	q.mu.Unlock()
}

// Done is closed once the queue is evicted or aborted.
func (q *Queue[T]) Done() <-chan struct{} { return q.done }

// Push queues it, merged into the last item waiting when both are of one
// stream. It returns the streams it skipped output of to stay within the
// live bound (nil when none), and never blocks. After the queue ended it
// releases it.
func (q *Queue[T]) Push(it T) (skipped []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.end != nil {
		it.Release()
		return nil
	}
	q.counters.Pushed.Add(1)
	stream, size := it.Stream(), it.Size()
	if n := len(q.items); stream != "" && n > 0 && q.items[n-1].it.Stream() == stream {
		last := q.items[n-1].it
		before := last.Size()
		if last.Merge(it) {
			q.counters.Merged.Add(1)
			q.live += last.Size() - before
			return q.afterPushLocked(false)
		}
	}
	now := time.Now()
	if len(q.items) == 0 {
		q.since = now // nothing waited: the consumer was not behind
	}
	q.items = append(q.items, entry[T]{it: it, at: now})
	if stream == "" {
		q.records += size
	} else {
		q.live += size
	}
	return q.afterPushLocked(stream != "")
}

// afterPushLocked holds the bounds once an item came (a new item of
// output, when added), and wakes the consumer.
func (q *Queue[T]) afterPushLocked(added bool) (skipped []string) {
	if q.records > q.cfg.RecordBytes {
		q.evictLocked()
		return nil
	}
	if added && q.cfg.LiveAge > 0 {
		// Output behind which newer output of its stream may now wait.
		skipped = q.skipLocked(0, time.Now().Add(-q.cfg.LiveAge))
	}
	if q.live > q.cfg.LiveBytes {
		skipped = append(skipped, q.skipLocked(q.live-q.cfg.LiveBytes, time.Time{})...)
	}
	q.armLocked()
	q.signal()
	return skipped
}

// skipLocked leaves out at least excess bytes of the oldest live output,
// or, with a non-zero before, every item of output pushed before it that
// has a later item of its stream waiting. It returns the streams it
// skipped output of.
func (q *Queue[T]) skipLocked(excess int, before time.Time) (skipped []string) {
	for i := 0; i < len(q.items); {
		e := q.items[i]
		stream := e.it.Stream()
		if stream == "" || !before.IsZero() && e.it.Whole() {
			i++
			continue
		}
		later := q.nextOfLocked(stream, i+1)
		var n int
		switch {
		case !before.IsZero():
			if !e.at.Before(before) {
				return skipped // the rest came later
			}
			if later < 0 {
				i++
				continue
			}
			n = e.it.Skip(e.it.Size())
		case excess <= 0:
			return skipped
		case e.it.Whole():
			if n = e.it.Skip(e.it.Size()); n == 0 {
				i++ // it cannot be skipped: its producer waits instead
				continue
			}
			n += q.dropLaterLocked(stream, i+1)
			excess -= n
		default:
			n = e.it.Skip(excess)
			excess -= n
		}
		if n > 0 {
			q.live -= n
			q.counters.SkippedBytes.Add(uint64(n))
			if len(skipped) == 0 || skipped[len(skipped)-1] != stream {
				skipped = append(skipped, stream)
			}
		}
		if e.it.Size() > 0 {
			i++
			continue
		}
		switch carry := e.it.Skipped(); {
		case later >= 0 && !e.it.Whole():
			q.items[later].it.Carry(carry)
		case carry > 0:
			i++ // an empty item that tells of what was skipped
			continue
		}
		e.it.Release()
		q.items = append(q.items[:i], q.items[i+1:]...)
	}
	return skipped
}

// dropLaterLocked drops the items of stream from i on, and returns their
// bytes.
func (q *Queue[T]) dropLaterLocked(stream string, i int) int {
	n := 0
	kept := q.items[:i]
	for _, e := range q.items[i:] {
		if e.it.Stream() != stream {
			kept = append(kept, e)
			continue
		}
		n += e.it.Size()
		e.it.Release()
	}
	clear(q.items[len(kept):])
	q.items = kept
	return n
}

// nextOfLocked returns the index of the first item of stream from i on,
// or -1.
func (q *Queue[T]) nextOfLocked(stream string, i int) int {
	for ; i < len(q.items); i++ {
		if q.items[i].it.Stream() == stream {
			return i
		}
	}
	return -1
}

// Next waits for the next batch and returns it appended to buf[:0]; the
// consumer then owns its items. Once the queue ended it returns the end's
// error: ErrEvicted, the reason given to Close or Abort (after what waited
// is delivered, for Close), or ctx's error.
func (q *Queue[T]) Next(ctx context.Context, buf []T) ([]T, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		switch {
		case q.dropped:
			return nil, q.end
		case q.started && len(q.items) > 0:
			return q.takeLocked(buf[:0]), nil
		case q.started && q.end != nil:
			return nil, q.end
		}
		q.taking = true
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-ctx.Done():
		}
		q.mu.Lock()
		q.taking = false
		q.since = time.Now()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// takeLocked moves the next batch from the queue to batch.
func (q *Queue[T]) takeLocked(batch []T) []T {
	if q.cfg.LiveAge > 0 {
		// Output that waited while newer output of its stream came.
		q.skipLocked(0, time.Now().Add(-q.cfg.LiveAge))
	}
	if len(q.items) == 0 {
		return batch
	}
	if head := q.items[0].it; head.Stream() != "" && !head.Whole() && head.Size() > q.cfg.BatchBytes {
		// Output larger than a batch may be: its newest part goes.
		n := head.Skip(head.Size() - q.cfg.BatchBytes)
		q.live -= n
		q.counters.SkippedBytes.Add(uint64(n))
	}
	n, size := 0, 0
	for n < len(q.items) && (n == 0 || size+q.items[n].it.Size() <= q.cfg.BatchBytes && n < q.cfg.BatchItems) {
		it := q.items[n].it
		size += it.Size()
		if it.Stream() == "" {
			q.records -= it.Size()
		} else {
			q.live -= it.Size()
		}
		batch = append(batch, it)
		n++
	}
	clear(q.items[:n])
	q.items = q.items[n:]
	if len(q.items) == 0 {
		q.items = nil
	}
	q.since = time.Now()
	q.armLocked()
	return batch
}

// armLocked sets the stall timer when items wait for a consumer that is
// not taking.
func (q *Queue[T]) armLocked() {
	if q.timer != nil || q.taking || len(q.items) == 0 || q.dropped || q.cfg.StallAge <= 0 {
		return
	}
	q.timer = time.AfterFunc(time.Until(q.since.Add(q.cfg.StallAge))+time.Millisecond, q.checkStall)
}

// checkStall evicts the queue when its consumer stalled.
func (q *Queue[T]) checkStall() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.timer = nil
	if q.dropped || q.taking || len(q.items) == 0 {
		return
	}
	if time.Since(q.since) >= q.cfg.StallAge {
		q.evictLocked()
		return
	}
	q.armLocked()
}

// Evict ends the queue as fallen behind: what waits is dropped, and Next
// reports ErrEvicted.
func (q *Queue[T]) Evict() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.evictLocked()
}

func (q *Queue[T]) evictLocked() {
	if q.dropped {
		return
	}
	q.counters.Evictions.Add(1)
	q.dropLocked(ErrEvicted)
}

// Abort ends the queue at once: what waits is dropped, and Next reports
// err.
func (q *Queue[T]) Abort(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dropLocked(err)
}

func (q *Queue[T]) dropLocked(err error) {
	if q.dropped {
		return
	}
	q.dropped, q.end = true, err
	for _, e := range q.items {
		e.it.Release()
	}
	q.items, q.live, q.records = nil, 0, 0
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
	close(q.done)
	q.signal()
}

// Close ends the queue once what waits is delivered: Next then reports
// reason. Items pushed after it are released. A queue that already ended
// keeps its end.
func (q *Queue[T]) Close(reason error) {
	q.mu.Lock()
	if q.end == nil {
		q.end = reason
	}
	q.mu.Unlock()
	q.signal()
}

// Waiting returns the bytes of output and of records waiting.
func (q *Queue[T]) Waiting() (live, records int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.live, q.records
}

func (q *Queue[T]) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}
