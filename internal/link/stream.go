package link

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/agentd-dev/agentd/internal/transport"
	"github.com/agentd-dev/agentd/protocol"
)

// streamBuffer bounds the frames a stream holds for its reader: while it
// is full the link stops reading the worker's socket, so the worker's
// writes wait and its own outbound bound applies. A stream's memory is at
// most this many frames and the one in its reader's hands.
const streamBuffer = 256

// Frame is one pushed frame of a stream.
type Frame struct {
	protocol.Pushed
	// Raw is the whole frame, to decode into its kind's type. It is valid
	// until the next call of the stream's Next or Close, which give its
	// memory back to be read into again: keep a copy of what must last.
	Raw []byte
}

// Stream is the frames of one subscription of the worker, in order, none
// dropped. Next and Close are for one goroutine, the stream's reader.
type Stream struct {
	c      *Conn         // constant
	id     string        // constant
	frames chan Frame    // in pooled buffers, the stream's until read
	gone   chan struct{} // closed once the stream has ended
	// abandoned is set by Close: a frame queued after gives its buffer
	// back at once.
	abandoned atomic.Bool

	held []byte // reader only: the frame Next returned last

	mu   sync.Mutex
	err  error // guarded by mu: why the stream ended
	once sync.Once
}

// Stream returns the stream of subscriptionID's frames. Frames that
// arrive before it is called are dropped, so call it before
// subscription.ready.
func (c *Conn) Stream(subscriptionID string) *Stream {
	s := &Stream{c: c, id: subscriptionID, frames: make(chan Frame, streamBuffer), gone: make(chan struct{})}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		s.end(c.err)
		return s
	}
	c.streams[subscriptionID] = s
	return s
}

// Next returns the stream's next frame, or the reason it ended:
// ErrClosed after Close, or the link's error. A subscription.closed frame
// is delivered, and ends the stream with ErrClosed. Next reports ctx's
// error before the stream's.
func (s *Stream) Next(ctx context.Context) (Frame, error) {
	s.letGo()
	if err := ctx.Err(); err != nil {
		return Frame{}, err
	}
	var f Frame
	select {
	case f = <-s.frames:
	case <-ctx.Done():
		return Frame{}, ctx.Err()
	case <-s.gone:
		select {
		case f = <-s.frames:
		default:
			s.mu.Lock()
			defer s.mu.Unlock()
			return Frame{}, s.err
		}
	}
	s.held = f.Raw
	return f, nil
}

// letGo gives the frame the reader had back.
func (s *Stream) letGo() {
	if s.held != nil {
		s.c.putBuffer(s.held)
		s.held = nil
	}
}

// Close ends the stream and gives back the frames it holds, the last one
// Next returned included. It does not close the subscription on the
// worker.
func (s *Stream) Close() {
	s.c.mu.Lock()
	if s.c.streams[s.id] == s {
		delete(s.c.streams, s.id)
	}
	s.c.mu.Unlock()
	s.abandoned.Store(true)
	s.end(ErrClosed)
	s.letGo()
	s.drain()
}

// drain gives back the buffers of the frames queued and never read.
func (s *Stream) drain() {
	for {
		select {
		case f := <-s.frames:
			s.c.putBuffer(f.Raw)
		default:
			return
		}
	}
}

func (s *Stream) end(err error) {
	s.once.Do(func() {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(s.gone)
	})
}

// push hands a pushed frame to its stream, a copy of line in a pooled
// buffer, waiting while the stream is full. A subscription.closed frame
// ends the stream once it is queued.
func (c *Conn) push(head protocol.Pushed, line []byte) {
	c.mu.Lock()
	s := c.streams[head.SubscriptionID]
	closed := head.Kind == protocol.KindSubscriptionClosed
	if closed {
		delete(c.streams, head.SubscriptionID)
	}
	c.mu.Unlock()
	if s == nil {
		return
	}
	raw := c.getBuffer(len(line))
	raw = append(raw, line...)
	f := Frame{Pushed: head, Raw: raw}
	if len(s.frames) == cap(s.frames) && onStreamFull != nil {
		onStreamFull()
	}
	select {
	case s.frames <- f:
		if s.abandoned.Load() { // closed while this one went in
			s.drain()
			return
		}
	case <-s.gone:
		c.putBuffer(raw)
		return
	case <-c.closing:
		c.putBuffer(raw)
		return
	}
	if closed {
		s.end(ErrClosed)
	}
}

// onStreamFull, when set, is called as the link's reader finds a stream
// full and waits: a test's view of backpressure.
var onStreamFull func()

func (c *Conn) getBuffer(n int) []byte {
	c.buffers.Add(1)
	return transport.GetBuffer(n)
}

func (c *Conn) putBuffer(b []byte) {
	c.buffers.Add(-1)
	transport.PutBuffer(b)
}
