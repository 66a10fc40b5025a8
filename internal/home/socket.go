package home

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/agentd-dev/agentd/protocol"
	"golang.org/x/sys/unix"
)

// liveProbeTimeout bounds the dial that tells a live host's socket from a
// dead one's.
const liveProbeTimeout = time.Second

// Listen listens on host id's socket in the runtime directory dir,
// protocol.SocketPath(dir, hostID), and makes it mode 0600. The listener
// removes the socket file when closed.
//
// A file already at that path is handled by what it is:
//   - a socket that accepts a connection belongs to a live host: Listen
//     refuses and leaves it alone;
//   - a socket that refuses connections (ECONNREFUSED) was left by a dead
//     host: Listen removes it and listens;
//   - anything else (not a socket, or a probe that fails otherwise) is
//     refused, naming the file.
//
// The caller is expected to hold the home lock, so that no other host of
// the same home replaces a stale socket at the same time.
//
// The queue of connections not yet accepted is as long as the system
// allows: net.ListenUnix asks for net.core.somaxconn (4096 on current
// Linux), and listen(2) caps any larger request to it, so a raw listen
// would gain nothing. A storm of connections that outruns the host fills
// it all the same; a connect then fails at once with EAGAIN, and clients
// wait through it (see client.Dial).
func Listen(dir, hostID string) (*net.UnixListener, error) {
	if err := protocol.ValidHostID(hostID); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	path := protocol.SocketPath(dir, hostID)
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("listen: %w", err)
	case fi.Mode().Type() != fs.ModeSocket:
		return nil, fmt.Errorf("listen: %s exists and is not a socket (mode %s); remove it by hand if it is not needed", path, fi.Mode())
	default:
		c, derr := net.DialTimeout("unix", path, liveProbeTimeout)
		if derr == nil {
			c.Close()
			return nil, fmt.Errorf("listen: a live host listens on %s", path)
		}
		if !errors.Is(derr, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("listen: cannot tell whether a host listens on %s: %w", path, derr)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("listen: remove stale socket: %w", err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	// Until this chmod the socket has the umask's mode; the 0700 runtime
	// directory keeps everyone else out meanwhile.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	return ln, nil
}

// PeerCred returns the uid and pid of the process at the other end of c,
// from SO_PEERCRED (the credentials the peer had when it connected).
func PeerCred(c *net.UnixConn) (uid uint32, pid int, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, 0, fmt.Errorf("peer credentials: %w", err)
	}
	var (
		cred *unix.Ucred
		gerr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, 0, fmt.Errorf("peer credentials: %w", err)
	}
	if gerr != nil {
		return 0, 0, fmt.Errorf("peer credentials: %w", gerr)
	}
	return cred.Uid, int(cred.Pid), nil
}
