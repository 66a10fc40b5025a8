package home

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/agentd-dev/agentd/protocol"
)

// PrepareRuntimeDir makes dir ready to hold sockets and registrations, and
// returns the mode it found when it had to tighten it (0 when it did not).
// A missing dir is created with mode 0700 (parents as needed). An existing
// dir must be a directory (not a symbolic link) owned by the current uid
// with no group or other permission bits. One that is the current uid's
// own but looser (a directory made with mkdir -p, 0755) gets mode 0700
// when it holds nothing but agentd's files, the user's own (sockets and
// registrations, with their temporary files); one holding anything else
// is left as it is.
// Otherwise PrepareRuntimeDir returns an error naming the path and what is
// wrong with it.
func PrepareRuntimeDir(dir string) (fixed fs.FileMode, err error) {
	if dir == "" {
		return 0, errors.New("runtime directory: empty path")
	}
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return 0, fmt.Errorf("create runtime directory: %w", err)
		}
		// The umask may have narrowed the mode; widening to 0700 is safe on
		// a directory made just now. Someone who raced us to create it is
		// caught by the check below.
		fi, err = os.Lstat(dir)
		if err == nil && fi.IsDir() && ownedByUs(fi) && fi.Mode().Perm() != 0o700 {
			if err := os.Chmod(dir, 0o700); err != nil {
				return 0, fmt.Errorf("runtime directory: %w", err)
			}
			fi, err = os.Lstat(dir)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("runtime directory: %w", err)
	}
	if fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 && ownedByUs(fi) && fi.Mode().Perm()&0o077 != 0 {
		return tighten(dir, fi)
	}
	return 0, checkRuntimeDir(dir, fi)
}

// tighten gives dir, the current uid's own directory with a loose mode,
// mode 0700 when it holds nothing but agentd's files, each its own, and
// returns the mode it had.
func tighten(dir string, fi fs.FileInfo) (fs.FileMode, error) {
	loose := fi.Mode().Perm()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("runtime directory %s has mode %04o; it must be 0700: %w", dir, loose, err)
	}
	for _, e := range entries {
		// A loose mode may have let others write: each file must be
		// the user's own too.
		why := ""
		info, err := e.Info()
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // removed meanwhile
		case !agentdFile(e.Name()):
			why = "which is not agentd's"
		case err != nil:
			why = fmt.Sprintf("which cannot be looked at (%v)", err)
		case !ownedByUs(info):
			why = fmt.Sprintf("owned by uid %d", ownerUID(info))
		}
		if why != "" {
			return 0, fmt.Errorf("runtime directory %s has mode %04o and holds %s, %s; it must be 0700 and owned by uid %d: chmod 0700 %s, or point %s elsewhere",
				dir, loose, e.Name(), why, os.Getuid(), dir, protocol.EnvRuntimeDir)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return 0, fmt.Errorf("runtime directory %s has mode %04o; it must be 0700: %w", dir, loose, err)
	}
	return loose, nil
}

// agentdFile reports whether name is one agentd keeps in a runtime
// directory: a host's or a worker's socket ("<host>-w-<session>.sock"), a
// host's registration, or a registration's temporary file (atomicfile's
// ".<name>…").
func agentdFile(name string) bool {
	if id, ok := strings.CutSuffix(name, protocol.SocketSuffix); ok {
		host, session, worker := strings.Cut(id, "-w-")
		return protocol.ValidHostID(host) == nil && (!worker || protocol.ValidHostID(session) == nil)
	}
	if protocol.HostIDOfRegistration(name) != "" {
		return true
	}
	rest, ok := strings.CutPrefix(name, ".")
	if !ok {
		return false
	}
	id, _, ok := strings.Cut(rest, protocol.RegistrationSuffix)
	return ok && protocol.ValidHostID(id) == nil
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
