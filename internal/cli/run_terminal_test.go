package cli_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/protocol"
)

// runAsked is what `agentd run` shows on a terminal while it waits for an
// approval.
const runAsked = "[y]es [n]o [a]lways allow bash in this session:"

// pendingOf waits until session id has an approval pending and returns it.
func pendingOf(t *testing.T, p *place, id string) protocol.Interaction {
	t.Helper()
	var in protocol.Interaction
	poll.Until(t, "an approval pending", func() bool {
		var pending []protocol.Interaction
		json.Unmarshal([]byte(p.mustRun("answer", "--json")), &pending)
		for _, x := range pending {
			if x.SessionID == id {
				in = x
				return true
			}
		}
		return false
	})
	return in
}

// lineOf returns the line of text that holds s, or "".
func lineOf(text, s string) string {
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

// TestRunPromptGivesWayWhenAnsweredElsewhere: the [y/n/a] prompt of a run
// on a terminal gives way the moment another command answers it; what
// follows starts on a line of its own, and no key is needed to go on.
func TestRunPromptGivesWayWhenAnsweredElsewhere(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--approve", "ask"))
	s := p.screen(t, "run", "--session", id, "run `echo answered-elsewhere`")
	s.waitText(runAsked)
	p.mustRun("answer", id, pendingOf(t, p, id).InteractionID, "allow")
	text := s.waitText("── completed")
	if err := s.waitExit(); err != nil {
		t.Fatalf("run: %v\n%s", err, text)
	}
	if !strings.Contains(text, "│ answered-elsewhere") {
		t.Fatalf("no output after the approval:\n%s", text)
	}
	if line := lineOf(text, runAsked); strings.TrimSpace(line[strings.Index(line, runAsked)+len(runAsked):]) != "" {
		t.Fatalf("output continued on the prompt's line %q:\n%s", line, text)
	}
	if !strings.Contains(text, "· allowed: run bash: echo answered-elsewhere") {
		t.Fatalf("the answer is not shown:\n%s", text)
	}
}

// TestRunPromptGivesWayWhenTheTurnIsStopped: agentd stop from another
// command cancels the approval; the prompt gives way and run exits 1
// without a key pressed.
func TestRunPromptGivesWayWhenTheTurnIsStopped(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--approve", "ask"))
	s := p.screen(t, "run", "--session", id, "run `echo never`")
	s.waitText(runAsked)
	p.mustRun("stop", "--now", id)
	text := s.waitText("── interrupted")
	if err := s.waitExit(); err == nil {
		t.Fatalf("run exited 0:\n%s", text)
	}
	if !strings.Contains(text, "· cancelled: run bash: echo never") || strings.Contains(text, "│ never") {
		t.Fatalf("screen:\n%s", text)
	}
}

// TestRunPromptAlwaysAllowsTheToolForTheSession: a at the prompt allows
// the call and the tool's later calls in the session, without asking.
func TestRunPromptAlwaysAllowsTheToolForTheSession(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--approve", "ask"))
	s := p.screen(t, "run", "--session", id, "run `echo first-call` and `echo second-call`")
	s.waitText(runAsked)
	s.typeKeys("a")
	text := s.waitText("── completed")
	if err := s.waitExit(); err != nil {
		t.Fatalf("run: %v\n%s", err, text)
	}
	if strings.Count(text, runAsked) != 1 || !strings.Contains(text, runAsked+" always") ||
		!strings.Contains(text, "│ first-call") || !strings.Contains(text, "│ second-call") {
		t.Fatalf("screen:\n%s", text)
	}
	if !strings.Contains(text, "allowed for the session: run bash") {
		t.Fatalf("the answer is not shown:\n%s", text)
	}
}

// TestRunCtrlCAtThePromptInterruptsTheTurn: Ctrl-C while the prompt waits
// interrupts the turn, says so, and the command exits 1.
func TestRunCtrlCAtThePromptInterruptsTheTurn(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir, "--approve", "ask"))
	s := p.screen(t, "run", "--session", id, "run `touch never-made`")
	s.waitText(runAsked)
	s.typeKeys("\x03")
	text := s.waitText("interrupted")
	if err := s.waitExit(); err == nil || !strings.Contains(text, "interrupting the turn") {
		t.Fatalf("run: %v\n%s", err, text)
	}
	if _, err := os.Stat(filepath.Join(dir, "never-made")); err == nil {
		t.Fatal("the tool ran")
	}
	if log := p.mustRun("log", id); !strings.Contains(log, "── interrupted") {
		t.Fatalf("log:\n%s", log)
	}
}

// TestRunCtrlCInterruptsARunningTool: Ctrl-C while a tool runs interrupts
// the turn at once and says so.
func TestRunCtrlCInterruptsARunningTool(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--approve", "all"))
	s := p.screen(t, "run", "--session", id, "run `echo started; sleep 60`")
	s.waitText("│ started")
	s.typeKeys("\x03")
	text := s.waitText("── interrupted")
	if err := s.waitExit(); err == nil || !strings.Contains(text, "interrupting the turn") {
		t.Fatalf("run: %v\n%s", err, text)
	}
}

// TestRunStreamsToolOutputOnATerminal: on a terminal a command's output
// shows as it comes, not when the command ends; while the command has
// printed nothing yet, a spinner says how long it has run, and it is gone
// once output comes.
func TestRunStreamsToolOutputOnATerminal(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	s := p.screen(t, "run", "--cwd", dir, "--approve", "all",
		"run `until [ -e go1 ]; do sleep 0.05; done; echo tick 1; until [ -e go2 ]; do sleep 0.05; done; echo tick 2`")
	s.waitText("bash · ")
	os.WriteFile(filepath.Join(dir, "go1"), nil, 0o644)
	text := s.waitText("│ tick 1")
	if strings.Contains(text, "bash · ") || strings.Contains(text, "│ tick 2") {
		t.Fatalf("after the first line:\n%s", text)
	}
	os.WriteFile(filepath.Join(dir, "go2"), nil, 0o644)
	s.waitText("── completed")
	if err := s.waitExit(); err != nil {
		t.Fatalf("run: %v\n%s", err, s.text())
	}
}

// TestRunAndLogShowControlCharactersVisibly: on a terminal, escape
// sequences a tool prints reach the screen as ^[…, never acted on: the
// screen is not cleared; --json keeps the bytes exact.
func TestRunAndLogShowControlCharactersVisibly(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	s := p.screen(t, "run", "--cwd", dir, "--approve", "all", `run `+"`"+`printf 'keep\033[2Jme\033]0;retitled\007\n'`+"`")
	text := s.waitText("── completed")
	if err := s.waitExit(); err != nil {
		t.Fatalf("run: %v\n%s", err, text)
	}
	id := sessionIDFrom(t, text)
	for name, text := range map[string]string{"run": text, "log": p.screen(t, "log", id).waitText("── completed")} {
		if !strings.Contains(text, "│ keep^[[2Jme^[]0;retitled^G") || !strings.Contains(text, "> run `printf") {
			t.Errorf("%s's screen:\n%s", name, text)
		}
	}
	out := p.mustRun("log", "--json", id)
	if !strings.Contains(out, `keep\u001b[2Jme\u001b]0;retitled\u0007`) {
		t.Fatalf("log --json does not keep the bytes:\n%s", out)
	}
}

// TestRunColoursItsMarksOnATerminalOnly: the renderer's marks are
// coloured on a terminal, not with NO_COLOR, nor when piped.
func TestRunColoursItsMarksOnATerminalOnly(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	render := func(noColor string) string {
		cmd := p.command("run", "--cwd", dir, "--approve", "all", "run `echo coloured`")
		cmd.Env = append(cmd.Env, "NO_COLOR="+noColor)
		s := p.screenOf(t, cmd)
		s.waitText("── completed")
		s.waitExit()
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.term.Render()
	}
	arrow := func(screen string) string { return lineOf(screen, "$ echo coloured") }
	if on := arrow(render("")); !strings.Contains(on, "\x1b[") {
		t.Errorf("no colour on a terminal: %q", on)
	}
	if off := arrow(render("1")); strings.Contains(off, "\x1b[") {
		t.Errorf("colour with NO_COLOR: %q", off)
	}
	if out := p.mustRun("run", "--cwd", dir, "--approve", "all", "run `echo piped`"); strings.Contains(out, "\x1b") {
		t.Errorf("colour when piped: %q", out)
	}
}

// TestRunSIGTERMLeavesPromptlyAndTheTurnRunsOn: SIGTERM ends the client
// while its turn streams, saying how to come back; the turn goes on.
func TestRunSIGTERMLeavesPromptlyAndTheTurnRunsOn(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	cmd, stderr := runUntilTool(t, p, id, "run `until [ -e go ]; do sleep 0.05; done; echo after-the-client`")
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err == nil || !strings.Contains(stderr.String(), "agentd attach "+id) {
		t.Fatalf("run after SIGTERM: %v: %s", err, stderr)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	poll.Until(t, "the turn to end", func() bool { return strings.Contains(p.mustRun("log", id), "── completed") })
	if log := p.mustRun("log", id); !strings.Contains(log, "│ after-the-client") {
		t.Fatalf("log:\n%s", log)
	}
}

// TestRunDetachReturnsWithTheSessionID: run -d starts the turn and returns
// at once with the session's id, saying how to come back to it.
func TestRunDetachReturnsWithTheSessionID(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	out, errOut, code := p.run("run", "-d", "--cwd", dir, "--approve", "all", "run `until [ -e go ]; do sleep 0.05; done; echo detached-done`")
	if code != 0 || !strings.Contains(errOut, "agentd attach") || !strings.Contains(errOut, "agentd log -f") {
		t.Fatalf("run -d: exit %d\n%s\n%s", code, out, errOut)
	}
	id := strings.TrimSpace(out)
	poll.Until(t, "the command to run", func() bool { return strings.Contains(p.mustRun("log", id), "→ $ until") })
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	poll.Until(t, "the turn to end", func() bool { return strings.Contains(p.mustRun("log", id), "── completed") })
	if log := p.mustRun("log", id); !strings.Contains(log, "│ detached-done") {
		t.Fatalf("log:\n%s", log)
	}
	if help := p.mustRun("run", "--help"); !strings.Contains(help, "agentd attach ID") || !strings.Contains(help, "Examples:") {
		t.Fatalf("run --help:\n%s", help)
	}
}

// TestASessionKeepsItsApprovalPolicy: a run without --approve leaves the
// session's policy as it was; --approve changes it; a call refused by
// policy says how to allow it.
func TestASessionKeepsItsApprovalPolicy(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir, "--approve", "all"))
	if out, errOut, code := p.run("run", "--session", id, "run `touch made-1`"); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "made-1")); err != nil {
		t.Fatal("the session's policy all was overridden by a run without --approve")
	}
	out := p.mustRun("run", "--session", id, "--approve", "read-only", "run `touch made-2`")
	if _, err := os.Stat(filepath.Join(dir, "made-2")); err == nil {
		t.Fatal("--approve read-only did not apply")
	}
	if !strings.Contains(out, "--approve") || !strings.Contains(out, "agentd answer") {
		t.Fatalf("the refusal does not say how to allow the call:\n%s", out)
	}
	p.mustRun("run", "--session", id, "run `touch made-3`")
	if _, err := os.Stat(filepath.Join(dir, "made-3")); err == nil {
		t.Fatal("the session did not keep read-only")
	}
}

// sessionCount returns how many sessions the place's host has.
func sessionCount(t *testing.T, p *place) int {
	t.Helper()
	var rows []protocol.Session
	if err := json.Unmarshal([]byte(p.mustRun("ls", "--json")), &rows); err != nil {
		t.Fatal(err)
	}
	return len(rows)
}

// TestRunReadsThePromptFromStdinOrAFile: run - and a pipe read the prompt
// from stdin, --file from a file; an empty or oversize prompt is a usage
// error that says how large it was, and leaves no session behind.
func TestRunReadsThePromptFromStdinOrAFile(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	withStdin := func(stdin string, args ...string) (string, string, int) {
		t.Helper()
		cmd := p.command(args...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !asExit(err, &exit) {
			t.Fatal(err)
		}
		code := 0
		if exit != nil {
			code = exit.ExitCode()
		}
		return out.String(), errOut.String(), code
	}
	for _, args := range [][]string{{"run", "--cwd", dir, "-"}, {"run", "--cwd", dir}} {
		out, errOut, code := withStdin("a prompt from stdin\n", args...)
		if code != 0 || !strings.Contains(out, `You said: "a prompt from stdin"`) {
			t.Fatalf("agentd %v: exit %d\n%s\n%s", args, code, out, errOut)
		}
	}
	file := filepath.Join(dir, "prompt.txt")
	os.WriteFile(file, []byte("a prompt from a file\n"), 0o644)
	if out := p.mustRun("run", "--cwd", dir, "--file", file); !strings.Contains(out, `You said: "a prompt from a file"`) {
		t.Fatalf("--file:\n%s", out)
	}
	before := sessionCount(t, p)
	os.WriteFile(file, []byte(strings.Repeat("x", 800_000)), 0o644)
	cases := []struct {
		stdin string
		args  []string
		says  string
	}{
		{"", []string{"run", "--cwd", dir, "-"}, "stdin is empty"},
		{"", []string{"run", "--cwd", dir, "--file", file}, "800000 bytes"},
		{strings.Repeat("y", 900_000), []string{"run", "--cwd", dir}, "900000 bytes"},
		{"", []string{"run", "--cwd", dir, "--file", file, "and words"}, "--file"},
	}
	for _, c := range cases {
		if _, errOut, code := withStdin(c.stdin, c.args...); code != 2 || !strings.Contains(errOut, c.says) {
			t.Errorf("agentd %v: exit %d %q; want exit 2 saying %q", c.args, code, errOut, c.says)
		}
	}
	if n := sessionCount(t, p); n != before {
		t.Fatalf("%d sessions after refused prompts, %d before", n, before)
	}
}

// TestAFailedStartLeavesNoSession: a run whose turn cannot start removes
// the session it created for it.
func TestAFailedStartLeavesNoSession(t *testing.T) {
	p := newSessionPlace(t)
	p.extraEnv = append(p.extraEnv, "ANTHROPIC_API_KEY=")
	_, errOut, code := p.run("run", "--cwd", p.workDir(), "--model", "anthropic/claude-sonnet-4-5", "hi")
	if code != 1 || !strings.Contains(errOut, "ANTHROPIC_API_KEY") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if n := sessionCount(t, p); n != 0 {
		t.Fatalf("%d sessions after a failed start", n)
	}
}

// TestRunContinueTakesTheLatestSessionOfTheDirectory: run -c continues
// the latest session of the current directory, and says when there is
// none.
func TestRunContinueTakesTheLatestSessionOfTheDirectory(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	runIn := func(args ...string) (string, string, int) {
		cmd := p.command(args...)
		cmd.Dir = dir
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !asExit(err, &exit) {
			t.Fatal(err)
		}
		if exit != nil {
			return out.String(), errOut.String(), exit.ExitCode()
		}
		return out.String(), errOut.String(), 0
	}
	if _, errOut, code := runIn("run", "-c", "hi"); code != 1 || !strings.Contains(errOut, "no session of") {
		t.Fatalf("-c without a session: exit %d %s", code, errOut)
	}
	p.mustRun("new", "--cwd", dir)
	latest := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	_, errOut, code := runIn("run", "--continue", "--title", "continued", "first")
	if code != 0 || sessionIDFrom(t, errOut) != latest {
		t.Fatalf("--continue: exit %d, %s; want session %s", code, errOut, latest)
	}
	if _, errOut, _ := runIn("run", "-c", "second"); sessionIDFrom(t, errOut) != latest {
		t.Fatalf("-c: %s; want session %s", errOut, latest)
	}
	if out := p.mustRun("ls"); !strings.Contains(out, "continued") {
		t.Fatalf("--title with -c did not rename the session:\n%s", out)
	}
}

// TestRunRefusesFlagsThatWouldBeIgnored: flags that would do nothing with
// --session are usage errors, as is an empty session id.
func TestRunRefusesFlagsThatWouldBeIgnored(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	before := sessionCount(t, p)
	cases := []struct {
		args []string
		says string
	}{
		{[]string{"run", "--session", "", "hi"}, "--session"},
		{[]string{"run", "--session", id, "--cwd", dir, "hi"}, "--cwd"},
		{[]string{"run", "--session", id, "-c", "hi"}, "--continue"},
		{[]string{"run", "-", "and", "words"}, "stdin"},
	}
	for _, c := range cases {
		if _, errOut, code := p.run(c.args...); code != 2 || !strings.Contains(errOut, c.says) {
			t.Errorf("agentd %v: exit %d %q; want exit 2 naming %q", c.args, code, errOut, c.says)
		}
	}
	if n := sessionCount(t, p); n != before {
		t.Fatalf("%d sessions, %d before", n, before)
	}
	if _, errOut, code := p.run("run", "--session", id, "--title", "retitled", "hi"); code != 0 {
		t.Fatalf("--title with --session: exit %d %s", code, errOut)
	}
	if out := p.mustRun("ls"); !strings.Contains(out, "retitled") {
		t.Fatalf("--title with --session was ignored:\n%s", out)
	}
}

func asExit(err error, exit **exec.ExitError) bool { return errors.As(err, exit) }

// TestRunGivesTheTerminalBackWhenTerminatedAtThePrompt: the prompt reads
// keys without echo or Enter, and SIGTERM there leaves the terminal as it
// was: line editing and echo back on.
func TestRunGivesTheTerminalBackWhenTerminatedAtThePrompt(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--approve", "ask"))
	s := p.screen(t, "run", "--session", id, "run `echo never`")
	s.waitText(runAsked)
	lflag := func() uint32 {
		tio, err := unix.IoctlGetTermios(int(s.tty.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		return tio.Lflag
	}
	poll.Until(t, "keys read one at a time", func() bool { return lflag()&(unix.ICANON|unix.ECHO) == 0 })
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.waitExit(); err == nil {
		t.Fatal("run exited 0 after SIGTERM")
	}
	if got := lflag(); got&(unix.ICANON|unix.ECHO) != unix.ICANON|unix.ECHO {
		t.Fatalf("the terminal was left with lflag %#x", got)
	}
	if text := s.waitText("agentd attach " + id); !strings.Contains(text, "terminated") {
		t.Fatalf("screen:\n%s", text)
	}
}

// TestRunDetachWithJSONPrintsTheIDs: run -d --json prints the session and
// the turn begun as one JSON object.
func TestRunDetachWithJSONPrintsTheIDs(t *testing.T) {
	p := newSessionPlace(t)
	var got struct{ SessionID, TurnID string }
	if err := json.Unmarshal([]byte(p.mustRun("run", "-d", "--json", "--cwd", p.workDir(), "hello")), &got); err != nil || got.SessionID == "" || got.TurnID == "" {
		t.Fatalf("run -d --json: %+v %v", got, err)
	}
	poll.Until(t, "the turn to end", func() bool { return strings.Contains(p.mustRun("log", got.SessionID), "── completed") })
}

// readmeFirstCommand returns the arguments of the README's first command,
// `go run ./cmd/agentd run '…'`, after the program.
func readmeFirstCommand(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```sh\ngo run ./cmd/agentd ")
	line, _, _ := strings.Cut(rest, "\n")
	line, _, _ = strings.Cut(line, "#")
	cmd, quoted, ok2 := strings.Cut(strings.TrimSpace(line), " '")
	if !ok || !ok2 || cmd != "run" || !strings.HasSuffix(quoted, "'") {
		t.Fatalf("the README's first command is not `go run ./cmd/agentd run '…'`: %q", line)
	}
	return []string{cmd, strings.TrimSuffix(quoted, "'")}
}

// TestTheREADMEsFirstCommandDoesWhatItSays: pasted into a terminal, the
// README's first command asks before it runs `ls -la`, and with y answers
// with what it printed; piped, the call is refused and the answer says how
// to allow it.
func TestTheREADMEsFirstCommandDoesWhatItSays(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	args := readmeFirstCommand(t)
	cmd := p.command(args...)
	cmd.Dir = dir
	s := p.screenOf(t, cmd)
	s.waitText(runAsked)
	s.typeKeys("y")
	text := s.waitText("── completed")
	if err := s.waitExit(); err != nil || strings.Count(text, "hello.txt") < 2 {
		t.Fatalf("on a terminal: %v\n%s", err, text)
	}
	cmd = p.command(args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil || strings.Contains(string(out), "hello.txt") || !strings.Contains(string(out), "--approve all") {
		t.Fatalf("piped: %v\n%s", err, out)
	}
}
