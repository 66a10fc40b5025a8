package cli_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// holdTurn starts a detached turn on session id whose command waits until
// the test says go: the worker stays busy until then. It returns the
// function that lets the turn finish.
func holdTurn(t *testing.T, p *place, id, dir string) (release func()) {
	t.Helper()
	started, gate := filepath.Join(dir, "held"), filepath.Join(dir, "go")
	os.Remove(gate)
	p.mustRun("run", "--session", id, "--detach", "--approve", "all",
		"run `touch held; while [ ! -e go ]; do sleep 0.02; done; echo released`")
	poll.Until(t, "the held command", func() bool { return exists(started) })
	return func() { os.WriteFile(gate, nil, 0o644) }
}

// hostPID returns the pid of the place's ready host.
func hostPID(t *testing.T, p *place) int {
	t.Helper()
	if p.hostID == "" {
		p.hostID, _ = protocol.DefaultHostID(p.home)
	}
	return waitReady(t, p).PID
}

// Seed 002: discovers workers after replacing the server. `agentd upgrade`
// replaces the host under a running turn: the new host adopts the worker
// (the same process), the client following the turn reconnects and sees
// all of it, each line once, and the turn completes; a session without a
// worker gets a new one.
func TestUpgradeAdoptsTheWorkersAndTheirClientsResume(t *testing.T) {
	p := newPlace(t)
	dir := p.workDir()
	busy := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	other := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	run := p.command("run", "--session", busy, "--approve", "all",
		"run `for i in 1 2 3; do echo line-$i; done; touch half; while [ ! -e go ]; do sleep 0.02; done; for i in 4 5 6; do echo line-$i; done`")
	var out, errOut bytes.Buffer
	run.Stdout, run.Stderr = &out, &errOut
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the first half of the command", func() bool { return exists(filepath.Join(dir, "half")) })
	worker, before := workerPID(t, p, busy), hostPID(t, p)

	up := p.mustRun("upgrade")
	after := hostPID(t, p)
	if after == before || !strings.Contains(up, "replaced") {
		t.Fatalf("upgrade: host %d → %d: %s", before, after, up)
	}
	waitProcessGone(t, before)
	if processGone(worker) {
		t.Fatal("the worker died in the hand-off")
	}
	wantServed(t, p.open(t), busy)
	if workerPID(t, p, busy) != worker {
		t.Fatal("the busy session's worker was not adopted")
	}
	if ls := p.mustRun("ls"); !strings.Contains(ls, busy) || !strings.Contains(ls, other) {
		t.Fatalf("ls after the upgrade:\n%s", ls)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	if err := waitCommand(t, run, "the run across the upgrade"); err != nil {
		t.Fatalf("run across the upgrade: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "host_replaced") || !strings.Contains(errOut.String(), "reconnected") {
		t.Fatalf("the run did not say why it reconnected: %s", errOut.String())
	}
	// The streamed tool output shows each line once (the answer quotes
	// the output again, after it).
	streamed, _, _ := strings.Cut(out.String(), "exit code 0")
	for i := 1; i <= 6; i++ {
		if n := strings.Count(streamed, "line-"+string(rune('0'+i))+"\n"); n != 1 {
			t.Fatalf("line-%d streamed %d times:\n%s", i, n, out.String())
		}
	}
	if log := p.mustRun("log", busy); !strings.Contains(log, "── completed") {
		t.Fatalf("log:\n%s", log)
	}
	if workerPID(t, p, busy) != worker {
		t.Fatal("the adopted worker was replaced")
	}
	p.mustRun("run", "--session", other, "hello")
	if w := workerPID(t, p, other); w == worker {
		t.Fatal("the other session shares the adopted worker")
	}
}

// Seed 002: retires an unclaimed idle worker after replacement demand
// expires. A worker adopted by the new host that no client claims retires
// once idle for its grace.
func TestAnAdoptedWorkerNobodyClaimsRetiresAfterItsGrace(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	release := holdTurn(t, p, id, dir)
	worker := workerPID(t, p, id)
	p.mustRun("upgrade")
	if processGone(worker) {
		t.Fatal("the worker died in the hand-off")
	}
	if got := adoptedPID(t, p, id); got != worker {
		t.Fatalf("the new host serves worker %d, not the adopted %d", got, worker)
	}
	release()
	waitProcessGone(t, worker)
	if log := p.mustRun("log", id); !strings.Contains(log, "released") || !strings.Contains(log, "── completed") {
		t.Fatalf("log:\n%s", log)
	}
}

// adoptedPID asks the host which worker serves session id: the pid in the
// session's worker registration, once the host has said it serves the
// session's worker.
func adoptedPID(t *testing.T, p *place, id string) int {
	t.Helper()
	wantServed(t, p.open(t), id)
	return workerPID(t, p, id)
}

// wantServed fails the test at once unless the host of c lists session id
// running: a host serves once it has adopted the workers it found, so a
// session whose worker it did not adopt is listed idle.
func wantServed(t *testing.T, c *client.Conn, id string) {
	t.Helper()
	list, err := client.Call(agentdtest.Context(t), c, protocol.OpSessionList, protocol.SessionListInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Sessions {
		if s.SessionID == id {
			if s.Status != protocol.SessionRunning {
				t.Fatalf("the new host lists session %s %s: it did not adopt the session's worker", id, s.Status)
			}
			return
		}
	}
	t.Fatalf("the new host does not list session %s: %+v", id, list.Sessions)
}

// awaitTurnEnd reads s until turn id ends, and returns how.
func awaitTurnEnd(t *testing.T, s *client.Session, id string) string {
	t.Helper()
	ctx := agentdtest.Context(t)
	for {
		ev, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("the session's stream ended before its turn: %v", err)
		}
		if d := ev.Delta; d.Event == protocol.EventRunEnd && d.Turn != nil && d.Turn.TurnID == id {
			return d.Turn.Status
		}
	}
}

// Seed 002: restores tracked sessions that are outside the replacement
// catalog. The host is killed and the session's header lost while its
// worker runs; the next host adopts the worker, puts the session back in
// the catalog from the worker's copy, and serves it: it lists the session
// running, the same worker process serves its stream, and the held turn
// completes on that stream.
func TestALiveWorkersSessionMissingFromTheCatalogIsRestored(t *testing.T) {
	p := newPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	release := holdTurn(t, p, id, dir)
	worker := workerPID(t, p, id)
	killHost(t, p)
	if err := os.Remove(filepath.Join(p.home, "sessions", id, "header.json")); err != nil {
		t.Fatal(err)
	}
	ls := p.mustRun("ls")
	if !strings.Contains(ls, id) || !strings.Contains(ls, dir) {
		t.Fatalf("ls after the header was lost:\n%s", ls)
	}
	c := p.open(t)
	wantServed(t, c, id)
	s, err := c.OpenSession(agentdtest.Context(t), id, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	turn := s.Snapshot().RootTurn
	if turn == nil || turn.Status != protocol.TurnRunning {
		t.Fatalf("the held turn on the new host: %+v", turn)
	}
	if got := workerPID(t, p, id); got != worker {
		t.Fatalf("the session is served by worker %d, not the adopted %d", got, worker)
	}
	release()
	if status := awaitTurnEnd(t, s, turn.TurnID); status != protocol.TurnCompleted {
		t.Fatalf("the held turn ended %s on the new host", status)
	}
	if _, err := os.Stat(filepath.Join(p.home, "sessions", id, "header.json")); err != nil {
		t.Fatalf("the header was not restored: %v", err)
	}
}

// A worker that does not answer the host adopting it (stopped, here) does
// not hold that host back: it is killed as lost, the host serves, and the
// session's next worker records the turn it left as failed.
func TestAHungWorkerIsStoppedAsLostAndDoesNotHoldTheNewHostBack(t *testing.T) {
	p := newPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	holdTurn(t, p, id, dir)
	worker := workerPID(t, p, id)
	killHost(t, p)
	st, err := proc.ReadStat(worker)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Kill(worker, syscall.SIGSTOP)
	// Should the new host not kill it, the worker is killed with the
	// command it runs, which would otherwise poll on for ever; once its
	// pid may name another process, it is left be.
	t.Cleanup(func() {
		if proc.RunningSince(worker, st.StartTime) {
			killSession(worker)
		}
	})
	p.mustRun("status")
	waitProcessGone(t, worker)
	out, errOut, code := p.run("run", "--session", id, "hello")
	if code != 0 {
		t.Fatalf("run after the hung worker: exit %d\n%s\n%s", code, out, errOut)
	}
	if log := p.mustRun("log", id); !strings.Contains(log, "did not answer") {
		t.Fatalf("log:\n%s", log)
	}
}

// Seed 002: composes management attachment with Session service
// hydration; observes keyed service instances and fences replacement
// generations over framed transport. The host is killed and the next one
// adopts the worker: one new connection lists the sessions and opens the
// adopted session's stream; a PTY controller acquired through the killed
// host is refused, its input never written, and the PTY can be taken
// anew.
func TestAReplacementFencesHandlesOfTheHostItReplaced(t *testing.T) {
	p := newPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	ctx := agentdtest.Context(t)
	dial := func() *client.Conn {
		c, _, _, err := activation.Open(ctx, activation.OpenOptions{Activation: activation.Options{Home: p.home, RuntimeDir: p.rundir}, NoStart: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c := dial()
	started, err := client.Call(ctx, c, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{
		SessionID: id, LaunchID: "fence-1", Command: "stty -echo; cat > typed", PTY: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ref := started.Ref
	stale, err := c.AcquirePTY(ctx, id, ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := stale.Control(ctx, []byte("before\n"), 0, 0); err != nil {
		t.Fatal(err)
	}
	worker := workerPID(t, p, id)
	killHost(t, p)
	p.mustRun("status")

	// One connection: the session list, then the session's stream.
	n := dial()
	list, err := client.Call(ctx, n, protocol.OpSessionList, protocol.SessionListInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Sessions) != 1 || list.Sessions[0].SessionID != id || list.Sessions[0].Status != protocol.SessionRunning {
		t.Fatalf("sessions after the replacement: %+v", list.Sessions)
	}
	s, err := n.OpenSession(ctx, id, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if snap := s.Snapshot(); snap.Session.SessionID != id || snap.Session.Model == "" {
		t.Fatalf("the adopted session's projection: %+v", snap.Session)
	}

	// The controller of the replaced host's client is refused, on the new
	// host, and what it sends is never written.
	_, err = client.Call(ctx, n, protocol.OpRuntimeResourceControllerControl, protocol.ControlInput{
		SessionID: id, Ref: ref, ControllerID: stale.Acquired.ControllerID, Sequence: 2, Data: "after\n",
	})
	if !errors.Is(err, client.ErrOperationConflict) {
		t.Fatalf("control with the replaced host's controller: %v", err)
	}
	fresh, err := n.AcquirePTY(ctx, id, ref)
	if err != nil {
		t.Fatalf("acquire after the replacement: %v", err)
	}
	if err := fresh.Control(ctx, []byte("fresh\n"), 0, 0); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the fresh input", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "typed"))
		return strings.Contains(string(b), "fresh")
	})
	if b, _ := os.ReadFile(filepath.Join(dir, "typed")); string(b) != "before\nfresh\n" {
		t.Fatalf("the PTY got %q", b)
	}
	if workerPID(t, p, id) != worker {
		t.Fatal("the worker was not adopted")
	}
}

// A shell attached with `agentd shell` lives through `agentd upgrade`:
// the command reconnects by itself, draws the screen again, takes control
// back, and the same shell reads what is typed next.
func TestAShellAttachmentReconnectsAcrossAnUpgrade(t *testing.T) {
	p, id := newShellPlace(t)
	p.extraEnv = append(p.extraEnv, "AGENTD_WORKER_IDLE_GRACE=30s")
	work := p.workDir()
	s, stderr := p.ptyScreen(t, work, "shell", id)
	s.typeKeys("echo before-$((2*3)) $$\r")
	s.waitText("before-6")
	worker := workerPID(t, p, id)
	p.mustRun("upgrade")
	wantServed(t, p.open(t), id)
	poll.Until(t, "the shell command to reconnect", func() bool { return strings.Contains(stderr.String(), "reconnected") })
	s.typeKeys("echo after-$((3*3)) $$\r")
	screen := s.waitText("after-9")
	if !strings.Contains(stderr.String(), "host_replaced") {
		t.Fatalf("the command did not say why it reconnected: %q", stderr.String())
	}
	// The same shell: the pid it printed before is the one it prints now.
	// Keys typed before the shell printed its prompt are echoed ahead of
	// it, so a line may start with the prompt the output follows.
	var before, after string
	for _, line := range strings.Split(screen, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			switch f[i] {
			case "before-6":
				before = f[i+1]
			case "after-9":
				after = f[i+1]
			}
		}
	}
	if before == "" || before != after {
		t.Fatalf("the shell was %q before the upgrade and %q after:\n%s", before, after, screen)
	}
	if workerPID(t, p, id) != worker {
		t.Fatal("the session's worker was replaced")
	}
	s.typeKeys("\x1c")
	if err := s.waitExit(); err != nil {
		t.Fatalf("detach: %v", err)
	}
}

// An attached screen lives through `agentd upgrade` mid-turn: it says it
// reconnected, and shows the rest of the turn once, to its end.
func TestAttachFollowsATurnAcrossAnUpgrade(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir, "--approve", "all"))
	s := p.screen(t, "attach", id)
	s.waitText("ctrl+\\ detach")
	s.typeLine("run `echo first-half; touch half; while [ ! -e go ]; do sleep 0.02; done; echo second-half`")
	s.waitText("│ first-half")
	p.mustRun("upgrade")
	wantServed(t, p.open(t), id)
	s.waitText("· reconnected")
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	text := s.waitText("── completed")
	for _, want := range []string{"│ first-half", "│ second-half"} {
		if n := strings.Count(text, want); n != 1 {
			t.Fatalf("%q shows %d times:\n%s", want, n, text)
		}
	}
	if strings.Contains(text, "interrupted") {
		t.Fatalf("the turn shows interrupted:\n%s", text)
	}
}

// A host starting after its host and worker were both killed finds the
// worker's registration dead: it removes it and the worker's socket, and
// ends the command the worker left running in its process session.
func TestAHostCleansUpAfterAWorkerKilledWithItsHost(t *testing.T) {
	p := newPlace(t)
	dir := p.workDir()
	id := strings.TrimSpace(p.mustRun("new", "--cwd", dir))
	p.mustRun("run", "--session", id, "--detach", "--approve", "all",
		"run `echo $$ > tool.pid; while [ ! -e go ]; do sleep 0.02; done`")
	tool := toolPID(t, dir)
	worker := workerPID(t, p, id)
	hostID, _ := protocol.DefaultHostID(p.home)
	sock := filepath.Join(p.rundir, hostID+"-w-"+id+".sock")
	killHost(t, p)
	syscall.Kill(worker, syscall.SIGKILL)
	waitProcessGone(t, worker)
	if processGone(tool) || !exists(sock) {
		t.Fatal("the killed worker's command or socket is gone before a host looked")
	}
	p.mustRun("status")
	waitProcessGone(t, tool)
	waitGone(t, sock, home.WorkerRegistrationPath(p.home, id))
	// The session's next worker records the turn the killed one left.
	p.mustRun("run", "--session", id, "hello")
	if log := p.mustRun("log", id); !strings.Contains(log, "failed") {
		t.Fatalf("log:\n%s", log)
	}
}

// `agentd upgrade` starts the new host with the arguments the running one
// was started with (its idle grace and default model here), logging to the
// home's log when the old one logged to its terminal.
func TestUpgradeKeepsTheHostsArguments(t *testing.T) {
	p := newPlace(t)
	old := p.startHost("--idle-grace", "0s", "--default-model", "faux/echo")
	p.mustRun("upgrade")
	waitProcessGone(t, old.Process.Pid)
	st := p.statusJSON()
	args, err := proc.Args(st.PID)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(args[1:], " ")
	for _, want := range []string{"host ", "--idle-grace 0s", "--default-model faux/echo", "--replace", "--log-file " + filepath.Join(p.home, "host.log")} {
		if !strings.Contains(line, want) {
			t.Fatalf("the new host runs %q, without %q", line, want)
		}
	}
	if st.LogFile != filepath.Join(p.home, "host.log") {
		t.Fatalf("the new host logs to %q", st.LogFile)
	}
}
