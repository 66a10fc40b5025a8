package bufpool

import (
	"bytes"
	"testing"
)

func TestGetHasRoom(t *testing.T) {
	for _, n := range []int{0, 1, 100, 2047, 2048, 4095, 4096, 4097, 65536, 65537, 768 << 10, 1 << 20, 1<<20 + 1, 4 << 20} {
		b := Get(n)
		if len(b) != 0 || cap(b) < n {
			t.Errorf("Get(%d): len %d cap %d", n, len(b), cap(b))
		}
		Put(b)
	}
}

func TestPutThenGetReusesTheBuffer(t *testing.T) {
	// A pool may drop what it holds at any collection, so this looks for
	// reuse over a few tries rather than at once.
	for range 10 {
		b := Get(10000)
		b = append(b, 'x')
		Put(b)
		c := Get(9000)
		if cap(c) == cap(b) && &c[:1][0] == &b[0] {
			if len(c) != 0 {
				t.Fatalf("a reused buffer came back with length %d", len(c))
			}
			return
		}
	}
	t.Fatal("a buffer given back was never handed out again")
}

func TestPutDropsForeignSizes(t *testing.T) {
	Put(make([]byte, 0, 5000)) // not a pooled size: dropped
	for range 100 {
		if b := Get(5000); cap(b) == 5000 {
			t.Fatal("a buffer of a size the pool does not keep was handed out")
		}
	}
}

func TestGrowKeepsTheBytes(t *testing.T) {
	b := append(Get(10), "hello"...)
	b = Grow(b, 100000)
	if cap(b)-len(b) < 100000 || !bytes.Equal(b, []byte("hello")) {
		t.Fatalf("Grow: %q, cap %d", b, cap(b))
	}
	same := Grow(b, 10)
	if &same[:1][0] != &b[:1][0] {
		t.Fatal("Grow moved a buffer that had room")
	}
	Put(b)
}

func BenchmarkGetPut64K(b *testing.B) {
	for b.Loop() {
		Put(append(Get(64<<10), 'x'))
	}
}
