package tui

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"charm.land/bubbles/v2/textinput"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

// screenModel is a screen on a session with no connection behind it: for
// what the screen does with keys and events alone.
func screenModel(t *testing.T) *model {
	t.Helper()
	snap := protocol.SessionProjection{Session: protocol.Session{SessionID: "s-1", Title: "work", Model: "faux/echo", Status: protocol.SessionIdle}}
	in := textinput.New()
	in.Focus()
	m := &model{
		ctx: context.Background(), in: newInbox(), proj: protocol.NewProjector(snap), feed: NewFeed(0), noOlder: true,
		view: viewport.New(), input: in, render: newRenderer(), follow: true,
		awaited: map[string]*Block{}, skips: map[*Block][]skip{}, inTool: map[*Block][]placedNote{}, placed: map[*Block]bool{},
	}
	m.view.KeyMap = viewport.KeyMap{}
	m.feed.OnChange = m.changed
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	return m
}

// screen is what the screen shows, without its styles, nor the spaces
// that end its lines.
func (m *model) screen() string {
	lines := strings.Split(ansi.Strip(m.View().Content), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

func (m *model) apply(ds ...protocol.SessionDelta) {
	for _, d := range ds {
		m.Update(eventsMsg{evs: []client.FollowEvent{{SessionEvent: client.SessionEvent{Delta: d}}}})
	}
}

func press(m *model, code rune, mod tea.KeyMod, text string) tea.Cmd {
	_, cmd := m.Update(tea.KeyPressMsg{Code: code, Mod: mod, Text: text})
	return cmd
}

func quits(cmd tea.Cmd) bool {
	if cmd == nil {
		return false
	}
	_, ok := cmd().(tea.QuitMsg)
	return ok
}

func TestCtrlBackslashDetachesAtOnce(t *testing.T) {
	m := screenModel(t)
	if !strings.Contains(m.screen(), "ctrl+\\ detach") {
		t.Fatalf("the help line does not name detaching:\n%s", m.screen())
	}
	if !quits(press(m, '\\', tea.ModCtrl, "")) {
		t.Fatal("ctrl+\\ did not detach")
	}
}

// TestCtrlCWarnsFirst: a first ctrl+c only says what a second does; a
// second, with no turn running, detaches; another key in between disarms.
func TestCtrlCWarnsFirst(t *testing.T) {
	m := screenModel(t)
	if quits(press(m, 'c', tea.ModCtrl, "")) {
		t.Fatal("one ctrl+c detached")
	}
	if !strings.Contains(m.screen(), "ctrl+c again detaches") {
		t.Fatalf("no warning:\n%s", m.screen())
	}
	press(m, 'x', 0, "x")
	if quits(press(m, 'c', tea.ModCtrl, "")) {
		t.Fatal("ctrl+c after another key detached")
	}
	if !quits(press(m, 'c', tea.ModCtrl, "")) {
		t.Fatal("ctrl+c twice did not detach an idle screen")
	}
}

// TestAnApprovalShowsUntilItIsResolved, and a y typed into a prompt
// being written goes to the prompt.
func TestAnApprovalShowsUntilItIsResolved(t *testing.T) {
	m := screenModel(t)
	in := protocol.Interaction{InteractionID: "i1", SessionID: "s-1", Kind: protocol.InteractionPermission,
		Prompt: "run bash: ls", Detail: []byte(`{"tool":"bash","arguments":{"command":"ls"}}`), State: protocol.InteractionPending}
	m.apply(
		protocol.SessionDelta{Event: protocol.EventRunStart, TurnID: "t1", Turn: &protocol.TurnSnapshot{SessionID: "s-1", TurnID: "t1", Status: protocol.TurnRunning}},
		protocol.SessionDelta{Event: protocol.EventInteractionAdded, TurnID: "t1", Interaction: &in},
	)
	if !strings.Contains(m.screen(), "? run bash: ls   y allow · n deny · a allow bash always") {
		t.Fatalf("no approval:\n%s", m.screen())
	}
	press(m, 'w', 0, "w")
	press(m, 'y', 0, "y")
	if m.input.Value() != "wy" {
		t.Fatalf("input %q: y typed into a prompt must go to it", m.input.Value())
	}
	done := in
	done.State, done.Answer = protocol.InteractionAnswered, protocol.AnswerAllow
	m.apply(protocol.SessionDelta{Event: protocol.EventInteractionResolved, TurnID: "t1", Interaction: &done})
	if s := m.screen(); strings.Contains(s, "y allow · n deny") || !strings.Contains(s, "allowed: run bash: ls") {
		t.Fatalf("after the answer:\n%s", s)
	}
}

// TestTheScreenShowsStreamingTextToolOutputPlanAndQueue, with the
// escapes in them made visible.
func TestTheScreenShowsStreamingTextToolOutputPlanAndQueue(t *testing.T) {
	m := screenModel(t)
	running := &protocol.TurnSnapshot{SessionID: "s-1", TurnID: "t1", RunID: "run-t1", Status: protocol.TurnRunning}
	sess := protocol.Session{SessionID: "s-1", Model: "faux/echo", Status: protocol.SessionRunning}
	m.apply(
		protocol.SessionDelta{Event: protocol.EventRunStart, TurnID: "t1", Turn: running},
		protocol.SessionDelta{Event: protocol.EventSessionChanged, Session: &sess},
		protocol.SessionDelta{Event: protocol.EventMessageStart, TurnID: "t1", MessageID: "m1", Role: "assistant"},
		protocol.SessionDelta{Event: protocol.EventMessageUpdate, TurnID: "t1", MessageID: "m1", Text: "Streaming \x1b[2J"},
		protocol.SessionDelta{Event: protocol.EventToolCallStart, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Arguments: []byte(`{"command":"make"}`)}},
		protocol.SessionDelta{Event: protocol.EventToolCallUpdate, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Output: "\x1b]0;title\x07built\n"}},
		protocol.SessionDelta{Event: protocol.EventTodoChanged, Todo: []protocol.TodoItem{{Text: "build it", Status: "in_progress"}}},
		protocol.SessionDelta{Event: protocol.EventQueueChanged, Queue: &protocol.Queue{FollowUp: []protocol.QueueEntry{{EntryID: "q-m2", MessageID: "m2", Content: protocol.Content{Text: "then test it"}, Placement: protocol.PlacementNextTurn, State: protocol.QueueQueued}}}},
	)
	s := m.screen()
	for _, want := range []string{"Streaming ^[[2J", "● $ make", "│ ^[]0;title^Gbuilt", "[~] build it", "queued: then test it", "running"} {
		if !strings.Contains(s, want) {
			t.Errorf("the screen lacks %q:\n%s", want, s)
		}
	}
	if _, running := m.running(); !running {
		t.Error("the screen does not know the turn runs")
	}
	if quits(press(m, 'c', tea.ModCtrl, "")) || !strings.Contains(m.screen(), "ctrl+c again stops the turn") {
		t.Errorf("a first ctrl+c while a turn runs:\n%s", m.screen())
	}
}

// The help line leaves out its least needed keys on a narrow screen,
// never the key that opens the resources.
func TestTheHelpLineKeepsItsMostNeededKeysOnANarrowScreen(t *testing.T) {
	for _, c := range []struct {
		width      int
		want, gone []string
	}{
		{200, []string{"enter send", "alt+enter queue", "ctrl+c ×2 stop", "tab resources", "pgup/pgdn scroll"}, nil},
		{80, []string{"enter send", "esc interrupt", "ctrl+\\ detach", "tab resources"}, []string{"pgup/pgdn scroll"}},
		{40, []string{"enter send", "esc interrupt"}, []string{"tab resources"}},
	} {
		line := helpLine(c.width)
		if ansi.StringWidth(line) > c.width {
			t.Errorf("at %d columns the help line is %d wide: %q", c.width, ansi.StringWidth(line), line)
		}
		for _, k := range c.want {
			if !strings.Contains(line, k) {
				t.Errorf("at %d columns %q leaves out %q", c.width, line, k)
			}
		}
		for _, k := range c.gone {
			if strings.Contains(line, k) {
				t.Errorf("at %d columns %q keeps %q", c.width, line, k)
			}
		}
	}
}

// TestAnApprovalGoesWithItsTurn: once the turn that asked has ended, the
// screen asks nothing, whatever its stream said of the approval, and y
// goes to the prompt.
func TestAnApprovalGoesWithItsTurn(t *testing.T) {
	m := screenModel(t)
	turn := protocol.TurnSnapshot{SessionID: "s-1", TurnID: "t1", Status: protocol.TurnRunning}
	in := protocol.Interaction{InteractionID: "i1", SessionID: "s-1", Kind: protocol.InteractionPermission, Prompt: "run bash: ls", State: protocol.InteractionPending}
	m.apply(
		protocol.SessionDelta{Event: protocol.EventRunStart, TurnID: "t1", Turn: &turn},
		protocol.SessionDelta{Event: protocol.EventInteractionAdded, TurnID: "t1", Interaction: &in},
	)
	if !strings.Contains(m.screen(), "? run bash: ls") {
		t.Fatalf("no approval:\n%s", m.screen())
	}
	ended := turn
	ended.Status = protocol.TurnCompleted
	m.apply(protocol.SessionDelta{Event: protocol.EventRunEnd, TurnID: "t1", Turn: &ended})
	press(m, 'y', 0, "y")
	if s := m.screen(); strings.Contains(s, "y allow · n deny") || m.input.Value() != "y" {
		t.Fatalf("after the turn's end, with y typed (input %q):\n%s", m.input.Value(), s)
	}
}

// TestASkippedStretchIsMarkedWhereItWasUntilTheWholeComes: a reply or a
// tool's output the stream skipped some of shows a dim mark of how much,
// where it was left out, until the whole text replaces what streamed.
func TestASkippedStretchIsMarkedWhereItWasUntilTheWholeComes(t *testing.T) {
	m := screenModel(t)
	m.apply(
		protocol.SessionDelta{Event: protocol.EventRunStart, TurnID: "t1", Turn: &protocol.TurnSnapshot{SessionID: "s-1", TurnID: "t1", Status: protocol.TurnRunning}},
		protocol.SessionDelta{Event: protocol.EventMessageStart, TurnID: "t1", MessageID: "m1", Role: "assistant"},
		protocol.SessionDelta{Event: protocol.EventMessageUpdate, TurnID: "t1", MessageID: "m1", Text: "first words"},
		protocol.SessionDelta{Event: protocol.EventMessageUpdate, TurnID: "t1", MessageID: "m1", Text: "last words", Skipped: 12_345_678},
		protocol.SessionDelta{Event: protocol.EventToolCallStart, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Arguments: []byte(`{"command":"make"}`)}},
		protocol.SessionDelta{Event: protocol.EventToolCallUpdate, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Output: "line 1\n"}},
		protocol.SessionDelta{Event: protocol.EventToolCallUpdate, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Output: "line 900\n"}, Skipped: 2048},
	)
	s := m.screen()
	for _, want := range []string{"first words\n… 12.3 MB skipped …\nlast words", "│ line 1\n  │ … 2.0 kB skipped …\n  │ line 900"} {
		if !strings.Contains(s, want) {
			t.Fatalf("the screen lacks %q:\n%s", want, s)
		}
	}
	if !strings.Contains(m.View().Content, styles().dim.Render(skippedText(12_345_678))) {
		t.Errorf("the mark is not dim: %q", m.View().Content)
	}
	m.apply(
		protocol.SessionDelta{Event: protocol.EventMessageEnd, TurnID: "t1", MessageID: "m1", Text: "first words, all of them, last words"},
		protocol.SessionDelta{Event: protocol.EventToolCallEnd, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Output: "line 1\nline 2\nline 900\n"}},
	)
	s = m.screen()
	if strings.Contains(s, "skipped") || !strings.Contains(s, "first words, all of them, last words") || !strings.Contains(s, "│ line 2") {
		t.Fatalf("once whole:\n%s", s)
	}
}

// TestAToolCallInTheHistoryAndTheStreamShowsOnce: a call that runs as the
// screen opens is in the history's last reply and in the stream; it shows
// once, where the history has it, with its arguments and all its output,
// whether the history's page or the stream's first delta of it comes
// first.
func TestAToolCallInTheHistoryAndTheStreamShowsOnce(t *testing.T) {
	call := protocol.MessageData{Role: "assistant", Parts: []protocol.MessagePart{
		{Type: protocol.PartText, Text: "Running it."},
		{Type: protocol.PartToolCall, ToolCall: &protocol.ToolCallPart{ID: "c1", Name: "bash", Arguments: []byte(`{"command":"make"}`)}},
	}}
	data, _ := json.Marshal(call)
	page := pageMsg{page: client.TranscriptPage{Through: 2, Records: []protocol.TranscriptRecord{
		{Seq: 1, Type: protocol.RecordTurnStart, TurnID: "t1", Data: []byte(`{}`)},
		{Seq: 2, Type: protocol.RecordAssistantMessage, TurnID: "t1", Data: data},
	}}}
	output := func(text string) protocol.SessionDelta {
		return protocol.SessionDelta{Event: protocol.EventToolCallUpdate, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Output: text}}
	}
	for _, pageFirst := range []bool{true, false} {
		m := screenModel(t)
		m.noOlder = false
		if pageFirst {
			m.Update(page)
		}
		m.apply(output("built a\n"))
		if !pageFirst {
			m.Update(page)
		}
		m.apply(output("built b\n"), protocol.SessionDelta{Event: protocol.EventToolCallEnd, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Output: "built a\nbuilt b\ndone\n"}})
		s := m.screen()
		if strings.Count(s, "● ") != 1 || !strings.Contains(s, "Running it.\n● $ make\n  │ built a\n  │ built b\n  │ done") {
			t.Errorf("the page first: %t:\n%s", pageFirst, s)
		}
	}
}

// TestARunningCallGoesOnFromTheSnapshotOfAStreamOpenedAgain: the output a
// running call printed while the stream was lost shows once the stream
// is open again, from its snapshot, each line once, under one header; the
// reconnection is noted where the output was then.
func TestARunningCallGoesOnFromTheSnapshotOfAStreamOpenedAgain(t *testing.T) {
	m := screenModel(t)
	m.apply(
		protocol.SessionDelta{Event: protocol.EventToolCallStart, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Arguments: []byte(`{"command":"make"}`)}},
		protocol.SessionDelta{Event: protocol.EventToolCallUpdate, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Output: "built a\n"}},
	)
	snap := protocol.SessionProjection{Session: protocol.Session{SessionID: "s-1", Status: protocol.SessionRunning},
		ToolCalls: []protocol.RunningToolCall{{TurnID: "t1", ID: "c1", Name: "bash", Arguments: []byte(`{"command":"make"}`), Output: "built a\nbuilt b\n"}}}
	m.Update(eventsMsg{evs: []client.FollowEvent{{SessionEvent: client.SessionEvent{Snapshot: &snap}, Reopened: true}}})
	m.apply(protocol.SessionDelta{Event: protocol.EventToolCallUpdate, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Output: "built c\n"}})
	if s := m.screen(); strings.Count(s, "● ") != 1 || !strings.Contains(s, "● $ make\n  │ built a\n  │ built b\n· reconnected\n  │ built c\n") {
		t.Fatalf("after the stream opened again:\n%s", s)
	}
}

// TestAnApprovalIsNotedWhereItHappenedAboveTheCallsOutput: the approval
// of a call is drawn between the call and its output, as it happened,
// not below the output that came after it.
func TestAnApprovalIsNotedWhereItHappenedAboveTheCallsOutput(t *testing.T) {
	m := screenModel(t)
	in := protocol.Interaction{InteractionID: "i1", Kind: protocol.InteractionPermission, Prompt: "run bash: make", State: protocol.InteractionPending}
	allowed := in
	allowed.State, allowed.Answer = protocol.InteractionAnswered, protocol.AnswerAllow
	m.apply(
		protocol.SessionDelta{Event: protocol.EventRunStart, TurnID: "t1", Turn: &protocol.TurnSnapshot{TurnID: "t1", Status: protocol.TurnRunning}},
		protocol.SessionDelta{Event: protocol.EventToolCallStart, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Arguments: []byte(`{"command":"make"}`)}},
		protocol.SessionDelta{Event: protocol.EventInteractionAdded, TurnID: "t1", Interaction: &in},
		protocol.SessionDelta{Event: protocol.EventInteractionResolved, TurnID: "t1", Interaction: &allowed},
		protocol.SessionDelta{Event: protocol.EventToolCallUpdate, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Output: "built a\n"}},
		protocol.SessionDelta{Event: protocol.EventToolCallEnd, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Output: "built a\nexit code 0"}},
	)
	if s := m.screen(); !strings.Contains(s, "● $ make\n· allowed: run bash: make\n  │ built a\n  │ exit code 0\n") || strings.Count(s, "allowed:") != 1 {
		t.Fatalf("the approval is not where it happened:\n%s", s)
	}
}
