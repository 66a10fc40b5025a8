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
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		return true, nil // no such process: it has exited and been reaped
	}
	if err != nil {
		return false, nil
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	// Deadlines work only on a descriptor the runtime polls.
	if f.SetReadDeadline(time.Time{}) != nil {
		return false, nil
	}
	raw, err := f.SyscallConn()
	if err != nil {
		return false, nil
	}
	stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	// The pidfd polls readable once the process has exited; Read calls
	// exited again each time the poller says it may be.
	exited := func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		return err == nil && n > 0
	}
	if err := raw.Read(exited); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
			return true, ctx.Err()
		}
		return true, err
	}
	return true, nil
}
