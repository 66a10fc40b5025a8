package transport

import (
	"bytes"
	"testing"
)

func TestGetBufferHasRoom(t *testing.T) {
	for _, n := range []int{0, 1, 100, 2047, 2048, 4095, 4096, 4097, 65536, 65537, 768 << 10, 1 << 20, 1<<20 + 1, 4 << 20} {
		b := GetBuffer(n)
		if len(b) != 0 || cap(b) < n {
			t.Errorf("GetBuffer(%d): len %d cap %d", n, len(b), cap(b))
		}
		PutBuffer(b)
	}
}

func TestAPutBufferIsGottenAgain(t *testing.T) {
	// A pool may drop what it holds at any collection, so this looks for
	// reuse over a few tries rather than at once.
	for range 10 {
		b := GetBuffer(10000)
		b = append(b, 'x')
		PutBuffer(b)
		c := GetBuffer(9000)
		if cap(c) == cap(b) && &c[:1][0] == &b[0] {
			if len(c) != 0 {
				t.Fatalf("a reused buffer came back with length %d", len(c))
			}
			return
		}
	}
	t.Fatal("a buffer given back was never handed out again")
}

func TestBufferClassesFitTightly(t *testing.T) {
	last := 0
	for n := 1; n <= 1<<maxBufferShift; n += 97 {
		c, size := bufferClass(n)
		if size < n || n > 1<<minBufferShift && size > n+n/4 {
			t.Fatalf("bufferClass(%d): size %d", n, size)
		}
		if c < last || c >= len(bufferPools) {
			t.Fatalf("bufferClass(%d): class %d after %d, of %d", n, c, last, len(bufferPools))
		}
		if c2, size2 := bufferClass(size); c2 != c || size2 != size {
			t.Fatalf("a buffer of class %d's size %d is of class %d, size %d", c, size, c2, size2)
		}
		last = c
	}
}

func TestPutBufferDropsForeignSizes(t *testing.T) {
	PutBuffer(make([]byte, 0, 5000)) // not a pooled size: dropped
	for range 100 {
		if b := GetBuffer(5000); cap(b) == 5000 {
			t.Fatal("a buffer of a size the pool does not keep was handed out")
		}
	}
}

func TestGrowBufferKeepsTheBytes(t *testing.T) {
	b := append(GetBuffer(10), "hello"...)
	b = GrowBuffer(b, 100000)
	if cap(b)-len(b) < 100000 || !bytes.Equal(b, []byte("hello")) {
		t.Fatalf("GrowBuffer: %q, cap %d", b, cap(b))
	}
	same := GrowBuffer(b, 10)
	if &same[:1][0] != &b[:1][0] {
		t.Fatal("GrowBuffer moved a buffer that had room")
	}
	PutBuffer(b)
}
