// Package fswatch wakes a waiter when the files it depends on change,
// through inotify where there is one, and otherwise after each wait's
// timeout.
package fswatch

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Watcher wakes a waiter when a file it depends on changes: a directory
// entry put in place or removed, a file written to or closed by its
// writer. It reads an inotify instance through the runtime's poller, so
// waiting blocks no thread and ends with a deadline or a context, and
// needs no goroutine.
//
// A change is a hint to look again, never an answer: callers re-read what
// they wait on after every wake-up, and wait with a bounded timeout so that
// what inotify cannot report (a process exiting that holds nothing
// watched, a directory that does not exist yet, a system without inotify)
// is still seen. Without inotify every wait is its timeout.
//
// A Watcher is used by one goroutine.
type Watcher struct {
	f *os.File // the inotify instance; nil without one
	// names maps a directory's watch to the entry names that count in
	// it; a file's watch maps to nil (every event counts).
	names map[int32][]string
	// missing holds the entries whose directory could not be watched
	// yet (it may not exist); every wait tries them again.
	missing []string
	// lost is set once a directory's watch has gone (the directory was
	// removed or its file system unmounted): its entries change unseen.
	lost bool
	buf  []byte
}

const (
	// entryEvents are the events of a directory that change an entry:
	// created, moved in or out, removed, written to, or closed after a
	// write.
	entryEvents = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM |
		unix.IN_DELETE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE
	// fileEvents are the events of a file that count: written to, or
	// closed by a writer (one that exits included).
	fileEvents = unix.IN_MODIFY | unix.IN_CLOSE_WRITE
)

func New() *Watcher {
	w := &Watcher{names: make(map[int32][]string)}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return w
	}
	f := os.NewFile(uintptr(fd), "inotify")
	// Deadlines work only on a descriptor the runtime polls.
	if f.SetReadDeadline(time.Time{}) != nil {
		f.Close()
		return w
	}
	w.f = f
	w.buf = make([]byte, 4096)
	return w
}

// Entry watches the directory entry path: its creation, replacement by a
// rename, and removal.
func (w *Watcher) Entry(path string) {
	if w.f != nil && !w.watchEntry(path) {
		w.missing = append(w.missing, path)
	}
}

func (w *Watcher) watchEntry(path string) bool {
	wd, err := w.add(filepath.Dir(path), entryEvents|unix.IN_ONLYDIR)
	if err != nil {
		return false
	}
	w.names[wd] = append(w.names[wd], filepath.Base(path))
	return true
}

// watchMissing tries again to watch the entries whose directory could not
// be watched.
func (w *Watcher) watchMissing() {
	missing := w.missing
	w.missing = nil
	for _, path := range missing {
		if !w.watchEntry(path) {
			w.missing = append(w.missing, path)
		}
	}
}

// File watches the file at path (the file, not the name: it may be
// renamed or removed after) for writes and for closes by a writer.
func (w *Watcher) File(path string) {
	if w.f == nil {
		return
	}
	if wd, err := w.add(path, fileEvents); err == nil {
		w.names[wd] = nil
	}
}

func (w *Watcher) add(path string, mask uint32) (int32, error) {
	raw, err := w.f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var wd int
	var werr error
	if err := raw.Control(func(fd uintptr) {
		wd, werr = unix.InotifyAddWatch(int(fd), path, mask)
	}); err != nil {
		return 0, err
	}
	return int32(wd), werr
}

// Wait returns when a watched change happens (true), when d has passed
// (false), or with ctx's error when ctx ends first.
func (w *Watcher) Wait(ctx context.Context, d time.Duration) (bool, error) {
	if w.f == nil {
		return sleep(ctx, d)
	}
	w.watchMissing()
	// The deadline is set before ctx is checked, so a cancellation after
	// the check moves it (below) and one before is seen by the check.
	if err := w.f.SetReadDeadline(time.Now().Add(d)); err != nil {
		return sleep(ctx, d)
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	// The cancellation reads its own copy of the file: it may run after
	// Wait has returned and Close has cleared w.f (a closed file refuses
	// the deadline, harmlessly).
	f := w.f
	stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	for {
		n, err := w.f.Read(w.buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return false, ctx.Err()
		}
		if err != nil {
			// The instance broke; go on without it.
			w.f.Close()
			w.f = nil
			return sleep(ctx, d)
		}
		if w.matches(w.buf[:n]) {
			return true, nil
		}
	}
}

// matches reports whether the events in b include one that counts; it
// reads them all, for the watches gone among them. An event is struct
// inotify_event: wd, mask, cookie and len, each 32 bits in the machine's
// order, then len bytes of NUL-padded name.
func (w *Watcher) matches(b []byte) bool {
	counts := false
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(b[0:]))
		mask := binary.NativeEndian.Uint32(b[4:])
		end := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(b[12:]))
		if end > len(b) {
			break
		}
		name, _, _ := strings.Cut(string(b[unix.SizeofInotifyEvent:end]), "\x00")
		b = b[end:]
		names, ok := w.names[wd]
		switch {
		case mask&unix.IN_Q_OVERFLOW != 0:
			counts = true // events were lost: any of them may have counted
		case mask&unix.IN_IGNORED != 0 && ok:
			// The watch has gone with what it watched.
			delete(w.names, wd)
			w.lost = w.lost || names != nil
			counts = true
		case ok && names == nil:
			counts = true
		case ok:
			counts = counts || slices.Contains(names, name)
		}
	}
	return counts
}

// Close releases the inotify instance; the Watcher's waits are timeouts
// after it.
func (w *Watcher) Close() {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
}

// Changed reports, without waiting, whether a watched change has happened
// since the last call, or may have: it is true once the instance has
// broken or a watched directory has gone, and while an entry's directory
// cannot be watched, and always without inotify. An event is queued by
// the call that changes the file, before it returns: a change made before
// Changed is called is seen by it.
func (w *Watcher) Changed() bool {
	if w.f == nil || w.lost {
		return true
	}
	// Entries watched only now may have changed before.
	changed := len(w.missing) > 0
	w.watchMissing()
	raw, err := w.f.SyscallConn()
	if err != nil {
		return true
	}
	for {
		var n int
		var rerr error
		// One read, without waiting in the poller for more.
		if err := raw.Read(func(fd uintptr) bool {
			n, rerr = unix.Read(int(fd), w.buf)
			return true
		}); err != nil {
			return true
		}
		switch {
		case errors.Is(rerr, unix.EAGAIN):
			return changed || w.lost || len(w.missing) > 0
		case rerr != nil || n <= 0:
			// The instance broke; go on without it.
			w.f.Close()
			w.f = nil
			return true
		}
		if w.matches(w.buf[:n]) {
			changed = true
		}
	}
}
