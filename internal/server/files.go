package server

import (
	"net"
	"os"
	"sync"
	"syscall"
)

// maxHeldFiles bounds the descriptors a connection holds for its calls to
// take: those passed beyond it are closed as they arrive.
const maxHeldFiles = 2

// filesConn is a Unix connection whose reads keep the descriptors its
// peer passes beside the bytes (SCM_RIGHTS), for the call those bytes
// carry to take (Call.TakeFiles). A descriptor arrives with the read of
// the first byte sent with it, so it is held before the request it came
// with is dispatched. Go receives them close-on-exec; each is made
// nonblocking, which its open file description keeps: a client passes
// descriptions of its own.
type filesConn struct {
	*net.UnixConn
	oob []byte // reader goroutine only

	mu     sync.Mutex
	held   []*os.File // guarded by mu
	closed bool       // guarded by mu: no more are held
}

func newFilesConn(c *net.UnixConn) *filesConn {
	return &filesConn{UnixConn: c, oob: make([]byte, syscall.CmsgSpace(4*maxHeldFiles))}
}

// Read reads as the connection does, holding the descriptors passed.
func (c *filesConn) Read(p []byte) (int, error) {
	n, oobn, _, _, err := c.ReadMsgUnix(p, c.oob)
	if oobn > 0 {
		c.hold(c.oob[:oobn])
	}
	return n, err
}

// hold keeps the descriptors of the control messages in oob, up to
// maxHeldFiles at once, and closes the rest.
func (c *filesConn) hold(oob []byte) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		fds, err := syscall.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if c.closed || len(c.held) == maxHeldFiles {
				syscall.Close(fd)
				continue
			}
			// Nonblocking, so that the runtime's poller reads and
			// writes it, and a deadline ends a read or a write.
			if syscall.SetNonblock(fd, true) != nil {
				syscall.Close(fd)
				continue
			}
			c.held = append(c.held, os.NewFile(uintptr(fd), "passed"))
		}
	}
}

// take returns the n descriptors held first, or nil, taking none, when
// fewer are held.
func (c *filesConn) take(n int) []*os.File {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.held) < n {
		return nil
	}
	fs := c.held[:n:n]
	c.held = c.held[n:]
	return fs
}

// Close closes the connection and the descriptors no call took.
func (c *filesConn) Close() error {
	c.mu.Lock()
	held := c.held
	c.held, c.closed = nil, true
	c.mu.Unlock()
	for _, f := range held {
		f.Close()
	}
	return c.UnixConn.Close()
}
