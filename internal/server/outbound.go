package server

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"

	"github.com/agentd-dev/agentd/internal/transport"
	"github.com/agentd-dev/agentd/protocol"
)

// Class orders a frame in the outbound queue.
type Class int

const (
	// Control frames (responses, handshake answers, projections, deltas)
	// are written first, in the order they were queued.
	Control Class = iota
	// Data frames (PTY output) yield to controls but are never starved:
	// one is written after at most dataEvery controls.
	Data
	// Fence frames (subscription.closed) are written after every frame
	// queued before them and before every frame queued after them.
	Fence
)

// dataEvery is how many control frames may pass a waiting data frame.
const dataEvery = 4

// FrameWriter is where an OutboundWriter writes: a framed transport.
type FrameWriter interface {
	Write(msg []byte) error
	Flush() error
}

// QueueError is returned when the outbound queue is full. The writer has
// then failed: every frame still queued is rejected with the same error.
type QueueError struct {
	// Code is "byte_limit" or "frame_limit".
	Code  string
	Limit int
}

func (e *QueueError) Error() string {
	return fmt.Sprintf("outbound queue full: %s of %d reached", e.Code, e.Limit)
}

// ErrWriterClosed is returned by Enqueue once the writer is closed.
var ErrWriterClosed = errors.New("outbound writer is closed")

// Receipt settles when its frame has been flushed or has failed.
type Receipt struct {
	once sync.Once
	done chan struct{}
	err  error  // set before done is closed
	then func() // constant: called once the frame is flushed, if set
}

// Done is closed when the frame has settled.
func (r *Receipt) Done() <-chan struct{} { return r.done }

// Err returns why the frame was not flushed, once Done is closed.
func (r *Receipt) Err() error { <-r.done; return r.err }

type outFrame struct {
	msg     []byte
	receipt *Receipt
	pooled  bool // msg is from transport.GetBuffer, given back once written
}

// epoch holds the frames queued between two fences.
type epoch struct {
	control, data []outFrame
	fence         *outFrame
}

// OutboundWriter is the one writer of a connection: a bounded queue drained
// by a single goroutine. Bytes are bounded at protocol.MaxOutboundQueueBytes
// (checked first) and frames at protocol.MaxOutboundQueueFrames; a frame
// that would cross a bound fails the writer instead of growing memory.
type OutboundWriter struct {
	out       FrameWriter     // writer goroutine only
	onFailure func(err error) // called once, from the goroutine that failed

	mu      sync.Mutex
	epochs  []*epoch   // guarded by mu; never empty while open
	written []*Receipt // guarded by mu: handed to the transport, not yet flushed
	busy    bool       // guarded by mu: the writer goroutine holds the transport
	direct  bool       // guarded by mu: a responder writes on its own goroutine
	bytes   int        // guarded by mu: queued and in-flight bytes
	frames  int        // guarded by mu
	passed  int        // guarded by mu: controls written while data waited
	closed  bool       // guarded by mu
	closing bool       // guarded by mu: close once drained
	err     error      // guarded by mu: why the writer failed
	wake    chan struct{}
	done    chan struct{}
}

// NewOutboundWriter starts a writer over out. onFailure is called once if a
// write fails or the queue overflows. Close or CloseAfterFlush stops it.
func NewOutboundWriter(out FrameWriter, onFailure func(error)) *OutboundWriter {
	w := &OutboundWriter{
		out:       out,
		onFailure: onFailure,
		epochs:    []*epoch{{}},
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
	}
	go w.loop()
	return w
}

// Enqueue queues msg (one encoded frame) in class. It fails at once when the
// writer is closed or the queue is full; otherwise the receipt settles later.
// It never blocks on the transport.
func (w *OutboundWriter) Enqueue(class Class, msg []byte) (*Receipt, error) {
	return w.enqueue(outFrame{msg: msg}, class, false, nil)
}

// EnqueueThen is Enqueue with then called once msg has been flushed, on
// the writer's goroutine, with no lock of the writer held: a subscriber
// hands over its next batch from it without a goroutine of its own. then
// is not called for a frame that fails; the writer's failure ends the
// connection, through onFailure.
func (w *OutboundWriter) EnqueueThen(class Class, msg []byte, then func()) error {
	_, err := w.enqueue(outFrame{msg: msg}, class, false, then)
	return err
}

// EnqueuePooled is EnqueueThen for a msg taken from transport.GetBuffer:
// the writer gives it back once it is written. The caller must not touch
// msg after.
func (w *OutboundWriter) EnqueuePooled(class Class, msg []byte, then func()) (*Receipt, error) {
	return w.enqueue(outFrame{msg: msg, pooled: true}, class, false, then)
}

// Respond queues a response like Enqueue, but when nothing is queued and the
// writer goroutine is idle it writes the frame on the caller's goroutine,
// sparing a hand-over. It may then block on the transport: only the
// goroutine serving a request calls it, never one holding a lock that
// others wait on. then, if set, is called once msg has been flushed, as
// with EnqueueThen.
func (w *OutboundWriter) Respond(msg []byte, then func()) (*Receipt, error) {
	return w.enqueue(outFrame{msg: msg}, Control, true, then)
}

// WritePooled is Respond for a msg taken from transport.GetBuffer, as
// EnqueuePooled takes it: written on the caller's goroutine when nothing
// is queued and the writer goroutine is idle, queued otherwise. It may
// block on the transport; only a goroutine that would wait for the
// frame's receipt anyway, holding no lock, calls it.
func (w *OutboundWriter) WritePooled(msg []byte) (*Receipt, error) {
	return w.enqueue(outFrame{msg: msg, pooled: true}, Control, true, nil)
}

func (w *OutboundWriter) enqueue(f outFrame, class Class, direct bool, then func()) (*Receipt, error) {
	msg := f.msg
	w.mu.Lock()
	if w.closed || w.closing {
		w.mu.Unlock()
		return nil, ErrWriterClosed
	}
	var qerr *QueueError
	switch {
	case w.bytes+len(msg) > protocol.MaxOutboundQueueBytes:
		qerr = &QueueError{Code: "byte_limit", Limit: protocol.MaxOutboundQueueBytes}
	case w.frames+1 > protocol.MaxOutboundQueueFrames:
		qerr = &QueueError{Code: "frame_limit", Limit: protocol.MaxOutboundQueueFrames}
	}
	if qerr != nil {
		rejected := w.closeLocked(qerr)
		w.mu.Unlock()
		w.onFailure(qerr)
		reject(rejected, qerr)
		return nil, qerr
	}
	f.receipt = &Receipt{done: make(chan struct{}), then: then}
	if direct && !w.busy && !w.direct && w.frames == 0 {
		return w.writeDirect(f)
	}
	last := w.epochs[len(w.epochs)-1]
	switch class {
	case Data:
		last.data = append(last.data, f)
	case Fence:
		last.fence = &f
		w.epochs = append(w.epochs, &epoch{})
	default:
		last.control = append(last.control, f)
	}
	w.bytes += len(msg)
	w.frames++
	w.mu.Unlock()
	w.signal()
	return f.receipt, nil
}

// writeDirect writes f on the caller's goroutine. Called with mu held;
// returns with it released.
func (w *OutboundWriter) writeDirect(f outFrame) (*Receipt, error) {
	w.direct = true
	w.bytes += len(f.msg)
	w.mu.Unlock()
	err := w.out.Write(f.msg)
	w.release(f)
	if err == nil {
		err = w.out.Flush()
	}
	w.mu.Lock()
	w.direct = false
	w.bytes -= len(f.msg)
	more := w.frames > 0 || w.closing
	w.mu.Unlock()
	if err != nil {
		w.fail(err)
		settle(f.receipt, fmt.Errorf("outbound write failed: %w", err))
		return f.receipt, nil
	}
	settle(f.receipt, nil)
	if more {
		w.signal()
	}
	return f.receipt, nil
}

func (w *OutboundWriter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Close stops the writer at once, rejecting what is still queued.
func (w *OutboundWriter) Close() {
	w.mu.Lock()
	var rejected []*Receipt
	if !w.closed {
		rejected = w.closeLocked(ErrWriterClosed)
	}
	w.mu.Unlock()
	reject(rejected, ErrWriterClosed)
	w.signal()
}

// Abort stops the writer at once, as a failed write does: the failure is
// reported (the connection it serves is closed with err) before what is
// still queued is rejected.
func (w *OutboundWriter) Abort(err error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	rejected := w.closeLocked(err)
	w.mu.Unlock()
	w.onFailure(err)
	reject(rejected, err)
	w.signal()
}

// CloseAfterFlush refuses new frames and stops once the queued ones are
// written. Wait for Done.
func (w *OutboundWriter) CloseAfterFlush() {
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	w.signal()
}

// LimitSocketBuffer asks the connection's socket to hold about n bytes at
// most on their way to the peer, where its transport allows: for a peer
// that reads slower than it is written to, what the kernel holds is what
// it sees late.
func (w *OutboundWriter) LimitSocketBuffer(n int) error {
	conn, ok := w.out.(interface{ NetConn() net.Conn })
	if !ok {
		return nil
	}
	if s, ok := conn.NetConn().(interface{ SetWriteBuffer(int) error }); ok {
		return s.SetWriteBuffer(n)
	}
	return nil
}

// Queued returns the bytes queued and not yet written, the frame being
// written included: a producer with several streams into one connection
// holds back while it is high.
func (w *OutboundWriter) Queued() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bytes
}

// QueuedFrames returns how many frames are queued and not yet written.
func (w *OutboundWriter) QueuedFrames() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.frames
}

// Done is closed when the writer goroutine has stopped.
func (w *OutboundWriter) Done() <-chan struct{} { return w.done }

// Err returns why the writer failed or closed, or nil.
func (w *OutboundWriter) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// closeLocked closes the writer with err and returns the receipts of every
// frame not yet flushed, for the caller to reject once it has unlocked
// (and, on a failure, reported it first).
func (w *OutboundWriter) closeLocked(err error) []*Receipt {
	w.closed = true
	w.err = err
	rejected := w.written
	for _, e := range w.epochs {
		for _, f := range e.control {
			rejected = append(rejected, f.receipt)
		}
		for _, f := range e.data {
			rejected = append(rejected, f.receipt)
		}
		if e.fence != nil {
			rejected = append(rejected, e.fence.receipt)
		}
	}
	w.epochs, w.written = []*epoch{{}}, nil
	w.bytes, w.frames = 0, 0
	return rejected
}

func reject(receipts []*Receipt, err error) {
	for _, r := range receipts {
		settle(r, err)
	}
}

// settle settles r once; later calls do nothing. A flushed frame's then
// runs after.
func settle(r *Receipt, err error) {
	r.once.Do(func() {
		r.err = err
		close(r.done)
		if err == nil && r.then != nil {
			r.then()
		}
	})
}

// nextLocked pops the next frame to write, or reports that none is queued.
func (w *OutboundWriter) nextLocked() (outFrame, bool) {
	for {
		e := w.epochs[0]
		takeData := len(e.data) > 0 && (len(e.control) == 0 || w.passed >= dataEvery)
		switch {
		case takeData:
			f := e.data[0]
			e.data = e.data[1:]
			w.passed = 0
			return f, true
		case len(e.control) > 0:
			f := e.control[0]
			e.control = e.control[1:]
			if len(e.data) > 0 {
				w.passed++
			}
			return f, true
		case e.fence != nil:
			f := *e.fence
			w.epochs = w.epochs[1:]
			return f, true
		}
		if len(w.epochs) == 1 {
			return outFrame{}, false
		}
		w.epochs = w.epochs[1:]
	}
}

func (w *OutboundWriter) loop() {
	defer close(w.done)
	// yielded marks one look away before a flush, so responses finishing
	// at the same moment share one write.
	yielded := false
	for {
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return
		}
		if w.direct {
			// A responder holds the transport; it wakes us when done.
			w.mu.Unlock()
			<-w.wake
			continue
		}
		f, ok := w.nextLocked()
		if ok {
			w.busy = true
			w.written = append(w.written, f.receipt)
		}
		pending := len(w.written) > 0
		if !ok && pending && !yielded {
			w.mu.Unlock()
			yielded = true
			runtime.Gosched()
			continue
		}
		yielded = false
		if !ok && !pending {
			w.busy = false
			if w.closing {
				w.closed = true
				w.err = ErrWriterClosed
				w.mu.Unlock()
				return
			}
			w.mu.Unlock()
			<-w.wake
			continue
		}
		w.mu.Unlock()

		if ok {
			err := w.out.Write(f.msg)
			w.release(f)
			if err != nil {
				w.fail(err)
				return
			}
			w.mu.Lock()
			w.bytes -= len(f.msg)
			w.frames--
			w.mu.Unlock()
			continue
		}
		if err := w.out.Flush(); err != nil {
			w.fail(err)
			return
		}
		w.mu.Lock()
		written := w.written
		w.written = nil
		w.mu.Unlock()
		for _, r := range written {
			settle(r, nil)
		}
	}
}

// release gives f's bytes back, once the transport is done with them.
func (w *OutboundWriter) release(f outFrame) {
	if f.pooled {
		transport.PutBuffer(f.msg)
	}
}

// fail fails the writer once after a write error: the failure is reported
// before the frames it strands are rejected.
func (w *OutboundWriter) fail(err error) {
	w.Abort(fmt.Errorf("outbound write failed: %w", err))
}
