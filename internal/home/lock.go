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

	"github.com/agentd-dev/agentd/protocol"
)

// LockFileName is the file in the home that the owning host holds locked.
const LockFileName = protocol.HomeLockName

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
	// Endpoint is the socket the holder announced (see Announce), or
	// empty.
	Endpoint string
}

func (e *HeldError) Error() string {
	msg := fmt.Sprintf("home %s is held by another agentd host", e.Path)
	if e.PID > 0 {
		msg = fmt.Sprintf("home %s is held by agentd host pid %d", e.Path, e.PID)
	}
	if e.Endpoint != "" {
		msg += fmt.Sprintf(", listening at %s (runtime directory %s)", e.Endpoint, filepath.Dir(e.Endpoint))
	}
	return msg
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
		pid, endpoint := readHolder(path)
		return nil, &HeldError{Path: home, PID: pid, Endpoint: endpoint}
	}
	if err := writeHolder(path, ""); err != nil {
		fl.Unlock()
		return nil, fmt.Errorf("lock home %s: write pid: %w", home, err)
	}
	return &HomeLock{path: path, fl: fl}, nil
}

// Held reports whether a host holds the lock of home: it asks for a shared
// lock without waiting, which the kernel refuses while a host holds its
// exclusive one, and lets go at once. It creates nothing: a home without a
// lock file is not held.
func Held(home string) bool {
	fl := flock.New(filepath.Join(home, LockFileName), flock.SetFlag(os.O_RDONLY|unix.O_NOFOLLOW))
	locked, err := fl.TryRLock()
	if err != nil {
		return false
	}
	if locked {
		fl.Unlock()
	}
	return !locked
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

// Announce adds endpoint, the socket the holder listens on, to the lock
// file, so that a host refused the home can say where to reach the holder
// even from another runtime directory.
func (l *HomeLock) Announce(endpoint string) error {
	if err := writeHolder(l.path, endpoint); err != nil {
		return fmt.Errorf("announce the home's socket: %w", err)
	}
	return nil
}

// writeHolder replaces the lock file's content with our pid and, when
// given, our endpoint, one per line, through a descriptor of its own: the
// lock is the lock file's open file description, which this one is not,
// so it neither takes nor drops it.
func writeHolder(path, endpoint string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	content := strconv.Itoa(os.Getpid()) + "\n"
	if endpoint != "" {
		content += endpoint + "\n"
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(content), 0)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readHolder reads the holder's pid (0 when unreadable) and endpoint (""
// when it announced none) from the lock file.
func readHolder(path string) (pid int, endpoint string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, ""
	}
	first, rest, _ := strings.Cut(string(b), "\n")
	pid, err = strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, ""
	}
	endpoint, _, _ = strings.Cut(rest, "\n")
	return pid, strings.TrimSpace(endpoint)
}
