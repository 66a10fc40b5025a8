package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/protocol"
)

// Two subscriptions that chose one PTY each get all of its output, in
// order and unchanged, while it floods: the output the worker quotes once
// is each subscription's own to merge and give back.
func TestAPTYFloodReachesEverySubscriptionThatChoseIt(t *testing.T) {
	r := start(t, protocol.ApprovalAll, "", "", "")
	ctx := agentdtest.Context(t)
	const lines = 100000
	pty, err := link.Call(ctx, r.conn, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{
		SessionID: "s1", LaunchID: "flood", Command: "stty -echo; read go; seq 1 " + strconv.Itoa(lines) + "; echo flood-done", PTY: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	var watchers []*link.Stream
	for range 2 {
		open, err := link.Call(ctx, r.conn, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: "s1", Transcript: protocol.TranscriptBootstrap{Kind: "none"}})
		if err != nil {
			t.Fatal(err)
		}
		w := r.conn.Stream(open.SubscriptionID)
		t.Cleanup(w.Close) // after its reader has returned
		if _, err := link.Call(ctx, r.conn, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}); err != nil {
			t.Fatal(err)
		}
		if _, err := link.Call(ctx, r.conn, protocol.OpSubscriptionPtyInterestSet, protocol.PtyInterestInput{SubscriptionID: open.SubscriptionID, Refs: []string{pty.Ref}}); err != nil {
			t.Fatal(err)
		}
		watchers = append(watchers, w)
	}
	ctl, err := link.Call(ctx, r.conn, protocol.OpRuntimeResourceControllerAcquire, protocol.ResourceRef{SessionID: "s1", Ref: pty.Ref})
	if err != nil {
		t.Fatal(err)
	}
	outputs := make([]string, len(watchers))
	// Each stream is read on its own goroutine; ending reading stops them.
	reading, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for i, w := range watchers {
		wg.Go(func() {
			var out strings.Builder
			screens := 0
			for done := false; !done; {
				f, err := w.Next(reading)
				if err != nil {
					t.Errorf("subscription %d: %v", i+1, err)
					return
				}
				if f.Kind != protocol.KindRuntimeResourcePtyData {
					continue
				}
				var d protocol.RuntimeResourcePtyDataFrame
				if err := protocol.DecodePtyDataFrame(f.Raw, &d); err != nil {
					t.Errorf("subscription %d: %v", i+1, err)
					return
				}
				if d.Screen {
					if screens++; screens > 1 {
						t.Errorf("subscription %d was sent a second screen", i+1)
						return
					}
					continue
				}
				out.WriteString(d.Data)
				done = strings.Contains(out.String()[max(0, out.Len()-len(d.Data)-len("flood-done")):], "flood-done")
			}
			outputs[i] = out.String()
		})
	}
	if _, err := link.Call(ctx, r.conn, protocol.OpRuntimeResourceControllerControl, protocol.ControlInput{
		SessionID: "s1", Ref: pty.Ref, ControllerID: ctl.ControllerID, Sequence: 1, Data: "\n",
	}); err != nil {
		t.Error(err)
		stop() // the flood never starts: the readers stop
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var b strings.Builder
	for i := 1; i <= lines; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteString("\r\n")
	}
	want := b.String()
	for i, out := range outputs {
		out, _, _ = strings.Cut(strings.TrimLeft(out, "\r\n"), "flood-done")
		if out != want {
			n := 0
			for n < len(out) && n < len(want) && out[n] == want[n] {
				n++
			}
			t.Errorf("subscription %d: %d bytes of output, %d expected, differing at byte %d: %q", i+1, len(out), len(want), n, out[n:min(len(out), n+40)])
		}
	}
}

// A worker's subscriptions choose PTYs and start by their own calls: an
// open that asks for either at once is refused, naming the field.
func TestAWorkersOpenRefusesPTYsAndAStartAtOnce(t *testing.T) {
	r := start(t, protocol.ApprovalAll, "", "", "")
	ctx := agentdtest.Context(t)
	for _, tc := range []struct {
		field string
		in    protocol.SubscriptionOpenInput
	}{
		{"input.ptys", protocol.SubscriptionOpenInput{Ptys: []string{"pty-1"}}},
		{"input.ready", protocol.SubscriptionOpenInput{Ready: true}},
	} {
		tc.in.SessionID, tc.in.Transcript = "s1", protocol.TranscriptBootstrap{Kind: "none"}
		_, err := link.Call(ctx, r.conn, protocol.OpSubscriptionOpen, tc.in)
		var re *link.RemoteError
		if !errors.As(err, &re) || re.Code != protocol.CodeInvalidRequest || !strings.Contains(re.Message, `"`+tc.field+`"`) {
			t.Fatalf("an open with %s: %v, want invalid_request naming it", tc.field, err)
		}
	}
}

// A PTY's screen is drawn once pty_interest.set is answered; a
// subscription that lets the PTY go before its screen is drawn is sent
// neither the screen nor the output after it: the screen drawn for an
// earlier choice is not sent once a later one replaced it.
func TestAPTYDroppedRightAfterItWasChosenSendsNothingMore(t *testing.T) {
	r := start(t, protocol.ApprovalAll, "", "", "")
	ctx := agentdtest.Context(t)
	// A screen full of text takes a while to draw, and the PTY prints
	// a line every few milliseconds after it.
	busy, err := link.Call(ctx, r.conn, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{
		SessionID: "s1", LaunchID: "busy", PTY: true, Cols: 300, Rows: 100,
		Command: "i=0; while [ $i -lt 3000 ]; do printf '\\033[1;3%dmcell%04d\\033[0m ' $((i % 8)) $i; i=$((i+1)); done; while :; do echo tick; sleep 0.005; done",
	})
	if err != nil {
		t.Fatal(err)
	}
	open, err := link.Call(ctx, r.conn, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: "s1", Transcript: protocol.TranscriptBootstrap{Kind: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	w := r.conn.Stream(open.SubscriptionID)
	t.Cleanup(w.Close)
	if _, err := link.Call(ctx, r.conn, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}); err != nil {
		t.Fatal(err)
	}
	for range 30 {
		for _, refs := range [][]string{{busy.Ref}, nil} {
			if _, err := link.Call(ctx, r.conn, protocol.OpSubscriptionPtyInterestSet, protocol.PtyInterestInput{SubscriptionID: open.SubscriptionID, Refs: refs}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A run started now is told of on the stream after whatever the
	// choices before sent; it lasts long enough for the busy PTY to
	// print many lines.
	mark, err := link.Call(ctx, r.conn, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{SessionID: "s1", LaunchID: "mark", Command: "sleep 0.3"})
	if err != nil {
		t.Fatal(err)
	}
	marked := false
	for {
		f, err := w.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		switch f.Kind {
		case protocol.KindRuntimeResourceUpdate:
			var u protocol.RuntimeResourceUpdateFrame
			if err := json.Unmarshal(f.Raw, &u); err != nil {
				t.Fatal(err)
			}
			var res protocol.Resource
			if u.Ref != mark.Ref || json.Unmarshal(u.Resource, &res) != nil {
				continue
			}
			if res.State == protocol.ResourceExited {
				return
			}
			marked = true
		case protocol.KindRuntimeResourcePtyData:
			if marked {
				t.Fatalf("the PTY the subscription let go sent it output: %.80s", f.Raw)
			}
		}
	}
}
