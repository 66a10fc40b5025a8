package proc

import (
	"context"
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// waitPidfd waits for pid to exit on a pidfd, read through the runtime's
// poller so that ctx can end the wait. It reports false when it could not
// wait that way (no pidfds, or one the poller cannot take), and the
// caller waits otherwise.
func waitPidfd(ctx context.Context, pid int) (bool, error) {
	f, err := OpenPidfd(pid)
	if errors.Is(err, unix.ESRCH) {
		return true, nil // no such process: it has exited and been reaped
	}
	if err != nil {
		return false, nil
	}
	defer f.Close()
	// Deadlines work only on a descriptor the runtime polls.
	if f.SetReadDeadline(time.Time{}) != nil {
		return false, nil
	}
	stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := AwaitPidfd(f); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
			return true, ctx.Err()
		}
		return true, err
	}
	return true, nil
}
