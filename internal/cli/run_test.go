package cli_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// newSessionPlace is a place whose workers stop soon after they idle.
func newSessionPlace(t *testing.T) *place {
	p := newPlace(t)
	p.extraEnv = append(p.extraEnv, "AGENTD_WORKER_IDLE_GRACE=200ms")
	return p
}

func (p *place) workDir() string {
	d := filepath.Join(filepath.Dir(p.home), "work")
	os.MkdirAll(d, 0o755)
	os.WriteFile(filepath.Join(d, "hello.txt"), []byte("hello from the work dir\n"), 0o644)
	return d
}

func sessionIDFrom(t *testing.T, stderr string) string {
	t.Helper()
	for _, line := range strings.Split(stderr, "\n") {
		if rest, ok := strings.CutPrefix(line, "session "); ok {
			return strings.Fields(rest)[0]
		}
	}
	t.Fatalf("no session id in %q", stderr)
	return ""
}

func TestRunWithTheOfflineModelRunsBashAndStreamsTheAnswer(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	out, errOut, code := p.run("run", "--cwd", dir, "--approve", "all", "list the files here: run `ls -la`")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "$ ls -la") || !strings.Contains(out, "hello.txt") {
		t.Fatalf("output lacks the command or its output:\n%s", out)
	}
	id := sessionIDFrom(t, errOut)

	// The session is on disk and continues.
	out, errOut, code = p.run("run", "--session", id[:6], "--approve", "all", "and now run `cat hello.txt`")
	if code != 0 || !strings.Contains(out, "hello from the work dir") {
		t.Fatalf("continued run: exit %d\n%s\n%s", code, out, errOut)
	}
	log := p.mustRun("log", id)
	for _, want := range []string{"list the files here", "cat hello.txt", "completed"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

func TestRunJSONStreamsPromptEventsInOrder(t *testing.T) {
	p := newSessionPlace(t)
	writeScript(t, p, `{"replies":[
		{"steps":[{"text":"Checking "},{"text":"first."},{"tool":"bash","arguments":{"command":"echo hi"},"id":"call-1"}]},
		{"steps":[{"text":"deterministic "},{"text":"remote answer"}]}
	]}`)
	out, errOut, code := p.run("run", "--cwd", p.workDir(), "--json", "--approve", "all", "question")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// Each delta as the line it is told by: its event, with the type of
	// the record it adds, the text a message ended with, or the status a
	// turn ended in. Updates of one message or tool call may travel
	// coalesced, as one line or several; session_changed is left out.
	var events []string
	var messages []string        // message ids, as they start
	texts := map[string]string{} // message id: its updates, appended
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var d protocol.SessionDelta
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("not a delta: %q", line)
		}
		e := d.Event
		switch d.Event {
		case protocol.EventSessionChanged, protocol.EventToolCallUpdate:
			continue
		case protocol.EventMessageStart:
			messages = append(messages, d.MessageID)
		case protocol.EventMessageUpdate:
			texts[d.MessageID] += d.Text
			if len(events) > 0 && events[len(events)-1] == e {
				continue
			}
		case protocol.EventMessageEnd:
			e += " " + d.Text
		case protocol.EventEntryAdded:
			var rec struct {
				Type string `json:"type"`
				Data struct {
					Text string `json:"text"`
				} `json:"data"`
			}
			json.Unmarshal(d.Entry, &rec)
			e += " " + rec.Type
			if rec.Type == "user_message" {
				e += " " + rec.Data.Text
			}
		case protocol.EventRunEnd:
			e += " " + d.Turn.Status
		}
		events = append(events, e)
	}
	want := []string{
		"entry_added turn_start", "entry_added user_message question", "run_start",
		"message_start", "message_update", "message_end Checking first.", "entry_added assistant_message",
		"tool_call_start", "tool_call_end", "entry_added tool_results",
		"message_start", "message_update", "message_end deterministic remote answer", "entry_added assistant_message",
		"entry_added turn_end", "run_end completed",
	}
	if !slices.Equal(events, want) {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(events, "\n"), strings.Join(want, "\n"))
	}
	if texts[messages[0]] != "Checking first." || texts[messages[1]] != "deterministic remote answer" {
		t.Fatalf("message updates add up to %q", texts)
	}
}

func TestReadOnlyApprovalRefusesBashAndTheTurnGoesOn(t *testing.T) {
	p := newSessionPlace(t)
	out, errOut, code := p.run("run", "--cwd", p.workDir(), "run `touch made-by-agent`")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(p.workDir(), "made-by-agent")); err == nil {
		t.Fatal("bash ran under the read-only policy")
	}
	if !strings.Contains(out, "read-only") {
		t.Fatalf("output does not say why:\n%s", out)
	}
	if n := strings.Count(out, "approval policy is read-only"); n != 1 {
		t.Fatalf("the refusal is said %d times, not once:\n%s", n, out)
	}
}

func workerPID(t *testing.T, p *place, session string) int {
	t.Helper()
	deadline := time.Now().Add(agentdtest.Timeout)
	for {
		b, err := os.ReadFile(home.WorkerRegistrationPath(p.home, session))
		var reg home.WorkerRegistration
		if err == nil && json.Unmarshal(b, &reg) == nil && reg.PID > 0 {
			return reg.PID
		}
		if time.Now().After(deadline) {
			t.Fatalf("no worker registered for %s", session)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func processGone(pid int) bool { return !proc.Running(pid) }

func waitProcessGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(agentdtest.Timeout)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runUntilTool starts `agentd run --json` on session id with prompt and
// returns once its first tool call has started; the command's stdout is
// drained from then on.
func runUntilTool(t *testing.T, p *place, id, prompt string) (cmd *exec.Cmd, stderr *bytes.Buffer) {
	t.Helper()
	cmd, stderr, _ = runUntil(t, p, protocol.EventToolCallStart, "run", "--session", id, "--json", "--approve", "all", prompt)
	return cmd, stderr
}

// runUntil starts agentd with args (a run with --json) and returns once a
// delta of event has come, with that delta's line; the command's stdout is
// drained from then on.
func runUntil(t *testing.T, p *place, event string, args ...string) (cmd *exec.Cmd, stderr *bytes.Buffer, line string) {
	t.Helper()
	cmd = p.command(args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr = &bytes.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && !strings.Contains(sc.Text(), `"event":"`+event+`"`) {
	}
	line = sc.Text()
	go func() {
		for sc.Scan() {
		}
	}()
	return cmd, stderr, line
}

// toolPID waits until the tool's command has written its pid to tool.pid
// in dir, and returns it.
func toolPID(t *testing.T, dir string) int {
	t.Helper()
	for deadline := time.Now().Add(agentdtest.Timeout); ; time.Sleep(5 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(dir, "tool.pid"))
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatal("the tool's command did not start")
		}
	}
}

func TestWorkerKilledMidTurnFailsTheTurnAndIsReplaced(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	cmd, stderr := runUntilTool(t, p, id, "run `echo $$ > tool.pid; exec sleep 100`")
	tool := toolPID(t, dir)
	pid := workerPID(t, p, id)
	c := p.open(t)
	syscall.Kill(pid, syscall.SIGKILL)
	// The host sees its worker's end: the session is no longer running.
	poll.Until(t, "the host to let go of its killed worker", func() bool {
		list, err := client.Call(agentdtest.Context(t), c, protocol.OpSessionList, protocol.SessionListInput{})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Sessions) == 1 && list.Sessions[0].Status != protocol.SessionRunning
	})
	err := waitCommand(t, cmd, "the run whose worker was killed")
	if err == nil || !strings.Contains(stderr.String(), "worker exited: signal 9") {
		t.Fatalf("run after the worker was killed: %v: %s", err, stderr.String())
	}
	// What the killed worker was running does not outlive it.
	waitProcessGone(t, tool)
	waitGone(t, home.WorkerRegistrationPath(p.home, id))
	// The transcript is intact and says why; the next attach starts a new worker.
	log := p.mustRun("log", id)
	if !strings.Contains(log, "failed: worker exited: signal 9") {
		t.Fatalf("log:\n%s", log)
	}
	out, errOut, code := p.run("run", "--session", id, "--approve", "all", "run `echo again`")
	if code != 0 || !strings.Contains(out, "again") {
		t.Fatalf("after replacement: exit %d\n%s\n%s", code, out, errOut)
	}
	if next := workerPID(t, p, id); next == pid {
		t.Fatal("the killed worker was not replaced")
	}
}

// TestAQueuedFollowUpOutlivesAKilledWorker: a follow-up queued while a turn
// ran is still queued when the worker is killed and replaced, and runs
// once the next turn ends.
func TestAQueuedFollowUpOutlivesAKilledWorker(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir()))
	c := p.open(t)
	ctx := agentdtest.Context(t)
	if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: id, TurnID: "t1",
		Content: protocol.Content{Text: "run `sleep 20`"}, Approval: protocol.ApprovalAll}); err != nil {
		t.Fatal(err)
	}
	entry, err := client.Call(ctx, c, protocol.OpTurnMessageSubmit, protocol.MessageSubmitInput{SessionID: id, MessageID: "m2",
		Content: protocol.Content{Text: "run `echo queued-before-the-kill`"}, Placement: protocol.PlacementNextTurn})
	if err != nil || entry.State != protocol.QueueQueued {
		t.Fatalf("submit: %+v %v", entry, err)
	}
	pid := workerPID(t, p, id)
	syscall.Kill(pid, syscall.SIGKILL)
	waitProcessGone(t, pid)
	// The host has seen its worker's end once it removed the registration
	// the killed worker could not: what follows reaches the replacement.
	// (A command sent in between may reach the dead worker's connection,
	// and fails.)
	waitGone(t, home.WorkerRegistrationPath(p.home, id))

	w, snap := subscribe(t, c, id)
	if len(snap.Queue.FollowUp) != 1 || snap.Queue.FollowUp[0].MessageID != "m2" {
		t.Fatalf("queue after the worker was replaced: %+v", snap.Queue)
	}
	if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: id, TurnID: "t3", Content: protocol.Content{Text: "hello"}}); err != nil {
		t.Fatal(err)
	}
	w.waitEnd(t, "tm2")
	if log := p.mustRun("log", id); !strings.Contains(log, "queued-before-the-kill") {
		t.Fatalf("log:\n%s", log)
	}
}

func TestIdleWorkerStopsAfterItsClientDisconnects(t *testing.T) {
	p := newSessionPlace(t) // workers idle for a short grace
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	witness := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	c := p.open(t)
	subscribe(t, c, id)
	pid := workerPID(t, p, id)

	// Another session's worker runs a turn for a client that then leaves:
	// by the time it has stopped, a whole idle grace has passed since, all
	// of it with the first session attached and idle.
	p.mustRun("run", "--session", witness, "hello")
	waitGone(t, home.WorkerRegistrationPath(p.home, witness))
	if processGone(pid) {
		t.Fatal("the worker of an attached session stopped")
	}
	if got := workerPID(t, p, id); got != pid {
		t.Fatalf("the attached session's worker is %d, was %d", got, pid)
	}

	// Its client disconnects: the worker stops.
	c.Close()
	waitProcessGone(t, pid)
	waitGone(t, home.WorkerRegistrationPath(p.home, id))
}

func TestOneWorkerPerSessionAllStoppedAtShutdown(t *testing.T) {
	p := newPlace(t)
	// Idle or orphaned, a worker lives on for an hour: within the test's
	// deadline only the host's shutdown can stop one.
	p.extraEnv = append(p.extraEnv, "AGENTD_WORKER_IDLE_GRACE=1h")
	dir := p.workDir()
	ids := make([]string, 3)
	for i := range ids {
		ids[i] = strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	}
	pids := map[int]string{}
	for _, id := range ids {
		subscribe(t, p.open(t), id) // each session attached by a client of its own
		pid := workerPID(t, p, id)
		if other, ok := pids[pid]; ok {
			t.Fatalf("sessions %s and %s share worker %d", other, id, pid)
		}
		pids[pid] = id
	}
	t.Cleanup(func() {
		for pid := range pids {
			if !processGone(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	for pid, id := range pids {
		if processGone(pid) {
			t.Fatalf("the worker of attached session %s (%d) is not running", id, pid)
		}
	}
	// shutdown returns once the host has exited, and the host drains by
	// stopping its workers.
	p.mustRun("shutdown")
	for pid, id := range pids {
		if !processGone(pid) {
			t.Fatalf("the worker of session %s (%d) outlived its host's shutdown", id, pid)
		}
		waitGone(t, home.WorkerRegistrationPath(p.home, id))
	}
}

func TestColdHostRetiresAfterItsOnlySessionAttachmentDisconnects(t *testing.T) {
	p := newSessionPlace(t)
	p.hostID = "00000000-0000-4000-8000-000000000001"
	p.extraEnv = append(p.extraEnv, "AGENTD_IDLE_GRACE=200ms")
	if _, errOut, code := p.run("run", "--cwd", p.workDir(), "hello"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	waitGone(t, protocol.SocketPath(p.rundir, p.hostID), protocol.RegistrationPath(p.rundir, p.hostID))
}

func TestSessionCommandsAndSelections(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	a := strings.TrimSpace(p.mustRun("new", "--id", "alpha1", "--cwd", dir, "--title", "first"))
	b := strings.TrimSpace(p.mustRun("new", "--id", "alpha2", "--cwd", dir, "--title", "second"))
	if _, errOut, code := p.run("new", "--id", "alpha1", "--cwd", dir); code != 1 || !strings.Contains(errOut, "alpha1") {
		t.Fatalf("duplicate id: exit %d %s", code, errOut)
	}
	var rows []protocol.Session
	json.Unmarshal([]byte(p.mustRun("ls", "--json")), &rows)
	if len(rows) != 2 {
		t.Fatalf("ls: %+v", rows)
	}
	p.mustRun("rename", a, "renamed")
	if out := p.mustRun("ls"); !strings.Contains(out, "renamed") || !strings.Contains(out, "second") {
		t.Fatalf("ls after rename:\n%s", out)
	}
	_, errOut, code := p.run("log", "zzzzzzzz")
	if code != 1 || !strings.Contains(errOut, "zzzzzzzz") {
		t.Fatalf("unknown session: exit %d %s", code, errOut)
	}
	// A prefix of both is ambiguous, and the error lists the candidates.
	_, errOut, code = p.run("log", "alpha")
	if code != 1 || !strings.Contains(errOut, "ambiguous") || !strings.Contains(errOut, a) || !strings.Contains(errOut, b) {
		t.Fatalf("ambiguous: exit %d %s", code, errOut)
	}
	p.mustRun("archive", b)
	if _, errOut, code := p.run("run", "--session", b, "hi"); code != 1 || !strings.Contains(errOut, "archived") {
		t.Fatalf("run on an archived session: exit %d %s", code, errOut)
	}
	p.mustRun("rm", b)
	if _, errOut, code := p.run("log", b); code != 1 || !strings.Contains(errOut, b) {
		t.Fatalf("removed session: exit %d %s", code, errOut)
	}
}

func TestModelFlagsAreValidated(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	cases := []struct {
		args []string
		code int
		says string
	}{
		{[]string{"run", "--cwd", dir, "--model", "anthropic", "hi"}, 2, "provider requires a model"},
		{[]string{"run", "--cwd", dir, "--model", "nosuch/model", "hi"}, 1, "nosuch"},
		{[]string{"run", "--cwd", dir, "--model", "anthropic/claude-sonnet-4-5", "hi"}, 1, "ANTHROPIC_API_KEY"},
	}
	p.extraEnv = append(p.extraEnv, "ANTHROPIC_API_KEY=")
	for _, c := range cases {
		_, errOut, code := p.run(c.args...)
		if code != c.code || !strings.Contains(errOut, c.says) {
			t.Errorf("agentd %v: exit %d %q; want exit %d mentioning %q", c.args, code, errOut, c.code, c.says)
		}
	}
}

func TestHostModelOptionIsRejectedWhenDiscoveryFindsARunningHost(t *testing.T) {
	p := newSessionPlace(t)
	p.mustRun("status")
	_, errOut, code := p.run("status", "--host-model", "faux/echo")
	if code != 1 || !strings.Contains(errOut, "only valid when this command starts a new host") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

func TestHostModelOptionSetsTheDefaultOfTheHostItStarts(t *testing.T) {
	p := newSessionPlace(t)
	if _, errOut, code := p.run("status", "--host-model", "anthropic"); code != 1 || !strings.Contains(errOut, "provider requires a model") {
		t.Fatalf("a provider without a model: exit %d: %s", code, errOut)
	}
	p.mustRun("status", "--host-model", "anthropic/claude-sonnet-4-5")
	var s protocol.Session
	json.Unmarshal([]byte(p.mustRun("new", "--json", "--cwd", p.workDir())), &s)
	if s.Model != "anthropic/claude-sonnet-4-5" {
		t.Fatalf("new session's model %q", s.Model)
	}
}

func TestApprovalAnsweredFromAnotherCommand(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir()))
	cmd := p.command("run", "--session", id, "--approve", "ask", "--wait-approval", "10m", "run `echo approved-elsewhere`")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pending []protocol.Interaction
	deadline := time.Now().Add(agentdtest.Timeout)
	for len(pending) == 0 {
		json.Unmarshal([]byte(p.mustRun("answer", "--json")), &pending)
		if time.Now().After(deadline) {
			t.Fatal("no pending approval appeared")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if pending[0].SessionID != id || !strings.Contains(pending[0].Prompt, "echo approved-elsewhere") {
		t.Fatalf("pending %+v", pending[0])
	}
	p.mustRun("answer", id, pending[0].InteractionID, "allow")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "approved-elsewhere") || !strings.Contains(stderr.String(), "waiting 10m0s for approval") || !strings.Contains(stderr.String(), "agentd answer") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	if _, errOut, code := p.run("answer", id, pending[0].InteractionID, "deny"); code != 1 || !strings.Contains(errOut, pending[0].InteractionID) {
		t.Fatalf("a second answer: exit %d %s", code, errOut)
	}
}

// TestAPipedRunRefusesWhatNobodyCanAnswer: off a terminal, a call that
// waits for approval is refused at once and the output says how to wait
// instead; --wait-approval=D refuses it once D is over; a bad duration is
// a usage error naming the flag.
func TestAPipedRunRefusesWhatNobodyCanAnswer(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir, "--approve", "ask"))
	out, errOut, code := p.run("run", "--session", id, "run `touch made-1`")
	if code != 0 || !strings.Contains(errOut, "refused") || !strings.Contains(errOut, "nobody can answer here") || !strings.Contains(errOut, "--wait-approval") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "made-1")); err == nil {
		t.Fatal("the refused call ran")
	}
	out, errOut, code = p.run("run", "--session", id, "--wait-approval=1ms", "run `touch made-2`")
	if code != 0 || !strings.Contains(errOut, "no answer came within 1ms") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "made-2")); err == nil {
		t.Fatal("the call refused after its wait ran")
	}
	for _, args := range [][]string{
		{"run", "--session", id, "--wait-approval=soon", "go"},
		{"run", "--session", id, "--wait-approval=-1m", "go"},
		{"run", "--session", id, "-d", "--wait-approval", "go"},
	} {
		if _, errOut, code := p.run(args...); code != 2 || !strings.Contains(errOut, "--wait-approval") {
			t.Errorf("agentd %v: exit %d: %s", args, code, errOut)
		}
	}
}

func TestStopEndsTheTurnAndKillsItsRunningToolAtOnce(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	// The command's child, in its process group, says who it is.
	cmd, stderr := runUntilTool(t, p, id, "run `sleep 60 & echo $! > child.pid; wait`")
	var child int
	poll.Until(t, "the tool's child to write its pid", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "child.pid"))
		child, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	if out := p.mustRun("stop", id); !strings.Contains(out, "stopping turn") {
		t.Fatalf("stop said %q", out)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(stderr.String(), "interrupted") {
		t.Fatalf("run: %v %s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "context canceled") {
		t.Errorf("run speaks Go: %s", stderr.String())
	}
	poll.Until(t, "the tool's child to end", func() bool { return !running(child) })
	if out := p.mustRun("stop", id); !strings.Contains(out, "no turn is running") {
		t.Fatalf("second stop said %q", out)
	}
}

func TestStopAfterStepLetsTheRunningToolFinish(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	// The tool waits for the stop to have been asked, then finishes.
	cmd, stderr := runUntilTool(t, p, id, "run `while [ ! -e go-on ]; do sleep 0.05; done; echo finished`")
	if out := p.mustRun("stop", "--after-step", id); !strings.Contains(out, "after its current step") {
		t.Fatalf("stop --after-step said %q", out)
	}
	os.WriteFile(filepath.Join(dir, "go-on"), nil, 0o644)
	if err := cmd.Wait(); err == nil || !strings.Contains(stderr.String(), "stopped") {
		t.Fatalf("run: %v %s", err, stderr.String())
	}
	if log := p.mustRun("log", id); !strings.Contains(log, "finished") {
		t.Fatalf("the tool did not finish:\n%s", log)
	}
	for _, args := range [][]string{{"stop", "--after-step", id, "shell-1"}, {"stop", "--after-step", "--now", id}} {
		if _, errOut, code := p.run(args...); code != 2 || !strings.Contains(errOut, "--after-step") {
			t.Errorf("agentd %v: exit %d: %s", args, code, errOut)
		}
	}
}

// running reports whether process pid runs: neither gone nor a zombie.
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, after, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(after, "Z")
}

func TestSessionSelectionSpansEveryHostOfTheRuntimeDirectory(t *testing.T) {
	first := newSessionPlace(t)
	first.hostID = "first"
	second := newSessionPlace(t)
	second.rundir = first.rundir
	second.hostID = "second"
	first.mustRun("new", "--id", "alpha1", "--cwd", first.workDir(), "--title", "on the first host")
	second.mustRun("new", "--id", "alpha2", "--cwd", second.workDir(), "--title", "on the second host")
	second.mustRun("new", "--id", "beta", "--cwd", second.workDir())

	// A session of another host is found from this one, and its log read.
	if out, errOut, code := first.run("rename", "beta", "renamed from afar"); code != 0 || !strings.Contains(out, "beta") {
		t.Fatalf("rename across hosts: exit %d %s", code, errOut)
	}
	if out := second.mustRun("ls"); !strings.Contains(out, "renamed from afar") {
		t.Fatalf("the rename did not reach the second host:\n%s", out)
	}
	if _, errOut, code := first.run("log", "beta"); code != 0 {
		t.Fatalf("log across hosts: exit %d %s", code, errOut)
	}
	// A prefix matching on two hosts is ambiguous, naming both.
	_, errOut, code := first.run("log", "alpha")
	if code != 1 || !strings.Contains(errOut, "ambiguous") || !strings.Contains(errOut, "alpha1 on host first") || !strings.Contains(errOut, "alpha2 on host second") {
		t.Fatalf("ambiguous across hosts: exit %d %s", code, errOut)
	}
	if _, errOut, code := first.run("log", "gamma"); code != 1 || !strings.Contains(errOut, `no session "gamma" on any host`) {
		t.Fatalf("missing: exit %d %s", code, errOut)
	}
	// One id on two hosts is ambiguous too, from either, naming both.
	first.mustRun("new", "--id", "demo-1", "--cwd", first.workDir())
	second.mustRun("new", "--id", "demo-1", "--cwd", second.workDir())
	for _, p := range []*place{first, second} {
		_, errOut, code := p.run("log", "demo-1")
		if code != 1 || !strings.Contains(errOut, "demo-1 on host first") || !strings.Contains(errOut, "demo-1 on host second") {
			t.Fatalf("one id on two hosts, from %s: exit %d %s", p.hostID, code, errOut)
		}
	}
	// With --json, a program reads each case's code.
	for selector, want := range map[string]protocol.Code{"demo-1": protocol.CodeSessionAmbiguous, "gamma": protocol.CodeNotFound} {
		if _, errOut, code := first.run("log", "--json", selector); code != 1 || jsonErrorCode(t, errOut) != string(want) {
			t.Fatalf("log --json %s: exit %d %s, want %s", selector, code, errOut, want)
		}
	}
}

// jsonErrorCode is the code of the error a command printed with --json.
func jsonErrorCode(t *testing.T, stderr string) string {
	t.Helper()
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(stderr), &e); err != nil {
		t.Fatalf("not a JSON error: %q", stderr)
	}
	return e.Error.Code
}

func TestRejectsADuplicateSessionIDWithinOneDurableRepository(t *testing.T) {
	p := newSessionPlace(t)
	p.mustRun("new", "--id", "demo-1", "--cwd", p.workDir(), "--title", "the original")
	p.mustRun("run", "--session", "demo-1", "hello")
	p.mustRun("shutdown")
	// Restored from a backup beside the original, by hand: a second
	// folder whose header names the same session.
	sessionsDir := filepath.Join(p.home, "sessions")
	original := filepath.Join(sessionsDir, "demo-1")
	restored := filepath.Join(sessionsDir, "demo-1-restored")
	if err := os.CopyFS(restored, os.DirFS(original)); err != nil {
		t.Fatal(err)
	}
	before := transcriptOf(t, original)

	// Over the wire, selecting the session is ambiguous, naming both folders.
	c := p.open(t)
	ctx := agentdtest.Context(t)
	_, err := client.Call(ctx, c, protocol.OpSessionGet, protocol.SessionRef{SessionID: "demo-1"})
	if !errors.Is(err, client.ErrSessionAmbiguous) || !strings.Contains(err.Error(), "demo-1-restored") {
		t.Fatalf("session.get demo-1: %v, want session_ambiguous naming the restored folder", err)
	}
	_, err = client.Call(ctx, c, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: "demo-1", Transcript: protocol.TranscriptBootstrap{Kind: "none"}})
	if !errors.Is(err, client.ErrSessionAmbiguous) {
		t.Fatalf("subscription.open demo-1: %v, want session_ambiguous", err)
	}
	// So is every command that selects it, and it runs nothing.
	for _, args := range [][]string{{"run", "--session", "demo-1", "--json", "again"}, {"log", "--json", "demo-1"}, {"rm", "--json", "demo-1"}} {
		_, errOut, code := p.run(args...)
		if code != 1 || jsonErrorCode(t, errOut) != string(protocol.CodeSessionAmbiguous) || !strings.Contains(errOut, "demo-1-restored") {
			t.Fatalf("agentd %v: exit %d: %s", args, code, errOut)
		}
	}
	for _, dir := range []string{original, restored} {
		if got := transcriptOf(t, dir); got != before {
			t.Fatalf("%s's transcript changed:\n%s", filepath.Base(dir), got)
		}
	}
	// Removing the copy, named by its folder, leaves the original selectable.
	p.mustRun("rm", "demo-1-restored")
	if log := p.mustRun("log", "demo-1"); !strings.Contains(log, "hello") {
		t.Fatalf("log once the copy is gone:\n%s", log)
	}
}

// transcriptOf reads the transcript of the session folder dir.
func transcriptOf(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "transcript.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// killHost kills the place's host with SIGKILL, as a crash would, and
// returns its pid.
func killHost(t *testing.T, p *place) int {
	t.Helper()
	id, _ := protocol.DefaultHostID(p.home)
	b, err := os.ReadFile(protocol.RegistrationPath(p.rundir, id))
	var reg protocol.Registration
	if err != nil || json.Unmarshal(b, &reg) != nil || reg.PID <= 0 {
		t.Fatalf("no host registered: %v", err)
	}
	syscall.Kill(reg.PID, syscall.SIGKILL)
	waitProcessGone(t, reg.PID)
	return reg.PID
}

// TestAWorkerWhoseHostWasKilledFinishesItsTurnAndRetires: an orphaned
// worker runs its turn to the end, records it, and exits once it has been
// idle for its grace with no host to claim it.
func TestAWorkerWhoseHostWasKilledFinishesItsTurnAndRetires(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	p.mustRun("run", "--session", id, "--detach", "--approve", "all", "run `echo $$ > tool.pid; sleep 1; echo orphan-finished`")
	for deadline := time.Now().Add(agentdtest.Timeout); !exists(filepath.Join(dir, "tool.pid")); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the tool's command did not start")
		}
	}
	pid := workerPID(t, p, id)
	killHost(t, p)
	waitProcessGone(t, pid)
	if log := p.mustRun("log", id); !strings.Contains(log, "orphan-finished") || !strings.Contains(log, "── completed") {
		t.Fatalf("log after the orphan retired:\n%s", log)
	}
}

// TestAHostKilledMidTurnLeavesTheTurnToFinish: the host is killed while a
// turn runs; the worker finishes the turn, the client following it starts
// a host that adopts the worker, and sees the turn complete with its
// output, not interrupted.
func TestAHostKilledMidTurnLeavesTheTurnToFinish(t *testing.T) {
	p := newPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	cmd, stderr := runUntilTool(t, p, id, "run `sleep 1; echo finished-after-the-crash`")
	pid := workerPID(t, p, id)
	killHost(t, p)
	// Whichever of the run and this starts the next host, it adopts the
	// worker before it serves.
	wantServed(t, p.open(t), id)
	if err := waitCommand(t, cmd, "the run whose host was killed"); err != nil {
		t.Fatalf("run whose host was killed: %v: %s", err, stderr)
	}
	if !strings.Contains(stderr.String(), "reconnected") {
		t.Fatalf("the run did not say it reconnected: %s", stderr)
	}
	log := p.mustRun("log", id)
	if !strings.Contains(log, "finished-after-the-crash") || !strings.Contains(log, "── completed") || strings.Contains(log, "interrupted") {
		t.Fatalf("log after the crash:\n%s", log)
	}
	if next := workerPID(t, p, id); next != pid {
		t.Fatalf("the session is served by worker %d, not by the adopted %d", next, pid)
	}
}

// TestANewHostAdoptsTheWorkerItsKilledPredecessorLeft: the next host
// adopts the worker a killed host left behind: the same process serves
// the session on, and its transcript keeps one writer.
func TestANewHostAdoptsTheWorkerItsKilledPredecessorLeft(t *testing.T) {
	p := newPlace(t) // workers idle for the default grace: the orphan stays
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir()))
	if _, errOut, code := p.run("run", "--session", id, "hello"); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, errOut)
	}
	orphan := workerPID(t, p, id)
	killHost(t, p)
	if processGone(orphan) {
		t.Fatal("the worker died with its host")
	}
	out, errOut, code := p.run("run", "--session", id, "hello again")
	if code != 0 || !strings.Contains(out, "hello again") {
		t.Fatalf("run on a new host: exit %d\n%s\n%s", code, out, errOut)
	}
	if next := workerPID(t, p, id); next != orphan {
		t.Fatalf("the session is served by worker %d, not by the adopted %d", next, orphan)
	}
}

// TestRunQueuesOrSteersIntoABusySession: a prompt for a session whose turn
// runs is refused with the way out; --queue runs it after that turn and
// streams it, --steer sends it into that turn and streams the rest. The
// busy turn is held by a tool call waiting for approval.
func TestRunQueuesOrSteersIntoABusySession(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir()))
	hold := func() (*exec.Cmd, func()) {
		t.Helper()
		busy, _, line := runUntil(t, p, protocol.EventInteractionAdded, "run", "--session", id, "--json", "--approve", "ask", "--wait-approval", "run `echo held`")
		var d struct{ Interaction protocol.Interaction }
		if err := json.Unmarshal([]byte(line), &d); err != nil || d.Interaction.InteractionID == "" {
			t.Fatalf("no interaction in %q: %v", line, err)
		}
		return busy, func() { p.mustRun("answer", id, d.Interaction.InteractionID, "allow") }
	}
	started := func(args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
		t.Helper()
		cmd := p.command(args...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &out, &errOut
	}

	busy, release := hold()
	if _, errOut, code := p.run("run", "--session", id, "another"); code != 1 || !strings.Contains(errOut, "--queue") {
		t.Fatalf("run on a busy session: exit %d: %s", code, errOut)
	}
	queued, out, errOut := started("run", "--session", id, "--queue", "queued prompt")
	poll.Until(t, "the prompt queued", func() bool { return strings.Contains(p.mustRun("log", id, "--json"), "queued prompt") })
	release()
	if err := busy.Wait(); err != nil {
		t.Fatalf("the busy turn: %v", err)
	}
	if err := queued.Wait(); err != nil || !strings.Contains(out.String(), `You said: "queued prompt"`) || !strings.Contains(errOut.String(), "queued:") {
		t.Fatalf("run --queue: %v\n%s\n%s", err, out, errOut)
	}

	busy, release = hold()
	steered, out, errOut := started("run", "--session", id, "--steer", "steer this")
	poll.Until(t, "the prompt queued", func() bool { return strings.Contains(p.mustRun("log", id, "--json"), "steer this") })
	release()
	if err := busy.Wait(); err != nil {
		t.Fatalf("the steered turn: %v", err)
	}
	if err := steered.Wait(); err != nil || !strings.Contains(out.String(), `You said: "steer this"`) || !strings.Contains(errOut.String(), "steered:") {
		t.Fatalf("run --steer: %v\n%s\n%s", err, out, errOut)
	}
	log := p.mustRun("log", id)
	turn, steer := strings.LastIndex(log, "> run `echo held`"), strings.Index(log, "> steer this")
	if turn < 0 || steer < turn || strings.Contains(log[turn:steer], "── turn ") {
		t.Fatalf("the steering did not go into the running turn:\n%s", log)
	}
}

// TestWorkersLogToTheHostsLog: a host started on demand logs to the home's
// host.log, and so do its workers, with whatever else they print.
func TestWorkersLogToTheHostsLog(t *testing.T) {
	p := newSessionPlace(t)
	if _, errOut, code := p.run("run", "--cwd", p.workDir(), "hello"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	poll.Until(t, "a worker's lines in host.log", func() bool {
		b, _ := os.ReadFile(filepath.Join(p.home, activation.LogFileName))
		return strings.Contains(string(b), "role=worker")
	})
}
