package sessions_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/protocol"
)

// An open that chooses a PTY and starts at once is answered before any
// frame of its subscription, whose first frame is the PTY's screen: for a
// PTY the worker's stream does not carry yet, and for one another
// subscription watches already, while the PTY prints throughout.
func TestAnOpenThatChoosesAPTYSendsItsScreenAfterItsResponse(t *testing.T) {
	h, c, work := newHost(t, time.Hour)
	s, pty := sessionWithPTY(t, c, work, `i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 0.002; done`)
	for round := range 8 {
		f := &rawFeed{rc: dialRaw(t, h.Endpoint())}
		raw := f.request(string(protocol.OpSubscriptionOpen), protocol.SubscriptionOpenInput{
			SessionID: s.SessionID, Transcript: protocol.TranscriptBootstrap{Kind: protocol.TranscriptNone},
			Ptys: []string{pty.Ref}, Ready: true,
		})
		if len(f.queued) > 0 {
			t.Fatalf("round %d: a frame came before the open's response: %s", round, f.queued[0].Raw)
		}
		var open protocol.SubscriptionOpenResult
		if err := json.Unmarshal(raw, &open); err != nil {
			t.Fatal(err)
		}
		w := &ptyWatch{t: t, w: f, ref: pty.Ref}
		w.until("tick") // the screen first, then output; checked by until
		if !w.frames[0].Screen {
			t.Fatalf("round %d: the first frame is not the screen", round)
		}
		for _, fr := range f.queued {
			if fr.SubscriptionID != open.SubscriptionID {
				t.Fatalf("round %d: a frame of %s reached a connection holding %s", round, fr.SubscriptionID, open.SubscriptionID)
			}
		}
		// Every other round's subscription stays open: the next opens on
		// a PTY the worker's stream carries already.
		if round%2 == 1 {
			f.rc.nc.Close()
		}
	}
}

// An open whose PTYs are not PTYs of the session is refused naming the
// field, and leaves nothing open: the session's worker, which the open
// started, stops once idle.
func TestAnOpenOfSomethingNotAPTYIsRefusedAndLeavesNothingOpen(t *testing.T) {
	h, c, work := newHost(t, 50*time.Millisecond)
	ctx := agentdtest.Context(t)
	s := createSession(t, c, work)
	run, err := client.Call(ctx, c, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{SessionID: s.SessionID, LaunchID: "l1", Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the worker to stop once idle", workerGone(h.Home, s.SessionID))
	for _, tc := range []struct {
		name  string
		ptys  []string
		ready bool
		code  protocol.Code
	}{
		{"a shell run", []string{run.Ref}, true, protocol.CodeInvalidRequest},
		{"an unknown PTY", []string{"pty-99"}, true, protocol.CodeNotFound},
		{"a ref of no resource's shape", []string{"nope"}, false, protocol.CodeInvalidRequest},
		{"an empty ref", []string{"pty-1", ""}, true, protocol.CodeInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Call(ctx, c, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{
				SessionID: s.SessionID, Transcript: protocol.TranscriptBootstrap{Kind: protocol.TranscriptNone}, Ptys: tc.ptys, Ready: tc.ready,
			})
			wantCode(t, err, tc.code)
			if !strings.Contains(err.Error(), `"input.ptys`) {
				t.Fatalf("the refusal %q does not name input.ptys", err)
			}
			poll.Until(t, fmt.Sprintf("the worker to stop once idle after refusing %v", tc.ptys), workerGone(h.Home, s.SessionID))
		})
	}
}
