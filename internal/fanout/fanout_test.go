package fanout_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd-dev/agentd/internal/fanout"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// item is a record (stream "") numbered seq, or output of a stream whose
// bytes are its positions in the stream modulo 251, from pos on, so a
// consumer can tell each byte's place.
type item struct {
	stream   string
	seq      int
	pos      int64 // the stream position of data[0]
	data     []byte
	skipped  int64
	maxMerge int
	whole    bool // a terminal's output: skipped with all of its stream
	life     *life
}

// life counts the items made and released, to find one released twice or
// never.
type life struct{ made, released atomic.Int64 }

func (l *life) item(it *item) *item { l.made.Add(1); it.life = l; return it }

func (it *item) Size() int      { return len(it.data) }
func (it *item) Stream() string { return it.stream }
func (it *item) Skipped() int64 { return it.skipped }
func (it *item) Whole() bool    { return it.whole }
func (it *item) Carry(n int64)  { it.skipped += n }
func (it *item) Release()       { it.life.released.Add(1) }

func (it *item) Merge(next *item) bool {
	if len(it.data)+len(next.data) > it.maxMerge || next.skipped > 0 {
		return false
	}
	it.data = append(it.data, next.data...)
	next.Release()
	return true
}

func (it *item) Skip(n int) int {
	if it.whole {
		n = len(it.data)
		it.data = nil // a terminal's output: its consumer is sent it anew
		return n
	}
	n = min(n, len(it.data))
	it.data = it.data[n:]
	it.pos += int64(n)
	it.skipped += int64(n)
	return n
}

func output(stream string, pos int64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((pos + int64(i)) % 251)
	}
	return b
}

// TestTheQueueKeepsItsPromiseAtAnySpeed pushes random records and output
// of two streams at random speeds to a consumer taking at random speeds,
// and checks the package's promise: records contiguous and in order,
// every byte of output delivered in its place or counted as skipped by
// the item after it, a terminal's output in order with a redraw asked for
// each gap, the live bound held after every push, the end delivered after
// everything, and every item released once.
func TestTheQueueKeepsItsPromiseAtAnySpeed(t *testing.T) {
	for seed := range uint64(60) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			checkPromise(t, rand.New(rand.NewPCG(seed, seed*7+1)))
		})
	}
}

func checkPromise(t *testing.T, r *rand.Rand) {
	cfg := fanout.Config{
		LiveBytes:   1 + r.IntN(64<<10),
		RecordBytes: 1 << 30,
		StallAge:    time.Hour,
		BatchBytes:  1 + r.IntN(32<<10),
		BatchItems:  1 + r.IntN(64),
	}
	if r.IntN(2) == 0 {
		cfg.LiveAge = time.Duration(r.IntN(3)) * time.Millisecond
	}
	var counters fanout.Counters
	var l life
	q := fanout.New[*item](cfg, &counters)
	q.Start()
	pushes, produceEvery, consumeEvery := 200+r.IntN(2000), r.IntN(40), r.IntN(40)
	reason := errors.New("done")

	cr := rand.New(rand.NewPCG(r.Uint64(), 3)) // the consumer's, apart from the producer's
	pushed := map[string]int64{}
	var records int
	var redraws, gaps atomic.Int64 // of the terminal's stream
	var wg sync.WaitGroup
	wg.Go(func() {
		for range pushes {
			var it *item
			switch k := r.IntN(5); {
			case k == 0:
				records++
				it = &item{seq: records, data: make([]byte, r.IntN(64))}
			default:
				s := []string{"a", "b"}[k%2]
				n := 1 + r.IntN(8<<10)
				it = &item{stream: s, pos: pushed[s], data: output(s, pushed[s], n), maxMerge: 16 << 10, whole: s == "b"}
				pushed[s] += int64(n)
			}
			for _, s := range q.Push(l.item(it)) {
				if s == "b" {
					redraws.Add(1)
				}
			}
			if live, _ := q.Waiting(); live > cfg.LiveBytes {
				t.Errorf("%d bytes of output wait, past the bound of %d", live, cfg.LiveBytes)
			}
			if produceEvery > 0 && r.IntN(produceEvery) == 0 {
				time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
			}
		}
		q.Close(reason)
	})

	delivered := map[string]int64{} // the stream position reached
	var seq int
	var buf []*item
	for {
		batch, err := q.Next(context.Background(), buf)
		if err != nil {
			if err != reason {
				t.Fatalf("the queue ended with %v", err)
			}
			break
		}
		if len(batch) > cfg.BatchItems {
			t.Fatalf("a batch of %d items passes the bound of %d", len(batch), cfg.BatchItems)
		}
		for _, it := range batch {
			if it.stream == "" {
				if it.seq != seq+1 {
					t.Fatalf("record %d follows record %d", it.seq, seq)
				}
				seq = it.seq
			} else {
				at := delivered[it.stream] + it.skipped
				if it.whole && it.pos > at {
					gaps.Add(1) // skipped with a redraw
					at = it.pos
				}
				if it.pos != at {
					t.Fatalf("stream %s: output at %d after %d delivered and %d skipped", it.stream, it.pos, delivered[it.stream], it.skipped)
				}
				for i, b := range it.data {
					if b != byte((at+int64(i))%251) {
						t.Fatalf("stream %s: byte %d out of place", it.stream, at+int64(i))
					}
				}
				delivered[it.stream] = at + int64(len(it.data))
			}
			it.Release()
		}
		buf = batch
		if consumeEvery > 0 && cr.IntN(consumeEvery) == 0 {
			time.Sleep(time.Duration(cr.IntN(500)) * time.Microsecond)
		}
	}
	wg.Wait()
	if seq != records {
		t.Fatalf("%d records delivered of %d", seq, records)
	}
	// What was skipped at the very end, with no item after it, is told by
	// an empty item: delivered counts it too.
	if delivered["a"] != pushed["a"] {
		t.Fatalf("%d bytes accounted for of %d", delivered["a"], pushed["a"])
	}
	if gaps.Load() > redraws.Load() {
		t.Fatalf("the terminal's output has %d gaps, and %d redraws were asked for", gaps.Load(), redraws.Load())
	}
	if m, rel := l.made.Load(), l.released.Load(); m != rel {
		t.Fatalf("%d items made, %d released", m, rel)
	}
}

// TestAStalledConsumerIsEvictedAndOnlyIt: of two queues of one producer,
// the one whose consumer takes nothing is evicted after its stall age,
// its items released; the other goes on.
func TestAStalledConsumerIsEvictedAndOnlyIt(t *testing.T) {
	var counters fanout.Counters
	var l life
	cfg := fanout.Config{LiveBytes: 1 << 10, RecordBytes: 1 << 20, StallAge: 50 * time.Millisecond, BatchBytes: 1 << 10, BatchItems: 8}
	stalled, reading := fanout.New[*item](cfg, &counters), fanout.New[*item](cfg, &counters)
	stalled.Start()
	reading.Start()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	stalled.Push(l.item(&item{seq: 1, data: []byte("x")}))
	<-stalled.Done()
	if _, err := stalled.Next(ctx, nil); err != fanout.ErrEvicted {
		t.Fatalf("the stalled queue's Next: %v", err)
	}
	for i := 1; i <= 3; i++ {
		reading.Push(l.item(&item{seq: i, data: []byte("x")}))
		batch, err := reading.Next(ctx, nil)
		if err != nil || len(batch) != 1 || batch[0].seq != i {
			t.Fatalf("the reading queue's Next: %v %v", batch, err)
		}
		batch[0].Release()
	}
	stalled.Push(l.item(&item{seq: 2, data: []byte("x")})) // released: it ended
	if got := counters.Evictions.Load(); got != 1 {
		t.Fatalf("%d evictions", got)
	}
	if m, rel := l.made.Load(), l.released.Load(); m != rel {
		t.Fatalf("%d items made, %d released", m, rel)
	}
}

// TestAConsumerThatKeepsTakingIsNeverEvicted: output far past every
// bound, taken slowly but steadily, is skipped, never evicted.
func TestAConsumerThatKeepsTakingIsNeverEvicted(t *testing.T) {
	var counters fanout.Counters
	var l life
	// The stall age is far longer than the test: what could close the
	// queue is its bounds, which a faster producer passes at once.
	cfg := fanout.Config{LiveBytes: 4 << 10, RecordBytes: 1 << 20, StallAge: time.Minute, BatchBytes: 1 << 10, BatchItems: 4}
	q := fanout.New[*item](cfg, &counters)
	q.Start()
	var pos int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 2000 {
			q.Push(l.item(&item{stream: "a", pos: pos, data: output("a", pos, 1<<10), maxMerge: 2 << 10}))
			pos += 1 << 10
		}
		q.Close(context.Canceled)
	}()
	var got int64
	for {
		batch, err := q.Next(context.Background(), nil)
		if err != nil {
			if err != context.Canceled {
				t.Fatalf("Next: %v", err)
			}
			break
		}
		for _, it := range batch {
			got = it.pos + int64(len(it.data))
			it.Release()
		}
		time.Sleep(100 * time.Microsecond) // a slow reader, never a stalled one
	}
	<-done
	if got != pos {
		t.Fatalf("the consumer reached %d of %d", got, pos)
	}
	if counters.Evictions.Load() != 0 || counters.SkippedBytes.Load() == 0 {
		t.Fatalf("evictions %d, skipped %d", counters.Evictions.Load(), counters.SkippedBytes.Load())
	}
}

// TestRecordsThatCannotDrainEvictTheQueue: records past their bound end
// the queue; it releases them.
func TestRecordsThatCannotDrainEvictTheQueue(t *testing.T) {
	var counters fanout.Counters
	var l life
	q := fanout.New[*item](fanout.Config{LiveBytes: 1, RecordBytes: 100, StallAge: time.Hour, BatchBytes: 1, BatchItems: 1}, &counters)
	for i := 1; i <= 11; i++ {
		q.Push(l.item(&item{seq: i, data: make([]byte, 10)}))
	}
	select {
	case <-q.Done():
	default:
		t.Fatal("records past their bound did not evict the queue")
	}
	q.Start()
	if _, err := q.Next(context.Background(), nil); err != fanout.ErrEvicted {
		t.Fatalf("Next: %v", err)
	}
	if m, rel := l.made.Load(), l.released.Load(); m != rel {
		t.Fatalf("%d items made, %d released", m, rel)
	}
}

// TestNextDeliversNothingBeforeStart: items wait for Start, and a
// consumer waiting then is not stalled.
func TestNextDeliversNothingBeforeStart(t *testing.T) {
	var counters fanout.Counters
	var l life
	q := fanout.New[*item](fanout.Config{LiveBytes: 1 << 10, RecordBytes: 1 << 10, StallAge: time.Hour, BatchBytes: 1 << 10, BatchItems: 8}, &counters)
	q.Push(l.item(&item{seq: 1, data: []byte("x")}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := q.Next(ctx, nil); err != context.Canceled {
		t.Fatalf("Next before Start: %v", err)
	}
	q.Start()
	batch, err := q.Next(context.Background(), nil)
	if err != nil || len(batch) != 1 {
		t.Fatalf("Next after Start: %v %v", batch, err)
	}
	batch[0].Release()
	q.Abort(errors.New("gone"))
	if m, rel := l.made.Load(), l.released.Load(); m != rel {
		t.Fatalf("%d items made, %d released", m, rel)
	}
}

// TestLimitBatchBoundsTheNextBatches: once limited, a batch holds what
// fits the new bound, at least one item.
func TestLimitBatchBoundsTheNextBatches(t *testing.T) {
	var counters fanout.Counters
	var l life
	q := fanout.New[*item](fanout.Config{LiveBytes: 1 << 20, RecordBytes: 1 << 20, StallAge: time.Hour, BatchBytes: 64 << 10, BatchItems: 64}, &counters)
	q.Start()
	for i := 1; i <= 8; i++ {
		q.Push(l.item(&item{seq: i, data: make([]byte, 1<<10)}))
	}
	take := func() int {
		batch, err := q.Next(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range batch {
			it.Release()
		}
		return len(batch)
	}
	if n := take(); n != 8 {
		t.Fatalf("a batch of %d items, want all 8", n)
	}
	for i := 1; i <= 8; i++ {
		q.Push(l.item(&item{seq: i, data: make([]byte, 1<<10)}))
	}
	q.LimitBatch(2 << 10)
	if n := take(); n != 2 {
		t.Fatalf("a batch of %d items after the limit, want 2", n)
	}
	q.LimitBatch(1)
	if n := take(); n != 1 {
		t.Fatalf("a batch of %d items under a limit smaller than any, want 1", n)
	}
	q.Abort(errors.New("done"))
	if m, rel := l.made.Load(), l.released.Load(); m != rel {
		t.Fatalf("%d items made, %d released", m, rel)
	}
}

// TestSkipTextCutsBetweenRunes: text skipped across several buffers
// leaves each on a rune boundary, and counts what it left out.
func TestSkipTextCutsBetweenRunes(t *testing.T) {
	a, b := []byte("héé"), []byte("✓✓x")
	n := fanout.SkipText(2, &a, &b) // "h" and half of "é": the whole "é" goes
	if n != 3 || string(a) != "é" || string(b) != "✓✓x" {
		t.Fatalf("skipped %d: %q %q", n, a, b)
	}
	n = fanout.SkipText(3, &a, &b) // the rest of a, and one byte of "✓": all of it
	if n != 5 || string(a) != "" || string(b) != "✓x" {
		t.Fatalf("skipped %d: %q %q", n, a, b)
	}
	if n = fanout.SkipText(100, &a, &b); n != 4 || len(b) != 0 {
		t.Fatalf("skipped %d of what was left: %q", n, b)
	}
}

// TestOutputLargerThanABatchGoesAsItsNewest: once the batch is limited,
// output larger than it is cut to its newest bytes, the rest counted as
// skipped.
func TestOutputLargerThanABatchGoesAsItsNewest(t *testing.T) {
	var counters fanout.Counters
	var l life
	q := fanout.New[*item](fanout.Config{LiveBytes: 1 << 20, RecordBytes: 1 << 20, StallAge: time.Hour, BatchBytes: 64 << 10, BatchItems: 64}, &counters)
	q.Start()
	q.LimitBatch(4 << 10)
	q.Push(l.item(&item{stream: "a", data: output("a", 0, 10<<10), maxMerge: 64 << 10}))
	batch, err := q.Next(context.Background(), nil)
	if err != nil || len(batch) != 1 {
		t.Fatalf("Next: %v %v", batch, err)
	}
	it := batch[0]
	if len(it.data) != 4<<10 || it.skipped != 6<<10 || it.pos != 6<<10 || it.data[0] != byte((6<<10)%251) {
		t.Fatalf("%d bytes from %d, %d skipped", len(it.data), it.pos, it.skipped)
	}
	it.Release()
	if got := counters.SkippedBytes.Load(); got != 6<<10 {
		t.Fatalf("%d bytes counted as skipped", got)
	}
	q.Abort(errors.New("done"))
}
