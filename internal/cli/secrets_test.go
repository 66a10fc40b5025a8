package cli_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// envProbe makes the test binary, started with it set to 1, a probe of
// what a process without capabilities can open (probeWithoutCaps).
const envProbe = "PROBE_WITHOUT_CAPS"

// probeWithoutCaps drops every capability, from its thread's sets and the
// bounding set, as a sandboxed command of the agent runs, then tries to
// open each file its arguments name as label=path, printing one line per
// file: "label: readable", "label: denied" or "label: <error>". The test
// runs as root, whose CAP_SYS_PTRACE opens any process's files: without
// it, what stays closed is closed to any process of the same user.
// (Without capabilities it may open the files only of processes without
// more capabilities than it has, dumpable ones.)
func probeWithoutCaps(args []string) int {
	// Capabilities belong to a thread: the opens below run on this one.
	runtime.LockOSThread()
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
	}
	var data [2]unix.CapUserData
	if err := unix.Capset(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &data[0]); err != nil {
		fmt.Println("capset:", err)
		return 2
	}
	for _, arg := range args {
		label, path, _ := strings.Cut(arg, "=")
		f, err := os.Open(path)
		switch {
		case err == nil:
			f.Close()
			fmt.Printf("%s: readable\n", label)
		case errors.Is(err, fs.ErrPermission):
			fmt.Printf("%s: denied\n", label)
		default:
			fmt.Printf("%s: %v\n", label, err)
		}
	}
	return 0
}

// startWithoutCaps starts cmd with an empty capability bounding set: run
// as root, it and what it starts have no capabilities, as processes of
// an ordinary user have none. The bounding set belongs to a thread and is
// inherited by what it forks: it is dropped on a thread of its own, which
// ends with its goroutine, never unlocked.
func startWithoutCaps(cmd *exec.Cmd) error {
	started := make(chan error)
	go func() {
		runtime.LockOSThread()
		for c := 0; c <= unix.CAP_LAST_CAP; c++ {
			unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		}
		started <- cmd.Start()
	}()
	return <-started
}

func TestNoProcessTheAgentsCommandsReachHoldsAReadableKey(t *testing.T) {
	p := newPlace(t)
	const envKey, storedKey = "sk-ant-env-Pw83nVbXcZaQeRtY", "sk-stored-Lm47dJqHkWoPuIyT"
	if _, errOut, code := p.runStdin(storedKey, "auth", "set", "openai"); code != 0 {
		t.Fatalf("auth set: %s", errOut)
	}
	// The worker lives on after the run, for its environment to be read.
	p.extraEnv = append(append(p.extraEnv, noKeys...), "ANTHROPIC_API_KEY="+envKey, "AGENTD_WORKER_IDLE_GRACE=1h")
	// The host, its workers and their commands run without capabilities,
	// as an ordinary user's processes do: a process of the same user then
	// reads another's /proc files unless it is undumpable.
	status := p.command("status", "--json")
	var stdout, stderr bytes.Buffer
	status.Stdout, status.Stderr = &stdout, &stderr
	if err := startWithoutCaps(status); err != nil {
		t.Fatal(err)
	}
	if err := waitCommand(t, status, "agentd status"); err != nil {
		t.Fatalf("status: %v: %s", err, stderr.String())
	}
	var st protocol.HostStatus
	if err := json.Unmarshal(stdout.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	host := st.PID
	if caps := capsOf(t, host); caps != "0000000000000000" {
		t.Fatalf("the host runs with capabilities %s", caps)
	}

	// The agent's command probes, without capabilities, its worker (its
	// shell's parent) and the host; the shell itself, of the same user,
	// is the probe's control. Then it prints its own environment.
	probe := fmt.Sprintf("%s=1 '%s' host-environ=/proc/%d/environ host-mem=/proc/%d/mem worker-environ=/proc/$PPID/environ worker-mem=/proc/$PPID/mem shell-environ=/proc/$$/environ",
		envProbe, os.Args[0], host, host)
	out, errOut, code := p.run("run", "--cwd", p.workDir(), "--model", "faux/echo", "--approve", "all",
		"run `"+probe+"` and `env`")
	if code != 0 {
		t.Fatalf("run: exit %d: %s\n%s", code, errOut, out)
	}
	for _, want := range []string{"host-environ: denied", "host-mem: denied", "worker-environ: denied", "worker-mem: denied", "shell-environ: readable"} {
		if !strings.Contains(out, want) {
			t.Errorf("the probe does not say %q:\n%s", want, out)
		}
	}
	// The command's environment: the allowlist's, no key, nothing of
	// agentd's.
	for _, banned := range []string{"AGENTD_", "_API_KEY", "[redacted]"} {
		if strings.Contains(out, banned) {
			t.Errorf("the command's environment holds %q:\n%s", banned, out)
		}
	}
	if !strings.Contains(out, "PATH=") {
		t.Errorf("the command's environment has no PATH:\n%s", out)
	}

	// Read as root, the worker's environment holds no key: it was never
	// given one there.
	worker := workerPID(t, p, sessionIDFrom(t, errOut))
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", worker))
	if err != nil {
		t.Fatal(err)
	}
	for _, banned := range []string{envKey, storedKey, "ANTHROPIC_API_KEY", "OPENAI_API_KEY"} {
		if strings.Contains(string(environ), banned) {
			t.Errorf("the worker's environment holds %q", banned)
		}
	}
}

// capsOf returns the permitted capabilities of process pid, in hex.
func capsOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "CapPrm:"); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("no CapPrm in the status of %d", pid)
	return ""
}

func TestAKeyAToolPrintsReachesNoTranscriptResourceLogDeltaOrHostLog(t *testing.T) {
	p := newSessionPlace(t)
	const envKey, storedKey = "sk-ant-env-Tr62kWbNcXaMeQsZ", "sk-stored-Ur15gHqLjYoPnBvC"
	if _, errOut, code := p.runStdin(storedKey, "auth", "set", "openai"); code != 0 {
		t.Fatalf("auth set: %s", errOut)
	}
	p.extraEnv = append(append(p.extraEnv, noKeys...), "ANTHROPIC_API_KEY="+envKey)
	// The command got the keys somehow: here, from a file of the work
	// directory.
	dir := p.workDir()
	if err := os.WriteFile(filepath.Join(dir, "keys.txt"), []byte("env "+envKey+"\nstored "+storedKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := p.run("run", "--cwd", dir, "--model", "faux/echo", "--approve", "all", "run `cat keys.txt`")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "env [redacted]") || !strings.Contains(out, "stored [redacted]") {
		t.Fatalf("the command's output does not show the keys redacted:\n%s", out)
	}
	id := sessionIDFrom(t, errOut)
	texts := map[string]string{"the run's output (the deltas)": out, "agentd log": p.mustRun("log", id)}
	files, _ := filepath.Glob(filepath.Join(p.home, "sessions", id, "*"))
	more, _ := filepath.Glob(filepath.Join(p.home, "sessions", id, "resources", "*"))
	files = append(append(files, more...), filepath.Join(p.home, activation.LogFileName))
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			texts[strings.TrimPrefix(f, p.home+"/")] = string(b)
		}
	}
	if len(more) == 0 {
		t.Fatalf("the session has no resource files: %v", files)
	}
	for what, text := range texts {
		for _, key := range []string{envKey, storedKey} {
			if strings.Contains(text, key) || strings.Contains(text, key[len(key)-8:]) {
				t.Errorf("%s holds a key", what)
			}
		}
	}
}

func TestASymlinkAtTheHostLogIsReplacedNotFollowed(t *testing.T) {
	p := newPlace(t)
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(target, []byte("untouched\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(p.home, 0o700); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(p.home, activation.LogFileName)
	if err := os.Symlink(target, logPath); err != nil {
		t.Fatal(err)
	}
	p.mustRun("status") // starts a host, which logs to host.log
	if b, err := os.ReadFile(target); err != nil || string(b) != "untouched\n" {
		t.Fatalf("the link's target: %q, %v", b, err)
	}
	fi, err := os.Lstat(logPath)
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("host.log is not a file of its own: %v, %v", fi, err)
	}
	if b, _ := os.ReadFile(logPath); !strings.Contains(string(b), "symbolic link") {
		t.Errorf("the log does not say the link was replaced:\n%s", b)
	}
}

func TestAuthSetLeavesTheDefaultModelAndSaysHowToChangeIt(t *testing.T) {
	p := newPlace(t)
	p.extraEnv = append(p.extraEnv, noKeys...)
	defaultModel := func() string {
		var res protocol.ModelsListResult
		if err := json.Unmarshal([]byte(p.mustRun("models", "--json")), &res); err != nil || res.Default == nil {
			t.Fatalf("models --json: %v", err)
		}
		return res.Default.Provider + "/" + res.Default.ModelID
	}
	before := defaultModel()
	if !strings.HasPrefix(before, "faux/") {
		t.Fatalf("without keys the default is %s", before)
	}
	out, errOut, code := p.runStdin("sk-ant-stored-Bn51vCxZaQwErTyU\n", "auth", "set", "anthropic")
	if code != 0 {
		t.Fatalf("auth set: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"new sessions still start with " + before, "agentd models select anthropic/"} {
		if !strings.Contains(out, want) {
			t.Errorf("auth set does not say %q:\n%s", want, out)
		}
	}
	if after := defaultModel(); after != before {
		t.Fatalf("storing a key changed the default model: %s → %s", before, after)
	}
	// Selected, an anthropic model is the default.
	p.mustRun("models", "select", "anthropic/claude-sonnet-4-5")
	if after := defaultModel(); after != "anthropic/claude-sonnet-4-5" {
		t.Fatalf("after models select the default is %s", after)
	}
}

func TestToolEnvNamesThatAreNoVariableAKeyOrAgentdsOwnAreRefused(t *testing.T) {
	p := newPlace(t)
	for _, c := range []struct{ value, says string }{
		{"PATH,1BAD", `"1BAD" is not a variable name`},
		{"AGENTD_HOME", `"AGENTD_HOME" is one of agentd's own settings`},
		{"OPENAI_API_KEY", `"OPENAI_API_KEY" names an API key`},
	} {
		p.extraEnv = []string{"AGENTD_TOOL_ENV=" + c.value}
		_, errOut, code := p.run("host")
		if code != 2 || !strings.Contains(errOut, "AGENTD_TOOL_ENV: "+c.says) {
			t.Errorf("AGENTD_TOOL_ENV=%s: exit %d %q; want exit 2 saying %q", c.value, code, errOut, c.says)
		}
	}
}

func TestAForgedWorkerRegistrationLeavesTheProcessItNamesRunning(t *testing.T) {
	p := newPlace(t)
	sleep := exec.Command("sleep", "1000")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleep.Wait()
	defer sleep.Process.Kill()
	st, err := proc.ReadStat(sleep.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// Its endpoint names a file of someone's, which stays too.
	theirs := filepath.Join(t.TempDir(), "theirs.sock")
	if err := os.WriteFile(theirs, []byte("theirs"), 0o600); err != nil {
		t.Fatal(err)
	}
	forged := home.WorkerRegistration{SessionID: "forged", PID: sleep.Process.Pid, ProcessStart: st.StartTime, Endpoint: theirs, Epoch: "e", StartedAt: time.Now()}
	if err := home.WriteWorkerRegistration(p.home, forged); err != nil {
		t.Fatal(err)
	}
	p.mustRun("status") // a host starts, adopting what is registered before it serves
	if !proc.RunningSince(sleep.Process.Pid, st.StartTime) {
		t.Fatal("the process a forged registration names was killed")
	}
	if _, err := os.Stat(theirs); err != nil {
		t.Fatalf("the file the forged registration names as its socket: %v", err)
	}
	if _, err := os.Stat(home.WorkerRegistrationPath(p.home, "forged")); err == nil {
		t.Error("the forged registration is left")
	}
	hostLog, _ := os.ReadFile(filepath.Join(p.home, activation.LogFileName))
	if !strings.Contains(string(hostLog), "not the session's worker") {
		t.Errorf("the host's log does not say why it left the process alone:\n%s", hostLog)
	}
}

func TestAKeyOfTheHostsEnvironmentIsHandedToItsWorkers(t *testing.T) {
	p := newSessionPlace(t)
	fake := fakeAnthropic(t, 1)
	const key = "sk-ant-env-Gh36jKlZxCvBnMqW"
	p.extraEnv = append(append(p.extraEnv, noKeys...), "ANTHROPIC_API_KEY="+key, "ANTHROPIC_BASE_URL="+fake.URL)
	out, errOut, code := p.run("run", "--cwd", p.workDir(), "--model", "anthropic/claude-sonnet-4-5", "hi")
	if code != 0 || !strings.Contains(out, "Hello, world.") {
		t.Fatalf("run: exit %d:\n%s\n%s", code, out, errOut)
	}
	if reqs := fake.Requests(); len(reqs) != 1 || reqs[0].Header.Get("X-Api-Key") != key {
		t.Fatalf("the provider got %d requests, the first with the key: %v", len(reqs), len(reqs) == 1 && reqs[0].Header.Get("X-Api-Key") == key)
	}
	if out := p.mustRun("auth", "ls"); !strings.Contains(out, "the host's environment (ANTHROPIC_API_KEY)") {
		t.Errorf("auth ls:\n%s", out)
	}
}
