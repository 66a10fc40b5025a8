package cli_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/protocol"
)

// newShellPlace is a place whose shell is sh, with a session of its work
// directory; it returns the session's id.
func newShellPlace(t *testing.T) (*place, string) {
	p := newSessionPlace(t)
	p.extraEnv = append(p.extraEnv, "SHELL=/bin/sh")
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir()))
	return p, id
}

// stderrFile is a command's stderr written straight to a file, so what
// the command said is there as soon as it said it.
type stderrFile struct {
	t    *testing.T
	path string
}

func (f stderrFile) String() string {
	b, err := os.ReadFile(f.path)
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

// ptyScreen runs `agentd args…` in directory dir on a screen, its stderr
// kept apart: an attached PTY's first screen clears what was said on it
// before.
func (p *place) ptyScreen(t *testing.T, dir string, args ...string) (*screen, stderrFile) {
	t.Helper()
	cmd := p.commandIn(dir, args...)
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	cmd.Stderr = f
	return p.screenOf(t, cmd), stderrFile{t, f.Name()}
}

// wantCooked checks that s's terminal was given back as it was: line by
// line, echoing.
func wantCooked(t *testing.T, s *screen) {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(s.tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if tio.Lflag&unix.ICANON == 0 || tio.Lflag&unix.ECHO == 0 {
		t.Fatalf("the terminal is left raw: lflag %#x", tio.Lflag)
	}
}

// listResources runs `agentd ps --json id`.
func listResources(t *testing.T, p *place, id string) []protocol.Resource {
	t.Helper()
	var rs []protocol.Resource
	if err := json.Unmarshal([]byte(p.mustRun("ps", "--json", id)), &rs); err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestAShellRunsOnAPTYOfTheSessionAndOutlivesItsDetach: agentd shell
// starts a shell in the session's directory and types into it; ctrl+\
// detaches and gives the terminal back, and ps lists the shell running;
// agentd pty attaches again to the screen as it was, a second agentd pty
// watches read-only what the first types, the size follows the terminal,
// the watcher takes control once the first detaches, and `exit 3` ends the
// attached command with 3.
func TestAShellRunsOnAPTYOfTheSessionAndOutlivesItsDetach(t *testing.T) {
	p, id := newShellPlace(t)
	work := p.workDir()
	s, _ := p.ptyScreen(t, work, "shell")
	// The shell's program hides the cursor; the terminal gets it back at
	// the detach.
	s.typeKeys("echo hello-$((6*7)) in $PWD; printf '\\033[?25lcursor-%s' hidden\r")
	s.waitText("hello-42 in " + work)
	s.waitText("cursor-hidden")
	s.typeKeys("\x1c")
	if err := s.waitExit(); err != nil {
		t.Fatalf("detach: %v", err)
	}
	wantCooked(t, s)
	s.mu.Lock()
	hidden := s.term.CursorHidden()
	s.mu.Unlock()
	if hidden {
		t.Fatal("the cursor the PTY's program hid stayed hidden after the detach")
	}

	rs := listResources(t, p, id)
	if len(rs) != 1 || rs[0].Kind != protocol.ResourcePTY || rs[0].State != protocol.ResourceRunning || rs[0].Cwd != work {
		t.Fatalf("ps --json after the detach: %+v", rs)
	}
	ref := rs[0].Ref
	table := p.mustRun("ps", id)
	if !strings.Contains(table, ref) || !strings.Contains(table, "running") || !strings.Contains(table, "/bin/sh") {
		t.Fatalf("ps after the detach:\n%s", table)
	}

	a, _ := p.ptyScreen(t, work, "pty", id[:5], ref) // a prefix names the session too
	a.waitText("hello-42 in " + work)
	b, _ := p.ptyScreen(t, work, "pty", id, ref)
	b.waitText("hello-42 in " + work)
	// It says on its last line that it watches read-only.
	b.waitText("watching it read-only until it is free and a key is typed (ctrl+\\ detaches)")
	b.typeKeys("echo typed-in-b\r")
	a.typeKeys("echo typed-in-a-$((1+1))\r")
	for _, s := range []*screen{a, b} {
		s.waitText("typed-in-a-2")
	}
	if text := a.text(); strings.Contains(text, "typed-in-b") {
		t.Fatalf("a watching client's keys reached the PTY:\n%s", text)
	}

	// The terminal of the controlling client changes size: the PTY's
	// follows.
	if err := pty.Setsize(a.tty, &pty.Winsize{Cols: 100, Rows: 30}); err != nil {
		t.Fatal(err)
	}
	a.typeKeys(`while [ "$(stty size)" != "30 100" ]; do sleep 0.05; done; echo resized-$(stty size | tr ' ' x)` + "\r")
	for _, s := range []*screen{a, b} {
		s.waitText("resized-30x100")
	}

	// The controlling client detaches: the watching one takes control at
	// its next key.
	a.typeKeys("\x1c")
	if err := a.waitExit(); err != nil {
		t.Fatalf("detach: %v", err)
	}
	b.typeKeys("echo b-took-over-$((9*9))\r")
	b.waitFor("the PTY taken over, its read-only line gone", func(text string) bool {
		return strings.Contains(text, "b-took-over-81") && !strings.Contains(text, "read-only")
	})
	b.typeKeys("exit 3\r")
	var exit *exec.ExitError
	if err := b.waitExit(); !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("agentd pty after exit 3: %v\n%s", err, b.text())
	}
	wantCooked(t, b)
	// Once nothing runs, the worker may retire and its list with it.
	if rs = listResources(t, p, id); len(rs) > 0 && (rs[0].State != protocol.ResourceExited || rs[0].ExitCode == nil || *rs[0].ExitCode != 3) {
		t.Fatalf("ps --json after exit 3: %+v", rs)
	}
}

// TestExitInAShellEndsItsCommandWithTheShellsCode: `exit 3` in agentd
// shell ends it with 3, the terminal given back, after all the shell
// printed.
func TestExitInAShellEndsItsCommandWithTheShellsCode(t *testing.T) {
	p, id := newShellPlace(t)
	s, _ := p.ptyScreen(t, p.workDir(), "shell", id)
	s.typeKeys("echo ready-$((2+3))\r")
	s.waitText("ready-5")
	// What the shell prints just before it exits is shown, none lost.
	s.typeKeys("i=0; while [ $i -lt 300 ]; do echo line-$i; i=$((i+1)); done; echo last-$((7*6)); exit 3\r")
	var exit *exec.ExitError
	if err := s.waitExit(); !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("agentd shell after exit 3: %v\n%s", err, s.text())
	}
	s.waitText("last-42")
	wantCooked(t, s)
}

// TestWatchNeverTakesControlAndStopEndsOneResource: agentd pty --watch
// shows a PTY no one controls without typing into it; agentd stop
// SESSION REF stops that resource, which ends the watching command.
func TestWatchNeverTakesControlAndStopEndsOneResource(t *testing.T) {
	p, id := newShellPlace(t)
	work := p.workDir()
	s, _ := p.ptyScreen(t, work, "shell", id)
	s.typeKeys("echo before-$((3+4))\r")
	s.waitText("before-7")
	s.typeKeys("\x1c")
	if err := s.waitExit(); err != nil {
		t.Fatalf("detach: %v", err)
	}
	ref := listResources(t, p, id)[0].Ref

	// Keys typed together with ctrl+\ reach the PTY before the detach.
	d, _ := p.ptyScreen(t, work, "pty", id, ref)
	d.waitText("before-7")
	d.typeKeys("echo typed-with-the-detach-$((5*5))\r\x1c")
	if err := d.waitExit(); err != nil {
		t.Fatalf("detach: %v", err)
	}

	w, _ := p.ptyScreen(t, work, "pty", "--watch", id, ref)
	w.waitText("typed-with-the-detach-25")
	w.typeKeys("echo from-the-watcher\r")
	// Another client can take control: the watcher holds none.
	a, aErr := p.ptyScreen(t, work, "pty", id, ref)
	a.typeKeys("echo controlled-$((4+4))\r")
	for _, s := range []*screen{a, w} {
		s.waitText("controlled-8")
	}
	if strings.Contains(aErr.String(), "read-only") || strings.Contains(a.text(), "from-the-watcher") {
		t.Fatalf("the watcher took control or typed: %q\n%s", aErr.String(), a.text())
	}

	if out := p.mustRun("stop", id, ref); !strings.Contains(out, ref+" stopped") {
		t.Fatalf("stop %s %s: %q", id, ref, out)
	}
	for _, s := range []*screen{a, w} {
		if err := s.waitExit(); err == nil {
			t.Fatalf("agentd pty of a stopped PTY exited 0")
		}
		wantCooked(t, s)
	}
	if rs := listResources(t, p, id); len(rs) > 0 && rs[0].State != protocol.ResourceExited {
		t.Fatalf("ps --json after stop: %+v", rs)
	}
	_, errOut, code := p.run("stop", id, "pty-99")
	if code == 0 || !strings.Contains(errOut, "pty-99") {
		t.Fatalf("stop of an unknown ref: exit %d: %s", code, errOut)
	}
}

// TestAttachingToAPTYNeedsATerminalAndARunningPTY: off a terminal, and for
// refs that are not a running PTY, the commands say what is wrong.
func TestAttachingToAPTYNeedsATerminalAndARunningPTY(t *testing.T) {
	p, id := newShellPlace(t)
	if _, errOut, code := p.run("shell", id); code != 1 || !strings.Contains(errOut, "needs a terminal") {
		t.Fatalf("shell off a terminal: exit %d: %s", code, errOut)
	}
	if _, errOut, code := p.run("pty", id); code != 2 || !strings.Contains(errOut, "SESSION REF") {
		t.Fatalf("pty without a REF: exit %d: %s", code, errOut)
	}
	if _, errOut, code := p.run("ps", id, "extra"); code != 2 {
		t.Fatalf("ps with two arguments: exit %d: %s", code, errOut)
	}
	if out := p.mustRun("ps", id); !strings.Contains(out, "runs nothing") {
		t.Fatalf("ps of a session that runs nothing: %q", out)
	}
	if _, errOut, code := p.run("stop", "--now", id, "pty-1"); code != 2 {
		t.Fatalf("stop --now with a REF: exit %d: %s", code, errOut)
	}
	s, errOut := p.ptyScreen(t, p.workDir(), "pty", id, "pty-7")
	if err := s.waitExit(); err == nil || !strings.Contains(errOut.String(), "pty-7") {
		t.Fatalf("pty of an unknown ref: %v: %q", err, errOut.String())
	}
	// A shell run is refused as what it is, though its stream was opened
	// while it was looked up; its terminal is given back untouched.
	c := p.open(t)
	run, err := client.Call(agentdtest.Context(t), c, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{SessionID: id, LaunchID: "l-run", Command: "sleep 60"})
	if err != nil {
		t.Fatal(err)
	}
	s, errOut = p.ptyScreen(t, p.workDir(), "pty", id, run.Ref)
	if err := s.waitExit(); err == nil || !strings.Contains(errOut.String(), run.Ref+" is a shell run, not a PTY") {
		t.Fatalf("pty of a shell run: %v: %q", err, errOut.String())
	}
	if text := strings.TrimSpace(s.text()); text != "" {
		t.Fatalf("pty of a shell run drew on the terminal:\n%s", text)
	}
}

// TestPsListsWhatRunsAndTheLastEndedRuns: every command the agent runs is
// a shell run, so ps lists what runs and the last ten that ended, saying
// how many more --all lists.
func TestPsListsWhatRunsAndTheLastEndedRuns(t *testing.T) {
	p, id := newShellPlace(t)
	c := p.open(t)
	ctx := agentdtest.Context(t)
	startRun := func(launch, command string) protocol.Resource {
		t.Helper()
		r, err := client.Call(ctx, c, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{SessionID: id, LaunchID: launch, Command: command})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	server := startRun("server", "sleep 60")
	for i := range 12 {
		r := startRun(fmt.Sprint("step-", i), fmt.Sprintf("exit %d", i))
		// Stopping answers once it has ended.
		if _, err := client.Call(ctx, c, protocol.OpRuntimeResourceStop, protocol.ResourceRef{SessionID: id, Ref: r.Ref}); err != nil {
			t.Fatal(err)
		}
	}
	table := p.mustRun("ps", id)
	if !strings.Contains(table, server.Ref+" ") || strings.Contains(table, "exit 1\n") || !strings.Contains(table, "exit 2\n") ||
		!strings.Contains(table, "exit 11\n") || !strings.Contains(table, "and 2 earlier ended runs: `agentd ps --all "+id+"` lists them") {
		t.Fatalf("ps:\n%s", table)
	}
	var all []protocol.Resource
	if err := json.Unmarshal([]byte(p.mustRun("ps", "--all", "--json", id)), &all); err != nil || len(all) != 13 {
		t.Fatalf("ps --all --json: %d resources, %v", len(all), err)
	}
}

// TestAPTYWatchedFromASmallerTerminalIsClippedAroundItsCursor: a 100×30
// PTY watched from an 80×24 terminal is drawn as the PTY shows it,
// clipped around its cursor, its last row saying so; a key typed there
// says why it is not sent.
func TestAPTYWatchedFromASmallerTerminalIsClippedAroundItsCursor(t *testing.T) {
	p, id := newShellPlace(t)
	work := p.workDir()
	a := p.screenSized(t, p.commandIn(work, "shell", id), 100, 30)
	a.typeKeys("for i in $(seq 1 40); do echo line-$i; done\r")
	a.waitText("line-40")
	ref := listResources(t, p, id)[0].Ref

	cmd := p.commandIn(work, "pty", id, ref)
	cmd.Stderr = nil
	b := p.screenSized(t, cmd, 80, 24)
	b.waitText(ref + " is 100×30: clipped to rows")
	a.typeKeys("echo from-two\r")
	text := b.waitFor("the command and its output, on lines of their own", func(text string) bool {
		lines := strings.Split(text, "\n")
		for i, l := range lines[:len(lines)-1] {
			if strings.HasSuffix(strings.TrimRight(l, " "), "echo from-two") && strings.HasPrefix(lines[i+1], "from-two") {
				return true
			}
		}
		return false
	})
	if at := b.cellOf("echo from-two", "echo from-two"); at < 0 || at > 10 {
		t.Fatalf("the command is drawn at column %d:\n%s", at, text)
	}
	lines := strings.Split(strings.TrimRight(text, "\n "), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "agentd: "+ref+" is 100×30: clipped to rows 8–30, columns 1–80") {
		t.Fatalf("the last row: %q\n%s", last, text)
	}
	b.typeKeys("x")
	b.waitText("read-only: another client controls this PTY")
	if strings.Contains(a.text(), "x\n") {
		t.Fatalf("a watching client's key reached the PTY:\n%s", a.text())
	}
}

// lentAway reports, each time it is called, whether a process other than
// s's command holds s's terminal: the PTY's worker it is lent to.
func lentAway(t *testing.T, s *screen) func() bool {
	tty, client := s.cmd.Stdin.(*os.File).Name(), s.cmd.Process.Pid
	return func() bool {
		return slices.ContainsFunc(agentdtest.Holders(t, tty), func(pid int) bool { return pid != client })
	}
}

// detachFreeing types the detach key into s and checks, as soon as its
// command has exited, that nothing holds its terminal any more: the
// terminal's end (waitExit's drain) would wait for every holder to close
// it.
func detachFreeing(t *testing.T, s *screen) {
	t.Helper()
	s.typeKeys("\x1c")
	select {
	case <-s.exit:
	case <-agentdtest.Context(t).Done():
		t.Fatalf("agentd shell still runs after the detach key:\n%s", s.text())
	}
	if pids := agentdtest.Holders(t, s.cmd.Stdin.(*os.File).Name()); len(pids) > 0 {
		t.Fatalf("processes %v hold the terminal after agentd shell detached from it", pids)
	}
	if err := s.waitExit(); err != nil {
		t.Fatalf("detach: %v", err)
	}
}

// TestAShellLendsItsTerminalToThePTYsWorkerAndHasItBackBeforeItLeaves:
// once keys are typed into agentd shell, the PTY's worker holds the
// terminal (it reads the keys and draws the PTY there); at the detach
// key it gives the terminal back, before the command exits, so that
// nothing of agentd reads the person's keys after.
//
// While the terminal is lent, agentd shell has none of its descriptions in
// its poller: a key typed, or the worker's drawing of it, would wake it
// for nothing, at each key.
func TestAShellLendsItsTerminalToThePTYsWorkerAndHasItBackBeforeItLeaves(t *testing.T) {
	p, id := newShellPlace(t)
	s, _ := p.ptyScreen(t, p.workDir(), "shell", id)
	s.typeKeys("echo typed-$((5*5))\r")
	s.waitText("typed-25")
	poll.Until(t, "another process than agentd shell holding its terminal", lentAway(t, s))
	s.typeKeys("echo still-$((6*6))\r")
	s.waitText("still-36")
	if fds := agentdtest.Polled(t, s.cmd.Process.Pid, s.cmd.Stdin.(*os.File).Name()); len(fds) > 0 {
		t.Errorf("agentd shell has descriptors %v of its terminal in its poller while the terminal is lent", fds)
	}
	detachFreeing(t, s)
	wantCooked(t, s)
}

// TestAShellLendsItsTerminalAgainAfterAFloodItFellBehind: a flood the
// terminal does not take has the PTY's worker give the terminal back, and
// agentd shell goes on through the host to the flood's end; a key typed
// once it has rested a moment lends the terminal to the worker again.
func TestAShellLendsItsTerminalAgainAfterAFloodItFellBehind(t *testing.T) {
	p, id := newShellPlace(t)
	s, _ := p.ptyScreen(t, p.workDir(), "shell", id)
	lent := lentAway(t, s)
	s.typeKeys("echo typed-$((5*5))\r")
	s.waitText("typed-25")
	poll.Until(t, "the terminal lent to the PTY's worker", lent)

	// More than the worker holds for a reader (1 MiB), while the screen
	// here takes none of it: the screen's lock held, its reader stops at
	// the next piece. Each line is drawn at the top left, so that the
	// screen here, which takes a scroll slowly, takes the flood quickly.
	s.mu.Lock()
	s.typeKeys("yes \"$(printf '\\033[H')flood-line\" | head -c 3000000; printf '\\033[2J'; echo flood-$((4*4))\r")
	poll.Until(t, "the terminal given back in the flood", func() bool { return !lent() })
	s.mu.Unlock()
	s.waitText("flood-16")

	// A space now and then, until one comes after the rest.
	var typed time.Time
	poll.Until(t, "the terminal lent again at a key", func() bool {
		if time.Since(typed) > 100*time.Millisecond {
			s.typeKeys(" ")
			typed = time.Now()
		}
		return lent()
	})
	s.typeKeys("echo again-$((7*7))\r")
	s.waitText("again-49")
	detachFreeing(t, s)
}
