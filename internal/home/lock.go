package home

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/gofrs/flock"
	"golang.org/x/sys/unix"
)

// LockFileName is the file in the home that the owning host holds locked.
const LockFileName = "host.lock"

// HeldError is returned by Lock when another host holds the home.
//
// Today a second host refuses to start on a held home. A later hand-off
// replaces refusal with takeover: the new host acts on this error by asking
// the holder (PID) to let go of the home, then locks it again. HeldError is
// that seam; callers that only refuse need nothing but its message.
type HeldError struct {
	// Path is the home directory that is held.
	Path string
	// PID is the holder's process id as it wrote it in the lock file, or 0
	// when the file could not be read (the holder may be mid-write).
	PID int
}

func (e *HeldError) Error() string {
	if e.PID <= 0 {
		return fmt.Sprintf("home %s is held by another agentd host", e.Path)
	}
	return fmt.Sprintf("home %s is held by agentd host pid %d", e.Path, e.PID)
}

// HomeLock is an exclusive hold on a home directory, kept until Release or
// until the process ends.
type HomeLock struct {
	path string // lock file; constant

	mu sync.Mutex
	fl *flock.Flock // guarded by mu; nil once released
}

// Lock takes an exclusive, non-blocking flock on <home>/host.lock (created
// 0600, never through a symbolic link), then writes the caller's pid into
// it so a refused host can say who holds the home. The kernel drops the
// lock when the process dies, so a crashed host never leaves its home
// locked.
//
// flock belongs to an open file description, so a second Lock on the same
// home fails even within the same process. When the home is held Lock
// returns a *HeldError.
func Lock(home string) (*HomeLock, error) {
	path := filepath.Join(home, LockFileName)
	fl := flock.New(path, flock.SetFlag(os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW), flock.SetPermissions(0o600))
	locked, err := fl.TryLock()
	if err != nil {
		return nil, fmt.Errorf("lock home %s: %w", home, err)
	}
	if !locked {
		return nil, &HeldError{Path: home, PID: readPID(path)}
	}
	if err := writePID(path); err != nil {
		fl.Unlock()
		return nil, fmt.Errorf("lock home %s: write pid: %w", home, err)
	}
	return &HomeLock{path: path, fl: fl}, nil
}

// Path returns the lock file's path.
func (l *HomeLock) Path() string { return l.path }

// Release unlocks the home and closes the lock file. The pid stays in the
// file; it means nothing without the lock. Releasing twice is a no-op.
func (l *HomeLock) Release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fl == nil {
		return nil
	}
	fl := l.fl
	l.fl = nil
	if err := fl.Unlock(); err != nil {
		return fmt.Errorf("release home lock: %w", err)
	}
	return nil
}

// writePID replaces the lock file's content with our pid, through a
// descriptor of its own: the lock is the lock file's open file
// description, which this one is not, so it neither takes nor drops it.
func writePID(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
