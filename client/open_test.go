package client_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// sessionHost is a host composition with one session, s1, whose
// subscriptions are each sent one session_changed delta once they are
// ready: as soon as the open is answered when it asks for ready, or, on
// an older host (its open decoded as before it took ready), once
// subscription.ready is.
type sessionHost struct {
	older bool // constant: subscription.open takes no ready, as before it did

	mu    sync.Mutex
	calls []string // guarded by mu: the operations called, in order
}

type sessionConn struct{ out *server.OutboundWriter }

func (*sessionConn) Close(context.Context) error { return nil }

func (h *sessionHost) AttachConnection(_ server.Identity, out *server.OutboundWriter) server.Attachment {
	return &sessionConn{out: out}
}

func (h *sessionHost) Close(context.Context) error { return nil }
func (h *sessionHost) BeginDrain()                 {}

func (h *sessionHost) called(op string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, op)
}

func (h *sessionHost) Handlers() server.Table {
	t := server.Table{}
	server.Handle(t, protocol.OpSubscriptionOpen, func(_ context.Context, call *server.Call, in *protocol.SubscriptionOpenInput) (protocol.SubscriptionOpenResult, error) {
		h.called(call.Operation.Name)
		if h.older {
			var before struct {
				SessionID  string                       `json:"sessionId"`
				Transcript protocol.TranscriptBootstrap `json:"transcript"`
			}
			if err := protocol.DecodeInput(call.Input, &before); err != nil {
				return protocol.SubscriptionOpenResult{}, &protocol.Error{Code: protocol.CodeInvalidRequest, Message: err.Error()}
			}
		} else if in.Ready {
			out := call.Attachment().(*sessionConn).out
			call.AfterResponse(func() { h.delta(out, "sub-1") })
		}
		return protocol.SubscriptionOpenResult{SubscriptionID: "sub-1", NextSequence: 1, Snapshot: json.RawMessage(`{"session":{"sessionId":"s1"},"transcriptSequence":7}`)}, nil
	})
	server.Handle(t, protocol.OpSubscriptionReady, func(_ context.Context, call *server.Call, in *protocol.SubscriptionRef) (protocol.SubscriptionRef, error) {
		h.called(call.Operation.Name)
		out := call.Attachment().(*sessionConn).out
		call.AfterResponse(func() { h.delta(out, in.SubscriptionID) })
		return *in, nil
	})
	server.Handle(t, protocol.OpSubscriptionClose, func(_ context.Context, call *server.Call, in *protocol.SubscriptionRef) (protocol.SubscriptionRef, error) {
		h.called(call.Operation.Name)
		return *in, nil
	})
	return t
}

// delta queues subscription id's one delta.
func (h *sessionHost) delta(out *server.OutboundWriter, id string) {
	b, _ := json.Marshal(protocol.SessionDeltaFrame{
		Pushed: protocol.Pushed{Kind: protocol.KindSessionDelta, HostEpoch: "e", SubscriptionID: id, Sequence: 1},
		Delta:  json.RawMessage(`{"event":"session_changed","session":{"sessionId":"s1","title":"changed"}}`),
	})
	out.EnqueueThen(server.Control, b, nil)
}

// A session's stream opens in one call, ready at once, and on a host
// from before the open took ready in two, the open then
// subscription.ready; either way its first frame is the first event.
func TestASessionStreamOpensReadyInOneCallAndInTwoOnAnOlderHost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		older bool
		calls []string
	}{
		{"one call", false, []string{"subscription.open"}},
		{"an older host", true, []string{"subscription.open", "subscription.open", "subscription.ready"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sh := &sessionHost{older: tc.older}
			h := agentdtest.NewHost(t, agentdtest.Options{Compose: func(context.Context, *server.Server) (server.Composition, error) { return sh, nil }})
			c := h.Connect(t)
			ctx := agentdtest.Context(t)
			s, err := c.OpenSession(ctx, "s1", client.SessionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if s.ID() != "sub-1" || s.SessionID() != "s1" || s.LastRecord() != 7 {
				t.Fatalf("the stream opened as %s of %s through record %d", s.ID(), s.SessionID(), s.LastRecord())
			}
			ev, err := s.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Delta.Event != protocol.EventSessionChanged || ev.Delta.Session == nil || ev.Delta.Session.Title != "changed" {
				t.Fatalf("the first event: %+v", ev)
			}
			sh.mu.Lock()
			calls := append([]string(nil), sh.calls...)
			sh.mu.Unlock()
			if !slices.Equal(calls, tc.calls) {
				t.Fatalf("calls to open the stream: %q, want %q", calls, tc.calls)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
