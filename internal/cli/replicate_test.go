package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/protocol"
)

// open connects a Go client to the place's host, starting it as the CLI does.
func (p *place) open(t *testing.T) *client.Conn {
	t.Helper()
	c, _, _, err := activation.Open(agentdtest.Context(t), activation.OpenOptions{Activation: activation.Options{
		Home: p.home, RuntimeDir: p.rundir, HostID: p.hostID,
		Command: []string{os.Args[0], "host"}, Env: p.env(),
	}})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// watcher follows one session through a subscription, recording each turn's
// start and end as it sees them.
type watcher struct {
	w      *client.Watcher
	mu     sync.Mutex
	events []string
	ended  map[string]chan struct{}
}

func subscribe(t *testing.T, c *client.Conn, session string) (*watcher, protocol.SessionProjection) {
	t.Helper()
	ctx := agentdtest.Context(t)
	open, err := client.Call(ctx, c, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: session, Transcript: protocol.TranscriptBootstrap{Kind: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	var snap protocol.SessionProjection
	json.Unmarshal(open.Snapshot, &snap)
	w := &watcher{w: c.Watch(open.SubscriptionID), ended: map[string]chan struct{}{}}
	if _, err := client.Call(ctx, c, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			f, err := w.w.Next(context.Background())
			if err != nil {
				return
			}
			var d protocol.SessionDeltaFrame
			var delta protocol.SessionDelta
			if f.Decode(&d) != nil || json.Unmarshal(d.Delta, &delta) != nil {
				continue
			}
			if delta.Event != protocol.EventRunStart && delta.Event != protocol.EventRunEnd {
				continue
			}
			w.mu.Lock()
			w.events = append(w.events, fmt.Sprintf("%s %s %s", delta.Event, delta.Turn.TurnID, delta.Turn.Status))
			if delta.Event == protocol.EventRunEnd {
				w.endedLocked(delta.Turn.TurnID)
				close(w.ended[delta.Turn.TurnID])
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.w.Close(); <-done })
	return w, snap
}

func (w *watcher) endedLocked(turn string) chan struct{} {
	if w.ended[turn] == nil {
		w.ended[turn] = make(chan struct{})
	}
	return w.ended[turn]
}

func (w *watcher) waitEnd(t *testing.T, turn string) {
	w.mu.Lock()
	ch := w.endedLocked(turn)
	w.mu.Unlock()
	waitCh(t, ch, "turn "+turn+" ended")
}

func waitCh(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	ctx := agentdtest.Context(t)
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatalf("timed out: %s", what)
	}
}

func TestClientsReplicateTurnStateAcrossConsecutivePrompts(t *testing.T) {
	p := newSessionPlace(t)
	a, b := p.open(t), p.open(t)
	ctx := agentdtest.Context(t)
	s, err := client.Call(ctx, a, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: p.workDir(), Approval: protocol.ApprovalAll})
	if err != nil {
		t.Fatal(err)
	}
	wa, _ := subscribe(t, a, s.SessionID)
	wb, _ := subscribe(t, b, s.SessionID)
	for i, prompt := range []string{"run `echo one`", "say hello"} {
		turn := fmt.Sprintf("turn-%d", i)
		if _, err := client.Call(ctx, a, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: turn, Content: protocol.Content{Text: prompt}}); err != nil {
			t.Fatal(err)
		}
		wa.waitEnd(t, turn)
		wb.waitEnd(t, turn)
	}
	if fmt.Sprint(wa.events) != fmt.Sprint(wb.events) {
		t.Fatalf("clients saw different turns:\n%v\n%v", wa.events, wb.events)
	}
	want := "[run_start turn-0 running run_end turn-0 completed run_start turn-1 running run_end turn-1 completed]"
	if fmt.Sprint(wa.events) != want {
		t.Fatalf("turns %v, want %s", wa.events, want)
	}
	// A third client attaching now sees the same state.
	_, snap := subscribe(t, p.open(t), s.SessionID)
	if snap.RootTurn == nil || snap.RootTurn.TurnID != "turn-1" || snap.RootTurn.Status != protocol.TurnCompleted {
		t.Fatalf("late snapshot %+v", snap.RootTurn)
	}
	// The same turn id twice starts one turn.
	again, err := client.Call(ctx, b, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: "turn-1", Content: protocol.Content{Text: "say hello"}})
	if err != nil || again.Kind != "existing" {
		t.Fatalf("retried turn.start: %+v %v", again, err)
	}
}

// modelsView follows one session's model and thinking level as one client
// sees them: its subscription's snapshot, then every session_changed.
type modelsView struct {
	mu      sync.Mutex
	state   protocol.ModelSelection // guarded by mu
	changed chan struct{}           // guarded by mu: closed and replaced at each change
}

func watchModels(t *testing.T, c *client.Conn, session string) *modelsView {
	t.Helper()
	ctx := agentdtest.Context(t)
	open, err := client.Call(ctx, c, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: session, Transcript: protocol.TranscriptBootstrap{Kind: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	var snap protocol.SessionProjection
	if err := json.Unmarshal(open.Snapshot, &snap); err != nil {
		t.Fatal(err)
	}
	v := &modelsView{state: protocol.ModelSelection{Model: snap.Session.Model, Thinking: snap.Session.Thinking}, changed: make(chan struct{})}
	w := c.Watch(open.SubscriptionID)
	if _, err := client.Call(ctx, c, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			f, err := w.Next(context.Background())
			if err != nil {
				return
			}
			var d protocol.SessionDeltaFrame
			var delta protocol.SessionDelta
			if f.Decode(&d) != nil || json.Unmarshal(d.Delta, &delta) != nil || delta.Event != protocol.EventSessionChanged || delta.Session == nil {
				continue
			}
			v.mu.Lock()
			v.state = protocol.ModelSelection{Model: delta.Session.Model, Thinking: delta.Session.Thinking}
			close(v.changed)
			v.changed = make(chan struct{})
			v.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Close(); <-done })
	return v
}

func (v *modelsView) get() protocol.ModelSelection {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.state
}

// waitFor waits until the view shows want.
func (v *modelsView) waitFor(t *testing.T, who string, want protocol.ModelSelection) {
	t.Helper()
	ctx := agentdtest.Context(t)
	for {
		v.mu.Lock()
		got, changed := v.state, v.changed
		v.mu.Unlock()
		if got == want {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("%s sees %+v, want %+v", who, got, want)
		}
	}
}

func TestModelsServiceAcrossConcurrentClients(t *testing.T) {
	p := newSessionPlace(t)
	// A key configures anthropic: its first model becomes the host's
	// default and its others can be selected. No turn runs, so nothing
	// calls it.
	p.extraEnv = append(append(p.extraEnv, noKeys...), "ANTHROPIC_API_KEY=sk-ant-test-not-a-key")
	a, b := p.open(t), p.open(t)
	ctx := agentdtest.Context(t)
	s, err := client.Call(ctx, a, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: p.workDir()})
	if err != nil {
		t.Fatal(err)
	}
	first := watchModels(t, a, s.SessionID)
	pid := workerPID(t, p, s.SessionID)
	second := watchModels(t, b, s.SessionID)
	if got := workerPID(t, p, s.SessionID); got != pid {
		t.Fatalf("the second client reached worker %d, the first %d", got, pid)
	}
	state := first.get()
	if state.Model != "anthropic/claude-sonnet-4-5" {
		t.Fatalf("the session's model %q, want the host's default anthropic/claude-sonnet-4-5", state.Model)
	}
	if got := second.get(); got != state {
		t.Fatalf("the second client hydrated %+v, the first %+v", got, state)
	}

	// One client changes the session's thinking level; both follow.
	level := "high"
	if state.Thinking == level {
		level = "low"
	}
	sel, err := client.Call(ctx, a, protocol.OpModelsThinkingSet, protocol.ThinkingSetInput{SessionID: s.SessionID, Level: level})
	if err != nil {
		t.Fatal(err)
	}
	state.Thinking = level
	if sel != (protocol.ModelSelection{SessionID: s.SessionID, Model: state.Model, Thinking: level}) {
		t.Fatalf("thinking set answered %+v", sel)
	}
	first.waitFor(t, "the client that set the thinking level", state)
	second.waitFor(t, "the other client", state)

	// The other selects the session's model; both follow, and the model
	// of new sessions stays.
	got, err := client.Call(ctx, b, protocol.OpModelsSelect, protocol.ModelsSelectInput{SessionID: s.SessionID, Model: "anthropic/claude-opus-4-6"})
	sel = got
	if err != nil {
		t.Fatal(err)
	}
	state.Model = "anthropic/claude-opus-4-6"
	second.waitFor(t, "the client that selected the model", state)
	first.waitFor(t, "the other client", state)
	list, err := client.Call(ctx, a, protocol.OpModelsList, protocol.ModelsListInput{})
	if err != nil {
		t.Fatal(err)
	}
	if list.Default == nil || list.Default.Provider+"/"+list.Default.ModelID != "anthropic/claude-sonnet-4-5" {
		t.Fatalf("a session's model changed the default for new sessions to %+v", list.Default)
	}
	if got := workerPID(t, p, s.SessionID); got != pid {
		t.Fatalf("the session moved to worker %d from %d", got, pid)
	}
	_, err = client.Call(ctx, a, protocol.OpModelsSelect, protocol.ModelsSelectInput{Model: "anthropic"})
	if !errors.Is(err, client.ErrInvalidRequest) || !strings.Contains(err.Error(), "provider requires a model") {
		t.Fatalf("select without a model: %v", err)
	}
}
