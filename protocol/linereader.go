package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// ErrMessageTooLarge is returned by LineReader.Next for a message over
// MaxMessageBytes; writers refuse to send one with it too.
var ErrMessageTooLarge = fmt.Errorf("message exceeds %d bytes", MaxMessageBytes)

// ErrOverBudget is returned by LineReader.Next when the message it reads
// needs a larger buffer than its ReadBudget has left.
var ErrOverBudget = errors.New("a partly read message would pass the memory budget for reading")

// ErrMessageTimeout is returned by LineReader.Next when a message has
// not arrived whole within the reader's message timeout of its first
// byte.
var ErrMessageTimeout = errors.New("a message did not arrive whole in time")

// lineReaderBufferSize is the buffer a LineReader reads into while no
// message outgrows it, and holds between messages: a message that fits is
// returned without a copy.
const lineReaderBufferSize = 4 << 10

// ReadBudget is memory that LineReaders share for the messages that
// outgrow their first buffer: a reader reserves a larger buffer's bytes
// before it takes one and releases them when it lets the buffer go. Its
// methods may be called from many readers at once.
type ReadBudget interface {
	// Reserve takes n bytes, or reports false and takes nothing when
	// fewer than n are left.
	Reserve(n int) bool
	// Release gives back n bytes taken by Reserve.
	Release(n int)
}

// Buffers lends a LineReader the buffers it reads into, and takes them
// back once the reader is past them: a process's pool of large buffers,
// say, so that a stream of large messages does not take each one's
// buffer fresh from the heap. Its methods may be called from many
// readers at once.
type Buffers interface {
	// Get returns an empty buffer with room for at least n bytes.
	Get(n int) []byte
	// Put takes back a buffer Get returned; nothing uses it after.
	Put(b []byte)
	// Size returns the capacity of the buffer Get(n) returns, which a
	// ReadBudget is asked for before it is taken.
	Size(n int) int
}

// heapBuffers are a LineReader's buffers when it is lent none: taken
// from the heap and left to the collector.
type heapBuffers struct{}

func (heapBuffers) Get(n int) []byte { return make([]byte, 0, n) }
func (heapBuffers) Put([]byte)       {}
func (heapBuffers) Size(n int) int   { return n }

// deadliner is a source whose reads can be given a deadline: a net.Conn.
type deadliner interface {
	SetReadDeadline(t time.Time) error
}

// LineReader reads the messages of a stream in this package's framing: one
// message a line, ended by "\n" (a "\r" before it is dropped too), at most
// MaxMessageBytes each, the line ending excluded. It is the one reader of
// that framing, for hosts, workers and clients alike. A LineReader is not
// safe for concurrent use.
//
// Between messages a LineReader holds one small buffer. A message that
// outgrows it is gathered in larger buffers (see Buffers) that grow as its
// bytes arrive, doubling, or at once to the length of the last message
// that outgrew it, and the larger buffer is given back once the
// reader is past the message.
type LineReader struct {
	r      io.Reader
	max    int
	small  int        // the size of the buffer held between messages
	budget ReadBudget // nil: unbounded
	bufs   Buffers    // where buffers come from and go back to

	// buf[start:end] is what was read and not yet returned, buf[start:scan]
	// of it known to hold no newline; next is where the message Next
	// returned last ends. buf is nil until the first Next and once spent.
	buf                    []byte
	start, scan, next, end int
	held                   int   // bytes of buf reserved from budget; 0 for a small buffer
	err                    error // what the source last failed with, kept until buf is used up
	spent                  bool  // Next failed: nothing more is read
	hint                   int   // the length of the last message that outgrew small
	emptyReads             int   // reads in a row that returned nothing

	timeout  time.Duration
	source   deadliner // r, when it takes deadlines
	begun    time.Time // when the message now partly read was first seen; zero between messages
	deadline time.Time // the read deadline set on source; zero for none
}

// NewLineReader returns a LineReader of r whose buffers nothing bounds
// but MaxMessageBytes.
func NewLineReader(r io.Reader) *LineReader {
	return newLineReader(r, MaxMessageBytes, lineReaderBufferSize)
}

// NewBudgetedLineReader returns a LineReader of r whose buffers beyond
// its small one are reserved from budget: a message that would need
// more than budget has left fails Next with ErrOverBudget.
func NewBudgetedLineReader(r io.Reader, budget ReadBudget) *LineReader {
	l := NewLineReader(r)
	l.budget = budget
	return l
}

func newLineReader(r io.Reader, max, small int) *LineReader {
	return &LineReader{r: r, max: max, small: small, bufs: heapBuffers{}}
}

// SetBuffers makes the reader take its buffers from bufs and give them
// back to it, rather than take them from the heap. Call it before the
// first Next.
func (l *LineReader) SetBuffers(bufs Buffers) { l.bufs = bufs }

// SetMessageTimeout bounds how long a message may take to arrive once its
// first byte has; an idle stream, between messages, is never timed out.
// A message not whole in time fails Next with ErrMessageTimeout. Zero
// removes the bound. The source must have a SetReadDeadline method (a
// net.Conn), and nothing else may set its read deadline while the bound
// is on. Call it from the goroutine that calls Next, not during a call.
//
// The reader sets a deadline when a message begins and none is set, and
// leaves it when the message ends: setting one costs a timer's update,
// and a stream of messages read in pieces would otherwise pay it for
// each. A deadline that passes before the message it finds began its
// time is moved to that message's end of time, and one that passes
// between messages is cleared, so each costs at most one early wake-up.
func (l *LineReader) SetMessageTimeout(d time.Duration) error {
	src, ok := l.r.(deadliner)
	if !ok && d > 0 {
		return errors.New("protocol: a message timeout needs a source with SetReadDeadline")
	}
	l.timeout, l.source, l.begun = d, src, time.Time{}
	if d <= 0 && !l.deadline.IsZero() {
		l.deadline = time.Time{}
		return src.SetReadDeadline(time.Time{})
	}
	return nil
}

// Next returns the next message without its line ending. The slice is
// valid until the next call. At the end of the stream Next returns io.EOF.
//
// A message longer than MaxMessageBytes is refused with ErrMessageTooLarge
// as soon as it is known to be, before its end arrives. A stream that ends
// in the middle of a line returns the line's bytes with
// io.ErrUnexpectedEOF: a peer that died while writing, or one that sent
// its last message without a newline; whether to take it is the caller's
// choice. After an error other than io.ErrUnexpectedEOF the reader is
// spent: the stream is no longer at the start of a message, and the
// reader has let go of its buffers.
func (l *LineReader) Next() ([]byte, error) {
	if l.spent {
		return nil, l.fail(l.err)
	}
	l.start = l.next
	l.settle()
	for {
		if i := bytes.IndexByte(l.buf[l.scan:l.end], '\n'); i >= 0 {
			line := l.buf[l.start : l.scan+i]
			l.next = l.scan + i + 1
			l.scan, l.begun = l.next, time.Time{}
			if l.held > 0 {
				l.hint = l.next - l.start
			}
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
			if len(line) > l.max {
				return nil, l.fail(ErrMessageTooLarge)
			}
			return line, nil
		}
		l.scan = l.end
		pending := l.end - l.start
		// One byte of room for a "\r" that may end the line.
		if pending > l.max+1 {
			return nil, l.fail(ErrMessageTooLarge)
		}
		if l.err != nil {
			if errors.Is(l.err, io.EOF) && pending > 0 {
				line := l.buf[l.start:l.end]
				l.next = l.end
				if len(line) > l.max {
					return nil, l.fail(ErrMessageTooLarge)
				}
				return line, io.ErrUnexpectedEOF
			}
			return nil, l.fail(l.err)
		}
		if err := l.room(); err != nil {
			return nil, l.fail(err)
		}
		l.fill()
	}
}

// settle lets go of what the reader is past: once every byte read is
// returned, a larger buffer is given back for a small one. A
// stream that writes whole messages is read to such a point whenever the
// reader catches up with it, and so before every wait for more.
func (l *LineReader) settle() {
	pending := l.end - l.start
	switch {
	case l.buf == nil:
		l.buf = l.getFull(l.small)
	case pending == 0:
		l.start, l.scan, l.next, l.end = 0, 0, 0, 0
		if l.held > 0 {
			l.drop()
			l.buf = l.getFull(l.small)
		}
	}
}

// room makes space in buf for more of the stream: it moves the pending
// bytes to the front, or else to a larger buffer, reserved from the
// budget first: twice the size, or at once the length of the last
// message that outgrew the small buffer, and at most what holds a
// message of the limit and its line ending.
func (l *LineReader) room() error {
	if l.end < len(l.buf) {
		return nil
	}
	pending := l.end - l.start
	if l.start > 0 {
		copy(l.buf, l.buf[l.start:l.end])
		l.scan -= l.start
		l.start, l.next, l.end = 0, 0, pending
		return nil
	}
	want := min(max(2*len(l.buf), l.hint), l.max+2)
	size := l.bufs.Size(want)
	if l.budget != nil && !l.budget.Reserve(size) {
		return fmt.Errorf("%w: %d bytes of it read, %d more refused", ErrOverBudget, pending, size)
	}
	nb := l.getFull(want)
	copy(nb, l.buf[:l.end])
	l.drop()
	l.buf, l.held = nb, size
	return nil
}

// getFull returns a buffer of at least n bytes, at its full length.
func (l *LineReader) getFull(n int) []byte {
	b := l.bufs.Get(n)
	return b[:cap(b)]
}

// drop gives buf back to where it came from and its bytes back to the budget.
func (l *LineReader) drop() {
	l.bufs.Put(l.buf)
	if l.held > 0 && l.budget != nil {
		l.budget.Release(l.held)
	}
	l.buf, l.held = nil, 0
}

// fill reads once into buf's free space, minding the message timeout.
// An error is kept for when what was read is used up.
func (l *LineReader) fill() {
	for {
		before := l.end - l.start
		if l.timeout > 0 && before > 0 {
			if l.begun.IsZero() {
				l.begun = time.Now()
			}
			if l.deadline.IsZero() {
				l.setDeadline(l.begun.Add(l.timeout))
			}
		}
		n, err := l.r.Read(l.buf[l.end:])
		if n < 0 || n > len(l.buf)-l.end {
			n, err = 0, errors.New("protocol: the source returned an invalid count")
		}
		l.end += n
		if err != nil && l.timeout > 0 && errors.Is(err, os.ErrDeadlineExceeded) {
			switch {
			case before == 0:
				// Passed between messages: an idle stream has no bound.
				l.setDeadline(time.Time{})
				err = nil
			case time.Since(l.begun) < l.timeout:
				// Set for an earlier message: this one has time left.
				l.setDeadline(l.begun.Add(l.timeout))
				err = nil
			default:
				err = fmt.Errorf("%w: %d bytes of it came within %v", ErrMessageTimeout, l.end-l.start, l.timeout)
			}
			if err == nil && n == 0 {
				continue
			}
		}
		switch {
		case err == nil && n == 0:
			if l.emptyReads++; l.emptyReads >= 100 {
				err = io.ErrNoProgress
			}
		case n > 0:
			l.emptyReads = 0
		}
		l.err = err
		return
	}
}

func (l *LineReader) setDeadline(t time.Time) {
	l.deadline = t
	l.source.SetReadDeadline(t)
}

// fail spends the reader, letting go of its buffers, and returns err.
func (l *LineReader) fail(err error) error {
	l.spent, l.err = true, err
	if l.buf != nil {
		l.drop()
	}
	l.start, l.scan, l.next, l.end = 0, 0, 0, 0
	return err
}

// Release lets go of the reader's buffers and their budget; the message
// Next returned last is no longer valid, and Next fails from then on (the
// stream may be mid-message). Release is for the goroutine that calls
// Next, once it will call it no more.
func (l *LineReader) Release() {
	if !l.spent {
		l.fail(io.ErrClosedPipe)
	}
}
