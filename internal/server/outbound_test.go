package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentd-dev/agentd/internal/transport"
	"github.com/agentd-dev/agentd/protocol"
)

func statusResponse(id string) []byte {
	b, _ := json.Marshal(protocol.HostStatus{State: protocol.StateReady})
	return encodeResponse(id, string(protocol.OpHostStatus), b, nil)
}

func TestOutboundWriterFlushesFIFOOverRealSocket(t *testing.T) {
	cli, srv := pair(t)
	var failures atomic.Int32
	w := NewOutboundWriter(cli, func(error) { failures.Add(1) })
	defer w.Close()
	ids := []string{"first", "second", "third"}
	var receipts []*Receipt
	for _, id := range ids {
		r, err := w.Enqueue(Control, statusResponse(id))
		if err != nil {
			t.Fatal(err)
		}
		receipts = append(receipts, r)
	}
	for _, r := range receipts {
		wait(t, r.Done(), "flushed")
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
	}
	for _, id := range ids {
		if r := readResponse(t, srv); r.RequestID != id {
			t.Fatalf("got %q, want %q", r.RequestID, id)
		}
	}
	if failures.Load() != 0 {
		t.Fatal("writer reported a failure")
	}
	w.Close()
	if _, err := w.Enqueue(Control, statusResponse("after-close")); !errors.Is(err, ErrWriterClosed) {
		t.Fatalf("enqueue after close: %v", err)
	}
}

// blockingWriter records frames and blocks its first write until released.
type blockingWriter struct {
	entered, release chan struct{}
	mu               sync.Mutex
	frames           []map[string]any
}

func (b *blockingWriter) Write(msg []byte) error {
	var f map[string]any
	json.Unmarshal(msg, &f)
	b.mu.Lock()
	b.frames = append(b.frames, f)
	first := len(b.frames) == 1
	b.mu.Unlock()
	if first {
		close(b.entered)
		<-b.release
	}
	return nil
}

func (b *blockingWriter) Flush() error { return nil }

func TestOutboundSchedulingPrioritizesControlsFairDataAndFences(t *testing.T) {
	bw := &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
	w := NewOutboundWriter(bw, func(err error) { t.Errorf("writer failed: %v", err) })
	defer w.Close()
	pty := func(seq int) []byte {
		b, _ := json.Marshal(protocol.RuntimeResourcePtyDataFrame{
			Pushed:                 protocol.Pushed{Kind: protocol.KindRuntimeResourcePtyData, HostEpoch: "host-1", SubscriptionID: "subscription-1", Sequence: uint64(seq)},
			RuntimeResourcePtyData: protocol.RuntimeResourcePtyData{SessionID: "session-1", Ref: "agentd://runtime/shell-1", PtySequence: uint64(seq), Data: "bytes"},
		})
		return b
	}
	var receipts []*Receipt
	enqueue := func(c Class, msg []byte) {
		r, err := w.Enqueue(c, msg)
		if err != nil {
			t.Fatal(err)
		}
		receipts = append(receipts, r)
	}
	enqueue(Data, pty(1))
	wait(t, bw.entered, "first write started")
	enqueue(Data, pty(2))
	for i := range 20 {
		enqueue(Control, statusResponse(fmt.Sprintf("control-%d", i)))
	}
	closed, _ := json.Marshal(protocol.SubscriptionClosedFrame{
		Pushed: protocol.Pushed{Kind: protocol.KindSubscriptionClosed, HostEpoch: "host-1", SubscriptionID: "subscription-1", Sequence: 1},
		Reason: protocol.ClosedSessionRemoved,
	})
	enqueue(Fence, closed)
	enqueue(Control, statusResponse("after-fence"))
	close(bw.release)
	for _, r := range receipts {
		wait(t, r.Done(), "flushed")
	}
	f := bw.frames
	if f[1]["requestId"] != "control-0" {
		t.Fatalf("second write %v, want control-0", f[1])
	}
	ptyAt := -1
	for i, fr := range f {
		if fr["kind"] == protocol.KindRuntimeResourcePtyData && fr["ptySequence"] == 2.0 {
			ptyAt = i
		}
	}
	if ptyAt <= 1 || ptyAt > 9 {
		t.Fatalf("PTY data written at %d: it must neither block controls nor starve", ptyAt)
	}
	if f[len(f)-2]["kind"] != protocol.KindSubscriptionClosed || f[len(f)-1]["requestId"] != "after-fence" {
		t.Fatalf("fence not kept: last frames %v %v", f[len(f)-2], f[len(f)-1])
	}
}

func TestOutboundWriterFailsOnceOnClosedTransport(t *testing.T) {
	cli, _ := pair(t)
	var failures atomic.Int32
	var reported atomic.Value
	w := NewOutboundWriter(cli, func(err error) {
		failures.Add(1)
		reported.Store(err)
	})
	defer w.Close()
	cli.Abort(nil)
	r, err := w.Enqueue(Control, statusResponse("closed-transport"))
	if err != nil {
		t.Fatal(err)
	}
	wait(t, r.Done(), "receipt settled")
	if r.Err() == nil {
		t.Fatal("frame on a closed transport was reported flushed")
	}
	if failures.Load() != 1 {
		t.Fatalf("failures = %d, want 1", failures.Load())
	}
	if msg := reported.Load().(error).Error(); !strings.Contains(msg, "closed") && !strings.Contains(msg, "write") {
		t.Fatalf("failure %q", msg)
	}
	if _, err := w.Enqueue(Control, statusResponse("after-failure")); !errors.Is(err, ErrWriterClosed) {
		t.Fatalf("enqueue after failure: %v", err)
	}
	if failures.Load() != 1 {
		t.Fatal("failure reported twice")
	}
}

// gatedWriter holds its first write until release is closed, then writes
// through to a real transport: what the writer queues behind that write
// stays queued, so its bounds are reached at a known frame.
type gatedWriter struct {
	out     *transport.Conn
	release chan struct{}
	once    sync.Once
}

func (g *gatedWriter) Write(msg []byte) error {
	g.once.Do(func() { <-g.release })
	return g.out.Write(msg)
}

func (g *gatedWriter) Flush() error { return g.out.Flush() }

func TestOutboundWriterReportsByteBoundBeforeFrameBound(t *testing.T) {
	// The bounds the wire contract promises, written out here so that a
	// change of the constants fails this test rather than moving with it.
	const byteBound, frameBound = 2 << 20, 4096
	// sized encodes a failure response of exactly n bytes, the newline
	// excluded, as the writer counts them.
	sized := func(i, n int) []byte {
		id := fmt.Sprintf("bound-%05d", i)
		msg := func(pad int) []byte {
			return encodeResponse(id, string(protocol.OpHostStatus), nil,
				protocol.Errorf(protocol.CodeInternalFailure, "%s", strings.Repeat("x", pad)))
		}
		b := msg(n - len(msg(0)))
		if len(b) != n {
			t.Fatalf("frame of %d bytes, want %d", len(b), n)
		}
		return b
	}
	for _, tc := range []struct {
		name     string
		size     int    // bytes of every frame
		accepted int    // frames queued before the overload
		code     string // the bound reported
	}{
		// The seed's case: 48 KiB failures fill 2 MiB long before 4,096 frames.
		{"large frames reach the byte bound", 48<<10 + 64, byteBound / (48<<10 + 64), "byte_limit"},
		// 4,096 frames of 512 bytes are exactly 2 MiB: the next crosses
		// both bounds at once, and the byte bound is the one reported.
		{"both bounds crossed at once report the byte bound", byteBound / frameBound, frameBound, "byte_limit"},
		// Small frames reach the frame bound with bytes to spare.
		{"small frames reach the frame bound", 256, frameBound, "frame_limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli, _ := pair(t) // the peer never reads
			gate := &gatedWriter{out: cli, release: make(chan struct{})}
			var failures atomic.Int32
			w := NewOutboundWriter(gate, func(error) { failures.Add(1) })
			defer func() { w.Close(); close(gate.release); wait(t, w.Done(), "writer stopped") }()

			var receipts []*Receipt
			var overload error
			for i := range frameBound + 1 {
				r, err := w.Enqueue(Control, sized(i, tc.size))
				if err != nil {
					overload = err
					break
				}
				receipts = append(receipts, r)
			}
			var qerr *QueueError
			if !errors.As(overload, &qerr) || qerr.Code != tc.code {
				t.Fatalf("overload = %v, want a %s QueueError", overload, tc.code)
			}
			if len(receipts) != tc.accepted {
				t.Fatalf("%d frames of %d bytes accepted before the overload, want %d (bounds %d bytes, %d frames)",
					len(receipts), tc.size, tc.accepted, byteBound, frameBound)
			}
			if failures.Load() != 1 {
				t.Fatalf("failures = %d, want 1", failures.Load())
			}
			for i, r := range receipts {
				wait(t, r.Done(), "receipt settled")
				if err := r.Err(); err != overload {
					t.Fatalf("frame %d settled with %v, want the overload itself", i, err)
				}
			}
			if _, err := w.Enqueue(Control, sized(0, tc.size)); !errors.Is(err, ErrWriterClosed) {
				t.Fatalf("enqueue after the overload: %v, want ErrWriterClosed", err)
			}
			if failures.Load() != 1 {
				t.Fatal("failure reported twice")
			}
		})
	}
}

// TestEnqueueThenRunsOnceTheFrameIsFlushedAndNeverForAFailedOne: a
// subscriber's next batch waits on it, without a goroutine of its own.
func TestEnqueueThenRunsOnceTheFrameIsFlushedAndNeverForAFailedOne(t *testing.T) {
	cli, srv := pair(t)
	w := NewOutboundWriter(cli, func(error) {})
	defer w.Close()
	flushed := make(chan struct{})
	if err := w.EnqueueThen(Control, statusResponse("with-then"), func() { close(flushed) }); err != nil {
		t.Fatal(err)
	}
	wait(t, flushed, "then after the flush")
	if r := readResponse(t, srv); r.RequestID != "with-then" {
		t.Fatalf("got %q", r.RequestID)
	}

	broken, _ := pair(t)
	bw := NewOutboundWriter(broken, func(error) {})
	defer bw.Close()
	broken.Abort(nil)
	var ran atomic.Bool
	if err := bw.EnqueueThen(Control, statusResponse("never-written"), func() { ran.Store(true) }); err != nil {
		t.Fatal(err)
	}
	r, err := bw.Enqueue(Control, statusResponse("after"))
	if err == nil {
		wait(t, r.Done(), "the failed writer settles what it held")
	}
	wait(t, bw.Done(), "the writer stops")
	if ran.Load() {
		t.Fatal("then ran for a frame that was never written")
	}
}

// A pooled frame goes out whole, and its buffer is given back to be built
// in again once it is written.
func TestAPooledFrameIsWrittenWholeThenGivenBack(t *testing.T) {
	cli, srv := pair(t)
	w := NewOutboundWriter(cli, func(err error) { t.Errorf("writer failed: %v", err) })
	defer w.Close()
	const size = 20 << 10
	reused := false
	// The pool may drop a buffer at any collection (and, under the race
	// detector, at random), and keeps one given back on the processor
	// that gave it, where a Get on another may not find it; so one given
	// back is looked for over many frames, and a buffer that is not it is
	// given back too, for the pool to stay as it was.
	for i := 0; i < 200 && !reused; i++ {
		msg := transport.GetBuffer(size)
		msg = append(msg, fmt.Sprintf(`{"requestId":"r%d","operation":"host.status","ok":true,"result":"%s"}`, i, strings.Repeat("x", size-100))...)
		first := &msg[:1][0]
		r, err := w.EnqueuePooled(Control, msg, nil)
		if err != nil {
			t.Fatal(err)
		}
		wait(t, r.Done(), "flushed")
		// Looked for before the frame is read: the reader's buffer for a
		// line this long is of the same size, and may be the one given
		// back.
		if again := transport.GetBuffer(size); &again[:1][0] == first {
			reused = true
		} else {
			transport.PutBuffer(again)
		}
		if got := readResponse(t, srv); got.RequestID != fmt.Sprintf("r%d", i) || len(got.Result) != size-100+2 {
			t.Fatalf("frame %d arrived as %q with %d bytes of result", i, got.RequestID, len(got.Result))
		}
	}
	if !reused {
		t.Fatal("no pooled frame's buffer was handed out again once written")
	}
}

// WritePooled writes on the caller's goroutine while the writer is idle
// (the frame has gone out when it returns), and queues behind a frame in
// progress, in order, without waiting for it.
func TestWritePooledWritesAtOnceWhenIdleAndQueuesBehindAWrite(t *testing.T) {
	bw := &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
	w := NewOutboundWriter(bw, func(err error) { t.Errorf("writer failed: %v", err) })
	defer w.Close()
	pooled := func(id string) []byte { return append(transport.GetBuffer(64), statusResponse(id)...) }
	first, err := w.Enqueue(Control, statusResponse("held"))
	if err != nil {
		t.Fatal(err)
	}
	wait(t, bw.entered, "the first write to start")
	queued, err := w.WritePooled(pooled("queued"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-queued.Done():
		t.Fatal("a frame behind a write in progress settled before it")
	default:
	}
	close(bw.release)
	wait(t, first.Done(), "the first frame flushed")
	wait(t, queued.Done(), "the queued frame flushed")
	bw.mu.Lock()
	var ids []any
	for _, f := range bw.frames {
		ids = append(ids, f["requestId"])
	}
	bw.mu.Unlock()
	if fmt.Sprint(ids) != "[held queued]" {
		t.Fatalf("frames written %v, want [held queued]", ids)
	}

	// A writer that has written nothing yet is idle.
	cli, srv := pair(t)
	idle := NewOutboundWriter(cli, func(err error) { t.Errorf("writer failed: %v", err) })
	defer idle.Close()
	now, err := idle.WritePooled(pooled("now"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-now.Done():
	default:
		t.Fatal("a frame written while the writer was idle had not settled when WritePooled returned")
	}
	if r := readResponse(t, srv); r.RequestID != "now" {
		t.Fatalf("got %q, want now", r.RequestID)
	}
}
