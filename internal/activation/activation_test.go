package activation_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/protocol"
)

// DiscoverOthers leaves the host it is told the caller reaches already
// alone: its registration is not read, even a dead host's that Discover
// would remove, and its socket is not dialled.
func TestDiscoverOthersNeitherReadsNorDialsTheHostLeftOut(t *testing.T) {
	dir := agentdtest.ShortDir(t)
	agentdtest.Listen(t, dir, "other")
	agentdtest.WriteRegistration(t, dir, agentdtest.Registration(dir, "other", os.Getpid()))
	own := agentdtest.Listen(t, dir, "own")
	agentdtest.WriteRegistration(t, dir, agentdtest.Registration(dir, "own", os.Getpid()))
	agentdtest.StaleSocket(t, dir, "gone")
	agentdtest.WriteRegistration(t, dir, agentdtest.Registration(dir, "gone", agentdtest.DeadPID(t)))
	discover := func(except string, want ...string) {
		t.Helper()
		hosts, err := activation.DiscoverOthers(t.Context(), dir, except)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, h := range hosts {
			ids = append(ids, h.HostID)
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("DiscoverOthers without %s: %q, want %q", except, ids, want)
		}
	}
	// pending takes the dial waiting in own's backlog, if one is, in one
	// accept(2) that does not wait: a dial returns once its connection is
	// queued there.
	pending := func() bool {
		raw, err := own.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		took := false
		err = raw.Control(func(fd uintptr) {
			if nfd, _, err := unix.Accept(int(fd)); err == nil {
				unix.Close(nfd)
				took = true
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		return took
	}

	discover("gone", "other", "own")
	if !agentdtest.Exists(protocol.RegistrationPath(dir, "gone")) || !agentdtest.Exists(protocol.SocketPath(dir, "gone")) {
		t.Error("the files of the dead host left out were removed")
	}
	if !pending() {
		t.Fatal("own was not dialled by a pass that did not leave it out")
	}
	discover("own", "other")
	if pending() {
		t.Fatal("own was dialled by the pass that left it out")
	}
}

func TestDiscoverRemovesStaleHostsAndSkipsCorruptRecords(t *testing.T) {
	dir := agentdtest.ShortDir(t)
	dead := agentdtest.DeadPID(t)

	agentdtest.Listen(t, dir, "live")
	agentdtest.WriteRegistration(t, dir, agentdtest.Registration(dir, "live", os.Getpid()))

	// Dead pid, socket left behind: the record goes.
	agentdtest.StaleSocket(t, dir, "dead")
	agentdtest.WriteRegistration(t, dir, agentdtest.Registration(dir, "dead", dead))
	// Dead pid, but something accepts on the socket: the record goes, the
	// socket stays.
	agentdtest.Listen(t, dir, "deadpid")
	agentdtest.WriteRegistration(t, dir, agentdtest.Registration(dir, "deadpid", dead))
	// Live pid (ours, not a host), socket refuses: the record goes.
	agentdtest.StaleSocket(t, dir, "refused")
	agentdtest.WriteRegistration(t, dir, agentdtest.Registration(dir, "refused", os.Getpid()))
	// Live pid, no socket at all: the record goes.
	agentdtest.WriteRegistration(t, dir, agentdtest.Registration(dir, "nosock", os.Getpid()))

	// Left alone: a corrupt record, a record naming another host, a
	// writer's temporary file, and other files.
	keep := map[string]string{
		"corrupt.json":        "{not json",
		"other.json":          agentdtest.MustJSON(t, agentdtest.Registration(dir, "elsewhere", os.Getpid())),
		"live.json.tmp-12345": "{",
		"notes.txt":           "hello",
		"-notanid.json":       "{}",
	}
	for name, content := range keep {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	hosts, err := activation.Discover(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != 1 || hosts[0].HostID != "live" {
		t.Fatalf("hosts = %+v; want only live", hosts)
	}
	for _, id := range []string{"dead", "deadpid", "refused", "nosock"} {
		if agentdtest.Exists(protocol.RegistrationPath(dir, id)) {
			t.Errorf("stale registration %s kept", id)
		}
	}
	// A socket is never removed: one that refuses may be a new host's,
	// bound and not yet listening. Its next host replaces it.
	for _, id := range []string{"dead", "refused", "deadpid"} {
		if !agentdtest.Exists(protocol.SocketPath(dir, id)) {
			t.Errorf("socket %s removed", id)
		}
	}
	if !agentdtest.Exists(protocol.SocketPath(dir, "live")) || !agentdtest.Exists(protocol.RegistrationPath(dir, "live")) {
		t.Error("the live host's files were touched")
	}
	for name := range keep {
		if !agentdtest.Exists(filepath.Join(dir, name)) {
			t.Errorf("%s was removed", name)
		}
	}
}

// The fake host: the test binary itself, run with fakeHostEnv set to a
// mode, stands in for "agentd host" so that cold activation starts a real
// process.
const (
	fakeHostEnv    = "AGENTD_TEST_FAKE_HOST"
	fakeHostLogEnv = "AGENTD_TEST_FAKE_HOST_LOG"
)

// TestFakeHost is not a test: with fakeHostEnv set it is the fake host.
//
// Modes: "serve" logs its pid, listens, registers as starting, then as
// ready, and serves until killed; "fail" writes to stderr and exits 3;
// "hang" logs its pid and never registers.
func TestFakeHost(t *testing.T) {
	mode := os.Getenv(fakeHostEnv)
	if mode == "" {
		return
	}
	logPID := func() {
		f, err := os.OpenFile(os.Getenv(fakeHostLogEnv), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake host:", err)
			os.Exit(4)
		}
		fmt.Fprintf(f, "%d\n", os.Getpid())
		f.Close()
	}
	switch mode {
	case "fail":
		fmt.Fprintln(os.Stderr, "fake host: starting")
		fmt.Fprintln(os.Stderr, "fake host: cannot open home: boom")
		os.Exit(3)
	case "hang":
		logPID()
		for {
			time.Sleep(time.Hour)
		}
	case "serve":
	default:
		os.Exit(5)
	}
	logPID()
	fmt.Fprintln(os.Stderr, "fake host: starting")
	dir, id := os.Getenv(protocol.EnvRuntimeDir), os.Getenv(protocol.EnvHostID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, "fake host:", err)
		os.Exit(4)
	}
	// As a real host listens: replacing a dead host's socket.
	ln, err := home.Listen(dir, id)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake host:", err)
		os.Exit(4)
	}
	r := protocol.Registration{
		SchemaVersion: protocol.RegistrationSchemaVersion,
		HostID:        id,
		PID:           os.Getpid(),
		Endpoint:      protocol.SocketPath(dir, id),
		Home:          os.Getenv(protocol.EnvHome),
		State:         protocol.StateStarting,
		// Version carries the argv after "--" so the test can see it.
		Version: strings.Join(os.Args[len(os.Args)-countAfterDash():], " "),
	}
	publish := func() {
		b, _ := json.Marshal(r)
		tmp := protocol.RegistrationPath(dir, id) + ".tmp-" + strconv.Itoa(os.Getpid())
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			os.Exit(4)
		}
		if err := os.Rename(tmp, protocol.RegistrationPath(dir, id)); err != nil {
			os.Exit(4)
		}
	}
	publish()
	time.Sleep(30 * time.Millisecond)
	r.State = protocol.StateReady
	publish()
	fmt.Fprintln(os.Stderr, "fake host: ready")
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(0)
		}
		c.Close()
	}
}

func countAfterDash() int {
	for i, a := range os.Args {
		if a == "--" {
			return len(os.Args) - i - 1
		}
	}
	return 0
}

// fakeHostOptions returns activation options whose host command is the
// fake host in mode, and the file where fake hosts log their pids. Every
// logged process is killed when the test ends.
func fakeHostOptions(t *testing.T, mode string) (activation.Options, string) {
	t.Helper()
	base := agentdtest.ShortDir(t)
	pidLog := filepath.Join(base, "pids")
	t.Cleanup(func() {
		for _, pid := range loggedPIDs(t, pidLog) {
			syscall.Kill(pid, syscall.SIGKILL)
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, 0, nil) // ECHILD when already collected
		}
	})
	return activation.Options{
		Home:       filepath.Join(base, "home"),
		RuntimeDir: filepath.Join(base, "run"),
		HostID:     "h1",
		Command:    []string{os.Args[0], "-test.run=^TestFakeHost$", "--"},
		Env:        []string{fakeHostEnv + "=" + mode, fakeHostLogEnv + "=" + pidLog},
	}, pidLog
}

func loggedPIDs(t *testing.T, path string) []int {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var pids []int
	s := bufio.NewScanner(f)
	for s.Scan() {
		pid, err := strconv.Atoi(s.Text())
		if err != nil {
			t.Fatalf("pid log line %q", s.Text())
		}
		pids = append(pids, pid)
	}
	return pids
}

func TestConcurrentColdActivationsStartExactlyOneHost(t *testing.T) {
	opts, pidLog := fakeHostOptions(t, "serve")
	opts.IdleGrace = time.Minute
	// A dead host's leftovers do not stop activation.
	if err := os.MkdirAll(opts.RuntimeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	agentdtest.StaleSocket(t, opts.RuntimeDir, opts.HostID)
	agentdtest.WriteRegistration(t, opts.RuntimeDir, agentdtest.Registration(opts.RuntimeDir, opts.HostID, agentdtest.DeadPID(t)))

	const n = 8
	type result struct {
		info    client.HostInfo
		started bool
		err     error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			info, started, err := activation.EnsureHost(t.Context(), opts)
			results[i] = result{info, started, err}
		})
	}
	wg.Wait()

	pids := loggedPIDs(t, pidLog)
	if len(pids) != 1 {
		t.Fatalf("%d hosts started (pids %v); want exactly 1", len(pids), pids)
	}
	starters := 0
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("call %d: %v", i, r.err)
		}
		if r.info.PID != pids[0] || r.info.State != protocol.StateReady || r.info.HostID != opts.HostID {
			t.Errorf("call %d got %+v; want the ready host pid %d", i, r.info.Registration, pids[0])
		}
		if r.started {
			starters++
		}
	}
	if starters != 1 {
		t.Errorf("%d calls say they started the host; want 1", starters)
	}
	if got := results[0].info.Version; got != "--idle-grace 1m0s" {
		t.Errorf("host got arguments %q; want --idle-grace 1m0s", got)
	}
	if got := results[0].info.Home; got != opts.Home {
		t.Errorf("host got home %q; want %q", got, opts.Home)
	}
	fi, err := os.Stat(opts.Home)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("home: %v, %v; want a 0700 directory", fi, err)
	}
	ents, _ := os.ReadDir(opts.Home)
	for _, e := range ents {
		if e.Name() != activation.LockName {
			t.Errorf("activation left %s in the home", e.Name())
		}
	}

	// Warm: the next call finds the host without starting one.
	info, started, err := activation.EnsureHost(t.Context(), opts)
	if err != nil || started || info.PID != pids[0] {
		t.Errorf("warm EnsureHost = pid %d, started %v, %v", info.PID, started, err)
	}
	if got := loggedPIDs(t, pidLog); len(got) != 1 {
		t.Errorf("warm call started another host: %v", got)
	}
}

func TestColdActivationCopiesHostStderrUntilReady(t *testing.T) {
	opts, _ := fakeHostOptions(t, "serve")
	var stderr bytes.Buffer
	opts.Stderr = &stderr
	if _, started, err := activation.EnsureHost(t.Context(), opts); err != nil || !started {
		t.Fatalf("EnsureHost: started %v, %v", started, err)
	}
	if !strings.Contains(stderr.String(), "fake host: starting") {
		t.Errorf("stderr %q lacks the host's output", stderr.String())
	}
}

func TestHostThatExitsBeforeReadyReportsItsStderr(t *testing.T) {
	opts, _ := fakeHostOptions(t, "fail")
	_, _, err := activation.EnsureHost(t.Context(), opts)
	if err == nil {
		t.Fatal("EnsureHost succeeded with a host that exits")
	}
	for _, want := range []string{"exited before it was ready", "exit status 3", "cannot open home: boom"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestActivationReturnsPromptlyWhenContextEnds(t *testing.T) {
	opts, pidLog := fakeHostOptions(t, "hang")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := activation.EnsureHost(ctx, opts)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v; want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("EnsureHost took %v after its deadline", d)
	}
	// On a loaded machine the deadline may pass before a host is
	// started, and one started may not have logged its pid yet: what
	// matters is that no second one was.
	for deadline := time.Now().Add(5 * time.Second); len(loggedPIDs(t, pidLog)) == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if pids := loggedPIDs(t, pidLog); len(pids) > 1 {
		t.Errorf("hosts started: %v; want at most 1", pids)
	}
}

func TestActivationWaitingForTheLockEndsWithContext(t *testing.T) {
	opts, pidLog := fakeHostOptions(t, "serve")
	if err := os.MkdirAll(opts.Home, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(opts.Home, activation.LockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, _, err = activation.EnsureHost(ctx, opts)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v; want context.Canceled", err)
	}
	if pids := loggedPIDs(t, pidLog); len(pids) != 0 {
		t.Errorf("a host was started without the activation lock: %v", pids)
	}
}

func TestActivationFindsABusyHostWithoutStartingAnother(t *testing.T) {
	opts, pidLog := fakeHostOptions(t, "serve")
	if err := os.MkdirAll(opts.RuntimeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	agentdtest.BusyListener(t, opts.RuntimeDir, opts.HostID)
	agentdtest.WriteRegistration(t, opts.RuntimeDir, agentdtest.Registration(opts.RuntimeDir, opts.HostID, os.Getpid()))
	info, started, err := activation.EnsureHost(t.Context(), opts)
	if err != nil || started || info.PID != os.Getpid() {
		t.Fatalf("EnsureHost = pid %d, started %v, %v; want the busy host, pid %d", info.PID, started, err, os.Getpid())
	}
	if pids := loggedPIDs(t, pidLog); len(pids) != 0 {
		t.Errorf("a second host was started: %v", pids)
	}
}

func TestActivationStartsNoHostWhileTheHomeIsHeld(t *testing.T) {
	opts, pidLog := fakeHostOptions(t, "serve")
	if err := os.MkdirAll(opts.Home, 0o700); err != nil {
		t.Fatal(err)
	}
	// A host holds the home but has no registration: it is starting, or
	// draining with its socket already gone.
	f, err := os.OpenFile(filepath.Join(opts.Home, protocol.HomeLockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, _, err = activation.EnsureHost(ctx, opts)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "a host holds home "+opts.Home) {
		t.Fatalf("err = %v; want a deadline naming the held home", err)
	}
	if pids := loggedPIDs(t, pidLog); len(pids) != 0 {
		t.Fatalf("a second host was started: %v", pids)
	}

	// Once the holder lets go, activation starts one.
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if _, started, err := activation.EnsureHost(t.Context(), opts); err != nil || !started {
		t.Fatalf("EnsureHost after the holder let go: started %v, %v", started, err)
	}
}

func TestActivationWithoutACommandSaysSo(t *testing.T) {
	opts, _ := fakeHostOptions(t, "serve")
	opts.Command = nil
	_, _, err := activation.EnsureHost(t.Context(), opts)
	if err == nil || !strings.Contains(err.Error(), "Command is empty") {
		t.Fatalf("EnsureHost without a command = %v; want an error naming Command", err)
	}
	_, _, _, err = activation.Open(t.Context(), activation.OpenOptions{Activation: opts})
	if err == nil || !strings.Contains(err.Error(), "Activation.Command is empty") {
		t.Fatalf("Open without a command = %v; want an error naming Activation.Command", err)
	}
}

func TestWaitExitedReturnsOnceTheHostExits(t *testing.T) {
	opts, _ := fakeHostOptions(t, "serve")
	info, started, err := activation.EnsureHost(t.Context(), opts)
	if err != nil || !started {
		t.Fatalf("EnsureHost: started %v, %v", started, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := activation.WaitExited(ctx, info); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "did not exit") {
		t.Fatalf("WaitExited of a running host with an ended context = %v", err)
	}
	if err := syscall.Kill(info.PID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := activation.WaitExited(t.Context(), info); err != nil {
		t.Fatalf("WaitExited of a host sent SIGTERM = %v", err)
	}
}
