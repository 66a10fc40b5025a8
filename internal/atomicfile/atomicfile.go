// Package atomicfile replaces files whole: a reader sees a file's old
// content or its new content, never a part of either.
//
// WriteDurable is for state that must survive a crash: it writes through
// github.com/google/renameio/v2, which syncs the file before its rename,
// and then syncs the directory. Write is for records that do not outlive
// the system (registrations in the runtime directory) and are rewritten on
// the hot path of a start: it makes no sync, which renameio always does.
// Both keep the temporary file in the target's own directory, so the
// rename never crosses file systems, and name it "."+base+digits, which
// RemoveLeftovers recognises. The package knows nothing of what the files
// hold.
//
// Open is how agentd opens, in place, the files it keeps in directories it
// owns (its log, the credentials file): never through a symbolic link,
// which would send a write, or a read, to a file of someone's choosing.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/renameio/v2"
	"golang.org/x/sys/unix"
)

// ErrSymlink is returned by Open for a path that is a symbolic link.
var ErrSymlink = errors.New("a symbolic link, which agentd does not follow")

// Open opens the file at path as os.OpenFile does, but never through a
// symbolic link at path (O_NOFOLLOW): a link there is refused with an
// error wrapping ErrSymlink, whatever it points at, and nothing is
// created or changed. The directories above path are followed as usual.
func Open(path string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|unix.O_NOFOLLOW, perm)
	if errors.Is(err, unix.ELOOP) {
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, &fs.PathError{Op: "open", Path: path, Err: ErrSymlink}
		}
	}
	return f, err
}

// Write replaces the file at path with data, mode perm. Readers see the
// old content or the new, never a part; a symbolic link at path is
// replaced, not followed. Nothing is synced: after a crash path may hold
// the old content, the new, or a damaged file, so Write is only for files
// whose readers can do without them.
//
// The mode is perm exactly: the umask does not narrow it, and setuid,
// setgid and sticky bits in perm are kept. Concurrent Writes of one path
// are safe; the last rename wins.
func Write(path string, data []byte, perm fs.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// WriteDurable replaces the file at path with data, mode perm, as Write
// does, and makes the change durable: the data is synced before the
// rename, and path's directory after it, so that once WriteDurable returns
// path holds the new content after a crash too, and before it returns a
// crash leaves the old content.
func WriteDurable(path string, data []byte, perm fs.FileMode) error {
	pf, err := renameio.NewPendingFile(path, renameio.WithTempDir(filepath.Dir(path)))
	if err != nil {
		return err
	}
	defer pf.Cleanup()
	if _, err := pf.Write(data); err != nil {
		return err
	}
	if err := pf.Chmod(perm); err != nil {
		return err
	}
	if err := pf.CloseAtomicallyReplace(); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir syncs the directory dir, making the names created, renamed or
// removed in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// RemoveLeftovers removes the temporary files that Writes of path left
// beside it when they were cut off before their rename (by a crash). Call
// it only where no Write of path can be under way, such as when the one
// process that writes path starts. A missing directory has no leftovers.
func RemoveLeftovers(path string) error {
	dir, prefix := filepath.Dir(path), "."+filepath.Base(path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	for _, e := range ents {
		if !isTemp(e.Name(), prefix) || !e.Type().IsRegular() {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// isTemp reports whether name is one of the temporary names a Write of a
// file whose name is prefix without its leading dot uses: the prefix and
// one or more digits.
func isTemp(name, prefix string) bool {
	digits, ok := strings.CutPrefix(name, prefix)
	if !ok || digits == "" {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// MoveAside renames the file at path, whose content cannot be used, to
// path.damaged-<UTC time of now>, keeping its bytes for a person to look
// at, and returns the new name.
func MoveAside(path string, now time.Time) (string, error) {
	aside := path + ".damaged-" + now.UTC().Format("20060102T150405.000000000Z")
	return aside, os.Rename(path, aside)
}
