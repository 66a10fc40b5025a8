package proc

import (
	"context"
	"time"
)

// Pacing of WaitExit where it cannot wait for an event: it looks at the
// process after waitLookMin, then after doubling waits up to waitLookMax.
const (
	waitLookMin = time.Millisecond
	waitLookMax = 50 * time.Millisecond
)

// WaitExit waits until process pid has exited, or returns ctx's error
// when ctx ends first. A zombie has exited; a pid that names no process
// has too. The process need not be a child of this one.
//
// Where the kernel has pidfds (Linux 5.3 and later) it waits for the
// process's pidfd to become readable, which the kernel makes it as the
// process exits, without a thread blocked and without looking again.
// Elsewhere, and where a pidfd cannot be had, it looks whether the
// process runs (see Running) at doubling intervals from 1ms up to 50ms.
func WaitExit(ctx context.Context, pid int) error {
	if pid <= 0 {
		return nil
	}
	if waited, err := waitPidfd(ctx, pid); waited {
		return err
	}
	return waitLooking(ctx, pid)
}

// waitLooking waits for pid to exit by looking whether it runs, at
// doubling intervals.
func waitLooking(ctx context.Context, pid int) error {
	again := waitLookMin
	t := time.NewTimer(again)
	defer t.Stop()
	for Running(pid) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		again = min(2*again, waitLookMax)
		t.Reset(again)
	}
	return nil
}
