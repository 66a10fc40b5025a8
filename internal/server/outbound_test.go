package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentd-dev/agentd/protocol"
)

func statusResponse(id string) []byte {
	b, _ := json.Marshal(protocol.HostStatus{State: protocol.StateReady})
	return encodeResponse(id, protocol.OpHostStatus, b, nil)
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

func TestOutboundWriterReportsByteBoundBeforeFrameBound(t *testing.T) {
	cli, _ := pair(t) // the peer never reads
	var failures atomic.Int32
	w := NewOutboundWriter(cli, func(error) { failures.Add(1) })
	defer w.Close()
	large := func(id string) []byte {
		return encodeResponse(id, protocol.OpHostStatus, nil,
			protocol.Errorf(protocol.CodeInternalFailure, "%s", strings.Repeat("x", 48<<10)))
	}
	var receipts []*Receipt
	var overload error
	for i := range 512 {
		r, err := w.Enqueue(Control, large(fmt.Sprintf("byte-bound-%d", i)))
		if err != nil {
			overload = err
			break
		}
		receipts = append(receipts, r)
	}
	var qerr *QueueError
	if !errors.As(overload, &qerr) || qerr.Code != "byte_limit" {
		t.Fatalf("overload = %v, want a byte_limit QueueError", overload)
	}
	if failures.Load() != 1 {
		t.Fatalf("failures = %d, want 1", failures.Load())
	}
	rejected := 0
	for _, r := range receipts {
		wait(t, r.Done(), "receipt settled")
		switch err := r.Err(); {
		case err == overload:
			rejected++
		case err != nil:
			t.Fatalf("receipt failed with %v, want the overload", err)
		}
	}
	if rejected == 0 {
		t.Fatal("no queued frame was rejected with the overload")
	}
	if len(receipts) >= protocol.MaxOutboundQueueFrames {
		t.Fatal("frame bound reached before the byte bound")
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
