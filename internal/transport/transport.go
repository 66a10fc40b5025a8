// Package transport frames messages as newline-delimited JSON over a stream
// connection: one message a line, at most protocol.MaxMessageBytes each. It
// knows the framing and nothing of what the messages mean.
package transport

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"

	"github.com/agentd-dev/agentd/protocol"
)

// ErrTooLarge is returned by Read and Write for a message over
// protocol.MaxMessageBytes. It is protocol.ErrMessageTooLarge.
var ErrTooLarge = protocol.ErrMessageTooLarge

// ErrAborted is the cause recorded by Abort when none is given.
var ErrAborted = errors.New("transport aborted")

// Conn is a framed connection. One goroutine may Read while another
// writes; Abort may be called from any goroutine.
type Conn struct {
	nc net.Conn
	r  *protocol.LineReader // reader goroutine only
	w  *bufio.Writer        // writer goroutine only

	once   sync.Once
	closed chan struct{}
	cause  error // set once, before closed is closed
}

// New frames nc.
func New(nc net.Conn) *Conn {
	return &Conn{
		nc:     nc,
		r:      protocol.NewLineReader(nc),
		w:      bufio.NewWriterSize(nc, 64<<10),
		closed: make(chan struct{}),
	}
}

// NetConn returns the underlying connection.
func (c *Conn) NetConn() net.Conn { return c.nc }

// Read returns the next message without its line ending
// (protocol.LineReader). The slice is valid until the next Read. A final
// message without a newline is returned as is; then io.EOF.
func (c *Conn) Read() ([]byte, error) {
	msg, err := c.r.Next()
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return msg, nil
	}
	return msg, err
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
