package cli_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/creack/pty"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// jsonError decodes the one JSON object a command writes on stderr for a
// failure under --json.
func jsonError(t *testing.T, stderr string) (code, message string) {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(stderr), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("stderr is not one JSON error object (%v): %q", err, stderr)
	}
	return e.Error.Code, e.Error.Message
}

func TestOperandsTheHostRefusesAreUsageErrorsWithoutOperationNames(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--id", "plain", "--cwd", p.workDir()))
	cases := []struct {
		args []string
		says string
	}{
		{[]string{"rename", id, ""}, "the title is required"},
		{[]string{"rename", id, "\x01"}, "the title must not contain control characters"},
		{[]string{"answer", id, "i-1", "maybe"}, `the answer must be "allow"`},
		{[]string{"models", "thinking", "bogus", "--session", id}, "the level must be"},
		{[]string{"log", ""}, "the session must not be empty"},
	}
	for _, c := range cases {
		_, errOut, code := p.run(c.args...)
		if code != 2 || !strings.Contains(errOut, c.says) {
			t.Errorf("agentd %q: exit %d, stderr %q; want exit 2 saying %q", c.args, code, errOut, c.says)
		}
		for _, op := range protocol.OperationNames() {
			if strings.Contains(errOut, op+":") {
				t.Errorf("agentd %q: the message names operation %s: %q", c.args, op, errOut)
			}
		}
	}
	// What the host could not do with well-formed operands is no usage error.
	if _, errOut, code := p.run("rename", "nosuch", "title"); code != 1 || !strings.Contains(errOut, `"nosuch"`) {
		t.Errorf("rename of a missing session: exit %d %q", code, errOut)
	}
}

func TestErrorsUnderJSONAreOneJSONObjectOnStderr(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--id", "plain", "--cwd", p.workDir()))
	cases := []struct {
		args       []string
		exit       int
		code, says string
	}{
		{[]string{"rename", "--json", id, ""}, 2, "invalid_request", "title"},
		{[]string{"log", "--json", "nosuch"}, 1, "not_found", "nosuch"},
		{[]string{"rm", "--json", "nosuch"}, 1, "not_found", "nosuch"},
		{[]string{"ls", "--json", "--limit", "-1"}, 2, "usage", "--limit"},
		{[]string{"ls", "--json", "--bogus"}, 2, "usage", "bogus"},
	}
	for _, c := range cases {
		stdout, errOut, exit := p.run(c.args...)
		if exit != c.exit || stdout != "" {
			t.Errorf("agentd %q: exit %d, stdout %q; want exit %d and nothing on stdout", c.args, exit, stdout, c.exit)
			continue
		}
		if code, msg := jsonError(t, errOut); code != c.code || !strings.Contains(msg, c.says) {
			t.Errorf("agentd %q: error %s %q; want %s saying %q", c.args, code, msg, c.code, c.says)
		}
	}
}

func TestMistypedCommandsAreRefusedWithASuggestion(t *testing.T) {
	p := newPlace(t)
	cases := []struct {
		args []string
		says string
	}{
		{[]string{"stauts"}, `did you mean "status"`},
		{[]string{"nosuch", "--help"}, `unknown command "nosuch"`},
		{[]string{"--host-model", "faux/echo", "lss"}, `did you mean "ls"`},
		{[]string{"models", "slect"}, `did you mean "select"`},
		{[]string{"help", "stauts"}, `did you mean "status"`},
		{[]string{"ls", "--limit", "abc"}, `--limit "abc": want a whole number`},
		{[]string{"host", "--idle-grace", "soon"}, `--idle-grace "soon": want a duration`},
	}
	for _, c := range cases {
		stdout, errOut, code := p.run(c.args...)
		if code != 2 || !strings.Contains(errOut, c.says) || strings.Contains(errOut, "strconv") || stdout != "" {
			t.Errorf("agentd %q: exit %d, stdout %q, stderr %q; want exit 2 saying %q", c.args, code, stdout, errOut, c.says)
		}
	}
	for _, args := range [][]string{{"--help"}, {"help"}} {
		if out := p.mustRun(args...); !strings.Contains(out, "Available Commands") {
			t.Errorf("agentd %v:\n%s", args, out)
		}
	}
	if out := p.mustRun("help", "models", "select"); !strings.Contains(out, "models select PROVIDER/MODEL") {
		t.Errorf("agentd help models select:\n%s", out)
	}
}

func TestVersionFlagAndCompletionScripts(t *testing.T) {
	p := newPlace(t)
	flag, cmd := p.mustRun("--version"), p.mustRun("version")
	if flag != cmd || !strings.HasPrefix(flag, "agentd ") || !strings.Contains(flag, "protocol 1..1") {
		t.Errorf("--version %q, version %q", flag, cmd)
	}
	for shell, marker := range map[string]string{"bash": "complete -o default", "zsh": "#compdef agentd", "fish": "complete -c agentd"} {
		if out := p.mustRun("completion", shell); !strings.Contains(out, marker) {
			t.Errorf("completion %s lacks %q:\n%.300s", shell, marker, out)
		}
	}
	if _, errOut, code := p.run("completion", "tcsh"); code != 2 || !strings.Contains(errOut, "tcsh") {
		t.Errorf("completion for an unknown shell: exit %d %q", code, errOut)
	}
}

func TestUnarchiveBringsASessionBackAndArchivedErrorsSayHow(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--id", "shelved", "--cwd", p.workDir()))
	p.mustRun("archive", id)
	listed := func(args ...string) bool {
		var rows []protocol.Session
		if err := json.Unmarshal([]byte(p.mustRun(append([]string{"ls", "--json"}, args...)...)), &rows); err != nil {
			t.Fatal(err)
		}
		return len(rows) == 1 && rows[0].SessionID == id
	}
	if listed() || !listed("--archived") {
		t.Fatal("an archived session is listed by default, or not with --archived")
	}
	for _, args := range [][]string{{"rename", id, "new title"}, {"run", "--session", id, "hi"}, {"archive", id}} {
		_, errOut, code := p.run(args...)
		if code != 1 || !strings.Contains(errOut, "agentd unarchive "+id) {
			t.Errorf("agentd %q on an archived session: exit %d %q; want it to say how to unarchive", args, code, errOut)
		}
	}
	var s protocol.Session
	if err := json.Unmarshal([]byte(p.mustRun("unarchive", "--json", "shel")), &s); err != nil || s.SessionID != id || s.Archived {
		t.Fatalf("unarchive: %+v %v", s, err)
	}
	if !listed() {
		t.Fatal("an unarchived session is not listed")
	}
	if out := p.mustRun("unarchive", id); strings.TrimSpace(out) != id {
		t.Fatalf("unarchiving a session that is not archived: %q", out)
	}
	p.mustRun("rename", id, "back at work")
	p.mustRun("run", "--session", id, "hello again")
}

func TestRemoveAnswersItsRecordAndAsksBeforeRemovingARunningSession(t *testing.T) {
	p := newSessionPlace(t)
	idle := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir()))
	var ref protocol.SessionRef
	if err := json.Unmarshal([]byte(p.mustRun("rm", "--json", idle)), &ref); err != nil || ref.SessionID != idle {
		t.Fatalf("rm --json: %+v %v", ref, err)
	}

	busy := strings.TrimSpace(p.mustRun("new", "--id", "busy", "--cwd", p.workDir()))
	run, runErr := runUntilTool(t, p, busy, "run `sleep 30`")
	// Off a terminal: refused without --force, naming it.
	if _, errOut, code := p.run("rm", busy); code != 1 || !strings.Contains(errOut, "--force") {
		t.Fatalf("rm of a running session off a terminal: exit %d %q", code, errOut)
	}
	// On one: asked, and no is no.
	s := p.screen(t, "rm", busy)
	s.waitText("[y/N]")
	s.typeKeys("n\r")
	s.waitText("not removed")
	if err := s.waitExit(); err == nil {
		t.Fatalf("answering no: exit 0\n%s", s.text())
	}
	p.mustRun("log", busy)
	s = p.screen(t, "rm", busy)
	s.waitText("[y/N]")
	s.typeKeys("y\r")
	s.waitText("removed " + busy)
	if err := s.waitExit(); err != nil {
		t.Fatalf("answering yes: %v\n%s", err, s.text())
	}
	if _, _, code := p.run("log", busy); code != 1 {
		t.Fatalf("the removed session is still there")
	}
	// The client that was streaming its turn does not point at the log
	// of a session that no longer exists.
	if err := run.Wait(); err == nil || strings.Contains(runErr.String(), "agentd log") || !strings.Contains(runErr.String(), "removed") {
		t.Fatalf("the streaming run: %v %q", err, runErr.String())
	}

	forced := strings.TrimSpace(p.mustRun("new", "--id", "forced", "--cwd", p.workDir()))
	run, _ = runUntilTool(t, p, forced, "run `sleep 30`")
	p.mustRun("rm", "--force", forced)
	run.Wait()
}

func TestASelectorLongerThanAnySessionIDIsRefusedNotEchoed(t *testing.T) {
	p := newSessionPlace(t)
	p.mustRun("new", "--cwd", p.workDir())
	// Through the command: a usage error naming the limit.
	long := strings.Repeat("a", 100_000)
	if _, errOut, code := p.run("log", long); code != 2 || !strings.Contains(errOut, "at most 64") || len(errOut) > 1000 {
		t.Fatalf("log of a long selector: exit %d, %d bytes of stderr: %.200s", code, len(errOut), errOut)
	}
	// Through the protocol, with a selector near the frame limit.
	c, _, _, err := activation.Open(agentdtest.Context(t), activation.OpenOptions{NoStart: true, Activation: activation.Options{Home: p.home, RuntimeDir: p.rundir}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	huge := strings.Repeat("b", protocol.MaxMessageBytes-1024)
	in := protocol.SessionRef{SessionID: huge}
	for op, call := range map[string]func() error{
		"session.get": func() error { _, err := client.Call(agentdtest.Context(t), c, protocol.OpSessionGet, in); return err },
		"session.remove": func() error {
			_, err := client.Call(agentdtest.Context(t), c, protocol.OpSessionRemove, in)
			return err
		},
		"interaction.query": func() error {
			_, err := client.Call(agentdtest.Context(t), c, protocol.OpInteractionQuery, in)
			return err
		},
	} {
		err := call()
		if !errors.Is(err, client.ErrInvalidRequest) || len(err.Error()) > 1000 {
			t.Errorf("%s of a %d-byte selector: %.200v", op, len(huge), err)
		}
	}
}

func TestASymlinkedWorkingDirectoryIsResolvedOnceAtCreation(t *testing.T) {
	p := newSessionPlace(t)
	base := filepath.Dir(p.home)
	first, second := filepath.Join(base, "first"), filepath.Join(base, "second")
	for _, d := range []string{first, second} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(base, "current")
	if err := os.Symlink(first, link); err != nil {
		t.Fatal(err)
	}
	var s protocol.Session
	if err := json.Unmarshal([]byte(p.mustRun("new", "--json", "--cwd", link)), &s); err != nil {
		t.Fatal(err)
	}
	if s.Cwd != first || s.Title != "" {
		t.Fatalf("session cwd %q title %q; want %q, untitled", s.Cwd, s.Title, first)
	}
	os.Remove(link)
	if err := os.Symlink(second, link); err != nil {
		t.Fatal(err)
	}
	out := p.mustRun("run", "--session", s.SessionID, "--approve", "all", "run `pwd`")
	if !strings.Contains(out, first) || strings.Contains(out, second) {
		t.Fatalf("the tool ran elsewhere than %s:\n%s", first, out)
	}
}

func TestARelativeHomeIsMadeAbsolute(t *testing.T) {
	p := newSessionPlace(t)
	base := filepath.Dir(p.home)
	cmd := p.command("new", "--id", "rel", "--cwd", p.workDir())
	cmd.Dir = base
	cmd.Env = append(cmd.Env, protocol.EnvHome+"=home")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("new with a relative home: %v %s", err, out)
	}
	if !exists(filepath.Join(p.home, "sessions", "rel", "header.json")) {
		t.Fatal("the session is not in the home the relative path names")
	}
	// From elsewhere, the same home by its absolute path finds it.
	if out := p.mustRun("ls"); !strings.Contains(out, "rel") {
		t.Fatalf("ls:\n%s", out)
	}
}

func TestLsListsThisHomeByDefaultAndFiltersByDirectoryAndLimit(t *testing.T) {
	first := newSessionPlace(t)
	first.hostID = "first"
	second := newSessionPlace(t)
	second.rundir = first.rundir
	second.hostID = "second"
	here, there := first.workDir(), filepath.Join(filepath.Dir(first.home), "there")
	os.Mkdir(there, 0o755)
	for _, id := range []string{"h1", "h2", "h3"} {
		first.mustRun("new", "--id", id, "--cwd", here)
	}
	first.mustRun("new", "--id", "t1", "--cwd", there)
	second.mustRun("new", "--id", "other", "--cwd", second.workDir())

	ids := func(p *place, args ...string) string {
		t.Helper()
		var rows []struct {
			HostID    string `json:"hostId"`
			SessionID string `json:"sessionId"`
		}
		if err := json.Unmarshal([]byte(p.mustRun(append([]string{"ls", "--json"}, args...)...)), &rows); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rows {
			out = append(out, r.SessionID)
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	if got := ids(first); got != "h1 h2 h3 t1" {
		t.Errorf("ls: %s; want this home's sessions only", got)
	}
	if got := ids(first, "--all-hosts"); got != "h1 h2 h3 other t1" {
		t.Errorf("ls --all-hosts: %s", got)
	}
	if got := ids(first, "--cwd", there); got != "t1" {
		t.Errorf("ls --cwd %s: %s", there, got)
	}
	cmd := first.command("ls", "--json", "--cwd", ".")
	cmd.Dir = here
	out, err := cmd.Output()
	if err != nil || strings.Count(string(out), `"sessionId"`) != 3 {
		t.Errorf("ls --cwd . in %s: %v %s", here, err, out)
	}
	if got := ids(first, "--limit", "2"); strings.Count(got, " ") != 1 {
		t.Errorf("ls --limit 2: %s", got)
	}
	if _, errOut, code := first.run("ls", "--limit", "2"); code != 0 || !strings.Contains(errOut, "2 more") {
		t.Errorf("ls --limit 2 says nothing of the rest: exit %d %q", code, errOut)
	}
	table := first.mustRun("ls", "--all-hosts")
	if !strings.Contains(table, "HOST") || !strings.Contains(table, "second") || strings.Contains(table, "\x1b[") {
		t.Errorf("ls --all-hosts, piped:\n%s", table)
	}
}

// ptyOutput runs cmd on a PTY and returns all it wrote, escape sequences
// included.
func ptyOutput(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	cmd.Env = append(cmd.Env, "TERM=xterm-256color")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 200, Rows: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	out, _ := io.ReadAll(tty) // ends with EIO once the command exits
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
	}
	return string(out)
}

func TestLsAndStatusAreColouredOnATerminalOnly(t *testing.T) {
	p := newSessionPlace(t)
	p.mustRun("new", "--id", "hue", "--cwd", p.workDir())
	for _, args := range [][]string{{"ls"}, {"status"}} {
		if out := ptyOutput(t, p.command(args...)); !strings.Contains(out, "\x1b[") {
			t.Errorf("agentd %v on a terminal has no colour:\n%q", args, out)
		}
		cmd := p.command(args...)
		cmd.Env = append(cmd.Env, "NO_COLOR=1")
		if out := ptyOutput(t, cmd); strings.Contains(out, "\x1b[") {
			t.Errorf("agentd %v with NO_COLOR is coloured:\n%q", args, out)
		}
		if out := p.mustRun(args...); strings.Contains(out, "\x1b[") {
			t.Errorf("agentd %v piped is coloured:\n%q", args, out)
		}
	}
	// Colour does not throw the columns out of line.
	lines := strings.Split(ansi.Strip(ptyOutput(t, p.command("ls"))), "\n")
	if len(lines) < 2 || strings.Index(lines[0], "TITLE") != strings.Index(strings.ReplaceAll(lines[1], "\r", ""), "untitled") {
		t.Errorf("columns out of line:\n%s", strings.Join(lines, "\n"))
	}
}

func TestStatusShowsHomeLogAndRunningSessionsWithoutCountingItself(t *testing.T) {
	p := newSessionPlace(t)
	out := p.mustRun("status")
	for _, want := range []string{p.home, filepath.Join(p.home, "host.log"), "no session is running"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^active operations +0$`).MatchString(out) {
		t.Errorf("status counts its own request:\n%s", out)
	}
	id := strings.TrimSpace(p.mustRun("new", "--id", "busy", "--cwd", p.workDir(), "--title", "sleeper"))
	run, _ := runUntilTool(t, p, id, "run `sleep 30`")
	defer func() { p.mustRun("stop", "--now", id); run.Wait() }()
	out = p.mustRun("status")
	if !strings.Contains(out, "1 session running") || !strings.Contains(out, "busy") || !strings.Contains(out, "sleeper") {
		t.Errorf("status while a turn runs:\n%s", out)
	}
	var st struct {
		protocol.HostStatus
		Running []protocol.Session `json:"runningSessions"`
	}
	if err := json.Unmarshal([]byte(p.mustRun("status", "--json")), &st); err != nil || st.Home != p.home || len(st.Running) != 1 || st.Running[0].SessionID != id || st.ActiveOperations != 0 {
		t.Errorf("status --json: %+v %v", st, err)
	}
}

func TestASecondHostOnAnotherRuntimeDirectorySaysWhereTheHolderListens(t *testing.T) {
	p := newPlace(t)
	first := p.startHost()
	other := *p
	other.rundir = filepath.Join(filepath.Dir(p.rundir), "run2")
	id, _ := protocol.DefaultHostID(p.home)
	_, errOut, code := other.run("host")
	if code != 1 || !strings.Contains(errOut, fmt.Sprintf("pid %d", first.Process.Pid)) || !strings.Contains(errOut, protocol.SocketPath(p.rundir, id)) {
		t.Fatalf("second host: exit %d: %s", code, errOut)
	}
}

// TestShutdownAsksBeforeStoppingWhatRunsAndNeedsForceOffATerminal: with a
// turn and its shell run running, shutdown says so and asks on a terminal
// (no is no, yes stops them with the host), refuses off one naming
// --force, and with --force stops them without asking. With nothing
// running it asks nothing.
func TestShutdownAsksBeforeStoppingWhatRunsAndNeedsForceOffATerminal(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir()))
	run, _ := runUntilTool(t, p, id, "run `sleep 30`")
	host := p.statusJSON().PID

	_, errOut, code := p.run("shutdown")
	if code != 1 || !strings.Contains(errOut, "1 turn is running and 1 shell run/PTY") || !strings.Contains(errOut, "--force") {
		t.Fatalf("shutdown off a terminal with a turn running: exit %d %q", code, errOut)
	}
	s := p.screen(t, "shutdown")
	s.waitText("[y/N]")
	if text := s.text(); !strings.Contains(text, "1 turn is running and 1 shell run/PTY") || !strings.Contains(text, "agentd upgrade") {
		t.Fatalf("the question does not say what runs and how to keep it:\n%s", text)
	}
	s.typeKeys("n\r")
	s.waitText("not stopped")
	if err := s.waitExit(); err == nil {
		t.Fatalf("answering no: exit 0\n%s", s.text())
	}
	if !proc.Running(host) {
		t.Fatal("answering no stopped the host")
	}
	s = p.screen(t, "shutdown")
	s.waitText("[y/N]")
	s.typeKeys("y\r")
	s.waitText("has stopped")
	if err := s.waitExit(); err != nil {
		t.Fatalf("answering yes: %v\n%s", err, s.text())
	}
	waitProcessGone(t, host)
	if err := run.Wait(); err == nil {
		t.Fatal("the turn the shutdown stopped completed")
	}
	if log := p.mustRun("log", id); !strings.Contains(log, "interrupted") {
		t.Fatalf("the stopped turn is not recorded as interrupted:\n%s", log)
	}

	// Nothing running: no question, on a terminal or off one.
	p.mustRun("run", "--session", id, "hello")
	s = p.screen(t, "shutdown")
	if text := s.waitText("has stopped"); strings.Contains(text, "[y/N]") {
		t.Fatalf("shutdown asked with nothing running:\n%s", text)
	}
	s.waitExit()

	run, _ = runUntilTool(t, p, id, "run `sleep 30`")
	host = p.statusJSON().PID
	if out := p.mustRun("shutdown", "--force"); !strings.Contains(out, "has stopped") {
		t.Fatalf("shutdown --force said %q", out)
	}
	waitProcessGone(t, host)
	run.Wait()
}
