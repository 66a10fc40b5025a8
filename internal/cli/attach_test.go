package cli_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/protocol"
)

// approvalAsked is the line of a screen that waits for an approval.
const approvalAsked = "y allow · n deny"

// TestTwoAttachedScreensShowOneSession: a prompt typed in one screen
// streams in both; the approval it waits for shows in both, and once
// answered in the other it is gone from both, and the tool's output and
// the reply show in both.
func TestTwoAttachedScreensShowOneSession(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--approve", "ask"))
	a := p.screen(t, "attach", id)
	b := p.screen(t, "attach", id)
	for _, s := range []*screen{a, b} {
		s.waitText("agentd · " + id)
		s.waitText("ctrl+\\ detach")
	}
	a.typeLine("please run `echo typed-in-a`")
	for _, s := range []*screen{a, b} {
		s.waitText("❯ please run `echo typed-in-a`")
		s.waitText("? run bash: echo typed-in-a")
		s.waitText(approvalAsked)
	}
	b.typeKeys("y")
	for _, s := range []*screen{a, b} {
		text := s.waitFor("the approval answered, the output and the reply", func(text string) bool {
			return !strings.Contains(text, approvalAsked) && strings.Contains(text, "│ typed-in-a") &&
				strings.Contains(text, "── completed") && strings.Contains(text, "allowed: run bash")
		})
		// The approval is drawn where it happened: before the output.
		if strings.Index(text, "allowed: run bash") > strings.Index(text, "│ typed-in-a") {
			t.Fatalf("the approval is drawn below the output it came before:\n%s", text)
		}
	}
}

// TestAnsweringAAllowsTheToolForTheRestOfTheSession: `a` at an approval
// in one screen allows the call and the tool's later calls; both screens
// say so, and the next command runs without asking.
func TestAnsweringAAllowsTheToolForTheRestOfTheSession(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--approve", "ask"))
	a := p.screen(t, "attach", id)
	b := p.screen(t, "attach", id)
	for _, s := range []*screen{a, b} {
		s.waitText("ctrl+\\ detach")
	}
	a.typeLine("run `echo first-call`")
	b.waitText(approvalAsked)
	b.typeKeys("a")
	for _, s := range []*screen{a, b} {
		s.waitFor("the call allowed for the session", func(text string) bool {
			return strings.Contains(text, "allowed for the session: run bash") && strings.Contains(text, "│ first-call") &&
				strings.Contains(text, "── completed")
		})
	}
	a.typeLine("run `echo second-call`")
	a.waitFor("the second call, run without asking", func(text string) bool {
		return strings.Contains(text, "│ second-call") && strings.Count(text, "── completed") == 2 && !strings.Contains(text, approvalAsked)
	})
}

// TestDetachingLeavesTheTurnRunning: ctrl+\ leaves the screen at once,
// exit 0, and the turn it showed runs on to its end.
func TestDetachingLeavesTheTurnRunning(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--approve", "all"))
	s := p.screen(t, "attach", id)
	s.waitText("ctrl+\\ detach")
	s.typeLine("run `sleep 1; echo after-the-detach`")
	s.waitText("● $ sleep 1; echo after-the-detach")
	s.typeKeys("\x1c")
	if err := s.waitExit(); err != nil {
		t.Fatalf("detach: %v", err)
	}
	poll.Until(t, "the turn ran to its end", func() bool {
		log := p.mustRun("log", id)
		return strings.Contains(log, "after-the-detach\n") && strings.Contains(log, "── completed")
	})
}

// TestEscapeSequencesInToolOutputAreShownNotInterpreted: what a tool
// prints reaches the screen with its control characters made visible.
func TestEscapeSequencesInToolOutputAreShownNotInterpreted(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--approve", "all"))
	s := p.screen(t, "attach", id)
	s.waitText("ctrl+\\ detach")
	s.typeLine(`run ` + "`" + `printf '\033[2J\033]0;owned\007\033[31mRED\033[0m\n'` + "`")
	text := s.waitText("│ ^[[2J^[]0;owned^G^[[31mRED^[[0m")
	if !strings.Contains(text, "agentd · "+id) {
		t.Fatalf("the screen was cleared:\n%s", text)
	}
	s.waitText("── completed")
}

// TestCtrlCTwiceStopsTheTurnAndEscInterruptsIt: esc interrupts a running
// turn at once; ctrl+c twice stops one after its step; neither leaves.
func TestCtrlCTwiceStopsTheTurnAndEscInterruptsIt(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--approve", "all"))
	s := p.screen(t, "attach", id)
	s.waitText("ctrl+\\ detach")
	s.typeLine("run `sleep 30`")
	s.waitText("● $ sleep 30")
	s.typeKeys("\x1b")
	s.waitText("── interrupted")

	s.typeLine("run `sleep 1; echo stepped`")
	s.waitText("● $ sleep 1; echo stepped")
	s.typeKeys("\x03")
	s.waitText("ctrl+c again stops the turn")
	s.typeKeys("\x03")
	s.waitFor("the turn stopped after its step", func(text string) bool {
		return strings.Contains(text, "── stopped") || strings.Contains(text, "── completed")
	})
	if strings.Contains(s.text(), "agentd exited") {
		t.Fatal("the screen left")
	}
	s.typeKeys("\x1c")
	if err := s.waitExit(); err != nil {
		t.Fatal(err)
	}
}

// TestAttachReconnectsToTheHostThatReplacesAKilledOne: the screen says
// the connection dropped, comes back on a new host, resumes after the
// last record it showed, and a turn typed then streams; each turn shows
// once.
func TestAttachReconnectsToTheHostThatReplacesAKilledOne(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--approve", "all"))
	s := p.screen(t, "attach", id)
	s.waitText("ctrl+\\ detach")
	s.typeLine("run `echo first-turn`")
	s.waitText("── completed")
	killHost(t, p)
	s.waitText("connection lost")
	s.waitText("· reconnected")
	s.typeLine("run `echo second-turn`")
	text := s.waitFor("the second turn", func(text string) bool { return strings.Count(text, "── completed") == 2 })
	for _, want := range []string{"│ first-turn", "│ second-turn", "❯ run `echo first-turn`"} {
		if n := strings.Count(text, want); n != 1 {
			t.Fatalf("%q shows %d times:\n%s", want, n, text)
		}
	}
	if n := len(regexp.MustCompile(`── turn `).FindAllString(text, -1)); n != 2 {
		t.Fatalf("%d turns show:\n%s", n, text)
	}
}

// TestAttachShowsTheTranscriptSoFar: a screen attached to a session with
// turns behind it shows them, paged from the host.
func TestAttachShowsTheTranscriptSoFar(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir, "--approve", "all"))
	p.mustRun("run", "--session", id, "--approve", "all", "run `echo earlier-turn`")
	s := p.screen(t, "attach", id)
	s.waitText("❯ run `echo earlier-turn`")
	s.waitText("│ earlier-turn")
	s.waitText("── completed")
}

// TestAttachDrawsTheNewestTurnsFirstAndTheOlderOnScrollingUp: the first
// screen of a session with more turns than it holds shows the last reply
// above the input line; scrolling up shows the older turns, back to the
// first.
func TestAttachDrawsTheNewestTurnsFirstAndTheOlderOnScrollingUp(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir()))
	for i := 1; i <= 14; i++ {
		p.mustRun("run", "--session", id, fmt.Sprintf("prompt %02d", i))
	}
	s := p.screen(t, "attach", id)
	s.waitFor("the last reply above the input line", func(text string) bool {
		i := strings.Index(text, `You said: "prompt 14"`)
		return i >= 0 && strings.Contains(text[i:], "\n> ")
	})
	if text := s.text(); strings.Contains(text, "❯ prompt 01") {
		t.Fatalf("the first turn shows on the first screen of 14:\n%s", text)
	}
	for i := 0; !strings.Contains(s.text(), "❯ prompt 01"); i++ {
		if i == 100 {
			t.Fatalf("the first turn does not show after 100 pages up:\n%s", s.text())
		}
		before := s.text()
		s.typeKeys("\x1b[5~") // page up
		s.waitFor("the page up drawn", func(text string) bool { return text != before || strings.Contains(text, "❯ prompt 01") })
	}
}

// TestAttachWithoutASessionPicksTheDirectorysLatestOrStartsOne: --new
// starts a session of the current directory; with no id, attach finds it.
func TestAttachWithoutASessionPicksTheDirectorysLatestOrStartsOne(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	if _, errOut, code := p.runIn(dir, "attach", "--json"); code != 1 || !strings.Contains(errOut, "agentd attach --new") {
		t.Fatalf("attach with no session here: exit %d: %s", code, errOut)
	}
	s := p.screen(t, "attach", "--new", "--cwd", dir)
	text := s.waitText("agentd · ")
	id := regexp.MustCompile(`agentd · (\S+)`).FindStringSubmatch(text)[1]
	s.typeKeys("\x1c")
	s.waitExit()
	var listed []protocol.Session
	json.Unmarshal([]byte(p.mustRun("ls", "--json")), &listed)
	if len(listed) != 1 || listed[0].SessionID != id || listed[0].Cwd != dir {
		t.Fatalf("sessions %+v, attached to %s", listed, id)
	}
	s = p.screenOf(t, p.commandIn(dir, "attach"))
	s.waitText("agentd · " + id)
	s.typeKeys("\x1c")
	s.waitExit()

	// With two sessions here, a picker offers them, the latest first.
	later := strings.TrimSpace(p.mustRun("new", "--cwd", dir, "--title", "the later one"))
	p.mustRun("run", "--session", later, "--approve", "all", "hello")
	s = p.screenOf(t, p.commandIn(dir, "attach"))
	s.waitText("sessions of this directory")
	s.waitText("❯ " + later)
	s.typeKeys("\r")
	s.waitText("agentd · " + later)
}

// TestAltEnterQueuesAFollowUpAndEnterSteersTheRunningTurn.
func TestAltEnterQueuesAFollowUpAndEnterSteersTheRunningTurn(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--approve", "ask"))
	s := p.screen(t, "attach", id)
	s.waitText("ctrl+\\ detach")
	s.typeLine("run `echo held`")
	s.waitText(approvalAsked)
	s.typeKeys("then a follow-up")
	s.waitText("> then a follow-up")
	s.typeKeys("\x1b\r")
	s.waitText("queued: then a follow-up")
	s.typeLine("some steering")
	s.waitText("steering: some steering")
	s.typeKeys("y")
	s.waitText("❯ (into the turn) some steering")
	text := s.waitFor("the follow-up's turn", func(text string) bool {
		return strings.Count(text, "── completed") == 2 && strings.Contains(text, "❯ then a follow-up") && !strings.Contains(text, "queued: then a follow-up")
	})
	// The queued turn's id is of the form of the one typed.
	ids := regexp.MustCompile(`── turn (\S+)`).FindAllStringSubmatch(text, -1)
	if len(ids) != 2 {
		t.Fatalf("turns shown: %q\n%s", ids, text)
	}
	for _, id := range ids {
		if !regexp.MustCompile(`^t[0-9a-f]{16}$`).MatchString(id[1]) {
			t.Errorf("turn id %q is not of the form t and 16 hex digits:\n%s", id[1], text)
		}
	}
}

// TestAttachOffATerminalPrintsTheSessionsEvents: off a terminal, attach
// prints a turn's events as lines, and as JSON lines with --json, until
// interrupted; log -f prints the transcript and follows it.
func TestAttachOffATerminalPrintsTheSessionsEvents(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--approve", "all"))
	p.mustRun("run", "--session", id, "--approve", "all", "run `echo before-the-follow`")
	// start runs a follower; it returns once the follower has opened its
	// stream (attach says so on stderr), so nothing after is missed.
	start := func(args ...string) (*exec.Cmd, <-chan string) {
		cmd := p.command(args...)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		opened := make(chan struct{})
		if args[0] == "attach" {
			errOut, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				sc := bufio.NewScanner(errOut)
				for sc.Scan() {
					if strings.HasPrefix(sc.Text(), "session "+id) {
						close(opened)
						break
					}
				}
				io.Copy(io.Discard, errOut)
			}()
		} else {
			close(opened)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		go func() {
			defer close(lines)
			for sc := bufio.NewScanner(out); sc.Scan(); {
				lines <- sc.Text()
			}
		}()
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		select {
		case <-opened:
		case <-time.After(agentdtest.Timeout):
			t.Fatalf("%v did not open its stream", args)
		}
		return cmd, lines
	}
	until := func(lines <-chan string, want string) {
		t.Helper()
		deadline := time.After(agentdtest.Timeout)
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("no line with %q before the output ended", want)
				}
				if strings.Contains(line, want) {
					return
				}
			case <-deadline:
				t.Fatalf("no line with %q", want)
			}
		}
	}
	lines, linesOut := start("attach", id)
	jsonl, jsonOut := start("attach", "--json", id)
	logf, logOut := start("log", "-f", id)
	until(logOut, "│ before-the-follow")
	c := p.open(t)
	w, _ := subscribe(t, c, id)
	if _, err := client.Call(agentdtest.Context(t), c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: id, TurnID: "t-live",
		Content: protocol.Content{Text: "run `echo while-followed`"}}); err != nil {
		t.Fatal(err)
	}
	w.waitEnd(t, "t-live")
	until(linesOut, "→ $ echo while-followed")
	until(linesOut, "│ while-followed")
	until(linesOut, "── completed")
	until(jsonOut, `"event":"tool_call_end"`)
	until(jsonOut, `"event":"run_end"`)
	until(logOut, "→ $ echo while-followed")
	until(logOut, "── completed")
	for _, cmd := range []*exec.Cmd{lines, jsonl, logf} {
		cmd.Process.Signal(syscall.SIGINT)
		if err := cmd.Wait(); err != nil {
			t.Errorf("%v after an interrupt: %v", cmd.Args[1:], err)
		}
	}
}

// commandIn is command run in directory dir.
func (p *place) commandIn(dir string, args ...string) *exec.Cmd {
	cmd := p.command(args...)
	cmd.Dir = dir
	return cmd
}

// runIn is run in directory dir.
func (p *place) runIn(dir string, args ...string) (string, string, int) {
	p.t.Helper()
	return p.runCommand(p.commandIn(dir, args...))
}

// runCommand runs cmd and returns stdout, stderr and the exit code.
func (p *place) runCommand(cmd *exec.Cmd) (string, string, int) {
	p.t.Helper()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else if err != nil {
		p.t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// TestAttachAndPtyShowASessionOfAnotherHost: a screen and a PTY's view of
// a session another host of the runtime directory serves show it, though
// each asks this home's host first, before the session is found.
func TestAttachAndPtyShowASessionOfAnotherHost(t *testing.T) {
	first := newSessionPlace(t)
	first.hostID = "first"
	second := newSessionPlace(t)
	second.rundir = first.rundir
	second.hostID = "second"
	first.mustRun("new", "--id", "here", "--cwd", first.workDir())
	second.mustRun("new", "--id", "afar", "--cwd", second.workDir())
	second.mustRun("run", "--session", "afar", "a question from afar")
	c := second.open(t)
	r, err := client.Call(agentdtest.Context(t), c, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{SessionID: "afar", LaunchID: "l-afar", Command: "echo pty-of-afar; sleep 60", PTY: true})
	if err != nil {
		t.Fatal(err)
	}

	s := first.screen(t, "attach", "afar")
	s.waitText(`You said: "a question from afar"`)
	s.waitText("agentd · afar")
	s.typeKeys(keyQuit)
	if err := s.waitExit(); err != nil {
		t.Fatalf("detach: %v", err)
	}

	v, _ := first.ptyScreen(t, first.workDir(), "pty", "afar", r.Ref)
	v.waitText("pty-of-afar")
}
