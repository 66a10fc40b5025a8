package server

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/protocol"
)

// writerAttacher attaches a connection's writer, for a handler to push
// frames with.
type writerAttacher struct{ out *OutboundWriter }

func (a *writerAttacher) AttachConnection(_ Identity, out *OutboundWriter) Attachment {
	return &writerAttacher{out: out}
}

func (a *writerAttacher) Close(context.Context) error { return nil }

// What a handler has run after its response follows that response on the
// connection; a handler that fails has nothing run.
func TestWhatRunsAfterAResponseFollowsIt(t *testing.T) {
	cli, srv := pair(t)
	table := Table{}
	Handle(table, protocol.OpTurnQuery, func(_ context.Context, call *Call, in *protocol.TurnRef) (protocol.TurnSnapshot, error) {
		out := call.Attachment().(*writerAttacher).out
		call.AfterResponse(func() {
			b, _ := json.Marshal(protocol.SubscriptionClosedFrame{
				Pushed: protocol.Pushed{Kind: protocol.KindSubscriptionClosed, HostEpoch: "e", SubscriptionID: "after-" + in.TurnID, Sequence: 1},
				Reason: protocol.ClosedClientClosed,
			})
			out.Enqueue(Control, b)
		})
		if in.TurnID == "fails" {
			return protocol.TurnSnapshot{}, protocol.Errorf(protocol.CodeNotFound, "no turn %s", in.TurnID)
		}
		return protocol.TurnSnapshot{SessionID: in.SessionID, TurnID: in.TurnID, RunID: "run", Status: "running"}, nil
	})
	startSession(t, srv, table, nil, func() ConnectionAttacher { return &writerAttacher{} })
	next := func() string {
		t.Helper()
		cli.NetConn().SetReadDeadline(time.Now().Add(timeout))
		line, err := cli.Read()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		f, err := protocol.DecodeHostFrame(line)
		switch {
		case err != nil:
			t.Fatalf("not a frame: %s (%v)", line, err)
		case f.Response != nil:
			return "response " + f.Response.RequestID
		}
		return "pushed " + f.Pushed.SubscriptionID
	}
	// Each request is sent once the frames before it have been read: what
	// the failed call would have run would come before the next response.
	var frames []string
	send(t, cli, turnQuery("r1", "fails"))
	frames = append(frames, next())
	send(t, cli, turnQuery("r2", "answers"))
	frames = append(frames, next(), next())
	if want := []string{"response r1", "response r2", "pushed after-answers"}; !slices.Equal(frames, want) {
		t.Fatalf("frames %q, want %q", frames, want)
	}
}
