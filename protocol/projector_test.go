package protocol_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/protocol"
)

// TestAProjectorFollowsATurnAsASubscriberDoes: a snapshot and the turn's
// deltas add up to the state the worker holds at each point.
func TestAProjectorFollowsATurnAsASubscriberDoes(t *testing.T) {
	pr := protocol.NewProjector(protocol.SessionProjection{Session: protocol.Session{SessionID: "s1", Status: protocol.SessionIdle}})
	turn := &protocol.TurnSnapshot{SessionID: "s1", TurnID: "t1", RunID: "run-t1", Status: protocol.TurnRunning}
	apply := func(ds ...protocol.SessionDelta) {
		for _, d := range ds {
			pr.Apply(d)
		}
	}
	apply(
		protocol.SessionDelta{Event: protocol.EventEntryAdded, TurnID: "t1", Entry: json.RawMessage(`{"seq":1,"type":"turn_start","data":{}}`)},
		protocol.SessionDelta{Event: protocol.EventRunStart, TurnID: "t1", Turn: turn},
		protocol.SessionDelta{Event: protocol.EventMessageStart, TurnID: "t1", MessageID: "m1"},
		protocol.SessionDelta{Event: protocol.EventMessageUpdate, TurnID: "t1", MessageID: "m1", Text: "Hel"},
		protocol.SessionDelta{Event: protocol.EventMessageUpdate, TurnID: "t1", MessageID: "m1", Text: "lo", Thinking: "hm"},
		protocol.SessionDelta{Event: protocol.EventToolCallStart, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Arguments: json.RawMessage(`{"command":"yes"}`)}},
	)
	big := strings.Repeat("y\n", protocol.MaxRunningOutput)
	for range 3 {
		apply(protocol.SessionDelta{Event: protocol.EventToolCallUpdate, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Output: big}})
	}
	apply(protocol.SessionDelta{Event: protocol.EventToolCallUpdate, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Output: "last line\n"}})
	p := pr.Projection()
	if p.RootTurn == nil || p.RootTurn.Status != protocol.TurnRunning || p.TranscriptSequence != 1 {
		t.Fatalf("turn %+v at record %d", p.RootTurn, p.TranscriptSequence)
	}
	if len(p.Streams) != 1 || p.Streams[0].Text != "Hello" || p.Streams[0].Thinking != "hm" {
		t.Fatalf("streams %+v", p.Streams)
	}
	if len(p.ToolCalls) != 1 || p.ToolCalls[0].Name != "bash" || len(p.ToolCalls[0].Output) > protocol.MaxRunningOutput ||
		!strings.HasSuffix(p.ToolCalls[0].Output, "y\nlast line\n") {
		t.Fatalf("tool calls %d, output of %d bytes ending %q", len(p.ToolCalls), len(p.ToolCalls[0].Output), p.ToolCalls[0].Output[len(p.ToolCalls[0].Output)-20:])
	}
	// A snapshot taken now starts another projector at the same place.
	again := protocol.NewProjector(p)
	ended := *turn
	ended.Status = protocol.TurnCompleted
	for _, x := range []*protocol.Projector{pr, again} {
		x.Apply(protocol.SessionDelta{Event: protocol.EventToolCallEnd, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash"}})
		x.Apply(protocol.SessionDelta{Event: protocol.EventMessageEnd, TurnID: "t1", MessageID: "m1"})
		x.Apply(protocol.SessionDelta{Event: protocol.EventRunEnd, TurnID: "t1", Turn: &ended})
		got := x.Projection()
		if len(got.Streams) != 0 || len(got.ToolCalls) != 0 || got.RootTurn.Status != protocol.TurnCompleted {
			t.Fatalf("after the turn: %+v", got)
		}
		if got.Streams == nil || got.ToolCalls == nil || got.Interactions == nil || got.Todo == nil {
			t.Fatalf("empty lists must encode as [], not null: %+v", got)
		}
	}
	// The projection it hands out is its own.
	p.Streams[0].Text = "changed"
	if pr.Projection().RootTurn == p.RootTurn {
		t.Fatal("projection shares its root turn")
	}
}

// TestADeltaFrameWrapsTheDeltaItWasGiven: the frame a fan-out builds
// around shared delta bytes decodes as the frame its fields say, whatever
// characters they hold.
func TestADeltaFrameWrapsTheDeltaItWasGiven(t *testing.T) {
	delta := []byte(`{"event":"message_update","text":"a \"quoted\" line\n"}`)
	raw := protocol.AppendDeltaFrame(nil, `e"1`, "s1.\\x.2", 42, delta)
	f, err := protocol.DecodeHostFrame(raw)
	if err != nil || f.Kind != protocol.KindSessionDelta {
		t.Fatalf("decoded %+v: %v", f, err)
	}
	var got protocol.SessionDeltaFrame
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.HostEpoch != `e"1` || got.SubscriptionID != "s1.\\x.2" || got.Sequence != 42 || string(got.Delta) != string(delta) {
		t.Fatalf("frame %+v", got)
	}
}

// FuzzProjector: deltas as a worker or a host may send them, in any
// order, however wrong, never make a projector panic, and its projection
// always encodes.
func FuzzProjector(f *testing.F) {
	f.Add([]byte(`{"event":"run_start","turnId":"t1","turn":{"turnId":"t1","status":"running"}}
{"event":"message_start","turnId":"t1","messageId":"m1"}
{"event":"message_update","turnId":"t1","messageId":"m1","text":"hi"}
{"event":"tool_call_start","turnId":"t1","toolCall":{"id":"c1","name":"bash"}}
{"event":"tool_call_update","turnId":"t1","toolCall":{"id":"c1","name":"bash","output":"x"}}
{"event":"entry_added","entry":{"seq":3}}
{"event":"run_end","turnId":"t1","turn":{"turnId":"t1","status":"completed"}}`))
	f.Add([]byte(`{"event":"message_update","messageId":"m9","text":"before its start"}
{"event":"tool_call_end","toolCall":null}
{"event":"queue_changed"}
{"event":"interaction_resolved","interaction":{"interactionId":"i1"}}
{"event":"entry_added","entry":"not a record"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		pr := protocol.NewProjector(protocol.SessionProjection{})
		for _, line := range strings.Split(string(data), "\n") {
			var d protocol.SessionDelta
			if json.Unmarshal([]byte(line), &d) == nil {
				pr.Apply(d)
			}
		}
		p := pr.Projection()
		if _, err := json.Marshal(p); err != nil {
			t.Fatalf("the projection does not encode: %v", err)
		}
		if again := protocol.NewProjector(p).Projection(); len(again.Streams) != len(p.Streams) || len(again.ToolCalls) != len(p.ToolCalls) {
			t.Fatalf("a projector started from a projection holds %d streams and %d calls, not %d and %d",
				len(again.Streams), len(again.ToolCalls), len(p.Streams), len(p.ToolCalls))
		}
	})
}

// TestProjectorsStartedFromOneSnapshotShareNothing: a stream's client and
// a screen each follow the session from the snapshot it opened with; an
// approval resolved in one is resolved in the other, and the snapshot
// still holds it as it was.
func TestProjectorsStartedFromOneSnapshotShareNothing(t *testing.T) {
	asked := func(id string) protocol.Interaction {
		return protocol.Interaction{InteractionID: id, SessionID: "s1", Kind: protocol.InteractionPermission, Prompt: "run bash: " + id, State: protocol.InteractionPending}
	}
	snap := protocol.SessionProjection{
		Session:      protocol.Session{SessionID: "s1", Status: protocol.SessionWaiting},
		Interactions: []protocol.Interaction{asked("i1"), asked("i2")},
		Todo:         []protocol.TodoItem{{Text: "a step", Status: "pending"}},
	}
	a, b := protocol.NewProjector(snap), protocol.NewProjector(snap)
	resolved := asked("i1")
	resolved.State, resolved.Answer = protocol.InteractionAnswered, protocol.AnswerAllow
	for _, pr := range []*protocol.Projector{a, b} {
		pr.Apply(protocol.SessionDelta{Event: protocol.EventInteractionResolved, Interaction: &resolved})
		pr.Apply(protocol.SessionDelta{Event: protocol.EventInteractionAdded, Interaction: new(asked("i3"))})
	}
	for name, pr := range map[string]*protocol.Projector{"first": a, "second": b} {
		ins := pr.Projection().Interactions
		if len(ins) != 2 || ins[0].InteractionID != "i2" || ins[1].InteractionID != "i3" {
			t.Errorf("the %s projector's interactions: %+v", name, ins)
		}
	}
	if len(snap.Interactions) != 2 || snap.Interactions[0].InteractionID != "i1" || snap.Interactions[1].InteractionID != "i2" {
		t.Errorf("the snapshot changed: %+v", snap.Interactions)
	}
}
