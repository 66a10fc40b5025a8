package tui

import (
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

func (m *model) resource(r protocol.Resource) {
	m.Update(eventsMsg{evs: []client.FollowEvent{{SessionEvent: client.SessionEvent{Resource: &r}}}})
}

func exitedWith(r protocol.Resource, code int) protocol.Resource {
	r.State, r.ExitCode = protocol.ResourceExited, &code
	return r
}

// TestAResourceThatExitedStaysExited: a list read before a resource
// exited, and answered after the update that said so, does not bring it
// back; a list read for a stream opened before the last is dropped.
func TestAResourceThatExitedStaysExited(t *testing.T) {
	m := screenModel(t)
	at := time.Now()
	pty := protocol.Resource{SessionID: "s-1", Ref: "pty-1", Kind: protocol.ResourcePTY, State: protocol.ResourceRunning, Command: "sh", StartedAt: at}
	run := protocol.Resource{SessionID: "s-1", Ref: "shell-2", Kind: protocol.ResourceShell, State: protocol.ResourceRunning, Command: "make", StartedAt: at.Add(time.Second)}
	m.resource(exitedWith(run, 2))
	m.Update(resourcesMsg{list: []protocol.Resource{pty, run}})
	if len(m.res.list) != 2 || m.res.list[0].Ref != "pty-1" || m.res.list[1].State != protocol.ResourceExited {
		t.Fatalf("after the update and the older list: %+v", m.res.list)
	}
	if s := m.screen(); !strings.Contains(s, "running: pty-1 · tab lists") {
		t.Fatalf("the running PTY is not named:\n%s", s)
	}
	m.res.reset()
	m.Update(resourcesMsg{gen: m.res.gen - 1, list: []protocol.Resource{pty}})
	if len(m.res.list) != 0 {
		t.Fatalf("a list of an older stream was applied: %+v", m.res.list)
	}
}

// TestTabOpensTheResourcesPaneAndEscClosesIt: tab with nothing to list
// says so; with resources it lists them, the latest running PTY chosen,
// each field's control characters visible and exit codes shown; the arrows
// choose; enter on a shell run or an exited PTY says why it does not
// open; esc closes the pane without interrupting the turn.
func TestTabOpensTheResourcesPaneAndEscClosesIt(t *testing.T) {
	m := screenModel(t)
	press(m, tea.KeyTab, 0, "")
	if s := m.screen(); m.paneOpen || !strings.Contains(s, "runs no shell run or PTY yet") {
		t.Fatalf("tab with no resources:\n%s", s)
	}
	at := time.Now().Add(-90 * time.Second)
	m.resource(protocol.Resource{Ref: "pty-1", Kind: protocol.ResourcePTY, State: protocol.ResourceRunning, Command: "vim\x1b]0;x\x07", StartedAt: at})
	m.resource(exitedWith(protocol.Resource{Ref: "pty-2", Kind: protocol.ResourcePTY, Command: "top", StartedAt: at.Add(time.Second)}, 0))
	m.resource(protocol.Resource{Ref: "shell-3", Kind: protocol.ResourceShell, State: protocol.ResourceRunning, Command: "npm run dev\n\x1b[2J", StartedAt: at.Add(2 * time.Second)})
	press(m, tea.KeyTab, 0, "")
	s := m.screen()
	for _, want := range []string{"resources of the session (1 of 3)", "❯ pty-1     pty   running  1m   vim^[]0;x^G", "  pty-2     pty   exit 0", "  shell-3   shell running  1m   npm run dev ^[[2J", paneHelp} {
		if !strings.Contains(s, want) {
			t.Errorf("the pane lacks %q:\n%s", want, s)
		}
	}
	press(m, tea.KeyDown, 0, "")
	press(m, tea.KeyEnter, 0, "")
	if s := m.screen(); !strings.Contains(s, "pty-2 has exited (exit status 0): it has no screen to open") {
		t.Errorf("enter on an exited PTY:\n%s", s)
	}
	press(m, tea.KeyDown, 0, "")
	press(m, tea.KeyDown, 0, "")
	if cmd := press(m, tea.KeyEnter, 0, ""); cmd != nil || !strings.Contains(m.screen(), "shell-3 is a shell run, not a PTY") {
		t.Errorf("enter on a shell run:\n%s", m.screen())
	}
	m.proj.Apply(protocol.SessionDelta{Event: protocol.EventRunStart, TurnID: "t1", Turn: &protocol.TurnSnapshot{TurnID: "t1", Status: protocol.TurnRunning}})
	if cmd := press(m, tea.KeyEscape, 0, ""); cmd != nil || m.paneOpen {
		t.Fatal("esc in the pane interrupted the turn, or left the pane open")
	}
	if s := m.screen(); !strings.Contains(s, "ctrl+\\ detach · tab resources") || !strings.Contains(s, "running: pty-1, shell-3") {
		t.Fatalf("after esc:\n%s", s)
	}
}

// FuzzResourceRowShowsNoControlCharacters: whatever a resource's fields
// hold, its row has nothing a terminal acts on.
func FuzzResourceRowShowsNoControlCharacters(f *testing.F) {
	f.Add("pty-1", "pty", "running", "vim \x1b[2J\x1b]0;t\x07\r\n\x9b31m")
	f.Add("shell-\x1b", "shell\x00", "exited", "\xff\xfe make")
	f.Fuzz(func(t *testing.T, ref, kind, state, command string) {
		row := ResourceRow(protocol.Resource{Ref: ref, Kind: kind, State: state, Command: command}, time.Now())
		for _, r := range row {
			if r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f {
				t.Fatalf("row %q holds %U", row, r)
			}
		}
	})
}

// TestFallingBehindIsCaughtUpWithoutCallingItALostConnection: a stream
// that fell behind says it catches up while it opens again, and leaves
// no note of a lost connection; a lost connection still says so.
func TestFallingBehindIsCaughtUpWithoutCallingItALostConnection(t *testing.T) {
	m := screenModel(t)
	snap := m.proj.Projection()
	events := func(evs ...client.FollowEvent) { m.Update(eventsMsg{evs: evs}) }
	events(client.FollowEvent{Lost: client.ErrWatcherSlow})
	if s := m.screen(); !strings.Contains(s, "catching up…") || strings.Contains(s, "connection lost") {
		t.Fatalf("fallen behind:\n%s", s)
	}
	events(client.FollowEvent{SessionEvent: client.SessionEvent{Snapshot: &snap}, Reopened: true})
	if s := m.screen(); strings.Contains(s, "catching up") || strings.Contains(s, "reconnected") {
		t.Fatalf("caught up:\n%s", s)
	}
	events(client.FollowEvent{Lost: client.ErrClosed}, client.FollowEvent{SessionEvent: client.SessionEvent{Snapshot: &snap}, Reopened: true})
	if s := m.screen(); !strings.Contains(s, "connection lost") || !strings.Contains(s, "reconnected") {
		t.Fatalf("a lost connection:\n%s", s)
	}
}
