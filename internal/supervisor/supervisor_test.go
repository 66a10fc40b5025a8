package supervisor_test

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/cli"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/internal/supervisor"
)

// The test binary doubles as the worker command: a real agentd worker.
// With AGENTD_TEST_LEAVE_CHILD set it first starts a process in its own
// process session, and names it in that file, for what a killed worker
// leaves behind. With AGENTD_TEST_HOLD_EXIT set it does not exit once it
// has stopped serving (its connections closed, its registration gone)
// until it is killed: a worker whose exit is slow.
func TestMain(m *testing.M) {
	if os.Getenv("AGENTD_TEST_AS_CLI") == "1" {
		if path := os.Getenv("AGENTD_TEST_LEAVE_CHILD"); path != "" {
			child := exec.Command("sleep", "1000")
			if err := child.Start(); err != nil {
				os.Exit(3)
			}
			os.WriteFile(path, []byte(strconv.Itoa(child.Process.Pid)), 0o600)
		}
		code := cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
		for os.Getenv("AGENTD_TEST_HOLD_EXIT") != "" {
			unix.Pause()
		}
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

// place is a home and runtime directory with a supervisor of real
// workers.
type place struct {
	t    *testing.T
	cfg  supervisor.Config
	work string
}

func newPlace(t *testing.T) *place {
	t.Setenv("AGENTD_TEST_AS_CLI", "1")
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	base := agentdtest.ShortDir(t)
	p := &place{t: t, work: filepath.Join(base, "work"), cfg: supervisor.Config{
		Home: filepath.Join(base, "home"), RuntimeDir: filepath.Join(base, "run"), HostID: "test",
		Command: []string{os.Args[0], "worker"}, Log: io.Discard,
	}}
	for _, dir := range []string{p.work, p.cfg.RuntimeDir, filepath.Join(p.cfg.Home, "sessions")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func (p *place) supervisor() *supervisor.Supervisor {
	s, err := supervisor.New(p.cfg)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(s.Wait)
	return s
}

// start starts the worker of session id, and stops it at the test's end.
func (p *place) start(s *supervisor.Supervisor, id string) *supervisor.Worker {
	p.t.Helper()
	w, err := s.Start(agentdtest.Context(p.t), id, []string{
		"--cwd", p.work, "--model", "faux/echo", "--thinking", "off", "--approval", "ask",
		"--transcript", filepath.Join(p.cfg.Home, "sessions", id+".jsonl"), "--orphan-grace", "1h",
	})
	if err != nil {
		p.t.Fatalf("starting the worker of %s: %v", id, err)
	}
	p.t.Cleanup(func() { w.Kill() })
	return w
}

func (p *place) registration(id string) (home.WorkerRegistration, error) {
	return home.ReadWorkerRegistration(home.WorkerRegistrationPath(p.cfg.Home, id))
}

// awaitDone waits for w's end, failing the test when it does not come.
func awaitDone(t *testing.T, w *supervisor.Worker, what string) {
	t.Helper()
	select {
	case <-w.Done():
	case <-time.After(agentdtest.Timeout):
		t.Fatalf("%s: the worker (pid %d) did not end", what, w.PID)
	}
}

// awaitGone waits until process pid, which pidfd names, has exited.
func awaitGone(t *testing.T, pid int, pidfd *os.File) {
	t.Helper()
	pidfd.SetReadDeadline(time.Now().Add(agentdtest.Timeout))
	if err := proc.AwaitPidfd(pidfd); err != nil {
		t.Fatalf("process %d still runs: %v", pid, err)
	}
}

// reap waits for a child of the test the supervisor let go of.
func reap(pid int) {
	var ws unix.WaitStatus
	unix.Wait4(pid, &ws, 0, nil)
}

func TestAStartedWorkerServesAsItsProcessAndStopsWhenAsked(t *testing.T) {
	p := newPlace(t)
	s := p.supervisor()
	w := p.start(s, "s1")
	ctx := agentdtest.Context(t)
	st, err := w.Conn.Status(ctx)
	if err != nil || st.PID != w.PID {
		t.Fatalf("status %+v %v, want the worker's pid %d", st, err, w.PID)
	}
	if reg, err := p.registration("s1"); err != nil || reg.PID != w.PID || reg.Endpoint != s.SocketPath("s1") || !proc.RunningSince(reg.PID, reg.ProcessStart) {
		t.Fatalf("registration %+v %v", reg, err)
	}
	stopCtx, cancel := context.WithTimeout(ctx, agentdtest.Timeout)
	defer cancel()
	w.Stop(stopCtx)
	if !w.Exited() || w.Err() != nil || w.Cause() != "worker exited" {
		t.Fatalf("a stopped worker ended with %v (%s)", w.Err(), w.Cause())
	}
	if _, err := p.registration("s1"); err == nil {
		t.Fatal("the stopped worker's registration is left")
	}
}

// TestAKilledWorkersExitIsAnEventAndWhatItLeftIsEnded: a worker killed
// with SIGKILL ends at once, as signal 9; its registration and socket go,
// and so does the process it started in its process session.
func TestAKilledWorkersExitIsAnEventAndWhatItLeftIsEnded(t *testing.T) {
	p := newPlace(t)
	childFile := filepath.Join(p.work, "child.pid")
	t.Setenv("AGENTD_TEST_LEAVE_CHILD", childFile)
	s := p.supervisor()
	w := p.start(s, "s1")
	child, childfd := leftChild(t, childFile)
	if supervisor.SessionOf(child) != w.PID {
		t.Fatalf("the worker's child is in session %d, not the worker's (%d)", supervisor.SessionOf(child), w.PID)
	}
	syscall.Kill(w.PID, syscall.SIGKILL)
	awaitDone(t, w, "killed")
	if !w.Exited() || w.Cause() != "worker exited: signal 9" {
		t.Fatalf("a killed worker ended with %v (%s)", w.Err(), w.Cause())
	}
	select {
	case <-w.Conn.Done():
	default:
		t.Fatal("the killed worker ended before its connection")
	}
	awaitGone(t, child, childfd)
	if _, err := p.registration("s1"); err == nil {
		t.Fatal("the killed worker's registration is left")
	}
	if _, err := os.Stat(s.SocketPath("s1")); err == nil {
		t.Fatal("the killed worker's socket is left")
	}
}

// TestANewSupervisorAdoptsTheRunningWorker: a worker let go of by one
// host is adopted by the next, found by its registration's pid and start
// time; its end is seen through a pidfd, though it is no child of the
// adopting host.
func TestANewSupervisorAdoptsTheRunningWorker(t *testing.T) {
	p := newPlace(t)
	first := p.start(p.supervisor(), "s1")
	defer reap(first.PID)
	first.Release()
	if !errors.Is(first.Err(), supervisor.ErrReleased) || first.Exited() {
		t.Fatalf("a worker let go of ended with %v", first.Err())
	}
	s := p.supervisor()
	regs := s.Registrations()
	if len(regs) != 1 || regs[0].PID != first.PID {
		t.Fatalf("registrations %+v, want the worker's", regs)
	}
	w, err := s.Adopt(agentdtest.Context(t), regs[0])
	if err != nil {
		t.Fatalf("adopting the worker: %v", err)
	}
	defer w.Kill()
	if st, err := w.Conn.Status(agentdtest.Context(t)); err != nil || st.PID != first.PID {
		t.Fatalf("the adopted worker's status %+v %v", st, err)
	}
	syscall.Kill(w.PID, syscall.SIGKILL)
	awaitDone(t, w, "killed once adopted")
	if !w.Exited() {
		t.Fatalf("the adopted worker ended with %v", w.Err())
	}
	if _, err := p.registration("s1"); err == nil {
		t.Fatal("the adopted worker's registration is left after its exit")
	}
}

// TestAnAdoptedWorkerThatRunsOnOnceItsConnectionEndedIsStillThisHosts:
// an adopted worker asked to stop closes its connection, and its exit may
// take long (its resources drain); its registration names no other host,
// so it is not taken for taken over: it is waited for, killed once it runs
// on past the grace (this one never exits of itself), and what it left is
// ended.
func TestAnAdoptedWorkerThatRunsOnOnceItsConnectionEndedIsStillThisHosts(t *testing.T) {
	p := newPlace(t)
	childFile := filepath.Join(p.work, "child.pid")
	t.Setenv("AGENTD_TEST_LEAVE_CHILD", childFile)
	t.Setenv("AGENTD_TEST_HOLD_EXIT", "1")
	first := p.start(p.supervisor(), "s1")
	pidfd, err := proc.OpenPidfd(first.PID)
	if err != nil {
		t.Fatal(err)
	}
	defer pidfd.Close()
	defer reap(first.PID)
	defer proc.SignalPidfd(pidfd, syscall.SIGKILL) // should the test fail, it never exits
	child, childfd := leftChild(t, childFile)
	first.Release()
	reg, err := p.registration("s1")
	if err != nil {
		t.Fatal(err)
	}
	p.cfg.StopGrace = 100 * time.Millisecond
	w, err := p.supervisor().Adopt(agentdtest.Context(t), reg)
	if err != nil {
		t.Fatalf("adopting the worker: %v", err)
	}
	defer w.Kill()
	w.Stop(agentdtest.Context(t))
	if !w.Exited() {
		t.Fatalf("an adopted worker that ran on once its connection ended ended with %v", w.Err())
	}
	awaitGone(t, w.PID, pidfd)
	awaitGone(t, child, childfd)
	if _, err := p.registration("s1"); err == nil {
		t.Fatal("the worker's registration is left")
	}
}

// TestAnAdoptedWorkerTakenOverRunsOnForTheOtherHost: a host that adopts a
// worker another host adopted is named in its registration before the
// worker closes the other's connection; the other host lets it run on at
// once, however short its grace, and leaves what it runs alone.
func TestAnAdoptedWorkerTakenOverRunsOnForTheOtherHost(t *testing.T) {
	p := newPlace(t)
	childFile := filepath.Join(p.work, "child.pid")
	t.Setenv("AGENTD_TEST_LEAVE_CHILD", childFile)
	first := p.start(p.supervisor(), "s1")
	defer reap(first.PID)
	child, _ := leftChild(t, childFile)
	first.Release()
	reg, err := p.registration("s1")
	if err != nil {
		t.Fatal(err)
	}
	p.cfg.StopGrace = time.Millisecond
	w, err := p.supervisor().Adopt(agentdtest.Context(t), reg)
	if err != nil {
		t.Fatalf("adopting the worker: %v", err)
	}
	defer w.Kill()
	other, err := p.supervisor().Adopt(agentdtest.Context(t), reg)
	if err != nil {
		t.Fatalf("taking the worker over: %v", err)
	}
	defer other.Kill()
	awaitDone(t, w, "taken over")
	if !errors.Is(w.Err(), supervisor.ErrSuperseded) {
		t.Fatalf("a worker taken over ended with %v, want supervisor.ErrSuperseded", w.Err())
	}
	if reg, err := p.registration("s1"); err != nil || reg.Host != other.Conn.InstanceID() {
		t.Fatalf("registration %+v %v, want it to name the host that took the worker over (%s)", reg, err, other.Conn.InstanceID())
	}
	if st, err := other.Conn.Status(agentdtest.Context(t)); err != nil || st.PID != first.PID {
		t.Fatalf("the worker taken over: status %+v %v", st, err)
	}
	if supervisor.SessionOf(child) != first.PID {
		t.Fatal("the process the worker started was ended")
	}
}

// TestAdoptionRefusesAProcessThatIsNotTheRegisteredWorker: a registration
// whose pid now names another process (its start time differs), or names
// a process that is no agentd worker of the session, is removed and that
// process spared; a registered worker that does not answer is killed as
// lost.
func TestAdoptionRefusesAProcessThatIsNotTheRegisteredWorker(t *testing.T) {
	p := newPlace(t)
	s := p.supervisor()
	other := exec.Command("sleep", "1000")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer other.Wait()
	defer other.Process.Kill()
	st, err := proc.ReadStat(other.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}

	reused := home.WorkerRegistration{SessionID: "s1", PID: other.Process.Pid, ProcessStart: st.StartTime + 1, Endpoint: filepath.Join(p.cfg.RuntimeDir, "none.sock")}
	if err := home.WriteWorkerRegistration(p.cfg.Home, reused); err != nil {
		t.Fatal(err)
	}
	if w, err := s.Adopt(agentdtest.Context(t), reused); !errors.Is(err, supervisor.ErrGone) {
		if w != nil {
			w.Release()
		}
		t.Fatalf("adopting a reused pid: %v, want supervisor.ErrGone", err)
	}
	if _, err := p.registration("s1"); err == nil {
		t.Fatal("the registration of a reused pid is left")
	}
	if !proc.RunningSince(other.Process.Pid, st.StartTime) {
		t.Fatal("the process that took the pid was harmed")
	}

	// The registered process itself, of the registered start time, but
	// no agentd worker: a registration forged to name it. It is left
	// alone, and the registration removed.
	forged := home.WorkerRegistration{SessionID: "s1", PID: other.Process.Pid, ProcessStart: st.StartTime, Endpoint: filepath.Join(p.cfg.RuntimeDir, "none.sock")}
	if err := home.WriteWorkerRegistration(p.cfg.Home, forged); err != nil {
		t.Fatal(err)
	}
	if w, err := s.Adopt(agentdtest.Context(t), forged); !errors.Is(err, supervisor.ErrGone) || !strings.Contains(err.Error(), "not the worker command") {
		if w != nil {
			w.Release()
		}
		t.Fatalf("adopting a process that is no worker: %v, want supervisor.ErrGone saying why", err)
	}
	if _, err := p.registration("s1"); err == nil {
		t.Fatal("the forged registration is left")
	}
	if !proc.RunningSince(other.Process.Pid, st.StartTime) {
		t.Fatal("the process a forged registration names was harmed")
	}

	// The session's worker itself, but it does not answer (stopped): it
	// is killed as lost.
	stopped := p.start(s, "s2")
	reg, err := p.registration("s2")
	if err != nil {
		t.Fatal(err)
	}
	syscall.Kill(stopped.PID, syscall.SIGSTOP)
	ctx, cancel := context.WithTimeout(agentdtest.Context(t), time.Second)
	defer cancel()
	if w, err := p.supervisor().Adopt(ctx, reg); !errors.Is(err, supervisor.ErrLost) {
		if w != nil {
			w.Release()
		}
		t.Fatalf("adopting a worker that does not answer: %v, want supervisor.ErrLost", err)
	}
	awaitDone(t, stopped, "killed as lost")
	if !stopped.Exited() || stopped.Cause() != "worker exited: signal 9" {
		t.Fatalf("the lost worker ended with %v (%s)", stopped.Err(), stopped.Cause())
	}
	if _, err := p.registration("s2"); err == nil {
		t.Fatal("the lost worker's registration is left")
	}
}

// TestAStartedWorkerWhoseConnectionEndsButRunsOnIsKilled: a worker this
// host started whose connection ends (another host's connection superseded
// it, here) while its process runs on is not waited for without end: after
// the grace it is killed with its process group, and waited for.
func TestAStartedWorkerWhoseConnectionEndsButRunsOnIsKilled(t *testing.T) {
	p := newPlace(t)
	childFile := filepath.Join(p.work, "child.pid")
	t.Setenv("AGENTD_TEST_LEAVE_CHILD", childFile)
	p.cfg.StopGrace = 100 * time.Millisecond
	w := p.start(p.supervisor(), "s1")
	pidfd, err := proc.OpenPidfd(w.PID)
	if err != nil {
		t.Fatal(err)
	}
	defer pidfd.Close()
	child, childfd := leftChild(t, childFile)
	reg, err := p.registration("s1")
	if err != nil {
		t.Fatal(err)
	}
	// A second supervisor takes the worker's connection: the worker
	// closes the first one's and runs on. (Killed as the grace ends, it
	// may be gone before the second one has checked it answers.)
	if other, err := p.supervisor().Adopt(agentdtest.Context(t), reg); err == nil {
		defer other.Kill()
	}
	select {
	case <-w.Conn.Done():
	case <-time.After(agentdtest.Timeout):
		t.Fatal("the worker kept its first connection when a second host connected")
	}
	awaitDone(t, w, "its connection ended")
	if !w.Exited() || w.Cause() != "worker exited: signal 9" {
		t.Fatalf("a started worker whose connection ended ended with %v (%s)", w.Err(), w.Cause())
	}
	awaitGone(t, w.PID, pidfd)
	awaitGone(t, child, childfd)
}

// leftChild returns the pid the worker's child wrote to file, and a
// pidfd of it, closed when the test ends.
func leftChild(t *testing.T, file string) (int, *os.File) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(string(b))
	childfd, err := proc.OpenPidfd(child)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { childfd.Close() })
	return child, childfd
}
