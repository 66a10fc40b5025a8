package cli_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/protocol"
)

// envSandboxProbe makes the test binary, started with it set to 1, a
// probe of what a command of the agent can reach (sandboxProbe).
const envSandboxProbe = "AGENTD_TEST_SANDBOX_PROBE"

// sandboxProbe tries each action its arguments name as kind:label=target,
// printing one line each, "label: " and what came of it:
//
//	read   open the file target for reading: readable, denied or the error
//	list   read the directory target: listed, denied or the error
//	write  create the file target: written, denied or the error
//	dial   connect to the agentd socket target and say hello: answered
//	       (with any frame: accepted, refused, incompatible), closed (the
//	       peer hung up unanswered, reset or not), denied or the error
//	tcp    connect to the address target: connected, denied or the error
//
// It runs as the agent's command runs, in the session's sandbox, with no
// capability of its own to drop.
func sandboxProbe(args []string) int {
	for _, arg := range args {
		kind, rest, _ := strings.Cut(arg, ":")
		label, target, _ := strings.Cut(rest, "=")
		var ok string
		var err error
		switch kind {
		case "read":
			ok = "readable"
			var f *os.File
			if f, err = os.Open(target); err == nil {
				f.Close()
			}
		case "list":
			ok = "listed"
			_, err = os.ReadDir(target)
		case "write":
			ok = "written"
			err = os.WriteFile(target, []byte("probe\n"), 0o600)
		case "dial":
			ok, err = "answered", dialAgentd(target)
		case "tcp":
			ok = "connected"
			var c net.Conn
			if c, err = net.DialTimeout("tcp", target, 10*time.Second); err == nil {
				c.Close()
			}
		default:
			err = fmt.Errorf("no such probe %q", kind)
		}
		switch {
		case err == nil:
			fmt.Printf("%s: %s\n", label, ok)
		case errors.Is(err, fs.ErrPermission):
			fmt.Printf("%s: denied\n", label)
		case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
			fmt.Printf("%s: closed\n", label)
		default:
			fmt.Printf("%s: %v\n", label, err)
		}
	}
	return 0
}

// dialAgentd says hello at the agentd socket path and reads the first
// frame back: nil when one came, io.EOF when the peer closed first.
func dialAgentd(path string) error {
	c, err := net.DialTimeout("unix", path, 10*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	hello, _ := json.Marshal(protocol.Hello{Kind: protocol.KindHello, ClientInstanceID: "probe",
		ProtocolMin: protocol.ProtocolVersion, ProtocolMax: protocol.ProtocolVersion,
		CompatibilityEpoch: protocol.CompatibilityEpoch, CompositionID: protocol.CompositionInteractive})
	if _, err := c.Write(append(hello, '\n')); err != nil {
		return io.EOF // closed before the hello was read
	}
	var b [1]byte
	_, err = c.Read(b[:])
	return err
}

func TestTheAgentsCommandsReachNoKeyNorAgentdFromTheirSandbox(t *testing.T) {
	p := newPlace(t)
	const envKey, storedKey = "sk-ant-env-Qm29xVbLcZaPeRtW", "sk-stored-Hn58dJqKkWoRuIyZ"
	if _, errOut, code := p.runStdin(storedKey, "auth", "set", "openai"); code != 0 {
		t.Fatalf("auth set: %s", errOut)
	}
	p.extraEnv = append(append(p.extraEnv, noKeys...), "ANTHROPIC_API_KEY="+envKey, "AGENTD_WORKER_IDLE_GRACE=1h")
	outside := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	// A first turn starts the host and the session's worker, as the
	// test's own user with every capability it has (root in CI).
	_, errOut, code := p.run("run", "--cwd", p.workDir(), "--model", "faux/echo", "--approve", "all", "--network", "off", "run `true`")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	id := sessionIDFrom(t, errOut)
	st := p.statusJSON()
	b, err := os.ReadFile(home.WorkerRegistrationPath(p.home, id))
	if err != nil {
		t.Fatal(err)
	}
	var worker home.WorkerRegistration
	if err := json.Unmarshal(b, &worker); err != nil {
		t.Fatal(err)
	}

	probe := []string{
		envSandboxProbe + "=1", "'" + os.Args[0] + "'",
		fmt.Sprintf("read:host-environ=/proc/%d/environ read:host-mem=/proc/%d/mem read:host-cmdline=/proc/%d/cmdline", st.PID, st.PID, st.PID),
		fmt.Sprintf("read:worker-environ=/proc/%d/environ read:worker-mem=/proc/%d/mem read:worker-cmdline=/proc/%d/cmdline", worker.PID, worker.PID, worker.PID),
		"read:credentials=" + filepath.Join(p.home, "credentials.json"),
		"list:home=" + p.home, "read:registration=" + protocol.RegistrationPath(p.rundir, st.HostID),
		"read:transcript=" + filepath.Join(p.home, "sessions", id, "transcript.jsonl"),
		"dial:host=" + protocol.SocketPath(p.rundir, st.HostID), "dial:worker=" + worker.Endpoint,
		"write:outside=" + filepath.Join(outside, "x"), "write:inside=inside.txt",
		"tcp:network=" + ln.Addr().String(),
	}
	out, errOut, code := p.run("run", "--session", id, "--approve", "all", "run `"+strings.Join(probe, " ")+"` and `env`")
	if code != 0 {
		t.Fatalf("run: exit %d: %s\n%s", code, errOut, out)
	}
	for _, want := range []string{
		"host-environ: denied", "host-mem: denied", "worker-environ: denied", "worker-mem: denied",
		"host-cmdline: readable", "worker-cmdline: readable", // read, below: they hold no key
		"credentials: denied", "registration: denied", "transcript: denied",
		"home: listed", // its names, never what they hold
		"host: closed", "worker: closed",
		"outside: denied", "inside: written",
		"network: denied",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the probe does not say %q:\n%s", want, out)
		}
	}
	// env's lines, as the tool's output shows them and the reply quotes
	// them: NAME=VALUE, the name first on its line.
	for line := range strings.Lines(out) {
		name, _, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "│ "), "=")
		if ok && (strings.HasPrefix(name, "AGENTD_") || strings.HasSuffix(name, "_API_KEY")) {
			t.Errorf("the command's environment holds %s:\n%s", name, out)
		}
	}
	if strings.Contains(out, envKey) || strings.Contains(out, storedKey) {
		t.Errorf("the probe's output holds a key:\n%s", out)
	}
	for _, pid := range []int{st.PID, worker.PID} {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err != nil || strings.Contains(string(b), envKey) || strings.Contains(string(b), storedKey) {
			t.Errorf("the command line of pid %d holds a key (or cannot be read: %v)", pid, err)
		}
	}

	// A read-only session's command writes nowhere but its tmp.
	out, errOut, code = p.run("run", "--cwd", p.workDir(), "--sandbox", "read-only", "--model", "faux/echo", "--approve", "all",
		"run `"+envSandboxProbe+"=1 '"+os.Args[0]+"' write:inside=inside2.txt write:outside="+filepath.Join(outside, "y")+` write:tmp="$TMPDIR/t"`+"`")
	if code != 0 {
		t.Fatalf("run: exit %d: %s\n%s", code, errOut, out)
	}
	for _, want := range []string{"inside: denied", "outside: denied", "tmp: written"} {
		if !strings.Contains(out, want) {
			t.Errorf("the read-only probe does not say %q:\n%s", want, out)
		}
	}

	// No key reached anything agentd wrote, but the file that stores one.
	filepath.WalkDir(p.home, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path == filepath.Join(p.home, "credentials.json") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err == nil && (strings.Contains(string(b), envKey) || strings.Contains(string(b), storedKey)) {
			t.Errorf("%s holds a key", path)
		}
		return nil
	})
}

// `go run` removes the binary it built once the command exits, and an
// upgrade replaces it: the host, its workers and their sandboxed commands
// run on from the binary they started as, the file gone.
func TestCommandsRunOnceTheAgentdBinaryIsRemoved(t *testing.T) {
	p := newPlace(t)
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(t.TempDir(), "agentd")
	if err := os.WriteFile(exe, self, 0o700); err != nil {
		t.Fatal(err)
	}
	first := p.command("run", "--cwd", p.workDir(), "--approve", "all", "run `true`")
	first.Path, first.Args[0] = exe, exe
	var stderr strings.Builder
	first.Stderr = &stderr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	if err := waitCommand(t, first, "the first run"); err != nil {
		t.Fatalf("the first run: %v: %s", err, stderr.String())
	}
	id := sessionIDFrom(t, stderr.String())
	if err := os.Remove(exe); err != nil {
		t.Fatal(err)
	}
	// The session's worker, started from the removed file, runs a
	// sandboxed command; so does a new session's worker.
	out, errOut, code := p.run("run", "--session", id, "--approve", "all", "run `echo after-$((2*3))`")
	if code != 0 || !strings.Contains(out, "after-6") {
		t.Fatalf("a turn once the binary is gone: exit %d: %s\n%s", code, errOut, out)
	}
	other := filepath.Join(t.TempDir(), "other")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = p.run("run", "--cwd", other, "--approve", "all", "run `echo new-$((3*3))`")
	if code != 0 || !strings.Contains(out, "new-9") {
		t.Fatalf("a new session once the binary is gone: exit %d: %s\n%s", code, errOut, out)
	}
}
