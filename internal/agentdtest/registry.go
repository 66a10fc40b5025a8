package agentdtest

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/agentd-dev/agentd/protocol"
)

// Registration is a ready host's registration record for host id in
// runtime directory dir, its process pid.
func Registration(dir, id string, pid int) protocol.Registration {
	return protocol.Registration{
		SchemaVersion: protocol.RegistrationSchemaVersion,
		HostID:        id,
		PID:           pid,
		Endpoint:      protocol.SocketPath(dir, id),
		Home:          "/nonexistent",
		HostEpoch:     "e1",
		State:         protocol.StateReady,
		ProtocolMin:   1,
		ProtocolMax:   1,
	}
}

// WriteRegistration publishes r in runtime directory dir, as a host does.
func WriteRegistration(t testing.TB, dir string, r protocol.Registration) {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(protocol.RegistrationPath(dir, r.HostID), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Listen starts a real listening socket for host id in dir, closed when
// the test ends.
func Listen(t testing.TB, dir, id string) *net.UnixListener {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: protocol.SocketPath(dir, id), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// StaleSocket leaves the socket file of host id in dir with nobody
// listening on it, as a host killed outright does.
func StaleSocket(t testing.TB, dir, id string) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: protocol.SocketPath(dir, id), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
}

// DeadPID returns the pid of a process that has exited and been waited
// for.
func DeadPID(t testing.TB) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.ProcessState.Pid()
}

// BusyListener listens for host id in dir with the smallest queue of
// connections not yet accepted, and fills that queue, so that a connect
// fails at once with EAGAIN, as it does when a storm of connections
// outruns a host. It returns the listener, to accept from.
func BusyListener(t testing.TB, dir, id string) *net.UnixListener {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	path := protocol.SocketPath(dir, id)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), path)
	l, err := net.FileListener(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	ln := l.(*net.UnixListener)
	ln.SetUnlinkOnClose(true)
	t.Cleanup(func() { ln.Close() })
	for range 64 {
		c, err := net.Dial("unix", path)
		if errors.Is(err, syscall.EAGAIN) {
			return ln
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Fatal("the listen queue never filled")
	return nil
}

// Exists reports whether a file of any kind is at path.
func Exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// MustJSON returns v encoded as JSON.
func MustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
