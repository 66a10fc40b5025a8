// Package transport frames messages as newline-delimited JSON over a stream
// connection: one message a line, at most protocol.MaxMessageBytes each. It
// knows the framing and nothing of what the messages mean.
package transport

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/agentd-dev/agentd/protocol"
)

// ErrTooLarge is returned by Read for a message over protocol.MaxMessageBytes.
var ErrTooLarge = fmt.Errorf("message exceeds %d bytes", protocol.MaxMessageBytes)

// ErrAborted is the cause recorded by Abort when none is given.
var ErrAborted = errors.New("transport aborted")

// Conn is a framed connection. One goroutine may Read while another
// writes; Abort may be called from any goroutine.
type Conn struct {
	nc  net.Conn
	r   *bufio.Reader // reader goroutine only
	w   *bufio.Writer // writer goroutine only
	big []byte        // reader goroutine only: a message spanning buffers

	once   sync.Once
	closed chan struct{}
	cause  error // set once, before closed is closed
}

// New frames nc.
func New(nc net.Conn) *Conn {
	return &Conn{
		nc:     nc,
		r:      bufio.NewReaderSize(nc, 64<<10),
		w:      bufio.NewWriterSize(nc, 64<<10),
		closed: make(chan struct{}),
	}
}

// NetConn returns the underlying connection.
func (c *Conn) NetConn() net.Conn { return c.nc }

// Read returns the next message without its newline. The slice is valid
// until the next Read. A final message without a newline is returned as
// is; then io.EOF.
func (c *Conn) Read() ([]byte, error) {
	c.big = c.big[:0]
	for {
		chunk, err := c.r.ReadSlice('\n')
		if err == nil {
			if len(c.big) == 0 {
				return trim(chunk), c.check(len(chunk) - 1)
			}
			c.big = append(c.big, chunk...)
			return trim(c.big), c.check(len(c.big) - 1)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			c.big = append(c.big, chunk...)
			if len(c.big) > protocol.MaxMessageBytes+1 {
				return nil, ErrTooLarge
			}
			continue
		}
		c.big = append(c.big, chunk...)
		if errors.Is(err, io.EOF) && len(c.big) > 0 {
			if len(c.big) > protocol.MaxMessageBytes {
				return nil, ErrTooLarge
			}
			return trim(c.big), nil
		}
		return nil, err
	}
}

func (c *Conn) check(n int) error {
	if n > protocol.MaxMessageBytes {
		return ErrTooLarge
	}
	return nil
}

func trim(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}

// Write buffers one message and its newline. Call Flush to send.
func (c *Conn) Write(msg []byte) error {
	if len(msg) > protocol.MaxMessageBytes {
		return ErrTooLarge
	}
	if _, err := c.w.Write(msg); err != nil {
		return err
	}
	return c.w.WriteByte('\n')
}

// Flush sends buffered messages.
func (c *Conn) Flush() error { return c.w.Flush() }

// WriteFrame writes and flushes one message.
func (c *Conn) WriteFrame(msg []byte) error {
	if err := c.Write(msg); err != nil {
		return err
	}
	return c.Flush()
}

// CloseWrite half-closes the connection: the peer reads EOF after what was
// flushed.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.nc.Close()
}

// Abort closes the connection at once, recording cause (ErrAborted when
// nil). Only the first call has an effect.
func (c *Conn) Abort(cause error) {
	c.once.Do(func() {
		if cause == nil {
			cause = ErrAborted
		}
		c.cause = cause
		c.nc.Close()
		close(c.closed)
	})
}

// Closed is closed once Abort has been called.
func (c *Conn) Closed() <-chan struct{} { return c.closed }

// Cause returns the cause given to Abort, or nil while the connection is open.
func (c *Conn) Cause() error {
	select {
	case <-c.closed:
		return c.cause
	default:
		return nil
	}
}
