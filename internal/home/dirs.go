package home

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// PrepareRuntimeDir makes dir ready to hold sockets and registrations. A
// missing dir is created with mode 0700 (parents as needed). An existing dir
// must be a directory (not a symbolic link) owned by the current uid with no
// group or other permission bits; otherwise PrepareRuntimeDir returns an error
// naming the path and its mode. It never changes the mode of an existing
// directory: a loose runtime directory is for its owner to fix.
func PrepareRuntimeDir(dir string) error {
	if dir == "" {
		return errors.New("runtime directory: empty path")
	}
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create runtime directory: %w", err)
		}
		// The umask may have narrowed the mode; widening to 0700 is safe on
		// a directory made just now. Someone who raced us to create it is
		// caught by the check below.
		fi, err = os.Lstat(dir)
		if err == nil && fi.IsDir() && ownedByUs(fi) && fi.Mode().Perm() != 0o700 {
			if err := os.Chmod(dir, 0o700); err != nil {
				return fmt.Errorf("runtime directory: %w", err)
			}
			fi, err = os.Lstat(dir)
		}
	}
	if err != nil {
		return fmt.Errorf("runtime directory: %w", err)
	}
	return checkRuntimeDir(dir, fi)
}

func checkRuntimeDir(dir string, fi fs.FileInfo) error {
	uid := os.Getuid()
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("runtime directory %s is a symbolic link; it must be a directory with mode 0700 owned by uid %d", dir, uid)
	case !fi.IsDir():
		return fmt.Errorf("runtime directory %s is not a directory (mode %s); it must be a directory with mode 0700 owned by uid %d", dir, fi.Mode(), uid)
	case !ownedByUs(fi):
		return fmt.Errorf("runtime directory %s is owned by uid %d (mode %04o); it must be 0700 and owned by uid %d", dir, ownerUID(fi), fi.Mode().Perm(), uid)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("runtime directory %s has mode %04o; it must be 0700 and owned by uid %d", dir, fi.Mode().Perm(), uid)
	}
	return nil
}

// PrepareHome creates the home directory dir with mode 0700 (parents as
// needed) when it is missing. An existing home is left as it is, but must be
// a directory.
func PrepareHome(dir string) error {
	if dir == "" {
		return errors.New("home: empty path")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create home: %w", err)
	}
	return nil
}

func ownerUID(fi fs.FileInfo) int {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1
	}
	return int(st.Uid)
}

func ownedByUs(fi fs.FileInfo) bool { return ownerUID(fi) == os.Getuid() }
