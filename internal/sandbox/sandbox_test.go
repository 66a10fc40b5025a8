package sandbox_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/internal/sandbox"
	"github.com/agentd-dev/agentd/protocol"
)

// place is a session's world in t.TempDir(): its workspace, its private
// tmp, a fake agentd home (with a credentials file) and runtime
// directory, and a directory outside all of them.
type place struct {
	t                                      *testing.T
	workspace, tmp, home, runtime, outside string
}

func newPlace(t *testing.T) place {
	t.Helper()
	root := t.TempDir()
	p := place{
		t:         t,
		workspace: filepath.Join(root, "work"), tmp: filepath.Join(root, "tmp"),
		home: filepath.Join(root, "home"), runtime: filepath.Join(root, "run"), outside: filepath.Join(root, "outside"),
	}
	for _, d := range []string{p.workspace, p.tmp, p.home, p.runtime, p.outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(p.home, "credentials.json"), filepath.Join(p.runtime, "host.json"), filepath.Join(p.outside, "readme")} {
		if err := os.WriteFile(f, []byte("secret-or-not\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func (p place) policy(mode string) *sandbox.Policy {
	pol := &sandbox.Policy{Mode: mode, Workspace: []string{p.workspace}, Tmp: p.tmp, Hidden: []string{p.home, p.runtime}}
	p.t.Cleanup(pol.Close)
	return pol
}

// sh runs script with sh -c under pol, in the workspace, and returns its
// combined output and whether it exited 0.
func sh(t *testing.T, pol *sandbox.Policy, dir, script string) (string, bool) {
	t.Helper()
	cmd, started, err := pol.Command(os.Environ(), "sh", "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = dir
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Start()
	started()
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("running %q: %v", script, err)
	}
	return out.String(), err == nil
}

func mustRun(t *testing.T, pol *sandbox.Policy, dir, script string) string {
	t.Helper()
	out, ok := sh(t, pol, dir, script)
	if !ok {
		t.Fatalf("%q failed under %s: %s", script, pol.Mode, out)
	}
	return out
}

func mustDeny(t *testing.T, pol *sandbox.Policy, dir, script, says string) {
	t.Helper()
	out, ok := sh(t, pol, dir, script)
	if ok || !strings.Contains(out, says) {
		t.Fatalf("%q under %s: want it refused with %q, got ok=%v: %s", script, pol.Mode, says, ok, out)
	}
}

func TestWorkspaceModeWritesOnlyInTheWorkspaceAndTmp(t *testing.T) {
	p := newPlace(t)
	pol := p.policy(protocol.SandboxWorkspace)
	mustRun(t, pol, p.workspace, "echo hi > inside && mkdir -p sub/dir && mv inside sub/dir/ && echo tmp > \"$TMPDIR/t\"")
	if b, err := os.ReadFile(filepath.Join(p.workspace, "sub/dir/inside")); err != nil || string(b) != "hi\n" {
		t.Fatalf("the write inside the workspace: %q, %v", b, err)
	}
	mustDeny(t, pol, p.workspace, "echo no > "+filepath.Join(p.outside, "file"), "Permission denied")
	mustDeny(t, pol, p.workspace, "rm "+filepath.Join(p.outside, "readme"), "Permission denied")
	if _, err := os.Stat(filepath.Join(p.outside, "file")); err == nil {
		t.Fatal("a file was written outside the workspace")
	}
	// What is outside is still readable, and output still goes nowhere.
	mustRun(t, pol, p.workspace, "cat "+filepath.Join(p.outside, "readme")+" > /dev/null")
}

func TestReadOnlyModeWritesOnlyInTmp(t *testing.T) {
	p := newPlace(t)
	pol := p.policy(protocol.SandboxReadOnly)
	mustDeny(t, pol, p.workspace, "echo no > here", "Permission denied")
	mustDeny(t, pol, p.workspace, "echo no > "+filepath.Join(p.outside, "file"), "Permission denied")
	out := mustRun(t, pol, p.workspace, "echo yes > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && ls -d \"$TMPDIR\"")
	if !strings.Contains(out, "yes") || !strings.Contains(out, p.tmp) {
		t.Fatalf("the private tmp: %s", out)
	}
}

func TestTheHomeAndRuntimeDirAreUnreadableInEverySandboxedMode(t *testing.T) {
	p := newPlace(t)
	for _, mode := range []string{protocol.SandboxReadOnly, protocol.SandboxWorkspace} {
		pol := p.policy(mode)
		mustDeny(t, pol, p.workspace, "cat "+filepath.Join(p.home, "credentials.json"), "Permission denied")
		// Its names may be listed, as every directory's on the way to
		// it (`ls ~`), never opened.
		if out := mustRun(t, pol, p.workspace, "ls "+filepath.Dir(p.home)+" "+p.home); !strings.Contains(out, "credentials.json") {
			t.Fatalf("the listing of the home's directory and the home: %s", out)
		}
		mustDeny(t, pol, p.workspace, "cat "+filepath.Join(p.runtime, "host.json"), "Permission denied")
		mustRun(t, pol, p.workspace, "cat "+filepath.Join(p.outside, "readme"))
	}
	// A hidden path inside the workspace stays hidden, the rest of it
	// writable.
	pol := p.policy(protocol.SandboxWorkspace)
	pol.Workspace = []string{filepath.Dir(p.home)}
	mustDeny(t, pol, p.workspace, "cat "+filepath.Join(p.home, "credentials.json"), "Permission denied")
	mustDeny(t, pol, p.workspace, "echo no > "+filepath.Join(p.home, "planted"), "Permission denied")
	mustRun(t, pol, p.workspace, "echo ok > "+filepath.Join(p.outside, "now-writable"))
	mustRun(t, pol, p.workspace, "ls "+filepath.Dir(p.home))
	// Full mode is no sandbox at all.
	mustRun(t, p.policy(protocol.SandboxFull), p.workspace, "cat "+filepath.Join(p.home, "credentials.json"))
}

func TestNetworkOffRefusesTCPAndUDPButNotUnixSockets(t *testing.T) {
	p := newPlace(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait() // after the listeners close
	defer ln.Close()
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	})
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	unixPath := filepath.Join(p.workspace, "s.sock")
	ul, err := net.Listen("unix", unixPath)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	wg.Go(func() {
		for {
			c, err := ul.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "over unix\n")
			c.Close()
		}
	})
	tcpTry := fmt.Sprintf("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d' && echo tcp ok", ln.Addr().(*net.TCPAddr).Port)
	udpTry := fmt.Sprintf("bash -c 'echo ping > /dev/udp/127.0.0.1/%d' && echo udp ok", udp.LocalAddr().(*net.UDPAddr).Port)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unixTry := envUnixClient + "=s.sock " + self

	on := p.policy(protocol.SandboxWorkspace)
	mustRun(t, on, p.workspace, tcpTry)
	mustRun(t, on, p.workspace, udpTry)
	buf := make([]byte, 16)
	if n, _, err := udp.ReadFrom(buf); err != nil || string(buf[:n]) != "ping\n" {
		t.Fatalf("the UDP listener read %q, %v", buf[:n], err)
	}

	off := p.policy(protocol.SandboxWorkspace)
	off.NetworkOff = true
	mustDeny(t, off, p.workspace, tcpTry, "Permission denied")
	mustDeny(t, off, p.workspace, udpTry, "Permission denied")
	if out := mustRun(t, off, p.workspace, unixTry); !strings.Contains(out, "over unix") {
		t.Fatalf("a unix socket with network off: %s", out)
	}
}

func TestASandboxedCommandHoldsNoCapabilityAndCannotReadAnUndumpableProcess(t *testing.T) {
	p := newPlace(t)
	pol := p.policy(protocol.SandboxWorkspace)
	status := mustRun(t, pol, p.workspace, "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)' /proc/self/status")
	for _, line := range strings.Split(strings.TrimSpace(status), "\n") {
		name, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		if (name == "NoNewPrivs" && v != "1") || (name != "NoNewPrivs" && strings.Trim(v, "0") != "") {
			t.Errorf("a sandboxed command's %s is %s", name, v)
		}
	}

	// A process of the same user that made itself undumpable, as the
	// host and workers do.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	holder := exec.Command(self)
	holder.Env = append(os.Environ(), envUndumpable+"=1", "AGENTD_SANDBOX_TEST_SECRET=hunter2")
	in, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Wait()
	defer in.Close()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the undumpable process: %q, %v", line, err)
	}
	environ := fmt.Sprintf("/proc/%d/environ", holder.Process.Pid)
	mustDeny(t, pol, p.workspace, "cat "+environ, "denied")
	if os.Getuid() == 0 {
		// Root's capabilities would read it: the sandbox took them away.
		if got := mustRun(t, nil, p.workspace, "cat "+environ); !strings.Contains(got, "hunter2") {
			t.Fatalf("unsandboxed root could not read %s: %q", environ, got)
		}
	}
}

// TestAnEntryAddedBesideAHiddenPathIsReadableByTheNextCommand: the
// ruleset lists the entries of the directories on the way to a hidden
// path one by one; one added there after a command ran is in the next
// command's.
func TestAnEntryAddedBesideAHiddenPathIsReadableByTheNextCommand(t *testing.T) {
	p := newPlace(t)
	pol := p.policy(protocol.SandboxWorkspace)
	mustRun(t, pol, p.workspace, "true")
	late := filepath.Join(filepath.Dir(p.home), "late")
	if err := os.WriteFile(late, []byte("came later\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, pol, p.workspace, "cat "+late); out != "came later\n" {
		t.Fatalf("the late file read %q", out)
	}
	mustDeny(t, pol, p.workspace, "cat "+filepath.Join(p.home, "credentials.json"), "Permission denied")
}

// children lists this process's child processes.
func children(t *testing.T) []string {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, task := range tasks {
		b, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		out = append(out, strings.Fields(string(b))...)
	}
	return out
}

// TestShellRunsStartedInSparesRunWhereAndAsTheyAreToldInTheirWalls: each
// shell run after the first starts in a spare re-exec started ahead; it
// runs in its own directory with its own environment, walled in, and
// Close ends the spare left.
func TestShellRunsStartedInSparesRunWhereAndAsTheyAreToldInTheirWalls(t *testing.T) {
	p := newPlace(t)
	pol := &sandbox.Policy{Mode: protocol.SandboxReadOnly, Workspace: []string{p.workspace}, Tmp: p.tmp, Hidden: []string{p.home}}
	t.Cleanup(pol.Close)
	for i, dir := range []string{p.workspace, p.outside, p.tmp, p.workspace} {
		want := fmt.Sprintf("%s %d", dir, i)
		cmd, out, err := pol.StartPiped([]string{fmt.Sprintf("N=%d", i)}, dir, "sh", "-c", `echo "$(pwd) $N"; echo x > written`)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(out)
		out.Close()
		cmd.Wait()
		lines := strings.Split(string(b), "\n")
		if lines[0] != want {
			t.Fatalf("run %d printed %q, want %q first", i, b, want)
		}
		if wrote := dir == p.tmp; wrote != !strings.Contains(string(b), "Permission denied") {
			t.Fatalf("run %d in %s, read-only: %q", i, dir, b)
		}
	}
	pol.Close()
	if left := children(t); len(left) > 0 {
		t.Fatalf("processes %v outlived Close", left)
	}
}

// TestAShellRunWhoseSpareWasKilledStartsInANewOne: a spare killed while
// it waits takes no command; the run starts in a spare started for it.
func TestAShellRunWhoseSpareWasKilledStartsInANewOne(t *testing.T) {
	p := newPlace(t)
	pol := p.policy(protocol.SandboxWorkspace)
	run := func() string {
		cmd, out, err := pol.StartPiped(nil, p.workspace, "sh", "-c", "echo ran")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(out)
		out.Close()
		cmd.Wait()
		return string(b)
	}
	if got := run(); got != "ran\n" {
		t.Fatalf("the first run printed %q", got)
	}
	poll.Until(t, "a spare to wait", func() bool { return len(children(t)) == 1 })
	pid, _ := strconv.Atoi(children(t)[0])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Its descriptors go with its last thread: the zombie's threads must
	// have ended, not only its leader.
	poll.Until(t, "the spare to be dead", func() bool {
		st, err := proc.ReadStat(pid)
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		return err == nil && st.Exited() && strings.Contains(string(status), "\nThreads:\t1\n")
	})
	if got := run(); got != "ran\n" {
		t.Fatalf("the run after its spare was killed printed %q", got)
	}
}
