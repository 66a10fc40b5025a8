package link_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// worker is a small worker composition: session.get answers with the
// caller it ran for, session.archive waits until its connection ends,
// subscription.ready pushes n deltas as fast as the socket takes them,
// and session.remove breaks the connection by overflowing its queue.
type worker struct {
	n       int
	out     atomic.Pointer[server.OutboundWriter]
	flushed atomic.Int64 // deltas the worker's writer has flushed
	started chan struct{}
	pushed  chan struct{}
}

func (w *worker) AttachConnection(_ server.Identity, out *server.OutboundWriter) server.Attachment {
	w.out.Store(out)
	return w
}

func (w *worker) Close(context.Context) error { return nil }
func (w *worker) BeginDrain()                 {}

func (w *worker) Handlers() server.Table {
	t := server.Table{}
	server.Handle(t, protocol.OpSessionGet, func(_ context.Context, call *server.Call, in *protocol.SessionRef) (protocol.Session, error) {
		return protocol.Session{SessionID: in.SessionID, Title: call.Caller.ClientInstanceID + "/" + call.Caller.ConnectionID}, nil
	})
	server.Handle(t, protocol.OpSessionArchive, func(ctx context.Context, _ *server.Call, _ *protocol.SessionRef) (protocol.Session, error) {
		close(w.started)
		<-ctx.Done()
		return protocol.Session{}, ctx.Err()
	})
	server.Handle(t, protocol.OpSessionRemove, func(_ context.Context, _ *server.Call, in *protocol.SessionRef) (protocol.SessionRef, error) {
		// Frames of no stream the link follows, until the queue is full.
		big := protocol.AppendDeltaFrame(nil, "e", "nobody", 1, fmt.Appendf(nil, `{"pad":%q}`, strings.Repeat("x", 64<<10)))
		for {
			if _, err := w.out.Load().Enqueue(server.Control, big); err != nil {
				return *in, nil
			}
		}
	})
	server.Handle(t, protocol.OpSubscriptionOpen, func(_ context.Context, _ *server.Call, in *protocol.SubscriptionOpenInput) (protocol.SubscriptionOpenResult, error) {
		return protocol.SubscriptionOpenResult{SubscriptionID: "sub-" + in.SessionID, NextSequence: 1, Snapshot: json.RawMessage(`{}`)}, nil
	})
	server.Handle(t, protocol.OpSubscriptionReady, func(_ context.Context, _ *server.Call, in *protocol.SubscriptionRef) (protocol.SubscriptionRef, error) {
		w.push(in.SubscriptionID, 1)
		return *in, nil
	})
	return t
}

// push queues delta seq and, once it is flushed, the next: the worker
// writes as fast as its reader takes, and no faster.
func (w *worker) push(sub string, seq int) {
	if seq > w.n {
		b, _ := json.Marshal(protocol.SubscriptionClosedFrame{Pushed: head(protocol.KindSubscriptionClosed, sub, seq), Reason: protocol.ClosedSessionRemoved})
		w.out.Load().Enqueue(server.Fence, b)
		close(w.pushed)
		return
	}
	b := protocol.AppendDeltaFrame(nil, "e", sub, uint64(seq), delta(seq))
	w.out.Load().EnqueueThen(server.Control, b, func() {
		w.flushed.Add(1)
		w.push(sub, seq+1)
	})
}

func head(kind, sub string, seq int) protocol.Pushed {
	return protocol.Pushed{Kind: kind, HostEpoch: "e", SubscriptionID: sub, Sequence: uint64(seq)}
}

// delta is delta seq's body: a kilobyte that names its sequence.
func delta(seq int) []byte {
	return fmt.Appendf(nil, `{"seq":%d,"pad":"%s"}`, seq, strings.Repeat(string(rune('a'+seq%26)), 1000))
}

// startWorker serves w as a worker serves its host, on a real socket.
func startWorker(t *testing.T, w *worker) string {
	t.Helper()
	sock := filepath.Join(agentdtest.ShortDir(t), "w.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{
		HostID: "worker", Version: "test", CompositionID: link.CompositionWorker, TrustCaller: true,
		DrainTimeout: time.Second,
		Compose:      func(context.Context, *server.Server) (server.Composition, error) { return w, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-ran
	})
	<-srv.Ready()
	return sock
}

func newWorker(n int) *worker {
	return &worker{n: n, started: make(chan struct{}), pushed: make(chan struct{})}
}

func dial(t *testing.T, sock string) *link.Conn {
	t.Helper()
	c, err := link.Dial(agentdtest.Context(t), sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestACallRunsForTheCallerItForwards(t *testing.T) {
	c := dial(t, startWorker(t, newWorker(0)))
	ctx := agentdtest.Context(t)
	caller := &protocol.Caller{ConnectionID: "c7", ClientInstanceID: "tui-1", Surface: protocol.SurfaceTUI, Principal: protocol.LocalOwner}
	var got protocol.Session
	if err := c.Call(ctx, caller, string(protocol.OpSessionGet), protocol.SessionRef{SessionID: "s1"}, &got); err != nil {
		t.Fatal(err)
	}
	if got.Title != "tui-1/c7" {
		t.Fatalf("the worker ran the call for %q, not for the forwarded caller tui-1/c7", got.Title)
	}
	// Without a caller, the call runs for the link's own connection.
	if err := c.Call(ctx, nil, string(protocol.OpSessionGet), protocol.SessionRef{SessionID: "s1"}, &got); err != nil {
		t.Fatal(err)
	}
	if want := c.Accepted().ConnectionID; !strings.HasSuffix(got.Title, "/"+want) || !strings.HasPrefix(got.Title, "host-") {
		t.Fatalf("a call without a caller ran for %q, not for the host's connection %s", got.Title, want)
	}
	st, err := c.Status(ctx)
	if err != nil || st.State != protocol.StateReady {
		t.Fatalf("status: %+v, %v", st, err)
	}
}

func TestAFailedCallIsARemoteErrorWithItsCode(t *testing.T) {
	c := dial(t, startWorker(t, newWorker(0)))
	err := c.Call(agentdtest.Context(t), nil, string(protocol.OpSessionList), protocol.SessionListInput{}, nil)
	var re *link.RemoteError
	if !errors.As(err, &re) || re.Code != protocol.CodeOperationUnavailable || re.Operation != string(protocol.OpSessionList) {
		t.Fatalf("an operation the worker does not serve failed with %#v, want a remote error with code %s", err, protocol.CodeOperationUnavailable)
	}
}

func TestASlowReaderOfAStreamLosesNothingAndHoldsTheWorkerBack(t *testing.T) {
	const n = 4 * link.StreamBuffer
	// What the stream queues, the frame in the reader's hands and the
	// one the link's reader waits to queue.
	const bound = link.StreamBuffer + 2
	w := newWorker(n)
	full := make(chan struct{}, 1)
	link.OnStreamFull(t, func() {
		select {
		case full <- struct{}{}:
		default:
		}
	})
	c := dial(t, startWorker(t, w))
	ctx := agentdtest.Context(t)
	var open protocol.SubscriptionOpenResult
	if err := c.Call(ctx, nil, string(protocol.OpSubscriptionOpen), protocol.SubscriptionOpenInput{SessionID: "s1", Transcript: protocol.TranscriptBootstrap{Kind: protocol.TranscriptNone}}, &open); err != nil {
		t.Fatal(err)
	}
	s := c.Stream(open.SubscriptionID)
	defer s.Close()
	if err := c.Call(ctx, nil, string(protocol.OpSubscriptionReady), protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}, nil); err != nil {
		t.Fatal(err)
	}
	// Read one frame, then stop: the worker goes on until the stream is
	// full and the sockets' buffers are, then waits.
	first, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first.Sequence != 1 || string(first.Raw) != string(protocol.AppendDeltaFrame(nil, "e", open.SubscriptionID, 1, delta(1))) {
		t.Fatalf("first frame: %s", first.Raw)
	}
	select {
	case <-full:
	case <-w.pushed:
		t.Fatalf("the worker wrote all %d frames to a reader that stopped; the link holds %d", n, link.Buffers(c))
	case <-ctx.Done():
		t.Fatal("the link never waited for its stopped reader")
	}
	if got := link.Buffers(c); got > bound {
		t.Fatalf("the link holds %d frames for a stopped reader, past its bound of %d", got, bound)
	}
	select {
	case <-w.pushed:
		t.Fatalf("the worker wrote all %d frames to a reader that stopped", n)
	default:
	}
	for seq := 2; seq <= n; seq++ {
		f, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("frame %d: %v", seq, err)
		}
		if int(f.Sequence) != seq || f.Kind != protocol.KindSessionDelta {
			t.Fatalf("frame %d came as %s %d", seq, f.Kind, f.Sequence)
		}
		if want := protocol.AppendDeltaFrame(nil, "e", open.SubscriptionID, uint64(seq), delta(seq)); string(f.Raw) != string(want) {
			t.Fatalf("frame %d is not what the worker sent: %.80s…", seq, f.Raw)
		}
		if got := link.Buffers(c); got > bound {
			t.Fatalf("the link holds %d frames, past its bound", got)
		}
	}
	f, err := s.Next(ctx)
	if err != nil || f.Kind != protocol.KindSubscriptionClosed {
		t.Fatalf("after the deltas: %s, %v; want the closed frame", f.Raw, err)
	}
	if _, err := s.Next(ctx); !errors.Is(err, link.ErrClosed) {
		t.Fatalf("after the closed frame: %v, want ErrClosed", err)
	}
	if got := link.Buffers(c); got != 0 {
		t.Fatalf("the stream ended holding %d buffers", got)
	}
}

func TestTheConnectionsEndEndsItsStreamsAndPendingCalls(t *testing.T) {
	w := newWorker(0)
	c := dial(t, startWorker(t, w))
	ctx := agentdtest.Context(t)
	s := c.Stream("sub-s1")
	defer s.Close()
	turn := make(chan error, 1)
	go func() {
		turn <- c.Call(ctx, nil, string(protocol.OpSessionArchive), protocol.SessionRef{SessionID: "s1"}, nil)
	}()
	<-w.started
	// The worker's queue overflows: the server ends the connection.
	c.Call(ctx, nil, string(protocol.OpSessionRemove), protocol.SessionRef{SessionID: "s1"}, nil)
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the link did not end with its connection")
	}
	if !errors.Is(c.Err(), link.ErrLost) {
		t.Fatalf("the link ended with %v, want ErrLost", c.Err())
	}
	var ie *link.InterruptedError
	if err := <-turn; !errors.As(err, &ie) || ie.Reason != link.ReasonConnectionLost || !ie.Dispatched || ie.Retryable || !errors.Is(err, link.ErrLost) {
		t.Fatalf("the pending command ended with %#v, want an interruption of a dispatched command by the lost connection", err)
	}
	if _, err := s.Next(ctx); !errors.Is(err, link.ErrLost) {
		t.Fatalf("the stream ended with %v, want ErrLost", err)
	}
	err := c.Call(ctx, nil, string(protocol.OpSessionGet), protocol.SessionRef{SessionID: "s1"}, nil)
	if !errors.As(err, &ie) || ie.Dispatched || !ie.Retryable {
		t.Fatalf("a call after the end failed with %#v, want an interruption before sending", err)
	}
}

func TestClosingTheLinkEndsItsStreamsAndGivesTheirBuffersBack(t *testing.T) {
	const n = 2 * link.StreamBuffer
	w := newWorker(n)
	c := dial(t, startWorker(t, w))
	ctx := agentdtest.Context(t)
	s := c.Stream("sub-s1")
	if err := c.Call(ctx, nil, string(protocol.OpSubscriptionReady), protocol.SubscriptionRef{SubscriptionID: "sub-s1"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if !errors.Is(c.Err(), link.ErrClosed) {
		t.Fatalf("a closed link's error: %v", c.Err())
	}
	for {
		if _, err := s.Next(ctx); err != nil {
			if !errors.Is(err, link.ErrClosed) {
				t.Fatalf("the stream of a closed link ended with %v", err)
			}
			break
		}
	}
	s.Close()
	if got := link.Buffers(c); got != 0 {
		t.Fatalf("a closed stream holds %d buffers", got)
	}
}

// A request whose write fails before any of it reached the worker's
// socket (the worker gone: EPIPE) was not dispatched, and is safe to ask
// again; the link has ended with it.
func TestARequestNoneOfWhichReachedTheWorkerWasNotDispatched(t *testing.T) {
	// Shut for reading, the socket refuses writes at once, and the link's
	// reader sees nothing of it.
	endpoint, shut := agentdtest.DyingPeer(t, func(uc *net.UnixConn, _ *bufio.Reader) { uc.CloseRead() }, true)
	ctx := agentdtest.Context(t)
	c, err := link.Dial(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-shut
	_, err = link.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: "s1", TurnID: "t1", Content: protocol.Content{Text: "hello"}})
	var ie *link.InterruptedError
	if !errors.As(err, &ie) || ie.Dispatched || !ie.Retryable || ie.Reason != link.ReasonConnectionLost {
		t.Fatalf("turn.start to a worker gone: %v (%+v), want an interruption before it was sent, retryable", err, ie)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the link stayed open after its write failed")
	}
}
