package server

import (
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// unixPair returns the two ends of a connected Unix socket.
func unixPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ends [2]*net.UnixConn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socket")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		ends[i] = c.(*net.UnixConn)
		t.Cleanup(func() { c.Close() })
	}
	return ends[0], ends[1]
}

// pipeEnds returns n pipes' write ends, and a check that reports whether
// pipe i's write end is closed everywhere, once the test closed its own.
func pipeEnds(t *testing.T, n int) (writes []*os.File, closedEverywhere func(i int) bool) {
	t.Helper()
	var reads []*os.File
	for range n {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		reads, writes = append(reads, r), append(writes, w)
	}
	return writes, func(i int) bool {
		writes[i].Close()
		reads[i].SetReadDeadline(time.Now().Add(timeout))
		_, err := reads[i].Read(make([]byte, 1))
		return err == io.EOF
	}
}

// Descriptors passed beside a connection's bytes are held for its calls,
// two at most: those beyond are closed as they arrive, and those no call
// took are closed with the connection. Each arrives nonblocking.
func TestAConnectionHoldsTwoDescriptorsPassedAndClosesTheRest(t *testing.T) {
	sender, receiver := unixPair(t)
	fc := newFilesConn(receiver)
	writes, closedEverywhere := pipeEnds(t, 4)
	rights := syscall.UnixRights(int(writes[0].Fd()), int(writes[1].Fd()), int(writes[2].Fd()))
	if _, _, err := sender.WriteMsgUnix([]byte("x"), rights, nil); err != nil {
		t.Fatal(err)
	}
	if n, err := fc.Read(make([]byte, 8)); n != 1 || err != nil {
		t.Fatalf("read %d, %v", n, err)
	}
	if fs := fc.take(3); fs != nil {
		t.Fatalf("took 3 where 2 are held: %v", fs)
	}
	if !closedEverywhere(2) {
		t.Fatal("the third descriptor passed was kept")
	}
	taken := fc.take(1)
	if len(taken) != 1 {
		t.Fatalf("took %v", taken)
	}
	defer taken[0].Close()
	rc, err := taken[0].SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	rc.Control(func(fd uintptr) {
		flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		if errno != 0 || flags&syscall.O_NONBLOCK == 0 {
			t.Errorf("a descriptor taken is not nonblocking: flags %#x, %v", flags, errno)
		}
		flags, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFD, 0)
		if errno != 0 || flags&syscall.FD_CLOEXEC == 0 {
			t.Errorf("a descriptor taken is not close-on-exec: flags %#x, %v", flags, errno)
		}
	})

	// One more passed: held, beside the one not taken.
	if _, _, err := sender.WriteMsgUnix([]byte("y"), syscall.UnixRights(int(writes[3].Fd())), nil); err != nil {
		t.Fatal(err)
	}
	if n, err := fc.Read(make([]byte, 8)); n != 1 || err != nil {
		t.Fatalf("read %d, %v", n, err)
	}
	fc.Close()
	for _, i := range []int{1, 3} {
		if !closedEverywhere(i) {
			t.Fatalf("descriptor %d, held and not taken, outlived its connection", i)
		}
	}
	if _, err := taken[0].Write([]byte("z")); err != nil {
		t.Fatalf("the descriptor taken was closed with the connection: %v", err)
	}
}
