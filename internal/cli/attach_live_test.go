package cli_test

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/protocol"
)

// Keys of the session's screen.
const (
	keyEsc   = "\x1b"
	keyCtrlC = "\x03"
)

// wantTranscriptKept checks that s still shows the transcript, the
// prompt line holding typed: it types ctrl+c, which arms a detach and
// says so, and esc, which disarms it and wipes nothing.
func wantTranscriptKept(t *testing.T, s *screen, typed string, shown ...string) {
	t.Helper()
	s.typeKeys(keyCtrlC)
	s.waitText("ctrl+c again detaches")
	s.typeKeys(keyEsc)
	text := s.waitFor("the screen after esc", func(text string) bool { return !strings.Contains(text, "ctrl+c again detaches") })
	for _, want := range append(shown, "> "+typed) {
		if !strings.Contains(text, want) {
			t.Fatalf("after esc the screen lost %q:\n%s", want, text)
		}
	}
}

// TestAnApprovalEndedAnywhereLeavesEveryScreenAtOnce: two screens open
// while a turn waits for an approval show it; once it is answered (by
// agentd answer, y or a in one screen) or cancelled (the turn stopped), it
// is gone from both at once, with nothing typed; the keys y, a and n then
// go to the prompt as typed, and esc leaves the transcript as it is.
func TestAnApprovalEndedAnywhereLeavesEveryScreenAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, p *place, id string, a *screen)
		// shown is what both screens show once it has ended.
		shown []string
	}{
		{"answered by agentd answer", func(t *testing.T, p *place, id string, _ *screen) {
			p.mustRun("answer", id, pendingOf(t, p, id).InteractionID, "allow")
		}, []string{"│ approved-later", "── completed"}},
		{"allowed with y in one screen", func(t *testing.T, _ *place, _ string, a *screen) {
			a.typeKeys("y")
		}, []string{"│ approved-later", "── completed"}},
		{"allowed always with a in one screen", func(t *testing.T, _ *place, _ string, a *screen) {
			a.typeKeys("a")
		}, []string{"│ approved-later", "── completed"}},
		{"cancelled by a stop", func(t *testing.T, p *place, id string, _ *screen) {
			p.mustRun("stop", "--now", id)
		}, []string{"── interrupted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newSessionPlace(t)
			id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--approve", "ask"))
			p.mustRun("run", "-d", "--session", id, "run `echo approved-later`")
			pendingOf(t, p, id)
			a := p.screen(t, "attach", id)
			b := p.screen(t, "attach", id)
			for _, s := range []*screen{a, b} {
				s.waitText("? run bash: echo approved-later")
				s.waitText(approvalAsked)
			}
			tc.end(t, p, id, a)
			for _, s := range []*screen{a, b} {
				s.waitFor("the approval gone", func(text string) bool {
					if strings.Contains(text, approvalAsked) {
						return false
					}
					for _, want := range tc.shown {
						if !strings.Contains(text, want) {
							return false
						}
					}
					return true
				})
			}
			for _, s := range []*screen{a, b} {
				s.typeKeys("yay hello")
				s.waitText("> yay hello")
				s.typeKeys(" n")
				s.waitText("> yay hello n")
				wantTranscriptKept(t, s, "yay hello n", append(tc.shown, "❯ run `echo approved-later`")...)
				if text := s.text(); strings.Contains(text, "answer:") || strings.Count(text, "● $ echo approved-later") != 1 {
					t.Fatalf("the screen after the approval:\n%s", text)
				}
			}
		})
	}
}

// TestAToolCallRunningAsTheScreenOpensShowsOnceWithItsOutputInOrder: a
// screen opened while a command prints shows the call once, where the
// transcript has it, with what it printed before and after the screen
// opened, in order.
func TestAToolCallRunningAsTheScreenOpensShowsOnceWithItsOutputInOrder(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir, "--approve", "all"))
	p.mustRun("run", "-d", "--session", id, "run `echo bg 1; echo bg 2; while [ ! -e go-on ]; do sleep 0.05; done; echo bg 3`")
	poll.Until(t, "the command's first lines", func() bool {
		logs, _ := filepath.Glob(filepath.Join(p.home, "sessions", id, "resources", "*.log"))
		for _, l := range logs {
			if b, _ := os.ReadFile(l); strings.Contains(string(b), "bg 2\n") {
				return true
			}
		}
		return false
	})
	a := p.screen(t, "attach", id)
	a.waitText("│ bg 2")
	if err := os.WriteFile(filepath.Join(dir, "go-on"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	text := a.waitFor("the call's end", func(text string) bool {
		return strings.Contains(text, "│ bg 3") && strings.Contains(text, "── completed")
	})
	if n := strings.Count(text, "● "); n != 1 || !strings.Contains(text, "● $ echo bg 1; echo bg 2;") {
		t.Fatalf("%d tool calls show:\n%s", n, text)
	}
	at := -1
	for _, line := range []string{"│ bg 1", "│ bg 2", "│ bg 3"} {
		i := strings.Index(text, line)
		if i <= at || strings.Count(text, line) != 1 {
			t.Fatalf("%q shows out of order or more than once:\n%s", line, text)
		}
		at = i
	}
}

// startRun starts a shell run of command in session id, as the agent's
// background bash does, and returns it.
func startRun(t *testing.T, p *place, id, command string) protocol.Resource {
	t.Helper()
	start := protocol.ResourceStartInput{SessionID: id, LaunchID: "l-" + command, Command: command}
	run, err := client.Call(agentdtest.Context(t), p.open(t), protocol.OpRuntimeResourceStart, start)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// TestTheRunningLineFollowsTheSessionsResourcesAtOnce: a shell run that
// starts shows on the screen's running line, and leaves it when it ends.
func TestTheRunningLineFollowsTheSessionsResourcesAtOnce(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--approve", "all"))
	a := p.screen(t, "attach", id)
	a.waitText("ctrl+\\ detach")
	first, second := startRun(t, p, id, "sleep 60"), startRun(t, p, id, "sleep 61")
	a.waitText("running: " + first.Ref + ", " + second.Ref)
	p.mustRun("stop", id, first.Ref)
	a.waitFor("the stopped run off the line", func(text string) bool {
		return strings.Contains(text, "running: "+second.Ref+" ·")
	})
	p.mustRun("stop", id, second.Ref)
	a.waitFor("no running line", func(text string) bool { return !strings.Contains(text, "running: ") })
}

// TestAttachEndsWhenItsSessionIsRemoved: a session removed from another
// terminal while a screen shows it, a shell run running, ends the screen:
// the terminal is given back, attach says why and exits 0, as tmux's
// attach does when its session ends; so does an attach off a terminal.
func TestAttachEndsWhenItsSessionIsRemoved(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--approve", "all"))
	run := startRun(t, p, id, "sleep 60")
	a := p.screen(t, "attach", id)
	a.waitText("running: " + run.Ref)
	lines := p.command("attach", id)
	errOut, err := lines.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := lines.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lines.Process.Kill(); lines.Wait() })
	said := make(chan []string, 1)
	sc := bufio.NewScanner(errOut)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "session "+id) {
		t.Fatalf("attach off a terminal began with %q", sc.Text())
	}
	go func() {
		var rest []string
		for sc.Scan() {
			rest = append(rest, sc.Text())
		}
		said <- rest
	}()

	p.mustRun("rm", "--force", id)
	text := a.waitText("agentd: session " + id + " was removed")
	if err := a.waitExit(); err != nil {
		t.Fatalf("attach after the session's removal: %v\n%s", err, text)
	}
	if strings.Contains(a.text(), "running: ") {
		t.Fatalf("the session's screen stayed:\n%s", a.text())
	}
	wantCooked(t, a)
	select {
	case rest := <-said:
		if err := lines.Wait(); err != nil || !slices.Contains(rest, "agentd: session "+id+" was removed") {
			t.Fatalf("attach off a terminal ended (%v) saying %q", err, rest)
		}
	case <-time.After(agentdtest.Timeout):
		t.Fatal("attach off a terminal still runs")
	}
}

// TestAttachEndsWhenTheHostIsShutDown: agentd shutdown ends every screen:
// the terminal is given back, attach says why and exits 0, and no host
// is started again to reconnect to.
func TestAttachEndsWhenTheHostIsShutDown(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--approve", "all"))
	a := p.screen(t, "attach", id)
	a.waitText("ctrl+\\ detach")
	p.mustRun("shutdown", "--force")
	text := a.waitFor("the screen's end", func(text string) bool {
		return strings.Contains(text, "agentd: the host was shut down") || strings.Contains(text, "· reconnected")
	})
	if strings.Contains(text, "· reconnected") {
		t.Fatalf("attach reconnected after a shutdown:\n%s", text)
	}
	if err := a.waitExit(); err != nil {
		t.Fatalf("attach after the shutdown: %v\n%s", err, text)
	}
	wantCooked(t, a)
}
