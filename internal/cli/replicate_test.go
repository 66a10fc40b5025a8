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
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/protocol"
)

// open connects a Go client to the place's host, starting it as the CLI does.
func (p *place) open(t *testing.T) *client.Conn {
	t.Helper()
	c, _, _, err := client.Open(agentdtest.Context(t), client.OpenOptions{Activation: client.ActivationOptions{
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
	var open protocol.SubscriptionOpenResult
	if err := c.Request(ctx, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: session, Transcript: protocol.TranscriptBootstrap{Kind: "none"}}, &open); err != nil {
		t.Fatal(err)
	}
	var snap protocol.SessionProjection
	json.Unmarshal(open.Snapshot, &snap)
	w := &watcher{w: c.Watch(open.SubscriptionID), ended: map[string]chan struct{}{}}
	if err := c.Request(ctx, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}, nil); err != nil {
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
	var s protocol.Session
	if err := a.Request(ctx, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: p.workDir(), Approval: protocol.ApprovalAll}, &s); err != nil {
		t.Fatal(err)
	}
	wa, _ := subscribe(t, a, s.SessionID)
	wb, _ := subscribe(t, b, s.SessionID)
	for i, prompt := range []string{"run `echo one`", "say hello"} {
		turn := fmt.Sprintf("turn-%d", i)
		if err := a.Request(ctx, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: turn, Content: protocol.Content{Text: prompt}}, nil); err != nil {
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
	var again protocol.TurnStartResult
	if err := b.Request(ctx, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: "turn-1", Content: protocol.Content{Text: "say hello"}}, &again); err != nil || again.Kind != "existing" {
		t.Fatalf("retried turn.start: %+v %v", again, err)
	}
}

func TestModelsServiceAcrossConcurrentClients(t *testing.T) {
	p := newSessionPlace(t)
	a, b := p.open(t), p.open(t)
	ctx := agentdtest.Context(t)
	var list protocol.ModelsListResult
	if err := b.Request(ctx, protocol.OpModelsList, nil, &list); err != nil {
		t.Fatal(err)
	}
	if list.Default == nil || list.Default.Provider != "faux" {
		t.Fatalf("default model %+v, want faux's", list.Default)
	}
	fauxModels := 0
	for _, m := range list.Models {
		if m.Provider == "faux" {
			fauxModels++
		}
	}
	if fauxModels == 0 {
		t.Fatalf("models %+v lack faux", list.Models)
	}
	var chosen string
	for _, m := range list.Models {
		if m.Unavailable == "" {
			chosen = m.Provider + "/" + m.ModelID // the last that can run
		}
	}
	if err := a.Request(ctx, protocol.OpModelsSelect, protocol.ModelsSelectInput{Model: chosen}, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Request(ctx, protocol.OpModelsList, nil, &list); err != nil {
		t.Fatal(err)
	}
	if list.Default == nil || list.Default.Provider+"/"+list.Default.ModelID != chosen {
		t.Fatalf("the other client sees default %+v, want %s", list.Default, chosen)
	}
	var s protocol.Session
	if err := b.Request(ctx, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: p.workDir()}, &s); err != nil {
		t.Fatal(err)
	}
	if s.Model != chosen {
		t.Fatalf("a new session got %q, want the last selected %q", s.Model, chosen)
	}
	err := a.Request(ctx, protocol.OpModelsSelect, protocol.ModelsSelectInput{Model: "anthropic"}, nil)
	if !errors.Is(err, client.ErrInvalidRequest) || !strings.Contains(err.Error(), "provider requires a model") {
		t.Fatalf("select without a model: %v", err)
	}
}
