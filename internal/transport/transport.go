// Package transport frames messages as newline-delimited JSON over a stream
// connection: one message a line, at most protocol.MaxMessageBytes each. It
// knows the framing and nothing of what the messages mean.
package transport

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd-dev/agentd/protocol"
)

// ErrTooLarge is returned by Read and Write for a message over
// protocol.MaxMessageBytes. It is protocol.ErrMessageTooLarge.
var ErrTooLarge = protocol.ErrMessageTooLarge

// ErrMessageTimeout is returned by Read for a message that did not arrive
// whole within the message timeout. It is protocol.ErrMessageTimeout.
var ErrMessageTimeout = protocol.ErrMessageTimeout

// ErrOverBudget is returned by Read for a message that would take the
// connection's read budget past its limit. It is protocol.ErrOverBudget.
var ErrOverBudget = protocol.ErrOverBudget

// ErrAborted is the cause recorded by Abort when none is given.
var ErrAborted = errors.New("transport aborted")

// Conn is a framed connection. One goroutine may Read while another
// writes; Abort may be called from any goroutine.
type Conn struct {
	nc net.Conn
	r  *protocol.LineReader // reader goroutine only
	// w holds messages written and not yet flushed, in a pooled buffer
	// taken by the first of them and given back by Flush; nil between.
	w    []byte // writer goroutine only
	werr error  // writer goroutine only: the write that failed; every later one fails with it

	once   sync.Once
	closed chan struct{}
	cause  error // set once, before closed is closed
}

// New frames nc.
func New(nc net.Conn) *Conn { return NewBudgeted(nc, nil) }

// NewBudgeted frames nc, reserving from budget the memory a message that
// outgrows the reader's small buffer takes (protocol.LineReader). A nil
// budget bounds nothing.
func NewBudgeted(nc net.Conn, budget *Budget) *Conn {
	r := protocol.NewLineReader(nc)
	if budget != nil {
		r = protocol.NewBudgetedLineReader(nc, budget)
	}
	r.SetBuffers(LineBuffers{})
	return &Conn{
		nc:     nc,
		r:      r,
		closed: make(chan struct{}),
	}
}

// Budget bounds the bytes that the readers of many connections hold at
// once for messages larger than their small buffers: a read that would
// take it past its limit fails with ErrOverBudget. It is safe for
// concurrent use.
type Budget struct {
	limit int64 // constant
	held  atomic.Int64
	peak  atomic.Int64 // the most held since ResetPeak
}

// NewBudget returns a Budget of limit bytes.
func NewBudget(limit int64) *Budget { return &Budget{limit: limit} }

// Reserve takes n bytes, or reports false and takes nothing when fewer
// are left.
func (b *Budget) Reserve(n int) bool {
	for {
		held := b.held.Load()
		if held+int64(n) > b.limit {
			return false
		}
		if b.held.CompareAndSwap(held, held+int64(n)) {
			b.raisePeak(held + int64(n))
			return true
		}
	}
}

// Release gives back n bytes taken by Reserve.
func (b *Budget) Release(n int) { b.held.Add(-int64(n)) }

func (b *Budget) raisePeak(held int64) {
	for {
		peak := b.peak.Load()
		if held <= peak || b.peak.CompareAndSwap(peak, held) {
			return
		}
	}
}

// Peak returns the most bytes reserved at once since ResetPeak.
func (b *Budget) Peak() int64 { return b.peak.Load() }

// ResetPeak starts Peak anew from what is reserved now.
func (b *Budget) ResetPeak() { b.peak.Store(b.held.Load()) }

// Held returns the bytes reserved now.
func (b *Budget) Held() int64 { return b.held.Load() }

// Limit returns the budget's limit.
func (b *Budget) Limit() int64 { return b.limit }

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

// SetMessageTimeout bounds how long a message may take to arrive once its
// first byte has (protocol.LineReader.SetMessageTimeout): Read then fails
// with ErrMessageTimeout. The connection's read deadline is the
// reader's from then on. Call it from the reader goroutine.
func (c *Conn) SetMessageTimeout(d time.Duration) error {
	if err := c.r.SetMessageTimeout(d); err != nil {
		return fmt.Errorf("transport: %w", err)
	}
	return nil
}

// ReleaseReader lets go of the memory the reader holds and what it took
// of its budget; nothing may be read after. The reader goroutine calls it
// once it is done reading.
func (c *Conn) ReleaseReader() { c.r.Release() }

// writeBufferSize bounds the messages Write gathers before it sends them;
// a message larger than it is sent on its own.
const writeBufferSize = 64 << 10

var newline = []byte{'\n'}

// Write buffers one message and its newline. Call Flush to send.
func (c *Conn) Write(msg []byte) error {
	if len(msg) > protocol.MaxMessageBytes {
		return ErrTooLarge
	}
	if c.werr != nil {
		return c.werr
	}
	if len(c.w)+len(msg)+1 > writeBufferSize {
		if err := c.Flush(); err != nil {
			return err
		}
		if len(msg)+1 > writeBufferSize {
			bufs := net.Buffers{msg, newline}
			_, c.werr = bufs.WriteTo(c.nc)
			return c.werr
		}
	}
	if c.w == nil {
		c.w = GetBuffer(writeBufferSize)
	}
	c.w = append(append(c.w, msg...), '\n')
	return nil
}

// Flush sends buffered messages.
func (c *Conn) Flush() error {
	if c.werr != nil || len(c.w) == 0 {
		return c.werr
	}
	_, c.werr = c.nc.Write(c.w)
	PutBuffer(c.w)
	c.w = nil
	return c.werr
}

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
