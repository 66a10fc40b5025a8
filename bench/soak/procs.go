package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	"github.com/agentd-dev/agentd/bench/internal/asagentd"
	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// track remembers pid, a host or worker of the soak, so that the end
// makes sure it has exited.
func (s *Soak) track(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pids[pid] = true
}

// trackRegistered tracks the hosts registered in the runtime directory
// and the workers registered in the home.
func (s *Soak) trackRegistered() {
	regs, _ := filepath.Glob(filepath.Join(s.runDir, "*"+protocol.RegistrationSuffix))
	workers, _ := filepath.Glob(filepath.Join(s.home, "workers", "*.json"))
	for _, path := range append(regs, workers...) {
		var reg struct {
			PID int `json:"pid"`
		}
		if readJSON(path, &reg) == nil && reg.PID > 0 {
			s.track(reg.PID)
		}
	}
}

// ours reports whether pid runs as a process of the soak: agentd placed in
// its runtime directory.
func (s *Soak) ours(pid int) bool { return asagentd.Placed(pid, s.runDir) }

// stopHost shuts the host down, which stops its workers, and reaps it;
// with checkExits, it checks that every host and worker the soak saw has
// exited.
func (s *Soak) stopHost(checkExits bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	s.trackRegistered()
	c, info, _, err := activation.Open(ctx, activation.OpenOptions{NoStart: true, Activation: s.activation(), Options: client.Options{Surface: protocol.SurfaceSDK}})
	switch {
	case errors.Is(err, client.ErrNoHost):
	case err != nil:
		return fmt.Errorf("stopping the host: %w", err)
	default:
		_, err = client.Call(ctx, c, protocol.OpHostShutdown, protocol.ShutdownInput{})
		c.Close()
		if err != nil {
			return fmt.Errorf("stopping the host: %w", err)
		}
		if err := activation.WaitExited(ctx, info); err != nil {
			return err
		}
	}
	activation.Discover(ctx, s.runDir) // reaps the hosts this process started
	if !checkExits {
		return nil
	}
	s.mu.Lock()
	pids := make([]int, 0, len(s.pids))
	for pid := range s.pids {
		pids = append(pids, pid)
	}
	s.mu.Unlock()
	for _, pid := range pids {
		for s.ours(pid) {
			if ctx.Err() != nil {
				s.fail("at the end: process %d outlived the host's shutdown", pid)
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// killLeftovers kills every host and worker of the soak still running,
// and reaps the hosts this process started.
func (s *Soak) killLeftovers() {
	s.trackRegistered()
	s.mu.Lock()
	var killed []int
	for pid := range s.pids {
		if s.ours(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			killed = append(killed, pid)
		}
	}
	s.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range killed {
		for proc.Running(pid) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	activation.Discover(context.Background(), s.runDir)
}
