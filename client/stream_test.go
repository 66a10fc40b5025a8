package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// pushComposition answers subscription.open with a fixed id and, on
// subscription.ready, pushes a projection, n deltas and a closed frame
// through the connection's writer.
type pushComposition struct {
	n       int
	writers chan *server.OutboundWriter
}

func (p *pushComposition) AttachConnection(_ server.Identity, out *server.OutboundWriter) server.Attachment {
	p.writers <- out
	return p
}

func (p *pushComposition) Close(context.Context) error { return nil }
func (p *pushComposition) BeginDrain()                 {}

func (p *pushComposition) Handlers() server.Table {
	t := server.Table{}
	server.Handle(t, protocol.OpSubscriptionOpen, func(_ context.Context, _ *server.Call, in *protocol.SubscriptionOpenInput) (protocol.SubscriptionOpenResult, error) {
		return protocol.SubscriptionOpenResult{SubscriptionID: "sub-" + in.SessionID, NextSequence: 1, Snapshot: json.RawMessage(`{}`)}, nil
	})
	server.Handle(t, protocol.OpSubscriptionReady, func(_ context.Context, _ *server.Call, in *protocol.SubscriptionRef) (protocol.SubscriptionRef, error) {
		out := <-p.writers
		head := func(kind string, seq int) protocol.Pushed {
			return protocol.Pushed{Kind: kind, HostEpoch: "e", SubscriptionID: in.SubscriptionID, Sequence: uint64(seq)}
		}
		b, _ := json.Marshal(protocol.SessionProjectionFrame{Pushed: head(protocol.KindSessionProjection, 1), Snapshot: json.RawMessage(`{"n":0}`)})
		out.Enqueue(server.Control, b)
		for i := 1; i <= p.n; i++ {
			b, _ := json.Marshal(protocol.SessionDeltaFrame{Pushed: head(protocol.KindSessionDelta, i+1), Delta: json.RawMessage(`{}`)})
			out.Enqueue(server.Control, b)
		}
		b, _ = json.Marshal(protocol.SubscriptionClosedFrame{Pushed: head(protocol.KindSubscriptionClosed, p.n+2), Reason: protocol.ClosedSessionRemoved})
		out.Enqueue(server.Fence, b)
		return *in, nil
	})
	return t
}

func TestWatcherReceivesPushedFramesInOrderUntilClosed(t *testing.T) {
	comp := &pushComposition{n: 100, writers: make(chan *server.OutboundWriter, 1)}
	h := agentdtest.NewHost(t, agentdtest.Options{Compose: func(context.Context, *server.Server) (server.Composition, error) { return comp, nil }})
	c := h.Connect(t)
	ctx := agentdtest.Context(t)
	open, err := client.Call(ctx, c, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: "s1", Transcript: protocol.TranscriptBootstrap{Kind: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	w := c.Watch(open.SubscriptionID)
	defer w.Close()
	if _, err := client.Call(ctx, c, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for seq := uint64(1); ; seq++ {
		f, err := w.Next(ctx)
		if err != nil {
			if !errors.Is(err, client.ErrClosed) || len(kinds) != comp.n+2 {
				t.Fatalf("after %d frames: %v", len(kinds), err)
			}
			break
		}
		if f.Sequence != seq || f.SubscriptionID != open.SubscriptionID {
			t.Fatalf("frame %+v, want sequence %d", f.Pushed, seq)
		}
		kinds = append(kinds, f.Kind)
	}
	if kinds[0] != protocol.KindSessionProjection || kinds[len(kinds)-1] != protocol.KindSubscriptionClosed {
		t.Fatalf("kinds %v", kinds)
	}
}

func TestWatcherNextReportsContextBeforeConnectionErrors(t *testing.T) {
	h := agentdtest.NewHost(t, agentdtest.Options{})
	c := h.Connect(t)
	w := c.Watch("nothing")
	c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with a cancelled context: %v", err)
	}
	if _, err := w.Next(context.Background()); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Next on a closed connection: %v", err)
	}
}
