package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// ptyHost is a host composition with one PTY, p1 of session s1, for a
// stream's reader to fall behind on. The nth subscription that chooses it
// is sent the screen "screen n"; the first is sent, besides, more output
// than a watcher holds (flood) or a few lines and then its closing as a
// slow consumer, all as soon as the open (on an older host, the choice)
// is answered, so that a reader that reads only once WatchPTY returns is
// behind.
type ptyHost struct {
	flood bool   // constant: the first subscription overflows its watcher
	older bool   // constant: subscription.open takes no PTYs, as before it did
	state string // constant: the PTY's state, as runtime.resource.query tells it
	// hold, when set, holds an open's answer until it is closed; holding
	// is closed as the open waits.
	hold, holding chan struct{}
	sent          chan struct{} // closed once the first subscription's frames are flushed
	mu            sync.Mutex
	opened        int      // guarded by mu
	closed        []string // guarded by mu: the subscriptions closed by their client
}

// ptyConn is a connection's attachment: where its frames are written.
type ptyConn struct{ out *server.OutboundWriter }

func (*ptyConn) Close(context.Context) error { return nil }

func (h *ptyHost) AttachConnection(_ server.Identity, out *server.OutboundWriter) server.Attachment {
	return &ptyConn{out: out}
}

func (h *ptyHost) Close(context.Context) error { return nil }
func (h *ptyHost) BeginDrain()                 {}

func (h *ptyHost) Handlers() server.Table {
	t := server.Table{}
	server.Handle(t, protocol.OpSubscriptionOpen, func(_ context.Context, call *server.Call, in *protocol.SubscriptionOpenInput) (protocol.SubscriptionOpenResult, error) {
		if h.older {
			// Decoded as a host did before the open took PTYs.
			var before struct {
				SessionID  string                       `json:"sessionId"`
				Transcript protocol.TranscriptBootstrap `json:"transcript"`
			}
			if err := protocol.DecodeInput(call.Input, &before); err != nil {
				return protocol.SubscriptionOpenResult{}, &protocol.Error{Code: protocol.CodeInvalidRequest, Message: err.Error()}
			}
		} else if !in.Ready || !slices.Equal(in.Ptys, []string{"p1"}) {
			return protocol.SubscriptionOpenResult{}, protocol.Errorf(protocol.CodeInvalidRequest, "the stream opens with p1 chosen and ready; got %+v", *in)
		}
		if h.hold != nil {
			close(h.holding)
			<-h.hold
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.opened++
		id := fmt.Sprintf("sub-%d", h.opened)
		if !h.older {
			out := call.Attachment().(*ptyConn).out
			call.AfterResponse(func() { h.stream(out, id) })
		}
		return protocol.SubscriptionOpenResult{SubscriptionID: id, NextSequence: 1, Snapshot: json.RawMessage(`{}`)}, nil
	})
	server.Handle(t, protocol.OpSubscriptionReady, func(_ context.Context, _ *server.Call, in *protocol.SubscriptionRef) (protocol.SubscriptionRef, error) {
		return *in, nil
	})
	server.Handle(t, protocol.OpSubscriptionPtyInterestSet, func(_ context.Context, call *server.Call, in *protocol.PtyInterestInput) (protocol.SubscriptionRef, error) {
		out := call.Attachment().(*ptyConn).out
		call.AfterResponse(func() { h.stream(out, in.SubscriptionID) })
		return protocol.SubscriptionRef{SubscriptionID: in.SubscriptionID}, nil
	})
	server.Handle(t, protocol.OpSubscriptionClose, func(_ context.Context, _ *server.Call, in *protocol.SubscriptionRef) (protocol.SubscriptionRef, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.closed = append(h.closed, in.SubscriptionID)
		return *in, nil
	})
	server.Handle(t, protocol.OpRuntimeResourceQuery, func(_ context.Context, _ *server.Call, in *protocol.ResourceQueryInput) (protocol.ResourceQueryResult, error) {
		return protocol.ResourceQueryResult{Resources: []protocol.Resource{{SessionID: "s1", Ref: "p1", Kind: protocol.ResourcePTY, State: h.state}}}, nil
	})
	return t
}

// stream queues the frames of subscription id, once its open has been
// answered: its screen, then for the first subscription more output than
// a watcher holds or a few lines and its closing as a slow consumer,
// closing sent once they are flushed.
func (h *ptyHost) stream(out *server.OutboundWriter, id string) {
	type frame struct {
		class server.Class
		b     []byte
	}
	var frames []frame
	seq := uint64(0)
	data := func(text string, screen bool) {
		seq++
		head := protocol.Pushed{Kind: protocol.KindRuntimeResourcePtyData, HostEpoch: "e", SubscriptionID: id, Sequence: seq}
		f := protocol.PtyDataFields{SessionID: "s1", Ref: "p1", PtySequence: seq, Data: protocol.AppendJSONString(nil, text), Screen: screen}
		frames = append(frames, frame{server.Control, protocol.AppendPtyDataFrame(nil, head, &f)})
	}
	data("screen "+strings.TrimPrefix(id, "sub-"), true)
	if id == "sub-1" {
		lines := 10
		if h.flood {
			lines = client.WatcherBuffer
		}
		for i := 1; i <= lines; i++ {
			data(fmt.Sprintf("line %d\n", i), false)
		}
		if !h.flood {
			seq++
			b, _ := json.Marshal(protocol.SubscriptionClosedFrame{
				Pushed: protocol.Pushed{Kind: protocol.KindSubscriptionClosed, HostEpoch: "e", SubscriptionID: id, Sequence: seq},
				Reason: protocol.ClosedSlowConsumer,
			})
			frames = append(frames, frame{server.Fence, b})
		}
	}
	for i, f := range frames {
		var then func()
		if id == "sub-1" && i == len(frames)-1 {
			then = func() { close(h.sent) }
		}
		out.EnqueueThen(f.class, f.b, then) // a failed writer ends the connection
	}
}

// A PTY stream whose reader falls behind goes on from the PTY's screen:
// the output before is whole as far as it goes, the stream reopens on a
// subscription of its own, the one it left is closed, and an exit the
// stream could not carry meanwhile is told after the screen.
func TestAPTYStreamThatFallsBehindGoesOnFromTheScreen(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flood bool
		older bool
		state string
	}{
		{"its watcher fills, and the PTY exits meanwhile", true, false, protocol.ResourceExited},
		{"the host closes it as a slow consumer", false, false, protocol.ResourceRunning},
		{"on a host whose open takes no PTYs, its watcher fills", true, true, protocol.ResourceRunning},
		{"on a host whose open takes no PTYs, it is closed as a slow consumer", false, true, protocol.ResourceExited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ph := &ptyHost{flood: tc.flood, older: tc.older, state: tc.state, sent: make(chan struct{})}
			h := agentdtest.NewHost(t, agentdtest.Options{Compose: func(context.Context, *server.Server) (server.Composition, error) { return ph, nil }})
			c := h.Connect(t)
			ctx := agentdtest.Context(t)
			s, err := c.WatchPTY(ctx, "s1", "p1")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// The reader starts behind: every frame of the first
			// subscription has reached the client (a round trip after them
			// has come back) before the first is read.
			select {
			case <-ph.sent:
			case <-ctx.Done():
				t.Fatal("the first subscription's frames were never flushed")
			}
			if _, err := c.Status(ctx); err != nil {
				t.Fatal(err)
			}
			next := func() client.PTYEvent {
				t.Helper()
				ev, err := s.Next(ctx)
				if err != nil {
					t.Fatalf("the stream ended: %v", err)
				}
				return ev
			}
			if ev := next(); !ev.Screen || string(ev.Data) != "screen 1" {
				t.Fatalf("the first event: %+v", ev)
			}
			lines := 0
			for {
				ev := next()
				if ev.Screen {
					if string(ev.Data) != "screen 2" {
						t.Fatalf("the screen after %d lines: %q", lines, ev.Data)
					}
					break
				}
				if want := fmt.Sprintf("line %d\n", lines+1); string(ev.Data) != want {
					t.Fatalf("output %q where %q was due: the stream tore", ev.Data, want)
				}
				lines++
			}
			t.Logf("%d lines, then the screen again", lines)
			if tc.state == protocol.ResourceExited {
				if ev := next(); ev.Resource == nil || ev.Resource.State != protocol.ResourceExited {
					t.Fatalf("after the screen: %+v, want the PTY's exit", ev)
				}
			}
			ph.mu.Lock()
			closed := slices.Clone(ph.closed)
			ph.mu.Unlock()
			if !slices.Contains(closed, "sub-1") {
				t.Fatalf("the subscriptions closed: %v, want sub-1, which the stream left", closed)
			}
		})
	}
}

// A PTY stream whose open is given up on before its answer (the caller's
// context ended) leaves nothing open: the subscription the host opened
// for it, started, is closed once the answer comes.
func TestAPTYStreamGivenUpOnBeforeItsOpenIsAnsweredLeavesNothingOpen(t *testing.T) {
	ph := &ptyHost{state: protocol.ResourceRunning, sent: make(chan struct{}), hold: make(chan struct{}), holding: make(chan struct{})}
	h := agentdtest.NewHost(t, agentdtest.Options{Compose: func(context.Context, *server.Server) (server.Composition, error) { return ph, nil }})
	c := h.Connect(t)
	ctx, cancel := context.WithCancel(agentdtest.Context(t))
	opened := make(chan error, 1)
	go func() {
		_, err := c.WatchPTY(ctx, "s1", "p1")
		opened <- err
	}()
	// The open is on its way, held by the host: the caller gives up.
	select {
	case <-ph.holding:
	case <-agentdtest.Context(t).Done():
		t.Fatal("the open never reached the host")
	}
	cancel()
	if err := <-opened; !errors.Is(err, context.Canceled) {
		t.Fatalf("WatchPTY given up on: %v, want context.Canceled", err)
	}
	close(ph.hold)
	poll.Until(t, "the abandoned subscription to be closed", func() bool {
		ph.mu.Lock()
		defer ph.mu.Unlock()
		return slices.Equal(ph.closed, []string{"sub-1"})
	})
}
