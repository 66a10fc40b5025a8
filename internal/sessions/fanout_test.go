package sessions_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/sessions"
	"github.com/agentd-dev/agentd/protocol"
)

// subscribe opens a subscription on c and readies it.
func subscribe(t *testing.T, c *client.Conn, in protocol.SubscriptionOpenInput) (*client.Watcher, protocol.SessionProjection) {
	t.Helper()
	ctx := agentdtest.Context(t)
	if in.Transcript.Kind == "" {
		in.Transcript.Kind = protocol.TranscriptNone
	}
	open, err := client.Call(ctx, c, protocol.OpSubscriptionOpen, in)
	if err != nil {
		t.Fatal(err)
	}
	var snap protocol.SessionProjection
	if err := json.Unmarshal(open.Snapshot, &snap); err != nil {
		t.Fatal(err)
	}
	w := c.Watch(open.SubscriptionID)
	t.Cleanup(w.Close)
	if _, err := client.Call(ctx, c, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}); err != nil {
		t.Fatal(err)
	}
	return w, snap
}

// nextDelta returns the watcher's next delta, with its frame's sequence,
// passing over runtime resource frames (a turn's bash runs as one).
func nextDelta(ctx context.Context, w *client.Watcher) (protocol.SessionDelta, uint64, error) {
	d, seq, _, err := nextDeltaAfter(ctx, w)
	return d, seq, err
}

// nextDeltaAfter is nextDelta, also counting the resource frames passed
// over.
func nextDeltaAfter(ctx context.Context, w *client.Watcher) (d protocol.SessionDelta, seq uint64, skipped uint64, err error) {
	f, err := w.Next(ctx)
	for err == nil && (f.Kind == protocol.KindRuntimeResourceUpdate || f.Kind == protocol.KindRuntimeResourcePtyData) {
		skipped++
		f, err = w.Next(ctx)
	}
	d, seq, err = decodeDelta(f, err)
	return d, seq, skipped, err
}

func decodeDelta(f client.Frame, err error) (protocol.SessionDelta, uint64, error) {
	if err != nil {
		return protocol.SessionDelta{}, 0, err
	}
	if f.Kind == protocol.KindSubscriptionClosed {
		var cl protocol.SubscriptionClosedFrame
		f.Decode(&cl)
		return protocol.SessionDelta{}, f.Sequence, fmt.Errorf("subscription closed: %s", cl.Reason)
	}
	var fr protocol.SessionDeltaFrame
	var d protocol.SessionDelta
	if err := f.Decode(&fr); err != nil {
		return d, 0, err
	}
	return d, f.Sequence, json.Unmarshal(fr.Delta, &d)
}

// untilRunEnd reads w's deltas until a turn ends, checking that sequences
// run on without a gap; it returns the deltas and the ended turn.
func untilRunEnd(t *testing.T, w *client.Watcher) ([]protocol.SessionDelta, protocol.TurnSnapshot) {
	t.Helper()
	ctx := agentdtest.Context(t)
	var got []protocol.SessionDelta
	var last uint64
	for {
		d, seq, skipped, err := nextDeltaAfter(ctx, w)
		if err != nil {
			t.Fatalf("after %d deltas: %v", len(got), err)
		}
		if last != 0 && seq != last+1+skipped {
			t.Fatalf("sequence %d follows %d", seq, last)
		}
		last = seq
		got = append(got, d)
		if d.Event == protocol.EventRunEnd {
			return got, *d.Turn
		}
	}
}

func fanout(t *testing.T, c *client.Conn) protocol.FanoutCounters {
	t.Helper()
	diag, err := client.Call(agentdtest.Context(t), c, protocol.OpHostDiagnosticsQuery, protocol.DiagnosticsQueryInput{})
	if err != nil {
		t.Fatal(err)
	}
	return diag.Fanout
}

// TestEachDeltaIsEncodedOnceWhateverTheNumberOfSubscribers: the same turn
// watched by one subscriber and by a hundred costs the host the same
// number of encodes: one per delta; each subscriber's frames wrap it.
func TestEachDeltaIsEncodedOnceWhateverTheNumberOfSubscribers(t *testing.T) {
	for _, n := range []int{1, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			h, c, work := newHost(t, time.Hour)
			ctx := agentdtest.Context(t)
			s, err := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work, Approval: protocol.ApprovalAll})
			if err != nil {
				t.Fatal(err)
			}
			// Ten connections share the subscribers, as ten clients would.
			var watchers []*client.Watcher
			for i := range n {
				conn := c
				if i%10 != 0 || i == 0 {
					conn = h.Connect(t)
				}
				w, _ := subscribe(t, conn, protocol.SubscriptionOpenInput{SessionID: s.SessionID})
				watchers = append(watchers, w)
			}
			if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: "t1", Content: protocol.Content{Text: "run `seq 1 50`"}}); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for _, w := range watchers {
				wg.Go(func() {
					if _, turn := untilRunEnd(t, w); turn.Status != protocol.TurnCompleted {
						t.Errorf("turn ended %+v", turn)
					}
					// The turn's last delta: the session is idle again.
					for {
						d, _, err := nextDelta(ctx, w)
						if err != nil {
							t.Error(err)
							return
						}
						if d.Event == protocol.EventSessionChanged && d.Session.Status == protocol.SessionIdle {
							return
						}
					}
				})
			}
			wg.Wait()
			// Each delta reached each subscriber, in a frame of its own or
			// merged into the one before it, and was encoded once.
			var f protocol.FanoutCounters
			poll.Until(t, "every delta delivered", func() bool {
				f = fanout(t, c)
				return f.Deltas > 0 && f.Frames+f.Coalesced == uint64(n)*f.Deltas
			})
			if f.Encodes != f.Deltas {
				t.Fatalf("%d subscribers: %d deltas, %d encodes; want one encode per delta", n, f.Deltas, f.Encodes)
			}
		})
	}
}

// rawConn is a client connection read by hand: it can stop reading, as a
// stalled client does.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func dialRaw(t *testing.T, endpoint string) *rawConn {
	t.Helper()
	nc, err := net.Dial("unix", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	rc := &rawConn{t: t, nc: nc, r: bufio.NewReaderSize(nc, protocol.MaxMessageBytes+1)}
	rc.send(`{"kind":"hello","clientInstanceId":"raw","protocolMin":1,"protocolMax":1,"compatibilityEpoch":1,"compositionId":"agentd.interactive","surface":"sdk"}`)
	if line := rc.read(); !strings.Contains(line, `"kind":"accepted"`) {
		t.Fatalf("handshake: %s", line)
	}
	return rc
}

func (rc *rawConn) send(lines ...string) {
	rc.t.Helper()
	if _, err := rc.nc.Write([]byte(strings.Join(lines, "\n") + "\n")); err != nil {
		rc.t.Fatal(err)
	}
}

func (rc *rawConn) read() string {
	rc.t.Helper()
	rc.nc.SetReadDeadline(time.Now().Add(agentdtest.Timeout))
	line, err := rc.r.ReadString('\n')
	if err != nil {
		rc.t.Fatalf("read: %v", err)
	}
	return strings.TrimSuffix(line, "\n")
}

// frame is what a test needs of any line a host sends.
type frame struct {
	Kind           string          `json:"kind"`
	RequestID      string          `json:"requestId"`
	OK             bool            `json:"ok"`
	Result         json.RawMessage `json:"result"`
	SubscriptionID string          `json:"subscriptionId"`
	Sequence       uint64          `json:"sequence"`
	Reason         string          `json:"reason"`
	Delta          json.RawMessage `json:"delta"`
}

func (rc *rawConn) next() frame {
	rc.t.Helper()
	line := rc.read()
	var f frame
	if err := json.Unmarshal([]byte(line), &f); err != nil {
		rc.t.Fatalf("frame %q: %v", line, err)
	}
	return f
}

// TestEvictingOneSlowSubscriptionKeepsSiblingSubscriptionsAndRequestsUsable:
// a client stops reading while one of its sessions streams megabytes; its
// subscription to that session falls behind its bound and is closed as a
// slow consumer, and only it: once the client reads again, the closed
// frame follows what it was given, its sibling subscription on the same
// connection streams the next turn, and requests are answered.
func TestEvictingOneSlowSubscriptionKeepsSiblingSubscriptionsAndRequestsUsable(t *testing.T) {
	h, c, work := newHostWith(t, func(cfg *sessions.Config) { cfg.BacklogBytes = 256 << 10 })
	ctx := agentdtest.Context(t)
	var slow, sibling protocol.Session
	slow, _ = client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work, Approval: protocol.ApprovalAll})
	sibling, _ = client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work, Approval: protocol.ApprovalAll})

	rc := dialRaw(t, h.Endpoint())
	ids := map[string]string{}
	for i, s := range []protocol.Session{slow, sibling} {
		rc.send(fmt.Sprintf(`{"requestId":"open-%d","operation":"subscription.open","input":{"sessionId":%q,"transcript":{"kind":"none"}}}`, i, s.SessionID))
		f := rc.next()
		var res protocol.SubscriptionOpenResult
		json.Unmarshal(f.Result, &res)
		ids[s.SessionID] = res.SubscriptionID
		rc.send(fmt.Sprintf(`{"requestId":"ready-%d","operation":"subscription.ready","input":{"subscriptionId":%q}}`, i, res.SubscriptionID))
		if f := rc.next(); f.RequestID != fmt.Sprintf("ready-%d", i) || !f.OK {
			t.Fatalf("ready: %+v", f)
		}
	}

	// The raw client reads nothing while the slow session's turn streams
	// its output, far more than the socket's buffers hold.
	if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: slow.SessionID, TurnID: "t1", Content: protocol.Content{Text: "run `seq 1 400000`"}}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the slow subscription's eviction", func() bool { return fanout(t, c).SlowConsumers >= 1 })
	poll.Until(t, "the slow session's turn to end", func() bool {
		turn, _ := client.Call(ctx, c, protocol.OpTurnQuery, protocol.TurnRef{SessionID: slow.SessionID, TurnID: "t1"})
		return turn.Status == protocol.TurnCompleted
	})

	// The client reads again: the slow subscription's frames run on to its
	// closed frame; then its sibling streams, and a request is answered.
	if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: sibling.SessionID, TurnID: "t2", Content: protocol.Content{Text: "hello"}}); err != nil {
		t.Fatal(err)
	}
	rc.send(`{"requestId":"status-after-eviction","operation":"host.status","input":{}}`)
	var slowSeq uint64
	var slowClosed, siblingEnded, status bool
	for !slowClosed || !siblingEnded || !status {
		f := rc.next()
		switch {
		case f.RequestID == "status-after-eviction":
			status = f.OK
		case f.SubscriptionID == ids[slow.SessionID]:
			if slowClosed {
				t.Fatalf("a frame after the closed frame: %+v", f)
			}
			if f.Sequence != slowSeq+1 {
				t.Fatalf("slow subscription: sequence %d follows %d", f.Sequence, slowSeq)
			}
			slowSeq = f.Sequence
			if f.Kind == protocol.KindSubscriptionClosed {
				if f.Reason != protocol.ClosedSlowConsumer {
					t.Fatalf("slow subscription closed with %q", f.Reason)
				}
				slowClosed = true
			}
		case f.SubscriptionID == ids[sibling.SessionID]:
			if f.Kind == protocol.KindSubscriptionClosed {
				t.Fatalf("the sibling was closed: %s", f.Reason)
			}
			siblingEnded = siblingEnded || strings.Contains(string(f.Delta), `"event":"run_end"`)
		}
	}
	if !slowClosed || slowSeq < 2 {
		t.Fatalf("the slow subscription got %d frames before it closed", slowSeq)
	}
	// The turn the slow subscriber missed is whole in the transcript.
	turn, err := client.Call(ctx, c, protocol.OpTurnQuery, protocol.TurnRef{SessionID: slow.SessionID, TurnID: "t1"})
	if err != nil || turn.Status != protocol.TurnCompleted {
		t.Fatalf("the slow session's turn: %+v %v", turn, err)
	}
}

// TestFlushesConcurrentSubscriptionOpensBeforeTheFramesTheirReadinessStarts:
// sixteen opens pipelined on one connection while the session streams:
// each open's result reaches the client before any frame of its
// subscription, the frames start at its nextSequence once it is ready,
// and none is lost between the opening and the readiness.
func TestFlushesConcurrentSubscriptionOpensBeforeTheFramesTheirReadinessStarts(t *testing.T) {
	h, c, work := newHost(t, time.Hour)
	ctx := agentdtest.Context(t)
	s, _ := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work, Approval: protocol.ApprovalAll})
	if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: "t1", Content: protocol.Content{Text: "run `for i in $(seq 1 800); do echo line $i; sleep 0.001; done`"}}); err != nil {
		t.Fatal(err)
	}
	// The opens go while the output streams.
	w, _ := subscribe(t, c, protocol.SubscriptionOpenInput{SessionID: s.SessionID})
	for {
		d, _, err := nextDelta(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		if d.Event == protocol.EventToolCallUpdate {
			break
		}
	}
	rc := dialRaw(t, h.Endpoint())
	const n = 16
	var opens []string
	for i := range n {
		opens = append(opens, fmt.Sprintf(`{"requestId":"open-%d","operation":"subscription.open","input":{"sessionId":%q,"transcript":{"kind":"none"}}}`, i, s.SessionID))
	}
	rc.send(opens...)
	type sub struct {
		opened   bool
		next     uint64
		proj     *protocol.Projector
		turnDone bool
	}
	subs := map[string]*sub{}
	var readies []string
	for len(readies) < n {
		f := rc.next()
		if f.Kind != "" {
			t.Fatalf("a pushed frame before every open was answered: %+v", f)
		}
		var res protocol.SubscriptionOpenResult
		if !f.OK || json.Unmarshal(f.Result, &res) != nil {
			t.Fatalf("open: %+v", f)
		}
		var snap protocol.SessionProjection
		json.Unmarshal(res.Snapshot, &snap)
		subs[res.SubscriptionID] = &sub{opened: true, next: res.NextSequence, proj: protocol.NewProjector(snap)}
		readies = append(readies, fmt.Sprintf(`{"requestId":"ready-%d","operation":"subscription.ready","input":{"subscriptionId":%q}}`, len(readies), res.SubscriptionID))
	}
	// Deltas go on while the subscriptions wait for their readiness: none
	// of them reaches the client before it (a request answered after two
	// more deltas were fanned out shows it).
	for range 2 {
		if _, _, err := nextDelta(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	rc.send(`{"requestId":"status","operation":"host.status","input":{}}`)
	for f := rc.next(); f.RequestID != "status"; f = rc.next() {
		t.Fatalf("a frame before its subscription was ready: %+v", f)
	}
	rc.send(readies...)
	done := 0
	for done < n {
		f := rc.next()
		if f.Kind == "" {
			continue
		}
		sb := subs[f.SubscriptionID]
		if sb == nil {
			t.Fatalf("a frame of a subscription never opened: %+v", f)
		}
		if f.Sequence != sb.next {
			t.Fatalf("%s: sequence %d, want %d", f.SubscriptionID, f.Sequence, sb.next)
		}
		sb.next++
		var d protocol.SessionDelta
		json.Unmarshal(f.Delta, &d)
		sb.proj.Apply(d)
		if d.Event == protocol.EventRunEnd && !sb.turnDone {
			sb.turnDone = true
			done++
		}
	}
	// Every subscriber's snapshot and deltas add up to the same session.
	var want protocol.SessionProjection
	for id, sb := range subs {
		got := sb.proj.Projection()
		if got.RootTurn == nil || got.RootTurn.Status != protocol.TurnCompleted {
			t.Fatalf("%s ends with turn %+v", id, got.RootTurn)
		}
		if want.RootTurn == nil {
			want = got
		} else if got.TranscriptSequence != want.TranscriptSequence || *got.RootTurn != *want.RootTurn {
			t.Fatalf("%s ends at record %d (%+v), another at %d (%+v)", id, got.TranscriptSequence, got.RootTurn, want.TranscriptSequence, want.RootTurn)
		}
	}
}

// TestASubscriptionResumesAfterTheLastRecordItHad: a client that had the
// transcript up to record N opens with transcript after N and gets every
// later record once, in order, as entry_added deltas, then the live ones.
func TestASubscriptionResumesAfterTheLastRecordItHad(t *testing.T) {
	_, c, work := newHost(t, time.Hour)
	ctx := agentdtest.Context(t)
	s, _ := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work, Approval: protocol.ApprovalAll})
	w, _ := subscribe(t, c, protocol.SubscriptionOpenInput{SessionID: s.SessionID})
	if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: "t1", Content: protocol.Content{Text: "run `echo one`"}}); err != nil {
		t.Fatal(err)
	}
	first, _ := untilRunEnd(t, w)
	var seqs []uint64
	for _, d := range first {
		if d.Event == protocol.EventEntryAdded {
			var rec protocol.TranscriptRecord
			json.Unmarshal(d.Entry, &rec)
			seqs = append(seqs, rec.Seq)
		}
	}
	// The live stream carried every record: 1, 2, … with no gap.
	for i, seq := range seqs {
		if seq != uint64(i+1) {
			t.Fatalf("live records %v: want 1, 2, 3, …", seqs)
		}
	}
	if len(seqs) < 4 {
		t.Fatalf("live records %v: want the turn's start, prompt, reply, results and end", seqs)
	}
	// The client lost the turn after its second record.
	const had = 2
	w2, snap := subscribe(t, c, protocol.SubscriptionOpenInput{SessionID: s.SessionID, Transcript: protocol.TranscriptBootstrap{Kind: protocol.TranscriptAfter, Sequence: had}})
	if snap.TranscriptSequence != uint64(len(seqs)) {
		t.Fatalf("snapshot at record %d, want %d", snap.TranscriptSequence, len(seqs))
	}
	if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: "t2", Content: protocol.Content{Text: "run `echo two`"}}); err != nil {
		t.Fatal(err)
	}
	want := uint64(had + 1)
	var ended bool
	for !ended {
		d, _, err := nextDelta(ctx, w2)
		if err != nil {
			t.Fatal(err)
		}
		switch d.Event {
		case protocol.EventEntryAdded:
			var rec protocol.TranscriptRecord
			if err := json.Unmarshal(d.Entry, &rec); err != nil {
				t.Fatal(err)
			}
			if rec.Seq != want {
				t.Fatalf("record %d, want %d", rec.Seq, want)
			}
			want++
		case protocol.EventRunEnd:
			ended = d.TurnID == "t2"
		}
	}
	// Paging reads the same transcript.
	page, err := client.Call(ctx, c, protocol.OpSessionTranscriptPage, protocol.TranscriptPageInput{SessionID: s.SessionID, Direction: "older", MaxBytes: protocol.MaxMessageBytes / 2})
	if err != nil {
		t.Fatal(err)
	}
	var last protocol.TranscriptRecord
	json.Unmarshal(page.Records[len(page.Records)-1], &last)
	if uint64(len(page.Records)) != want-1 || last.Seq != want-1 || last.Type != protocol.RecordTurnEnd {
		t.Fatalf("page of %d records ending at %+v; the stream reached record %d", len(page.Records), last, want-1)
	}
}

// TestAToolsMegabytesOfOutputReachTheSubscriberWithinTheWireLimit: a
// command printing megabytes streams through worker and host in deltas
// that each fit the wire limit, each byte delivered or counted as skipped;
// the turn completes, and requests on the session are answered while it
// runs.
func TestAToolsMegabytesOfOutputReachTheSubscriberWithinTheWireLimit(t *testing.T) {
	// What is measured is the frames, not how far a reader under the race
	// detector may lag a burst of output before it is dropped.
	_, c, work := newHostWith(t, func(cfg *sessions.Config) { cfg.BacklogBytes, cfg.BacklogAge = 64<<20, time.Minute })
	ctx := agentdtest.Context(t)
	s, _ := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work, Approval: protocol.ApprovalAll})
	w, _ := subscribe(t, c, protocol.SubscriptionOpenInput{SessionID: s.SessionID})
	if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: "t1", Content: protocol.Content{Text: "run `seq 1 1000000`"}}); err != nil {
		t.Fatal(err)
	}
	var output int
	var queried bool
	for {
		d, _, err := nextDelta(ctx, w)
		if errors.Is(err, context.DeadlineExceeded) || err != nil {
			t.Fatalf("after %d bytes of output: %v", output, err)
		}
		if d.Event == protocol.EventToolCallUpdate {
			output += len(d.ToolCall.Output) + int(d.Skipped)
			if !queried {
				// The subscriber may lag the turn: it runs, or has just ended.
				turn, err := client.Call(ctx, c, protocol.OpTurnQuery, protocol.TurnRef{SessionID: s.SessionID, TurnID: "t1"})
				if err != nil ||
					turn.Status != protocol.TurnRunning && turn.Status != protocol.TurnCompleted {
					t.Fatalf("turn.query while the output streams: %+v %v", turn, err)
				}
				queried = true
			}
		}
		if d.Event == protocol.EventRunEnd {
			if d.Turn.Status != protocol.TurnCompleted {
				t.Fatalf("turn ended %+v", d.Turn)
			}
			break
		}
	}
	const printed = 6888896 // the bytes `seq 1 1000000` prints
	if output != printed {
		t.Fatalf("the subscriber got %d bytes of output, want %d", output, printed)
	}
}

// TestAClientThatAttachesMidToolCallSeesTheCallAndItsOutput: the snapshot
// of a subscription opened while a command runs holds the call and the
// tail of what it printed, and the subscription's updates continue it.
func TestAClientThatAttachesMidToolCallSeesTheCallAndItsOutput(t *testing.T) {
	_, c, work := newHost(t, time.Hour)
	ctx := agentdtest.Context(t)
	s, _ := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work, Approval: protocol.ApprovalAll})
	first, _ := subscribe(t, c, protocol.SubscriptionOpenInput{SessionID: s.SessionID})
	if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: "t1", Content: protocol.Content{Text: "run `echo started; while [ ! -e go-on ]; do sleep 0.05; done; echo finished`"}}); err != nil {
		t.Fatal(err)
	}
	for {
		d, _, err := nextDelta(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		if d.Event == protocol.EventToolCallUpdate && strings.Contains(d.ToolCall.Output, "started") {
			break
		}
	}
	late, snap := subscribe(t, c, protocol.SubscriptionOpenInput{SessionID: s.SessionID})
	if len(snap.ToolCalls) != 1 || snap.ToolCalls[0].Name != "bash" || !strings.Contains(snap.ToolCalls[0].Output, "started") ||
		!strings.Contains(string(snap.ToolCalls[0].Arguments), "finished") {
		t.Fatalf("a late subscriber's snapshot holds tool calls %+v", snap.ToolCalls)
	}
	// The command finishes once the late subscriber has its snapshot.
	if err := os.WriteFile(filepath.Join(work, "go-on"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	pr := protocol.NewProjector(snap)
	for {
		d, _, err := nextDelta(ctx, late)
		if err != nil {
			t.Fatal(err)
		}
		pr.Apply(d)
		if d.Event == protocol.EventToolCallUpdate {
			if got := pr.Projection().ToolCalls; len(got) != 1 || !strings.Contains(got[0].Output, "started\nfinished") {
				t.Fatalf("the running call after an update: %+v", got)
			}
		}
		if d.Event == protocol.EventRunEnd {
			break
		}
	}
	if got := pr.Projection().ToolCalls; len(got) != 0 {
		t.Fatalf("tool calls after the turn: %+v", got)
	}
}

// TestManySubscriptionsOnOneConnectionNeverOverfillIt: forty subscriptions
// of one connection that stops reading while the session streams output;
// each would hand the connection a batch, more together than its queue
// may hold. They hold back instead, and once the client reads again every
// subscription has every delta, its output whole or skipped ahead (and
// saying how much), on the same connection.
func TestManySubscriptionsOnOneConnectionNeverOverfillIt(t *testing.T) {
	h, c, work := newHostWith(t, func(cfg *sessions.Config) { cfg.BacklogBytes, cfg.BacklogAge = 64<<20, time.Minute })
	ctx := agentdtest.Context(t)
	s, _ := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work, Approval: protocol.ApprovalAll})
	rc := dialRaw(t, h.Endpoint())
	const n = 40
	ids := map[string]bool{}
	for i := range n {
		rc.send(fmt.Sprintf(`{"requestId":"open-%d","operation":"subscription.open","input":{"sessionId":%q,"transcript":{"kind":"none"}}}`, i, s.SessionID))
		var res protocol.SubscriptionOpenResult
		json.Unmarshal(rc.next().Result, &res)
		ids[res.SubscriptionID] = true
		rc.send(fmt.Sprintf(`{"requestId":"ready-%d","operation":"subscription.ready","input":{"subscriptionId":%q}}`, i, res.SubscriptionID))
		if f := rc.next(); !f.OK {
			t.Fatalf("ready: %+v", f)
		}
	}
	// The client reads nothing while the turn prints about 600 KB.
	if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: "t1", Content: protocol.Content{Text: "run `seq 1 100000`"}}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the turn to end", func() bool {
		turn, _ := client.Call(ctx, c, protocol.OpTurnQuery, protocol.TurnRef{SessionID: s.SessionID, TurnID: "t1"})
		return turn.Status == protocol.TurnCompleted
	})
	output := map[string]int{}
	ended := 0
	for ended < n {
		f := rc.next()
		if f.Kind == protocol.KindSubscriptionClosed {
			t.Fatalf("%s closed: %s", f.SubscriptionID, f.Reason)
		}
		if !ids[f.SubscriptionID] {
			continue
		}
		var d protocol.SessionDelta
		json.Unmarshal(f.Delta, &d)
		if d.Event == protocol.EventToolCallUpdate {
			output[f.SubscriptionID] += len(d.ToolCall.Output) + int(d.Skipped)
		}
		if d.Event == protocol.EventRunEnd {
			ended++
		}
	}
	// Each has every byte, or the count of those it skipped.
	const printed = 588895 // the bytes `seq 1 100000` prints
	for id := range ids {
		if output[id] != printed {
			t.Fatalf("%s got %d bytes of output, want %d", id, output[id], printed)
		}
	}
	rc.send(`{"requestId":"alive","operation":"host.status","input":{}}`)
	for f := rc.next(); f.RequestID != "alive"; f = rc.next() {
	}
}
