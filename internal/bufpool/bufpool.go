// Package bufpool keeps the large byte buffers that frames are built in
// and read into, to use again. A process that relays a PTY's output goes
// through megabytes a second of such buffers; taken fresh from the heap,
// each costs a collection's share and, once the runtime has given its
// pages back, a page fault for every 4 KiB of it when it is next written.
package bufpool

import (
	"math/bits"
	"sync"
)

const (
	minShift = 12 // 4 KiB: smaller buffers are cheap from the heap
	maxShift = 20 // 1 MiB: a whole frame at the wire limit fits
)

// pools[i] holds buffers of capacity 1<<(minShift+i).
var pools [maxShift - minShift + 1]sync.Pool

// class returns the pool index whose buffers hold n bytes, or -1 for n
// outside the pooled sizes.
func class(n int) int {
	if n <= 1<<minShift {
		if n <= 0 {
			return -1
		}
		return 0
	}
	if n > 1<<maxShift {
		return -1
	}
	return bits.Len(uint(n-1)) - minShift
}

// Get returns an empty buffer with room for at least n bytes.
func Get(n int) []byte {
	c := class(n)
	if c < 0 || n < 1<<minShift/2 {
		return make([]byte, 0, n)
	}
	if p, ok := pools[c].Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return make([]byte, 0, 1<<(minShift+c))
}

// Put gives b back for a later Get. Nothing may use b, or anything sliced
// from it, after. A buffer not from Get is taken when its capacity is one
// of the pooled sizes, and dropped otherwise.
func Put(b []byte) {
	c := class(cap(b))
	if c < 0 || cap(b) != 1<<(minShift+c) {
		return
	}
	b = b[:0]
	pools[c].Put(&b)
}

// Grow returns b with room for n more bytes, moving it to a larger pooled
// buffer (and giving b back) when it has not.
func Grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := append(Get(len(b)+n), b...)
	Put(b)
	return nb
}
