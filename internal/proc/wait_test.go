package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
)

// sleeper starts a child that runs until killed, and kills and reaps it
// when the test ends.
func sleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "3600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

func TestWaitExitEndsWithItsContextWhileTheProcessRuns(t *testing.T) {
	cmd := sleeper(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := WaitExit(ctx, cmd.Process.Pid); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitExit of a running process with an ended context = %v; want context.Canceled", err)
	}
	// Cancelled while it waits: it ends too.
	ctx, cancel = context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- WaitExit(ctx, cmd.Process.Pid) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitExit cancelled = %v; want context.Canceled", err)
	}
	if !Running(cmd.Process.Pid) {
		t.Error("the process stopped running")
	}
}

func TestWaitExitReturnsOnceTheProcessExitsAZombieIncluded(t *testing.T) {
	cmd := sleeper(t)
	done := make(chan error)
	go func() { done <- WaitExit(t.Context(), cmd.Process.Pid) }()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Not yet reaped: the child is a zombie of this process.
	if err := <-done; err != nil {
		t.Fatalf("WaitExit of a killed process = %v", err)
	}
	cmd.Wait()
	if err := WaitExit(t.Context(), cmd.Process.Pid); err != nil {
		t.Fatalf("WaitExit of a reaped process = %v", err)
	}
}

func TestWaitExitLookingReturnsOnceTheProcessExits(t *testing.T) {
	cmd := sleeper(t)
	done := make(chan error)
	go func() { done <- waitLooking(t.Context(), cmd.Process.Pid) }()
	if err := cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("waitLooking of a killed process = %v", err)
	}
}
