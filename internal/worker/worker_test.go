package worker_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/internal/provider"
	"github.com/agentd-dev/agentd/internal/provider/faux"
	"github.com/agentd-dev/agentd/internal/tools"
	"github.com/agentd-dev/agentd/internal/transcript"
	"github.com/agentd-dev/agentd/internal/worker"
	"github.com/agentd-dev/agentd/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type running struct {
	conn       *link.Conn
	transcript string
	cwd        string
	cancel     context.CancelFunc
	done       chan error
}

// start runs a worker in this process on a real socket, with the faux
// model (scripted when script is set), and connects to it as its host does.
func start(t *testing.T, approval, script, previousExit string, transcriptPath string) *running {
	t.Helper()
	reg := provider.NewRegistry()
	if script != "" {
		s, err := faux.ParseScript([]byte(script))
		if err != nil {
			t.Fatal(err)
		}
		reg.Register(faux.NewScripted(s))
	} else {
		f, _ := faux.New(faux.Config{})
		reg.Register(f)
	}
	return startWorker(t, worker.Config{
		Session:        protocol.Session{Model: "faux/echo"},
		Approval:       approval,
		TranscriptPath: transcriptPath,
		Providers:      reg,
		PreviousExit:   previousExit,
	})
}

// startWorker runs a worker of session s1 in this process on a real
// socket, and connects to it as its host does. What cfg leaves empty is
// filled in: a home and a socket in a directory of the test's, the
// session's cwd in another (the sandbox of its commands hides the first),
// and the builtin tools.
func startWorker(t *testing.T, cfg worker.Config) *running {
	t.Helper()
	dir := agentdtest.ShortDir(t)
	cfg.Home = dir
	cfg.Session.SessionID = "s1"
	if cfg.Session.Cwd == "" {
		cfg.Session.Cwd = t.TempDir()
	}
	if cfg.TranscriptPath == "" {
		cfg.TranscriptPath = filepath.Join(dir, "transcript.jsonl")
	}
	if cfg.Tools == nil {
		cfg.Tools = tools.Builtin()
	}
	cfg.SocketPath = filepath.Join(dir, "w.sock")
	r := &running{transcript: cfg.TranscriptPath, cwd: cfg.Session.Cwd, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- worker.Run(ctx, cfg) }()
	deadline := time.Now().Add(agentdtest.Timeout)
	for {
		c, err := link.Dial(agentdtest.Context(t), cfg.SocketPath)
		if err == nil {
			if st, err := c.Status(agentdtest.Context(t)); err == nil && st.State == protocol.StateReady {
				r.conn = c
				break
			}
			c.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker not ready: %v", err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) {
	if r.cancel == nil {
		return
	}
	r.conn.Close()
	r.cancel()
	r.cancel = nil
	if err := <-r.done; err != nil {
		t.Errorf("worker: %v", err)
	}
}

// follow subscribes and returns a channel of deltas.
func follow(t *testing.T, c *link.Conn) <-chan protocol.SessionDelta {
	t.Helper()
	ctx := agentdtest.Context(t)
	open, err := link.Call(ctx, c, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: "s1", Transcript: protocol.TranscriptBootstrap{Kind: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	w := c.Stream(open.SubscriptionID)
	if _, err := link.Call(ctx, c, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}); err != nil {
		t.Fatal(err)
	}
	out := make(chan protocol.SessionDelta, 4096)
	go func() {
		defer close(out)
		for {
			f, err := w.Next(context.Background())
			if err != nil {
				return
			}
			var fr protocol.SessionDeltaFrame
			var d protocol.SessionDelta
			if json.Unmarshal(f.Raw, &fr) == nil && json.Unmarshal(fr.Delta, &d) == nil {
				out <- d
			}
		}
	}()
	return out
}

// failedWith reports whether err is the worker's failed response of code.
func failedWith(err error, code protocol.Code) bool {
	var re *link.RemoteError
	return errors.As(err, &re) && re.Code == code
}

// dialAsTool connects to the worker's socket as a client that is not a
// host does, a tool or a bench, runs the handshake and makes one call of
// session s1, as a host's first call would attach it.
func dialAsTool(t *testing.T, sock string) {
	t.Helper()
	nc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	hello, _ := json.Marshal(protocol.Hello{
		Kind: protocol.KindHello, ClientInstanceID: "tool", ProtocolMin: protocol.ProtocolVersion, ProtocolMax: protocol.ProtocolVersion,
		CompatibilityEpoch: protocol.CompatibilityEpoch, CompositionID: link.CompositionWorker, Surface: protocol.SurfaceSDK,
	})
	if _, err := nc.Write(append(hello, '\n')); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(nc)
	line, err := lines.ReadBytes('\n')
	if err != nil || !bytes.Contains(line, []byte(`"kind":"accepted"`)) {
		t.Fatalf("a tool's handshake with the worker: %s, %v", line, err)
	}
	// A call, which from a host's connection would attach it.
	if _, err := nc.Write([]byte(`{"requestId":"t1","operation":"session.todo.query","input":{"sessionId":"s1"}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if line, err = lines.ReadBytes('\n'); err != nil || !bytes.Contains(line, []byte(`"ok":true`)) {
		t.Fatalf("a tool's call to the worker was answered %s, %v", line, err)
	}
}

func until(t *testing.T, deltas <-chan protocol.SessionDelta, pred func(protocol.SessionDelta) bool) []protocol.SessionDelta {
	t.Helper()
	var seen []protocol.SessionDelta
	timeout := time.After(agentdtest.Timeout)
	for {
		select {
		case d, ok := <-deltas:
			if !ok {
				t.Fatalf("stream ended; saw %d deltas", len(seen))
			}
			seen = append(seen, d)
			if pred(d) {
				return seen
			}
		case <-timeout:
			t.Fatalf("timed out; saw %+v", seen)
		}
	}
}

func runEnd(id string) func(protocol.SessionDelta) bool {
	return func(d protocol.SessionDelta) bool {
		return d.Event == protocol.EventRunEnd && d.Turn != nil && d.Turn.TurnID == id
	}
}

func startTurn(t *testing.T, c *link.Conn, id, text string) protocol.TurnStartResult {
	t.Helper()
	res, err := link.Call(agentdtest.Context(t), c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: "s1", TurnID: id, Content: protocol.Content{Text: text}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// startBusy starts a worker whose model first runs `sleep 30` with bash,
// then gives replies, starts turn t1 and returns once the sleep runs: t1
// runs until it is stopped.
func startBusy(t *testing.T, replies ...string) (*running, <-chan protocol.SessionDelta) {
	t.Helper()
	busy := `{"steps":[{"tool":"bash","arguments":{"command":"sleep 30"}}]}`
	r := start(t, protocol.ApprovalAll, `{"replies":[`+strings.Join(append([]string{busy}, replies...), ",")+`]}`, "", "")
	deltas := follow(t, r.conn)
	startTurn(t, r.conn, "t1", "go")
	until(t, deltas, func(d protocol.SessionDelta) bool { return d.Event == protocol.EventToolCallStart })
	return r, deltas
}

func TestTurnStreamsEventsAndIsRecorded(t *testing.T) {
	r := start(t, protocol.ApprovalAll, "", "", "")
	deltas := follow(t, r.conn)
	startTurn(t, r.conn, "t1", "run `echo worker-test`")
	seen := until(t, deltas, runEnd("t1"))
	last := seen[len(seen)-1]
	if last.Turn.Status != protocol.TurnCompleted {
		t.Fatalf("turn %+v", last.Turn)
	}
	var sawOutput bool
	for _, d := range seen {
		if d.Event == protocol.EventToolCallEnd && strings.Contains(d.ToolCall.Output, "worker-test") {
			sawOutput = true
		}
	}
	if !sawOutput {
		t.Fatal("no tool output streamed")
	}
	// The same turn id again is the same turn.
	if res := startTurn(t, r.conn, "t1", "run `echo worker-test`"); res.Kind != "existing" {
		t.Fatalf("second start: %+v", res)
	}
	r.stop(t)
	c, err := transcript.ReadAll(r.transcript)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, rec := range c.Records {
		types = append(types, rec.Type)
	}
	if got := strings.Join(types, " "); got != "turn_start user_message assistant_message tool_results assistant_message turn_end" {
		t.Fatalf("records %s", got)
	}
}

func TestAskPolicyWaitsForAnAnswerAndTheFirstAnswerWins(t *testing.T) {
	r := start(t, protocol.ApprovalAsk, "", "", "")
	deltas := follow(t, r.conn)
	startTurn(t, r.conn, "t1", "run `echo approved`")
	seen := until(t, deltas, func(d protocol.SessionDelta) bool { return d.Event == protocol.EventInteractionAdded })
	in := seen[len(seen)-1].Interaction
	ctx := agentdtest.Context(t)
	pending, err := link.Call(ctx, r.conn, protocol.OpInteractionQuery, protocol.SessionRef{SessionID: "s1"})
	if err != nil || len(pending.Pending) != 1 {
		t.Fatalf("pending %+v %v", pending, err)
	}
	if _, err := link.Call(ctx, r.conn, protocol.OpInteractionAnswer, protocol.InteractionAnswerInput{SessionID: "s1", InteractionID: in.InteractionID, Answer: "allow"}); err != nil {
		t.Fatal(err)
	}
	_, err = link.Call(ctx, r.conn, protocol.OpInteractionAnswer, protocol.InteractionAnswerInput{SessionID: "s1", InteractionID: in.InteractionID, Answer: "deny"})
	if !failedWith(err, protocol.CodeNotFound) {
		t.Fatalf("second answer: %v", err)
	}
	seen = until(t, deltas, runEnd("t1"))
	var ran bool
	for _, d := range seen {
		if d.Event == protocol.EventToolCallEnd && strings.Contains(d.ToolCall.Output, "approved") {
			ran = true
		}
	}
	if !ran {
		t.Fatal("the approved command did not run")
	}
}

func TestStopInterruptAndQueuedFollowUp(t *testing.T) {
	r, deltas := startBusy(t, `{"steps":[{"text":"follow-up answered"}]}`)
	ctx := agentdtest.Context(t)
	entry, err := link.Call(ctx, r.conn, protocol.OpTurnMessageSubmit, protocol.MessageSubmitInput{SessionID: "s1", MessageID: "m2", Content: protocol.Content{Text: "then this"}, Placement: protocol.PlacementNextTurn})
	if err != nil || entry.State != protocol.QueueQueued {
		t.Fatalf("submit: %+v %v", entry, err)
	}
	_, conflict := link.Call(ctx, r.conn, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: "s1", TurnID: "t-other", Content: protocol.Content{Text: "x"}})
	if !failedWith(conflict, protocol.CodeOperationConflict) {
		t.Fatalf("a second turn while one runs: %v", conflict)
	}
	if _, err := link.Call(ctx, r.conn, protocol.OpTurnInterrupt, protocol.TurnRef{SessionID: "s1", TurnID: "t1"}); err != nil {
		t.Fatal(err)
	}
	seen := until(t, deltas, runEnd("t1"))
	if st := seen[len(seen)-1].Turn.Status; st != protocol.TurnInterrupted {
		t.Fatalf("interrupted turn ended %q", st)
	}
	seen = until(t, deltas, runEnd("tm2"))
	if st := seen[len(seen)-1].Turn.Status; st != protocol.TurnCompleted {
		t.Fatalf("queued turn ended %q", st)
	}
}

func TestRunningTurnIsRecordedInterruptedWhenTheWorkerStops(t *testing.T) {
	r, _ := startBusy(t)
	r.stop(t)
	c, err := transcript.ReadAll(r.transcript)
	if err != nil {
		t.Fatal(err)
	}
	last := c.Records[len(c.Records)-1]
	if last.Type != "turn_end" || !strings.Contains(string(last.Data), protocol.TurnInterrupted) {
		t.Fatalf("last record %s %s", last.Type, last.Data)
	}
}

func TestATurnLeftRunningByADeadWorkerIsRecordedFailed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "transcript.jsonl")
	log, err := transcript.Open(path, transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log.Append("turn_start", "t1", map[string]string{"runId": "run-t1", "text": "hi"})
	log.Append("user_message", "t1", map[string]string{"text": "hi"})
	log.Close()
	r := start(t, protocol.ApprovalAll, "", "worker exited: signal 9", path)
	snap, err := link.Call(agentdtest.Context(t), r.conn, protocol.OpTurnQuery, protocol.TurnRef{SessionID: "s1", TurnID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Status != protocol.TurnFailed || snap.Error != "worker exited: signal 9" {
		t.Fatalf("recovered turn %+v", snap)
	}
}

func TestQueuedMessageCanBeRetractedBeforeItIsDelivered(t *testing.T) {
	r, deltas := startBusy(t)
	ctx := agentdtest.Context(t)
	entry, err := link.Call(ctx, r.conn, protocol.OpTurnMessageSubmit, protocol.MessageSubmitInput{SessionID: "s1", MessageID: "m2", Content: protocol.Content{Text: "later"}, Placement: protocol.PlacementNextTurn})
	if err != nil {
		t.Fatal(err)
	}
	again, err := link.Call(ctx, r.conn, protocol.OpTurnMessageSubmit, protocol.MessageSubmitInput{SessionID: "s1", MessageID: "m2", Content: protocol.Content{Text: "later"}, Placement: protocol.PlacementNextTurn})
	if err != nil || again.EntryID != entry.EntryID {
		t.Fatalf("resubmitted message: %+v %v", again, err)
	}
	out, err := link.Call(ctx, r.conn, protocol.OpQueueRetract, protocol.QueueRetractInput{SessionID: "s1", EntryID: entry.EntryID})
	if err != nil || out.State != protocol.QueueRetracted {
		t.Fatalf("retract: %+v %v", out, err)
	}
	if _, err := link.Call(ctx, r.conn, protocol.OpQueueRetract, protocol.QueueRetractInput{SessionID: "s1", EntryID: entry.EntryID}); !failedWith(err, protocol.CodeNotFound) {
		t.Fatalf("second retract: %v", err)
	}
	got, err := link.Call(ctx, r.conn, protocol.OpTurnMessageSubmit, protocol.MessageSubmitInput{SessionID: "s1", MessageID: "m2", Content: protocol.Content{Text: "later"}, Placement: protocol.PlacementNextTurn})
	again = got
	if err != nil || again.State != protocol.QueueRetracted {
		t.Fatalf("a retracted message resubmitted: %+v %v", again, err)
	}
	link.Call(ctx, r.conn, protocol.OpTurnInterrupt, protocol.TurnRef{SessionID: "s1", TurnID: "t1"})
	until(t, deltas, runEnd("t1"))
}

func TestTurnsOfAnEarlierWorkerAreKnownAfterRestart(t *testing.T) {
	r := start(t, protocol.ApprovalAll, "", "", "")
	deltas := follow(t, r.conn)
	startTurn(t, r.conn, "t1", "hello")
	until(t, deltas, runEnd("t1"))
	startTurn(t, r.conn, "t2", "hello again")
	until(t, deltas, runEnd("t2"))
	r.stop(t)
	r2 := start(t, protocol.ApprovalAll, "", "", r.transcript)
	ctx := agentdtest.Context(t)
	snap, err := link.Call(ctx, r2.conn, protocol.OpTurnQuery, protocol.TurnRef{SessionID: "s1", TurnID: "t1"})
	if err != nil || snap.Status != protocol.TurnCompleted {
		t.Fatalf("earlier turn: %+v %v", snap, err)
	}
	if res := startTurn(t, r2.conn, "t2", "hello again"); res.Kind != "existing" {
		t.Fatalf("retried turn after restart: %+v", res)
	}
	got, err := link.Call(ctx, r2.conn, protocol.OpTurnStop, protocol.TurnRef{SessionID: "s1", TurnID: "t1"})
	snap = got
	if err != nil {
		t.Fatalf("stopping a finished turn: %v", err)
	}
}

func TestManySmallDeltasArriveWholeAndInOrder(t *testing.T) {
	script := `{"replies":[{"steps":[{"text":"<"},{"repeat":50000,"text":"x"},{"text":">"}]}]}`
	r := start(t, protocol.ApprovalAll, script, "", "")
	deltas := follow(t, r.conn)
	startTurn(t, r.conn, "t1", "go")
	seen := until(t, deltas, runEnd("t1"))
	var text strings.Builder
	updates := 0
	for _, d := range seen {
		if d.Event == protocol.EventMessageUpdate {
			text.WriteString(d.Text)
			updates++
		}
	}
	if want := "<" + strings.Repeat("x", 50000) + ">"; text.String() != want {
		t.Fatalf("streamed %d bytes in %d updates; want %d bytes in order", text.Len(), updates, len(want))
	}
	if seen[len(seen)-1].Turn.Status != protocol.TurnCompleted {
		t.Fatalf("turn %+v", seen[len(seen)-1].Turn)
	}
}

func TestThePlanSurvivesARestart(t *testing.T) {
	script := `{"replies":[
		{"steps":[{"tool":"todo","arguments":{"items":[{"text":"read the code","status":"done"},{"text":"fix the bug","status":"in_progress"}]}}]},
		{"steps":[{"text":"planned"}]}
	]}`
	r := start(t, protocol.ApprovalAll, script, "", "")
	deltas := follow(t, r.conn)
	startTurn(t, r.conn, "t1", "plan it")
	until(t, deltas, runEnd("t1"))
	r.stop(t)
	r2 := start(t, protocol.ApprovalAll, "", "", r.transcript)
	plan, err := link.Call(agentdtest.Context(t), r2.conn, protocol.OpSessionTodoQuery, protocol.SessionRef{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Items) != 2 || plan.Items[1].Text != "fix the bug" || plan.Items[1].Status != "in_progress" {
		t.Fatalf("plan after restart: %+v", plan.Items)
	}
}

// TestQueuedMessagesOutliveTheWorker: messages queued while a turn ran are
// recorded before they are acknowledged, so the next worker of the session
// knows them: retracted ones stay retracted, steering that missed its turn
// leads the next, and they run in order once a turn ends.
func TestQueuedMessagesOutliveTheWorker(t *testing.T) {
	r, _ := startBusy(t)
	ctx := agentdtest.Context(t)
	submit := func(c *link.Conn, id, placement string) protocol.QueueEntry {
		t.Helper()
		in := protocol.MessageSubmitInput{SessionID: "s1", MessageID: id, Content: protocol.Content{Text: "message " + id}, Placement: placement}
		e, err := link.Call(ctx, c, protocol.OpTurnMessageSubmit, in)
		if err != nil {
			t.Fatalf("submit %s: %v", id, err)
		}
		return e
	}
	m2 := submit(r.conn, "m2", protocol.PlacementNextTurn)
	m3 := submit(r.conn, "m3", protocol.PlacementNextTurn)
	submit(r.conn, "m4", protocol.PlacementSteering)
	if _, err := link.Call(ctx, r.conn, protocol.OpQueueRetract, protocol.QueueRetractInput{SessionID: "s1", EntryID: m3.EntryID}); err != nil {
		t.Fatal(err)
	}
	r.stop(t)

	r2 := start(t, protocol.ApprovalAll, `{"replies":[{"steps":[{"text":"a"}]},{"steps":[{"text":"b"}]},{"steps":[{"text":"c"}]}]}`, "", r.transcript)
	open, err := link.Call(ctx, r2.conn, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: "s1", Transcript: protocol.TranscriptBootstrap{Kind: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	var p protocol.SessionProjection
	if err := json.Unmarshal(open.Snapshot, &p); err != nil {
		t.Fatal(err)
	}
	var queued []string
	for _, e := range append(p.Queue.Steering, p.Queue.FollowUp...) {
		queued = append(queued, e.MessageID+"/"+e.State)
	}
	if got := strings.Join(queued, " "); got != "m4/queued m2/queued" {
		t.Fatalf("queue after restart: %s", got)
	}
	if e := submit(r2.conn, "m2", protocol.PlacementNextTurn); e.EntryID != m2.EntryID || e.State != protocol.QueueQueued {
		t.Fatalf("m2 resubmitted after restart: %+v", e)
	}
	if e := submit(r2.conn, "m3", protocol.PlacementNextTurn); e.State != protocol.QueueRetracted {
		t.Fatalf("m3 resubmitted after restart: %+v", e)
	}

	// Nothing runs in the new worker: a new message queues behind the
	// waiting ones, which start at once, in order.
	deltas2 := follow(t, r2.conn)
	if e := submit(r2.conn, "m5", protocol.PlacementNextTurn); e.State != protocol.QueueQueued {
		t.Fatalf("m5 submitted behind a waiting queue: %+v", e)
	}
	var ended []string
	for len(ended) < 3 {
		seen := until(t, deltas2, func(d protocol.SessionDelta) bool { return d.Event == protocol.EventRunEnd })
		end := seen[len(seen)-1].Turn
		if end.Status != protocol.TurnCompleted {
			t.Fatalf("turn %s ended %s: %s", end.TurnID, end.Status, end.Error)
		}
		ended = append(ended, end.TurnID)
	}
	if got := strings.Join(ended, " "); got != "tm4 tm2 tm5" {
		t.Fatalf("turns after restart: %s", got)
	}
}

// TestDeliveredSteeringIsNotQueuedAgainAfterRestart: the steering message a
// turn took is recorded as delivered, so a later worker does not run it
// again.
func TestDeliveredSteeringIsNotQueuedAgainAfterRestart(t *testing.T) {
	r := start(t, protocol.ApprovalAsk, `{"replies":[{"steps":[{"tool":"bash","arguments":{"command":"true"}}]},{"steps":[{"text":"steered"}]}]}`, "", "")
	deltas := follow(t, r.conn)
	startTurn(t, r.conn, "t1", "go")
	seen := until(t, deltas, func(d protocol.SessionDelta) bool { return d.Event == protocol.EventInteractionAdded })
	in := seen[len(seen)-1].Interaction
	ctx := agentdtest.Context(t)
	steer := protocol.MessageSubmitInput{SessionID: "s1", MessageID: "m2", Content: protocol.Content{Text: "steer"}, Placement: protocol.PlacementSteering}
	if _, err := link.Call(ctx, r.conn, protocol.OpTurnMessageSubmit, steer); err != nil {
		t.Fatal(err)
	}
	if _, err := link.Call(ctx, r.conn, protocol.OpInteractionAnswer, protocol.InteractionAnswerInput{SessionID: "s1", InteractionID: in.InteractionID, Answer: "allow"}); err != nil {
		t.Fatal(err)
	}
	until(t, deltas, runEnd("t1"))
	r.stop(t)

	r2 := start(t, protocol.ApprovalAsk, "", "", r.transcript)
	e, err := link.Call(ctx, r2.conn, protocol.OpTurnMessageSubmit, steer)
	if err != nil || e.State != protocol.QueueDelivered {
		t.Fatalf("the delivered steering message resubmitted: %+v %v", e, err)
	}
	if _, err := link.Call(ctx, r2.conn, protocol.OpTurnQuery, protocol.TurnRef{SessionID: "s1", TurnID: "tm2"}); !failedWith(err, protocol.CodeNotFound) {
		t.Fatalf("the delivered steering message started a turn of its own: %v", err)
	}
	c, err := transcript.ReadAll(r.transcript)
	if err != nil {
		t.Fatal(err)
	}
	var steered bool
	for _, rec := range c.Records {
		steered = steered || rec.Type == "user_message" && strings.Contains(string(rec.Data), `"messageId":"m2"`)
	}
	if !steered {
		t.Fatal("no user_message record delivers m2")
	}
}

// TestAQueuedMessageWaitsWhileTheModelCannotRun: a follow-up whose turn
// cannot start (the session's model was switched to a provider that is not
// configured) stays queued, and runs after the next turn once it can.
func TestAQueuedMessageWaitsWhileTheModelCannotRun(t *testing.T) {
	r, deltas := startBusy(t, `{"steps":[{"text":"t3"}]}`, `{"steps":[{"text":"m2"}]}`)
	ctx := agentdtest.Context(t)
	m2 := protocol.MessageSubmitInput{SessionID: "s1", MessageID: "m2", Content: protocol.Content{Text: "then this"}, Placement: protocol.PlacementNextTurn}
	if _, err := link.Call(ctx, r.conn, protocol.OpTurnMessageSubmit, m2); err != nil {
		t.Fatal(err)
	}
	selectModel := func(model string) {
		t.Helper()
		if _, err := link.Call(ctx, r.conn, protocol.OpModelsSelect, protocol.ModelsSelectInput{SessionID: "s1", Model: model}); err != nil {
			t.Fatal(err)
		}
	}
	selectModel("anthropic/claude-sonnet-4-5")
	if _, err := link.Call(ctx, r.conn, protocol.OpTurnInterrupt, protocol.TurnRef{SessionID: "s1", TurnID: "t1"}); err != nil {
		t.Fatal(err)
	}
	until(t, deltas, runEnd("t1"))
	e, err := link.Call(ctx, r.conn, protocol.OpTurnMessageSubmit, m2)
	if err != nil || e.State != protocol.QueueQueued {
		t.Fatalf("m2 after its turn could not start: %+v %v", e, err)
	}
	selectModel("faux/echo")
	startTurn(t, r.conn, "t3", "now")
	until(t, deltas, runEnd("t3"))
	seen := until(t, deltas, runEnd("tm2"))
	if st := seen[len(seen)-1].Turn.Status; st != protocol.TurnCompleted {
		t.Fatalf("the waiting message's turn ended %q", st)
	}
}

// TestAWorkerIsNoOrphanBeforeItsHostClaimsIt: the orphan grace runs only
// once a host has attached; a worker its host is slow to reach waits.
func TestAWorkerIsNoOrphanBeforeItsHostClaimsIt(t *testing.T) {
	dir := agentdtest.ShortDir(t)
	f, _ := faux.New(faux.Config{})
	reg := provider.NewRegistry()
	reg.Register(f)
	sock := filepath.Join(dir, "w.sock")
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		worker.Run(ctx, worker.Config{
			Home: dir, Session: protocol.Session{SessionID: "s1", Cwd: dir, Model: "faux/echo"},
			SocketPath: sock, TranscriptPath: filepath.Join(dir, "transcript.jsonl"),
			Providers: reg, Tools: tools.Builtin(), OrphanGrace: time.Millisecond,
		})
	}()
	defer func() {
		cancel()
		<-exited
	}()
	// The worker registers as its composition becomes ready.
	for deadline := time.Now().Add(agentdtest.Timeout); ; time.Sleep(2 * time.Millisecond) {
		if _, err := os.Stat(home.WorkerRegistrationPath(dir, "s1")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker did not register")
		}
	}
	select {
	case <-exited:
		t.Fatal("the worker retired before a host reached it")
	case <-time.After(100 * time.Millisecond): // a hundred orphan graces
	}
	c, err := link.Dial(agentdtest.Context(t), sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := link.Call(agentdtest.Context(t), c, protocol.OpSessionGet, protocol.SessionRef{SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
}

// TestAToolAllowedForTheSessionRunsWithoutAskingAgainAfterARestart: the
// answer allow_always runs the call, and the tool's later calls, in this
// worker and the next, run without an interaction.
func TestAToolAllowedForTheSessionRunsWithoutAskingAgainAfterARestart(t *testing.T) {
	r := start(t, protocol.ApprovalAsk, "", "", "")
	deltas := follow(t, r.conn)
	startTurn(t, r.conn, "t1", "run `echo first`")
	seen := until(t, deltas, func(d protocol.SessionDelta) bool { return d.Event == protocol.EventInteractionAdded })
	in := seen[len(seen)-1].Interaction
	ctx := agentdtest.Context(t)
	answered, err := link.Call(ctx, r.conn, protocol.OpInteractionAnswer, protocol.InteractionAnswerInput{SessionID: "s1", InteractionID: in.InteractionID, Answer: protocol.AnswerAllowAlways})
	if err != nil || answered.Answer != protocol.AnswerAllowAlways {
		t.Fatalf("answer: %+v %v", answered, err)
	}
	until(t, deltas, runEnd("t1"))
	asked := func(seen []protocol.SessionDelta) bool {
		for _, d := range seen {
			if d.Event == protocol.EventInteractionAdded {
				return true
			}
		}
		return false
	}
	startTurn(t, r.conn, "t2", "run `echo second`")
	if seen := until(t, deltas, runEnd("t2")); asked(seen) {
		t.Fatal("the allowed tool asked again")
	}
	r.stop(t)
	r2 := start(t, protocol.ApprovalAsk, "", "", r.transcript)
	deltas2 := follow(t, r2.conn)
	startTurn(t, r2.conn, "t3", "run `echo third`")
	seen = until(t, deltas2, runEnd("t3"))
	if asked(seen) {
		t.Fatal("the allowed tool asked again after a restart")
	}
	var ran bool
	for _, d := range seen {
		ran = ran || d.Event == protocol.EventToolCallEnd && strings.Contains(d.ToolCall.Output, "third")
	}
	if !ran {
		t.Fatal("the allowed command did not run")
	}
}

// TestAPageCarriesARecordTooLargeForTheWireWithoutItsData: a record past
// the wire limit still pages, without its data, saying how much was left
// out; the records around it come whole.
func TestAPageCarriesARecordTooLargeForTheWireWithoutItsData(t *testing.T) {
	path := filepath.Join(agentdtest.ShortDir(t), "transcript.jsonl")
	log, err := transcript.Open(path, transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", protocol.MaxMessageBytes)
	for _, rec := range []struct {
		typ  string
		data any
	}{
		{protocol.RecordTurnStart, protocol.TurnStartData{RunID: "run-t1", Text: "big"}},
		{protocol.RecordAssistantMessage, protocol.MessageData{Role: "assistant", Parts: []protocol.MessagePart{{Type: protocol.PartText, Text: big}}}},
		{protocol.RecordTurnEnd, protocol.TurnEndData{Status: protocol.TurnCompleted}},
	} {
		if _, err := log.Append(rec.typ, "t1", rec.data); err != nil {
			t.Fatal(err)
		}
	}
	log.Close()
	r := start(t, protocol.ApprovalAll, "", "", path)
	ctx := agentdtest.Context(t)
	var got []protocol.TranscriptRecord
	in := protocol.TranscriptPageInput{SessionID: "s1", Direction: "older", MaxBytes: 64 << 10}
	for {
		page, err := link.Call(ctx, r.conn, protocol.OpSessionTranscriptPage, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range page.Records {
			var rec protocol.TranscriptRecord
			if err := json.Unmarshal(raw, &rec); err != nil {
				t.Fatal(err)
			}
			got = append(got, rec)
		}
		if page.NextCursor == nil {
			break
		}
		in.Cursor = page.NextCursor
	}
	if len(got) != 3 {
		t.Fatalf("%d records", len(got))
	}
	for _, rec := range got {
		switch rec.Seq {
		case 2:
			if rec.OmittedBytes < protocol.MaxMessageBytes || string(rec.Data) != "null" || rec.Type != protocol.RecordAssistantMessage {
				t.Fatalf("the large record: %+v", rec)
			}
		default:
			if rec.OmittedBytes != 0 || rec.Data == nil {
				t.Fatalf("record %d: %+v", rec.Seq, rec)
			}
		}
	}
}

// A command the agent starts in the background outlives its turn as one
// of the session's runtime resources; a later turn reads its output and
// stops it.
func TestABackgroundRunTheAgentStartsOutlivesItsTurn(t *testing.T) {
	r := start(t, protocol.ApprovalAll, `{"replies":[
		{"steps":[{"tool":"bash","arguments":{"command":"echo serving on 8080; sleep 1000","background":true}}]},
		{"steps":[{"text":"started"}]},
		{"steps":[{"tool":"bash_output","arguments":{"ref":"shell-1"}}]},
		{"steps":[{"text":"it serves"}]},
		{"steps":[{"tool":"bash_stop","arguments":{"ref":"shell-1"}}]},
		{"steps":[{"text":"stopped"}]}
	]}`, "", "")
	deltas := follow(t, r.conn)
	ctx := agentdtest.Context(t)
	toolOutput := func(turn string) string {
		t.Helper()
		var out string
		for _, d := range until(t, deltas, runEnd(turn)) {
			if d.Event == protocol.EventToolCallEnd {
				out += d.ToolCall.Output
			}
		}
		return out
	}
	resources := func() []protocol.Resource {
		t.Helper()
		res, err := link.Call(ctx, r.conn, protocol.OpRuntimeResourceQuery, protocol.ResourceQueryInput{SessionID: "s1"})
		if err != nil {
			t.Fatal(err)
		}
		return res.Resources
	}

	startTurn(t, r.conn, "t1", "start the server")
	if out := toolOutput("t1"); !strings.Contains(out, "started shell-1") {
		t.Fatalf("bash answered %q", out)
	}
	if rs := resources(); len(rs) != 1 || rs[0].State != protocol.ResourceRunning {
		t.Fatalf("after the turn: %+v", rs)
	}
	log := filepath.Join(filepath.Dir(r.transcript), "resources", "shell-1.log")
	for deadline := time.Now().Add(agentdtest.Timeout); ; time.Sleep(5 * time.Millisecond) {
		if b, _ := os.ReadFile(log); strings.Contains(string(b), "serving") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the background run never printed")
		}
	}

	startTurn(t, r.conn, "t2", "is it up?")
	if out := toolOutput("t2"); !strings.Contains(out, "serving on 8080") || !strings.Contains(out, "shell-1 (shell, `echo serving on 8080; sleep 1000`) running") {
		t.Fatalf("bash_output answered %q", out)
	}
	startTurn(t, r.conn, "t3", "stop it")
	if out := toolOutput("t3"); !strings.Contains(out, "stopped shell-1") || !strings.Contains(out, "exited with code 143") {
		t.Fatalf("bash_stop answered %q", out)
	}
	if rs := resources(); rs[0].State != protocol.ResourceExited {
		t.Fatalf("after bash_stop: %+v", rs)
	}
}

// TestAForegroundBashCallIsAShellRunOfTheSession: a bash call the turn
// waits for runs as one of the session's resources: its output streams
// to the turn as it comes and is logged, its end is recorded with its exit
// code, and `agentd ps` lists it after the turn.
func TestAForegroundBashCallIsAShellRunOfTheSession(t *testing.T) {
	r := start(t, protocol.ApprovalAll, "", "", "")
	deltas := follow(t, r.conn)
	// What it leaves running in the background ends with it.
	pids := filepath.Join(r.cwd, "pids")
	startTurn(t, r.conn, "t1", "run `echo first line; sleep 1000 & echo $! > "+pids+"; echo second line; exit 4`")
	var updates, out string
	for _, d := range until(t, deltas, runEnd("t1")) {
		switch {
		case d.Event == protocol.EventToolCallUpdate && d.ToolCall != nil:
			updates += d.ToolCall.Output
		case d.Event == protocol.EventToolCallEnd:
			out = d.ToolCall.Output
		}
	}
	if !strings.Contains(updates, "first line") || !strings.Contains(out, "second line") || !strings.Contains(out, "exit code 4") {
		t.Fatalf("streamed %q, answered %q", updates, out)
	}
	res, err := link.Call(agentdtest.Context(t), r.conn, protocol.OpRuntimeResourceQuery, protocol.ResourceQueryInput{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if rs := res.Resources; len(rs) != 1 || rs[0].Kind != protocol.ResourceShell || rs[0].State != protocol.ResourceExited ||
		rs[0].ExitCode == nil || *rs[0].ExitCode != 4 || !strings.HasPrefix(rs[0].Command, "echo first line") {
		t.Fatalf("the session's resources after the turn: %+v", rs)
	}
	log, err := os.ReadFile(filepath.Join(filepath.Dir(r.transcript), "resources", res.Resources[0].Ref+".log"))
	if err != nil || string(log) != "first line\nsecond line\n" {
		t.Fatalf("the run's log %q, %v", log, err)
	}
	b, _ := os.ReadFile(pids)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("the background pid %q: %v", b, err)
	}
	if proc.Running(pid) {
		t.Fatalf("the sleep the command left running still runs as pid %d", pid)
	}
}

// Seed 002: fences superseded attachment hydration by attachment
// generation. A host's connection supersedes the host connections before
// it: the earlier one is closed, its stream with it, and a subscription it
// asks for (a hydration of the generation it belonged to) is never opened,
// though its request was already on its way when the newer host attached:
// nothing reaches the earlier connection after that.
func TestANewerHostConnectionSupersedesTheEarlierOne(t *testing.T) {
	r := start(t, protocol.ApprovalAsk, "", "", "")
	ctx := agentdtest.Context(t)
	sock := r.conn.Endpoint()
	dialHost := func() *link.Conn {
		c, err := link.Dial(ctx, sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// The first host speaks the protocol itself, so that a request can be
	// on its way, all but its last byte written, while another host
	// attaches.
	first, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	first.SetDeadline(time.Now().Add(agentdtest.Timeout))
	lines := bufio.NewReader(first)
	send := func(v any, end string) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := first.Write(append(b, end...)); err != nil {
			t.Fatal(err)
		}
	}
	send(protocol.Hello{
		Kind: "hello", ClientInstanceID: "first-host", ProtocolMin: protocol.ProtocolVersion, ProtocolMax: protocol.ProtocolVersion,
		CompatibilityEpoch: protocol.CompatibilityEpoch, CompositionID: link.CompositionWorker, Surface: link.SurfaceHost,
	}, "\n")
	if line, err := lines.ReadString('\n'); err != nil || !strings.Contains(line, `"accepted"`) {
		t.Fatalf("the first host's hello was answered %q, %v", line, err)
	}
	// Its first call attaches it as the worker's host.
	send(protocol.Request{RequestID: "r1", Operation: string(protocol.OpSessionTodoQuery), Input: json.RawMessage(`{"sessionId":"s1"}`)}, "\n")
	if line, err := lines.ReadString('\n'); err != nil || !strings.Contains(line, `"ok":true`) {
		t.Fatalf("the first host's call was answered %q, %v", line, err)
	}
	in := protocol.SubscriptionOpenInput{SessionID: "s1", Transcript: protocol.TranscriptBootstrap{Kind: protocol.TranscriptNone}}
	raw, _ := json.Marshal(in)
	send(protocol.Request{RequestID: "r2", Operation: string(protocol.OpSubscriptionOpen), Input: raw}, "")

	second := dialHost()
	if _, err := link.Call(ctx, second, protocol.OpSessionTodoQuery, protocol.SessionRef{SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	// The open's last byte: whether the superseded connection is closed
	// already or not, the open is never answered as opened, and no frame
	// of any kind reaches it.
	first.Write([]byte("\n"))
	rest, err := io.ReadAll(lines)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the superseded host connection stayed open; it read %q", rest)
	}
	if len(rest) > 0 {
		t.Fatalf("the superseded host connection read %q after another host attached", rest)
	}
	// A client that is not a host (a test's, a tool's) supersedes nothing.
	dialAsTool(t, sock)
	if _, err := link.Call(ctx, second, protocol.OpSubscriptionOpen, in); err != nil {
		t.Fatalf("the current host's connection: %v", err)
	}
	if second.Err() != nil {
		t.Fatalf("the current host's connection closed: %v", second.Err())
	}
}
