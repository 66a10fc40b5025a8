package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// place is one home and runtime directory for agentd processes.
type place struct {
	t            *testing.T
	home, rundir string
	hostID       string
	extraEnv     []string
}

func newPlace(t *testing.T) *place {
	base := agentdtest.ShortDir(t)
	p := &place{t: t, home: filepath.Join(base, "home"), rundir: filepath.Join(base, "run")}
	// After the hosts are stopped, before the place is removed: nothing
	// the test started outlives it, whatever way the test ended.
	t.Cleanup(func() { killAll(runningIn(base)) })
	t.Cleanup(func() { awaitNoneRunIn(t, base) })
	t.Cleanup(p.stopAll)
	return p
}

// awaitNoneRunIn fails the test unless every process it started under dir
// ends within Timeout once the hosts are stopped: none names dir in its
// command line (a host, a worker) or works in it (a command a worker ran).
func awaitNoneRunIn(t *testing.T, dir string) {
	t.Helper()
	if left := runningIn(dir); len(left) > 0 {
		t.Logf("still running as the test ends: %v", left)
		poll.Until(t, "the processes the test started to end", func() bool { return len(runningIn(dir)) == 0 })
	}
}

// runningIn lists the processes (by pid, with their command lines) that
// run with dir in their command line, or in dir or under it.
func runningIn(dir string) map[int][]string {
	ents, _ := os.ReadDir("/proc")
	left := map[int][]string{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		args, _ := proc.Args(pid)
		cwd, _ := os.Readlink("/proc/" + e.Name() + "/cwd")
		in := cwd == dir || strings.HasPrefix(cwd, dir+"/") || strings.Contains(strings.Join(args, " ")+" ", dir+"/")
		if in && proc.Running(pid) {
			left[pid] = args
		}
	}
	return left
}

// killAll kills the processes procs lists.
func killAll(procs map[int][]string) {
	for pid := range procs {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// killSession kills what runs in the process session sid, its leader
// included: a worker and the commands it ran.
func killSession(sid int) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := proc.ReadStat(pid); err == nil && st.Session == sid {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func (p *place) env() []string {
	// GORACE: a race-enabled binary otherwise sleeps a second at exit.
	env := append(os.Environ(), envAsCLI+"=1", "GORACE=atexit_sleep_ms=0",
		protocol.EnvHome+"="+p.home, protocol.EnvRuntimeDir+"="+p.rundir)
	if p.hostID != "" {
		env = append(env, protocol.EnvHostID+"="+p.hostID)
	}
	return append(env, p.extraEnv...)
}

func (p *place) command(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = p.env()
	return cmd
}

// run runs agentd with args and returns stdout, stderr and the exit code.
func (p *place) run(args ...string) (string, string, int) {
	p.t.Helper()
	cmd := p.command(args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("agentd %v: %v", args, err)
	}
	err := waitCommand(p.t, cmd, fmt.Sprintf("agentd %v", args))
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		p.t.Fatalf("agentd %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

// commandTimeout bounds how long a command a test runs may take: one
// held by a host that went wrong (waiting on a worker that exited, say)
// fails the test with its name instead of hanging until go test's own
// timeout.
const commandTimeout = 2 * agentdtest.Timeout

// waitCommand waits for the started cmd, what, to exit, and returns its
// error; one still running after commandTimeout is killed and fails t.
func waitCommand(t *testing.T, cmd *exec.Cmd, what string) error {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		return err
	case <-time.After(commandTimeout):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("%s did not exit within %v: the host held it", what, commandTimeout)
		return nil
	}
}

func (p *place) mustRun(args ...string) string {
	p.t.Helper()
	out, errOut, code := p.run(args...)
	if code != 0 {
		p.t.Fatalf("agentd %v: exit %d: %s", args, code, errOut)
	}
	return out
}

func (p *place) statusJSON() protocol.HostStatus {
	p.t.Helper()
	var st protocol.HostStatus
	if err := json.Unmarshal([]byte(p.mustRun("status", "--json")), &st); err != nil {
		p.t.Fatal(err)
	}
	return st
}

// stopAll shuts down every host registered in the runtime directory.
func (p *place) stopAll() {
	hosts, _ := activation.Discover(context.Background(), p.rundir)
	for _, h := range hosts {
		syscall.Kill(h.PID, syscall.SIGTERM)
		activation.WaitExited(agentdtest.Context(p.t), h)
	}
}

// startHost runs `agentd host` in the foreground as a child and waits until
// it is ready.
func (p *place) startHost(args ...string) *exec.Cmd {
	p.t.Helper()
	cmd := p.command(append([]string{"host"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { cmd.Wait(); close(waited) }()
	p.t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-waited
	})
	id := p.hostID
	if id == "" {
		id, _ = protocol.DefaultHostID(p.home)
	}
	deadline := time.Now().Add(agentdtest.Timeout)
	for {
		b, err := os.ReadFile(protocol.RegistrationPath(p.rundir, id))
		var reg protocol.Registration
		if err == nil && json.Unmarshal(b, &reg) == nil && reg.State == protocol.StateReady && reg.PID == cmd.Process.Pid {
			return cmd
		}
		select {
		case <-waited:
			p.t.Fatalf("host exited before ready: %s", stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("host not ready: %s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func waitGone(t *testing.T, paths ...string) {
	t.Helper()
	deadline := time.Now().Add(agentdtest.Timeout)
	for _, path := range paths {
		for exists(path) {
			if time.Now().After(deadline) {
				t.Fatalf("%s still exists", filepath.Base(path))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func TestStatusColdStartsAHostAndPrintsIt(t *testing.T) {
	p := newPlace(t)
	out := p.mustRun("status")
	for _, field := range []string{"version", "protocol", "host id", "pid", "state", "ready", "uptime", "connections", "active operations"} {
		if !strings.Contains(out, field) {
			t.Errorf("status output lacks %q:\n%s", field, out)
		}
	}
	st := p.statusJSON()
	if st.State != protocol.StateReady || st.ProtocolMin != 1 || st.PID == 0 || st.HostID == "" || st.Connections != 1 {
		t.Fatalf("status %+v", st)
	}
	if !strings.Contains(out, fmt.Sprint(st.PID)) {
		t.Fatalf("a second status reached another host: %s", out)
	}
}

func TestConcurrentColdActivationStartsOneHostAndRetiresAfterClientsLeave(t *testing.T) {
	p := newPlace(t)
	p.hostID = "00000000-0000-4000-8000-000000000001"
	const grace = 500 * time.Millisecond
	p.extraEnv = []string{activation.EnvIdleGrace + "=" + grace.String()}
	ctx := agentdtest.Context(t)
	// Seven commands and one client that stays connected activate at once.
	const commands = 7
	pids := make([]int, commands)
	var held *client.Conn
	var heldErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		held, _, _, heldErr = activation.Open(ctx, activation.OpenOptions{Activation: activation.Options{
			Home: p.home, RuntimeDir: p.rundir, HostID: p.hostID,
			Command: []string{os.Args[0], "host"}, Env: p.env(), IdleGrace: grace,
		}})
	})
	for i := range commands {
		wg.Go(func() {
			out, errOut, code := p.run("status", "--json")
			if code != 0 {
				t.Errorf("status %d: exit %d: %s", i, code, errOut)
				return
			}
			var st protocol.HostStatus
			json.Unmarshal([]byte(out), &st)
			pids[i] = st.PID
		})
	}
	wg.Wait()
	if heldErr != nil {
		t.Fatalf("open: %v", heldErr)
	}
	defer held.Close()
	st, err := held.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if pid != st.PID {
			t.Fatalf("status answered from pids %v and the client that stays from %d: want one host", pids, st.PID)
		}
	}

	// The commands have left. A host of another home in the same runtime
	// directory, started now with the same grace, retires once it is idle:
	// a whole grace has then passed since the commands left, and the host
	// the remaining client holds is still up.
	witness := newPlace(t)
	witness.rundir, witness.hostID, witness.extraEnv = p.rundir, "00000000-0000-4000-8000-000000000002", p.extraEnv
	witness.mustRun("status")
	waitGone(t, protocol.SocketPath(witness.rundir, witness.hostID))
	if again, err := held.Status(ctx); err != nil || again.PID != st.PID || again.State != protocol.StateReady {
		t.Fatalf("with a client connected, the host answers %+v, %v", again, err)
	}
	// A client that comes back finds the same host.
	if got := p.statusJSON(); got.PID != st.PID {
		t.Fatalf("a returning client reached host %d, want %d", got.PID, st.PID)
	}

	// The last client leaves: the host retires.
	held.Close()
	waitGone(t, protocol.SocketPath(p.rundir, p.hostID), protocol.RegistrationPath(p.rundir, p.hostID))
}

func TestRuntimeDirectoryAndHostIDLayout(t *testing.T) {
	p := newPlace(t)
	p.hostID = "00000000-0000-4000-8000-000000000001"
	st := p.statusJSON()
	if st.HostID != p.hostID {
		t.Fatalf("host id %q, want %q", st.HostID, p.hostID)
	}
	fi, err := os.Lstat(p.rundir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("runtime dir mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	sock, err := os.Lstat(protocol.SocketPath(p.rundir, p.hostID))
	if err != nil || sock.Mode().Type() != fs.ModeSocket || sock.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v %v", sock.Mode(), err)
	}
	reg, err := os.Lstat(protocol.RegistrationPath(p.rundir, p.hostID))
	if err != nil || !reg.Mode().IsRegular() || reg.Mode().Perm() != 0o600 {
		t.Fatalf("registration %v %v", reg.Mode(), err)
	}
	entries, _ := os.ReadDir(p.rundir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{p.hostID + ".json", p.hostID + ".sock"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("runtime dir holds %v, want %v", names, want)
	}
}

func TestStatusAllDiscoversMultipleHostsInOneRuntimeDirectory(t *testing.T) {
	first := newPlace(t)
	first.hostID = "00000000-0000-4000-8000-000000000001"
	second := newPlace(t)
	second.rundir = first.rundir
	second.hostID = "00000000-0000-4000-8000-000000000002"
	firstHost := first.startHost()
	second.startHost()
	for _, p := range []*place{first, second} {
		for _, id := range []string{"demo-1", "demo-2"} {
			p.mustRun("new", "--id", id, "--cwd", p.workDir())
		}
		if fi, err := os.Lstat(protocol.SocketPath(p.rundir, p.hostID)); err != nil || fi.Mode().Type() != fs.ModeSocket {
			t.Fatalf("host %s's socket: %v %v", p.hostID, fi, err)
		}
	}

	hosts := func() []string {
		t.Helper()
		var rows []struct {
			HostID string `json:"hostId"`
			State  string `json:"state"`
			Error  string `json:"error"`
		}
		if err := json.Unmarshal([]byte(second.mustRun("status", "--all", "--json")), &rows); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range rows {
			if r.State != protocol.StateReady || r.Error != "" {
				t.Fatalf("host %s: %s %s", r.HostID, r.State, r.Error)
			}
			ids = append(ids, r.HostID)
		}
		slices.Sort(ids)
		return ids
	}
	// sessions lists host/session pairs as a client of p's home sees them
	// across the runtime directory.
	sessions := func(p *place) []string {
		t.Helper()
		var rows []struct {
			HostID    string `json:"hostId"`
			SessionID string `json:"sessionId"`
		}
		if err := json.Unmarshal([]byte(p.mustRun("ls", "--all-hosts", "--json")), &rows); err != nil {
			t.Fatal(err)
		}
		var pairs []string
		for _, r := range rows {
			pairs = append(pairs, r.HostID+"/"+r.SessionID)
		}
		slices.Sort(pairs)
		return pairs
	}
	both := []string{first.hostID, second.hostID}
	if got := hosts(); !slices.Equal(got, both) {
		t.Fatalf("hosts %v, want %v", got, both)
	}
	all := []string{
		first.hostID + "/demo-1", first.hostID + "/demo-2",
		second.hostID + "/demo-1", second.hostID + "/demo-2",
	}
	for _, p := range []*place{first, second} {
		if got := sessions(p); !slices.Equal(got, all) {
			t.Fatalf("sessions listed from %s's home: %v, want %v", p.hostID, got, all)
		}
	}

	firstHost.Process.Signal(syscall.SIGTERM)
	waitGone(t, protocol.SocketPath(first.rundir, first.hostID))
	if got := hosts(); !slices.Equal(got, []string{second.hostID}) {
		t.Fatalf("hosts after the first stopped: %v", got)
	}
	if got, want := sessions(second), all[2:]; !slices.Equal(got, want) {
		t.Fatalf("sessions after the first host stopped: %v, want %v", got, want)
	}
	if out := second.mustRun("status", "--all"); !strings.Contains(out, second.hostID) || strings.Contains(out, first.hostID) {
		t.Fatalf("status --all:\n%s", out)
	}
}

func TestHostDrainsOnSIGTERMAndExitsZero(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			p := newPlace(t)
			p.hostID = "drain"
			cmd := p.command("host", "--log-format", "json")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitReady(t, p)
			cmd.Process.Signal(sig)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("host exited with %v: %s", err, stderr.String())
			}
			if exists(protocol.SocketPath(p.rundir, p.hostID)) || exists(protocol.RegistrationPath(p.rundir, p.hostID)) {
				t.Fatal("socket or registration left behind")
			}
			var states []string
			for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("log line is not JSON: %q", line)
				}
				if s, ok := rec["state"].(string); ok {
					states = append(states, s)
				}
			}
			if fmt.Sprint(states) != fmt.Sprint([]string{"recovering", "ready", "draining"}) {
				t.Fatalf("logged states %v", states)
			}
		})
	}
}

func waitReady(t *testing.T, p *place) protocol.Registration {
	t.Helper()
	deadline := time.Now().Add(agentdtest.Timeout)
	for {
		b, err := os.ReadFile(protocol.RegistrationPath(p.rundir, p.hostID))
		var reg protocol.Registration
		if err == nil && json.Unmarshal(b, &reg) == nil && reg.State == protocol.StateReady {
			return reg
		}
		if time.Now().After(deadline) {
			t.Fatal("host not ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSecondHostOnTheSameHomeExitsOneNamingTheHolder(t *testing.T) {
	p := newPlace(t)
	first := p.startHost()
	_, errOut, code := p.run("host")
	if code != 1 || !strings.Contains(errOut, fmt.Sprintf("pid %d", first.Process.Pid)) || !strings.Contains(errOut, "--replace") {
		t.Fatalf("second host: exit %d: %s", code, errOut)
	}
}

func TestShutdownDrainsTheHostAndWaitsForItsExit(t *testing.T) {
	p := newPlace(t)
	st := p.statusJSON()
	out := p.mustRun("shutdown")
	if !strings.Contains(out, "stopped") {
		t.Fatalf("shutdown said %q", out)
	}
	if proc.Running(st.PID) {
		t.Fatalf("host pid %d still runs after shutdown returned", st.PID)
	}
	if out := p.mustRun("shutdown"); !strings.Contains(out, "no agentd host") {
		t.Fatalf("second shutdown said %q", out)
	}
}

func TestExitCodes(t *testing.T) {
	p := newPlace(t)
	cases := []struct {
		args []string
		code int
		says string
	}{
		{[]string{"status", "--bogus"}, 2, "unknown flag"},
		{[]string{"status", "extra"}, 2, "takes no arguments"},
		{[]string{"nonsense"}, 2, "nonsense"},
		{[]string{"host", "--log-format", "xml"}, 2, "--log-format"},
		{[]string{"host", "--idle-grace", "soon"}, 2, "idle-grace"},
		{[]string{"version"}, 0, ""},
	}
	for _, c := range cases {
		_, errOut, code := p.run(c.args...)
		if code != c.code || !strings.Contains(errOut, c.says) {
			t.Errorf("agentd %v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, errOut, c.code, c.says)
		}
	}
}

func TestEveryCommandHasOneSentenceHelp(t *testing.T) {
	p := newPlace(t)
	out := p.mustRun("--help")
	for _, cmd := range []string{"status", "host", "shutdown", "version", "ls", "archive", "unarchive", "rm", "completion", "help"} {
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == cmd {
				line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), cmd))
			}
		}
		if line == "" || !strings.HasSuffix(line, ".") || strings.Count(line, ". ") > 0 {
			t.Errorf("%s help %q: want one sentence", cmd, line)
		}
	}
}

func TestHandStartedHostRetiresOnlyWithAnIdleGrace(t *testing.T) {
	p := newPlace(t)
	p.hostID = "by-hand"
	cmd := p.command("host", "--idle-grace", "200ms")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, p)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("host exited with %v: %s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "retiring after idle grace") {
		t.Fatalf("host log: %s", stderr.String())
	}
	waitGone(t, protocol.SocketPath(p.rundir, p.hostID), protocol.RegistrationPath(p.rundir, p.hostID))
}
