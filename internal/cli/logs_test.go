package cli_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/protocol"
)

// TestLogsPrintsAShellRunsOutputAndFollowsIt: agentd logs prints what a
// shell run wrote, its last lines with --tail, and with -f what it
// writes next until it ends, then says how it ended; a ref the session
// does not have, or a bad --tail, is refused naming it.
func TestLogsPrintsAShellRunsOutputAndFollowsIt(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir, "--approve", "all"))
	done := startRun(t, p, id, "printf 'one\\ntwo\\nthree\\n'; exit 3")
	waitEnded(t, p, id, done.Ref)
	if out := p.mustRun("logs", id, done.Ref); out != "one\ntwo\nthree\n" {
		t.Fatalf("logs: %q", out)
	}
	if out := p.mustRun("logs", id, done.Ref, "--tail", "2"); out != "two\nthree\n" {
		t.Fatalf("logs --tail 2: %q", out)
	}
	if out := p.mustRun("logs", id, done.Ref, "--tail", "0"); out != "" {
		t.Fatalf("logs --tail 0: %q", out)
	}
	if out, errOut, code := p.run("logs", id, done.Ref, "-f"); code != 0 || out != "one\ntwo\nthree\n" {
		t.Fatalf("logs -f of an ended run: exit %d %q %s", code, out, errOut)
	}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"logs", id, "shell-99"}, 1, "no resource shell-99"},
		{[]string{"logs", id, done.Ref, "--tail", "abc"}, 2, `--tail "abc": want a number of lines`},
		{[]string{"logs", id}, 2, "a SESSION and a REF"},
	} {
		if _, errOut, code := p.run(c.args...); code != c.code || !strings.Contains(errOut, c.says) {
			t.Errorf("agentd %v: exit %d %s; want exit %d saying %q", c.args, code, errOut, c.code, c.says)
		}
	}

	// A run that goes on until a file appears: -f prints its first line,
	// then the rest as it comes, and ends with the run.
	live := startRun(t, p, id, "echo first; while [ ! -e go ]; do sleep 0.01; done; echo second; exit 0")
	cmd := p.command("logs", id, live.Ref, "-f")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "first" {
		t.Fatalf("first line %q", sc.Text())
	}
	mustWrite(t, filepath.Join(dir, "go"))
	if !sc.Scan() || sc.Text() != "second" {
		t.Fatalf("second line %q", sc.Text())
	}
	io.Copy(io.Discard, stdout)
	if err := waitCommand(t, cmd, "agentd logs -f"); err != nil || !strings.Contains(stderr.String(), live.Ref+" ended (exit status 0)") {
		t.Fatalf("logs -f: %v: %s", err, stderr.String())
	}
}

// TestASlowLogsReaderHoldsNothingUp: a follower that reads nothing while
// a shell run prints a lot keeps neither the run nor the session waiting,
// and once read gives the whole output, in order.
func TestASlowLogsReaderHoldsNothingUp(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--approve", "all"))
	run := startRun(t, p, id, "echo start; while [ ! -e go ]; do sleep 0.01; done; seq 1 200000")
	cmd := p.command("logs", id, run.Ref, "-f")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The follower is in place, and reads nothing more, when the flood
	// starts.
	r := bufio.NewReader(stdout)
	if line, err := r.ReadString('\n'); line != "start\n" {
		t.Fatalf("first line %q: %v", line, err)
	}
	mustWrite(t, filepath.Join(p.workDir(), "go"))
	waitEnded(t, p, id, run.Ref)
	// A turn runs to its end beside it.
	if out := p.mustRun("run", "--session", id, "hello"); !strings.Contains(out, "hello") {
		t.Fatalf("a turn beside the follower: %q", out)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := waitCommand(t, cmd, "agentd logs -f"); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := 1; i <= 200000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if string(out) != want.String() {
		t.Fatalf("the follower's output: %d bytes, want %d", len(out), want.Len())
	}
}

// waitEnded waits until resource ref of session id has ended.
func waitEnded(t *testing.T, p *place, id, ref string) {
	t.Helper()
	c := p.open(t)
	poll.Until(t, ref+" to end", func() bool {
		rs, err := c.Resources(agentdtest.Context(t), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Ref == ref {
				return r.State != protocol.ResourceRunning
			}
		}
		return false
	})
}

func mustWrite(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTheResourcesPaneOpensAShellRunsOutputLive: enter on a shell run in
// attach's resources pane shows its output, what it prints next as it
// prints it, and how it ended; q brings the session's screen back.
func TestTheResourcesPaneOpensAShellRunsOutputLive(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir, "--approve", "all"))
	run := startRun(t, p, id, "echo before-$((1+1)); while [ ! -e go ]; do sleep 0.01; done; echo after-$((2+2)); exit 5")
	a := p.screen(t, "attach", id)
	a.waitText("running: " + run.Ref)
	a.typeKeys(keyTab)
	a.waitText("❯ " + run.Ref + " ")
	a.typeKeys(keyEnter)
	a.waitFor("the run's output alone", func(text string) bool {
		return strings.Contains(text, "── "+run.Ref) && strings.Contains(text, "before-2") && !strings.Contains(text, "agentd · "+id)
	})
	mustWrite(t, filepath.Join(dir, "go"))
	a.waitText("after-4")
	a.waitText(run.Ref + " exited (exit status 5) · q back")
	a.typeKeys("q")
	a.waitText("back from " + run.Ref + ", which exited (exit status 5)")
	a.waitText("agentd · " + id)
	a.typeKeys(keyQuit)
	if err := a.waitExit(); err != nil {
		t.Fatalf("detach: %v", err)
	}
}
