package client_test

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/protocol"
)

// A command whose write fails before any of it reaches the socket (its
// peer gone: EPIPE) was not dispatched: it is safe to send again. One
// whose first bytes reached the socket before the peer went was: its
// outcome is unknown.
func TestACommandIsDispatchedOnlyOnceSomeOfItReachedTheSocket(t *testing.T) {
	for _, tc := range []struct {
		name       string
		text       string
		die        func(*net.UnixConn, *bufio.Reader)
		dispatched bool // and the peer's end is not waited for
	}{
		{
			name: "the peer stopped reading before it was sent",
			text: "hello",
			// A socket its peer shut for reading refuses writes at once,
			// while the connection's reader sees nothing yet.
			die:        func(uc *net.UnixConn, _ *bufio.Reader) { uc.CloseRead() },
			dispatched: false,
		},
		{
			name: "the peer went while it was being sent",
			text: strings.Repeat("x", 700<<10), // more than the socket holds
			die: func(uc *net.UnixConn, r *bufio.Reader) {
				r.ReadByte() // some of it arrived
				uc.CloseRead()
			},
			dispatched: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Its connection stays open: the client's reader sees nothing
			// of the peer's going, its write alone fails.
			endpoint, died := agentdtest.DyingPeer(t, tc.die, !tc.dispatched)
			ctx := agentdtest.Context(t)
			c, err := client.Dial(ctx, endpoint, client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if !tc.dispatched {
				<-died
			}
			_, err = client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: "s1", TurnID: "t1", Content: protocol.Content{Text: tc.text}})
			var ie *client.InterruptedError
			if !errors.As(err, &ie) {
				t.Fatalf("turn.start to a peer that went: %v, want an interruption", err)
			}
			if ie.Mode != protocol.Command || ie.Dispatched != tc.dispatched || ie.Retryable == tc.dispatched || ie.Reason != client.ReasonConnectionLost {
				t.Fatalf("interrupted %+v, want a command dispatched %v, retryable %v, its connection lost", ie, tc.dispatched, !tc.dispatched)
			}
		})
	}
}
