package cli_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/creack/pty"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/protocol"
)

// Keys as a terminal sends them.
const (
	keyTab   = "\t"
	keyEnter = "\r"
	keyUp    = "\x1b[A"
	keyDown  = "\x1b[B"
	keyQuit  = "\x1c" // ctrl+\
)

// detachedShell starts a shell on a PTY of session id with agentd shell,
// prints mark in it and detaches; it returns the PTY's ref.
func detachedShell(t *testing.T, p *place, id, mark string) string {
	t.Helper()
	s, _ := p.ptyScreen(t, p.workDir(), "shell", id)
	s.typeKeys("echo " + mark + "-$((6*7))\r")
	s.waitText(mark + "-42")
	s.typeKeys(keyQuit)
	if err := s.waitExit(); err != nil {
		t.Fatalf("detach: %v", err)
	}
	rs := listResources(t, p, id)
	if len(rs) != 1 {
		t.Fatalf("ps --json after the shell's detach: %+v", rs)
	}
	return rs[0].Ref
}

// TestAttachListsTheSessionsResourcesAndOpensAPTYFullScreen: attach names
// the PTY that runs; tab lists the session's resources, one started while
// attached among them with its command's control characters shown, not
// acted on; enter opens the PTY full screen, its screen as it was, keys
// typed reach it, and ctrl+\ comes back to the session's screen; a shell
// run's output opens; a stopped run shows its exit code, and a PTY
// whose program exits while open brings the screen back saying so.
func TestAttachListsTheSessionsResourcesAndOpensAPTYFullScreen(t *testing.T) {
	p, id := newShellPlace(t)
	ref := detachedShell(t, p, id, "shell-mark")

	a := p.screen(t, "attach", id)
	a.waitText("running: " + ref)
	a.waitText("tab resources")

	c := p.open(t)
	start := protocol.ResourceStartInput{SessionID: id, LaunchID: "l-pane", Command: "sleep 60 # \x1b[2J\x1b]0;owned\x07"}
	run, err := client.Call(agentdtest.Context(t), c, protocol.OpRuntimeResourceStart, start)
	if err != nil {
		t.Fatal(err)
	}
	a.waitText("running: " + ref + ", " + run.Ref)
	if table := p.mustRun("ps", id); strings.Contains(table, "\x1b") || !strings.Contains(table, "sleep 60 # ^[[2J^[]0;owned^G") {
		t.Fatalf("ps shows the command's control characters as they are:\n%q", table)
	}
	a.typeKeys(keyTab)
	text := a.waitText("sleep 60 # ^[[2J^[]0;owned^G")
	if !strings.Contains(text, "agentd · "+id) || !strings.Contains(text, "enter open the PTY full screen") {
		t.Fatalf("the list drove the terminal, or the keys are not named:\n%s", text)
	}
	a.waitText("❯ " + ref + " ")

	a.typeKeys(keyEnter)
	a.waitFor("the PTY's screen alone", func(text string) bool {
		return strings.Contains(text, "shell-mark-42") && !strings.Contains(text, "agentd · "+id)
	})
	a.typeKeys("echo typed-in-the-view-$((2+3))\r")
	a.waitText("typed-in-the-view-5")
	// The PTY's size follows the terminal's.
	if err := pty.Setsize(a.tty, &pty.Winsize{Cols: 100, Rows: 30}); err != nil {
		t.Fatal(err)
	}
	a.typeKeys(`while [ "$(stty size)" != "30 100" ]; do sleep 0.05; done; echo resized-$(stty size | tr ' ' x)` + "\r")
	a.waitText("resized-30x100")
	a.typeKeys(keyQuit)
	a.waitText("back from " + ref + ", which runs on")
	text = a.waitText("agentd · " + id)
	// The screen is laid out for the terminal's new size: its last line
	// is the 30th.
	a.waitFor("the screen laid out on 30 rows", func(text string) bool {
		lines := strings.Split(text, "\n")
		return len(lines) > 29 && strings.Contains(lines[29], "ctrl+\\ detach") && strings.TrimSpace(strings.Join(lines[30:], "")) == ""
	})
	if strings.Contains(text, "typed-in-the-view-5") {
		t.Fatalf("the session's screen was not drawn again:\n%s", text)
	}

	a.typeKeys(keyDown)
	a.waitText("❯ " + run.Ref + " ")
	a.typeKeys(keyEnter)
	a.waitText("── " + run.Ref + " · sleep 60")
	a.typeKeys("q")
	a.waitText("back from " + run.Ref + ", which runs on")
	if out := p.mustRun("stop", id, run.Ref); !strings.Contains(out, "stopped") {
		t.Fatalf("stop %s: %q", run.Ref, out)
	}
	a.waitFor("the stopped run with its exit code", func(text string) bool {
		for line := range strings.Lines(text) {
			if strings.Contains(line, run.Ref+" ") && strings.Contains(line, " exit ") && !strings.Contains(line, "exit ?") {
				return true
			}
		}
		return false
	})

	a.typeKeys(keyUp)
	a.waitText("❯ " + ref + " ")
	a.typeKeys(keyEnter)
	a.waitText("typed-in-the-view-5")
	a.typeKeys("exit 3\r")
	a.waitText(ref + " exited (exit status 3)")
	a.waitText("agentd · " + id)
	a.typeKeys(keyEnter)
	a.waitText(ref + " has exited (exit status 3)")

	a.typeKeys(keyQuit)
	if err := a.waitExit(); err != nil {
		t.Fatalf("detach: %v", err)
	}
	wantCooked(t, a)
}

// TestAPTYAnotherClientControlsOpensReadOnlyFromAttachAndSaysSo: opened
// from attach while agentd shell holds it, a PTY shows its screen and
// output with a line saying it is watched read-only; what is typed there
// does not reach it; ctrl+\ comes back to the session's screen, which
// says so too.
func TestAPTYAnotherClientControlsOpensReadOnlyFromAttachAndSaysSo(t *testing.T) {
	p, id := newShellPlace(t)
	b, _ := p.ptyScreen(t, p.workDir(), "shell", id)
	b.typeKeys("echo held-by-b-$((2*2))\r")
	b.waitText("held-by-b-4")

	a := p.screen(t, "attach", id)
	a.waitText("running: pty-")
	a.typeKeys(keyTab)
	a.waitText("❯ pty-")
	a.typeKeys(keyEnter)
	a.waitText("held-by-b-4")
	a.waitText("another client controls pty-")
	a.waitText("watching it read-only")

	a.typeKeys("echo typed-in-a\r")
	b.typeKeys("echo typed-in-b-$((3*3))\r")
	for _, s := range []*screen{a, b} {
		s.waitText("typed-in-b-9")
	}
	if text := b.text(); strings.Contains(text, "typed-in-a") {
		t.Fatalf("keys typed in a read-only view reached the PTY:\n%s", text)
	}
	a.typeKeys(keyQuit)
	a.waitText("watched read-only, another client controlling it")
	a.waitText("agentd · " + id)

	b.typeKeys("exit 4\r")
	var exit *exec.ExitError
	if err := b.waitExit(); !errors.As(err, &exit) || exit.ExitCode() != 4 {
		t.Fatalf("agentd shell after exit 4: %v", err)
	}
	a.waitFor("the PTY's exit", func(text string) bool { return strings.Contains(text, " exit 4 ") })
	a.typeKeys(keyQuit)
	if err := a.waitExit(); err != nil {
		t.Fatalf("detach: %v", err)
	}
}

// TestATurnThatRanWhileAPTYWasOpenShowsWholeOnReturn: the session's
// stream is read on while a PTY is shown full screen; a turn that
// streamed more events meanwhile than the stream's own buffer holds shows
// whole once the screen is back, and nothing is called a lost
// connection.
func TestATurnThatRanWhileAPTYWasOpenShowsWholeOnReturn(t *testing.T) {
	p, id := newShellPlace(t)
	ref := detachedShell(t, p, id, "shell-mark")
	a := p.screen(t, "attach", id)
	a.waitText("running: " + ref)
	a.typeKeys(keyTab)
	a.waitText("❯ " + ref + " ")
	a.typeKeys(keyEnter)
	a.waitFor("the PTY's screen alone", func(text string) bool {
		return strings.Contains(text, "shell-mark-42") && !strings.Contains(text, "agentd · "+id)
	})
	c := p.open(t)
	ctx := agentdtest.Context(t)
	s, err := c.OpenSession(ctx, id, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Lines printed apart, most of them each its own event, until the
	// stream has carried more events than a session stream holds unread
	// (client.Watch): a loaded machine that merges lines makes the turn
	// longer, not the test weaker.
	const enough = 1100
	stop := filepath.Join(t.TempDir(), "enough")
	prompt := "run `i=0; while [ ! -e " + stop + " ] && [ $i -lt 1000000 ]; do echo line-$i; j=0; while [ $j -lt 400 ]; do j=$((j+1)); done; i=$((i+1)); done; echo all-printed`"
	if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: id, TurnID: "t-away", Approval: protocol.ApprovalAll, Content: protocol.Content{Text: prompt}}); err != nil {
		t.Fatal(err)
	}
	events := 0
	for {
		ev, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if events++; events == enough {
			if err := os.WriteFile(stop, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if ev.Delta.Event == protocol.EventRunEnd && ev.Delta.Turn != nil && ev.Delta.Turn.TurnID == "t-away" {
			break
		}
	}
	if events <= enough {
		t.Fatalf("the turn ended after %d events, before the test let it", events)
	}
	a.typeKeys(keyQuit)
	text := a.waitFor("the turn, whole", func(text string) bool {
		return strings.Contains(text, "│ all-printed") && strings.Contains(text, "── completed") && !strings.Contains(text, "catching up")
	})
	if strings.Contains(text, "connection lost") || strings.Contains(text, "reconnected") {
		t.Fatalf("the screen called falling behind a lost connection:\n%s", text)
	}
}
