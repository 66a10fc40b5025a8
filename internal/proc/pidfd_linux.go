package proc

import (
	"errors"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// OpenPidfd opens a pidfd of process pid, as a file the runtime's poller
// waits on: it becomes readable once the process has exited. The process
// need not be a child of this one.
func OpenPidfd(pid int) (*os.File, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, os.NewSyscallError("pidfd_open", err)
	}
	return os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(pid)), nil
}

// AwaitPidfd blocks until the process of pidfd has exited (nil), or
// until the wait is cut off: pidfd's read deadline passed (an error
// matching os.ErrDeadlineExceeded) or it was closed.
func AwaitPidfd(pidfd *os.File) error {
	rc, err := pidfd.SyscallConn()
	if err != nil {
		return err
	}
	var pollErr error
	err = rc.Read(func(fd uintptr) bool {
		// Asked once before waiting and after each wake-up: an exit
		// before the wait began is seen as readily as one during it.
		for {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(fds, 0)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				pollErr = os.NewSyscallError("poll", err)
				return true
			}
			return n > 0
		}
	})
	if err != nil {
		return err
	}
	return pollErr
}

// SignalPidfd sends sig to the process of pidfd; one that has exited is
// not signalled, and neither is whatever process took its pid since.
func SignalPidfd(pidfd *os.File, sig syscall.Signal) error {
	rc, err := pidfd.SyscallConn()
	if err != nil {
		return err
	}
	var sigErr error
	if err := rc.Control(func(fd uintptr) {
		sigErr = unix.PidfdSendSignal(int(fd), sig, nil, 0)
	}); err != nil {
		return err
	}
	return sigErr
}
