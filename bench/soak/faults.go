package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// A faultKind is one way the soak breaks agentd.
type faultKind struct {
	name string
	// inject breaks agentd and says when and what: the session hit, or
	// every session.
	inject func(ctx context.Context, s *Soak) (fault, error)
}

// faultKinds are the faults every soak injects.
var faultKinds = []faultKind{
	{"kill-worker", killWorker},
	{"kill-host", killHost},
}

// handoffFault kills the host while it hands the home off to its
// replacement; the soak injects it with Config.Handoff.
var handoffFault = faultKind{"kill-host-in-handoff", killHostInHandoff}

// errNoTarget is returned by a fault that finds nothing to break now.
var errNoTarget = errors.New("nothing to break")

// fault is one fault injected.
type fault struct {
	kind   string
	target string    // the session hit; empty: every session
	pid    int       // the process killed
	at     time.Time // when it was killed
	done   time.Time // when it was gone
	// late is set when the process had gone by itself before the kill:
	// a host that finished handing off first.
	late bool
}

func (f fault) String() string {
	what := "the host"
	if f.target != "" {
		what = "the worker of session " + f.target
	}
	if f.late {
		return fmt.Sprintf("%s: %s (pid %d) had handed off before the SIGKILL", f.kind, what, f.pid)
	}
	return fmt.Sprintf("%s: SIGKILL to %s (pid %d)", f.kind, what, f.pid)
}

// killWorker kills the worker of a session chosen at random.
func killWorker(ctx context.Context, s *Soak) (fault, error) {
	runs := s.runs()
	for _, i := range s.rng.Perm(len(runs)) {
		id := runs[i].id
		var reg home.WorkerRegistration
		if readJSON(home.WorkerRegistrationPath(s.home, id), &reg) != nil || !s.ours(reg.PID) {
			continue
		}
		f, err := s.kill(ctx, reg.PID)
		f.target = id
		return f, err
	}
	return fault{}, errNoTarget
}

// killHost kills the host.
func killHost(ctx context.Context, s *Soak) (fault, error) {
	pid, err := s.hostPID()
	if err != nil {
		return fault{}, err
	}
	return s.kill(ctx, pid)
}

// killHostInHandoff starts a host that replaces the running one (`agentd
// host --replace`), and kills the running one a random moment later, in
// the middle of handing its home and workers over.
func killHostInHandoff(ctx context.Context, s *Soak) (fault, error) {
	pid, err := s.hostPID()
	if err != nil {
		return fault{}, err
	}
	args := slices.Concat(s.agentd[1:], []string{"host", "--replace", "--idle-grace", time.Hour.String(), "--log-file", filepath.Join(s.home, activation.LogFileName)})
	cmd := exec.Command(s.agentd[0], args...)
	cmd.Env = append(os.Environ(), protocol.EnvHome+"="+s.home, protocol.EnvRuntimeDir+"="+s.runDir)
	cmd.Env = append(cmd.Env, s.env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fault{}, err
	}
	exited := make(chan error, 1)
	s.children.Go(func() { exited <- cmd.Wait() })
	if err := sleep(ctx, time.Duration(s.rng.Int64N(int64(100*time.Millisecond)))); err != nil {
		return fault{}, err
	}
	f, err := s.kill(ctx, pid)
	if errors.Is(err, errNoTarget) {
		// The hand-off was over before the kill: a replacement all the same.
		f.late, f.done = true, time.Now()
	} else if err != nil {
		return f, err
	}
	// An agentd without hand-offs refuses the flag at once.
	select {
	case err := <-exited:
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 2 {
			return f, fmt.Errorf("agentd host --replace: %v: %s", err, bytes.TrimSpace(stderr.Bytes()))
		}
	case <-time.After(time.Second):
	}
	return f, nil
}

// hostPID returns the pid of the host registered for the soak's home.
func (s *Soak) hostPID() (int, error) {
	id, err := protocol.DefaultHostID(s.home)
	if err != nil {
		return 0, err
	}
	var reg protocol.Registration
	if readJSON(protocol.RegistrationPath(s.runDir, id), &reg) != nil || !s.ours(reg.PID) {
		return 0, errNoTarget
	}
	return reg.PID, nil
}

// kill sends SIGKILL to pid and waits until it is gone.
func (s *Soak) kill(ctx context.Context, pid int) (fault, error) {
	s.track(pid)
	f := fault{pid: pid, at: time.Now()}
	if err := syscall.Kill(pid, syscall.SIGKILL); errors.Is(err, syscall.ESRCH) {
		return f, errNoTarget // it exited first
	} else if err != nil {
		return f, fmt.Errorf("killing pid %d: %w", pid, err)
	}
	for proc.Running(pid) {
		if err := sleep(ctx, time.Millisecond); err != nil {
			return f, err
		}
	}
	f.done = time.Now()
	return f, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
