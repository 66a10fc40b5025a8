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
	"time"

	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/protocol"
)

// started is an agentd command running beside the test, its output
// gathered as it comes.
type started struct {
	cmd         *exec.Cmd
	out, errOut agentdtest.LockedBuffer
	exited      chan struct{}
	code        int
}

// start starts agentd with args; the test's end kills what still runs.
func (p *place) start(args ...string) *started {
	p.t.Helper()
	s := &started{cmd: p.command(args...), exited: make(chan struct{})}
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.errOut
	if err := s.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	go func() {
		err := s.cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			s.code = exit.ExitCode()
		}
		close(s.exited)
	}()
	p.t.Cleanup(func() {
		s.cmd.Process.Signal(syscall.SIGCONT)
		s.cmd.Process.Kill()
		<-s.exited
	})
	return s
}

// wait waits until the command exits and returns its exit code.
func (s *started) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-s.exited:
		return s.code
	case <-time.After(agentdtest.Timeout):
		t.Fatalf("%v did not exit:\n%s\n%s", s.cmd.Args[1:], s.out.String(), s.errOut.String())
		return 0
	}
}

// heldCommand prints lines 1 to 3, then waits for the file go in its
// directory, then prints lines 4 to 6.
const heldCommand = "run `for i in 1 2 3; do echo bg $i; done; while [ ! -e go ]; do sleep 0.02; done; for i in 4 5 6; do echo bg $i; done`"

// tickingCommand prints tick lines until the file go is in its directory.
const tickingCommand = "run `while [ ! -e go ]; do echo tick; sleep 0.05; done`"

// eachLineOnce fails unless the tool output in out, before the call's
// end, shows lines bg 1 to bg 6 once each, in order.
func eachLineOnce(t *testing.T, out string) {
	t.Helper()
	streamed, _, _ := strings.Cut(out, "exit code 0")
	at := -1
	for i := 1; i <= 6; i++ {
		line := "bg " + string(rune('0'+i)) + "\n"
		if n := strings.Count(streamed, line); n != 1 {
			t.Fatalf("%q shown %d times:\n%s", line, n, out)
		}
		next := strings.Index(streamed, line)
		if next < at {
			t.Fatalf("%q shown out of order:\n%s", line, out)
		}
		at = next
	}
}

// log -f of a session whose tool call runs shows the call's output so far
// from the stream's projection, then the rest as it comes: each line once,
// in order.
func TestLogFollowShowsARunningCallsOutputOnceInOrder(t *testing.T) {
	p := newPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("run", "-d", "--cwd", dir, "--approve", "all", heldCommand))
	log := p.start("log", "-f", id)
	poll.Until(t, "log -f to show the output so far", func() bool { return strings.Contains(log.out.String(), "bg 3\n") })
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	poll.Until(t, "log -f to show the turn's end", func() bool { return strings.Contains(log.out.String(), "── completed") })
	log.cmd.Process.Signal(os.Interrupt)
	if code := log.wait(t); code != 0 {
		t.Fatalf("log -f: exit %d: %s", code, log.errOut.String())
	}
	eachLineOnce(t, log.out.String())
}

// A run whose stream ends while its turn runs, and whose turn ends before
// it has the stream again (the host killed, the client stopped), shows the
// end from the transcript: with --json, the turn's records and its
// run_end.
func TestRunShowsTheEndOfATurnThatEndedWhileItsStreamWasGone(t *testing.T) {
	p := newPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	run := p.start("run", "--session", id, "--approve", "all", "--json", heldCommand)
	poll.Until(t, "the first lines", func() bool { return strings.Contains(run.out.String(), `bg 3\n`) })
	host := hostPID(t, p)
	run.cmd.Process.Signal(syscall.SIGSTOP)
	syscall.Kill(host, syscall.SIGKILL)
	waitProcessGone(t, host)
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	transcript := filepath.Join(p.home, "sessions", id, "transcript.jsonl")
	poll.Until(t, "the turn's end record", func() bool {
		b, _ := os.ReadFile(transcript)
		return strings.Contains(string(b), `"type":"`+protocol.RecordTurnEnd+`"`)
	})
	run.cmd.Process.Signal(syscall.SIGCONT)
	if code := run.wait(t); code != 0 {
		t.Fatalf("run: exit %d:\n%s\n%s", code, run.out.String(), run.errOut.String())
	}
	if !strings.Contains(run.errOut.String(), "reconnected") {
		t.Fatalf("run did not reconnect: %s", run.errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(run.out.String()), "\n")
	var last protocol.SessionDelta
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.Event != protocol.EventRunEnd ||
		last.Turn == nil || last.Turn.Status != protocol.TurnCompleted {
		t.Fatalf("the last line is not the turn's run_end (%v):\n%s", err, run.out.String())
	}
	if !strings.Contains(run.out.String(), `bg 6\n`) || !strings.Contains(run.out.String(), `"type":"`+protocol.RecordTurnEnd+`"`) {
		t.Fatalf("run --json lacks the turn's end:\n%s", run.out.String())
	}
}

// A run whose tool floods its stream, so that it falls behind and
// reconnects, still shows its turn's end before it exits 0.
func TestRunJSONShowsTheEndOfATurnThatFloodedItsStream(t *testing.T) {
	p := newPlace(t)
	out, errOut, code := p.run("run", "--approve", "all", "--json", "run `seq 1 2000000`")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var last protocol.SessionDelta
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.Event != protocol.EventRunEnd ||
		last.Turn == nil || last.Turn.Status != protocol.TurnCompleted {
		t.Fatalf("the last line is not the turn's run_end (%v): %s\n%s", err, errOut, lines[len(lines)-1])
	}
	if !strings.Contains(out, `"type":"`+protocol.RecordTurnEnd+`"`) {
		t.Fatalf("run --json lacks the turn's end record: %s", errOut)
	}
}

// After agentd shutdown, run and log -f end, saying why, and start no
// host: reconnecting is for hand-offs and crashes.
func TestShutdownEndsItsClientsAndNoneStartsAHost(t *testing.T) {
	p := newPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	run := p.start("run", "--session", id, "--approve", "all", tickingCommand)
	poll.Until(t, "run to show the output", func() bool { return strings.Contains(run.out.String(), "tick\n") })
	log := p.start("log", "-f", id)
	poll.Until(t, "log -f to show the output", func() bool { return strings.Contains(log.out.String(), "tick\n") })
	p.mustRun("shutdown", "--force")
	for name, c := range map[string]*started{"run": run, "log -f": log} {
		if code := c.wait(t); code == 0 || !strings.Contains(c.errOut.String(), "the host was shut down") ||
			strings.Contains(c.errOut.String(), "reconnect") {
			t.Fatalf("%s after the shutdown: exit %d: %s", name, code, c.errOut.String())
		}
	}
	if hosts, _ := activation.Discover(agentdtest.Context(t), p.rundir); len(hosts) != 0 {
		t.Fatalf("a host runs after the shutdown: %+v", hosts)
	}
}

// A session removed ends the log -f that follows it, saying so.
func TestRemovingASessionEndsItsFollower(t *testing.T) {
	p := newPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("run", "-d", "--cwd", dir, "--approve", "all", tickingCommand))
	log := p.start("log", "-f", id)
	poll.Until(t, "log -f to show the output", func() bool { return strings.Contains(log.out.String(), "tick\n") })
	p.mustRun("rm", "--force", id)
	if code := log.wait(t); code == 0 || !strings.Contains(log.errOut.String(), "session removed") {
		t.Fatalf("log -f after rm: exit %d: %s", code, log.errOut.String())
	}
}
