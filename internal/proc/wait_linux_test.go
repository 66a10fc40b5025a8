package proc

import (
	"context"
	"errors"
	"testing"
)

func TestWaitExitWaitsOnAPidfd(t *testing.T) {
	cmd := sleeper(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	waited, err := waitPidfd(ctx, cmd.Process.Pid)
	if !waited || !errors.Is(err, context.Canceled) {
		t.Fatalf("waitPidfd = %v, %v; want a wait on the pidfd ended by its context", waited, err)
	}
}
