package transport

import (
	"math/bits"
	"sync"

	"github.com/agentd-dev/agentd/protocol"
)

// The large byte buffers that frames are built in and read into are kept
// to use again. A process that relays a PTY's output goes through
// megabytes a second of them; taken fresh from the heap, each costs a
// collection's share and, once the runtime has given its pages back, a
// page fault for every 4 KiB of it when it is next written.

const (
	minBufferShift = 12 // 4 KiB: smaller buffers are cheap from the heap
	maxBufferShift = 20 // 1 MiB: a whole frame at the wire limit fits
)

// Above 4 KiB, each doubling of size is cut in four classes, so that a
// buffer is at most a quarter larger than asked for.
var bufferPools [1 + 4*(maxBufferShift-minBufferShift)]sync.Pool

// bufferClass returns the index of the smallest class whose buffers hold
// n bytes and their size, or -1 for n outside the pooled sizes.
func bufferClass(n int) (class, size int) {
	switch {
	case n <= 0 || n > 1<<maxBufferShift:
		return -1, 0
	case n <= 1<<minBufferShift:
		return 0, 1 << minBufferShift
	}
	e := bits.Len(uint(n-1)) - 1 // 1<<e < n <= 1<<(e+1)
	step := 1 << (e - 2)
	q := (n - 1<<e + step - 1) / step // 1 to 4
	return 4*(e-minBufferShift) + q, 1<<e + q*step
}

// GetBuffer returns an empty buffer with room for at least n bytes.
func GetBuffer(n int) []byte {
	c, size := bufferClass(n)
	if c < 0 || n < 1<<minBufferShift/2 {
		return make([]byte, 0, n)
	}
	if p, ok := bufferPools[c].Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return make([]byte, 0, size)
}

// bufferSize returns the capacity of the buffer GetBuffer(n) returns.
func bufferSize(n int) int {
	c, size := bufferClass(n)
	if c < 0 || n < 1<<minBufferShift/2 {
		return n
	}
	return size
}

// PutBuffer gives b back for a later GetBuffer. Nothing may use b, or
// anything sliced from it, after. A buffer not from GetBuffer is taken
// when its capacity is one of the pooled sizes, and dropped otherwise.
func PutBuffer(b []byte) {
	c, size := bufferClass(cap(b))
	if c < 0 || cap(b) != size {
		return
	}
	b = b[:0]
	bufferPools[c].Put(&b)
}

// GrowBuffer returns b with room for n more bytes, moving it to a larger
// pooled buffer (and giving b back) when it has not.
func GrowBuffer(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := append(GetBuffer(len(b)+n), b...)
	PutBuffer(b)
	return nb
}

// LineBuffers lends a protocol.LineReader this pool's buffers.
type LineBuffers struct{}

var _ protocol.Buffers = LineBuffers{}

func (LineBuffers) Get(n int) []byte { return GetBuffer(n) }
func (LineBuffers) Put(b []byte)     { PutBuffer(b) }
func (LineBuffers) Size(n int) int   { return bufferSize(n) }
