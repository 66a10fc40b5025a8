package acp

import (
	"errors"
	"io"
	"sync"
)

// maxQueued bounds the bytes a batcher holds for a slow editor.
const maxQueued = 1 << 20

// batcher writes what the connection sends in as few writes as it can: a
// Write returns once its bytes are queued, and one goroutine writes out
// whatever has queued since its last write, so a burst of updates costs
// the editor one wake-up, not one a line. At most maxQueued bytes wait
// (a larger message waits alone); a Write past that waits for room, so an
// editor that stops reading stops the writers and nothing grows.
type batcher struct {
	w    io.WriteCloser // constant
	done chan struct{}  // constant; closed when the writing goroutine ends

	mu     sync.Mutex
	cond   *sync.Cond // signalled when buf, err or closed change
	buf    []byte     // guarded by mu: queued, not yet written
	err    error      // guarded by mu: why writing stopped
	closed bool       // guarded by mu
}

// errWriterClosed is returned by a Write after Close.
var errWriterClosed = errors.New("the editor's end is closed")

func newBatcher(w io.WriteCloser) *batcher {
	b := &batcher{w: w, done: make(chan struct{})}
	b.cond = sync.NewCond(&b.mu)
	go b.run()
	return b
}

// Write queues p.
func (b *batcher) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.err == nil && !b.closed && len(b.buf) > 0 && len(b.buf)+len(p) > maxQueued {
		b.cond.Wait()
	}
	switch {
	case b.err != nil:
		return 0, b.err
	case b.closed:
		return 0, errWriterClosed
	}
	b.buf = append(b.buf, p...)
	b.cond.Broadcast()
	return len(p), nil
}

// run writes out what is queued until Close or a failed write.
func (b *batcher) run() {
	defer close(b.done)
	var out []byte
	for {
		b.mu.Lock()
		for len(b.buf) == 0 && !b.closed {
			b.cond.Wait()
		}
		if len(b.buf) == 0 {
			b.mu.Unlock()
			return
		}
		out, b.buf = b.buf, out[:0]
		b.cond.Broadcast()
		b.mu.Unlock()
		if _, err := b.w.Write(out); err != nil {
			b.mu.Lock()
			b.err = err
			b.cond.Broadcast()
			b.mu.Unlock()
			return
		}
	}
}

// Close stops taking writes, closes the underlying writer (which ends a
// write the editor left blocked) and waits for the writing goroutine.
// What was queued and not yet written is dropped.
func (b *batcher) Close() error {
	b.mu.Lock()
	b.closed = true
	b.buf = nil
	b.cond.Broadcast()
	b.mu.Unlock()
	err := b.w.Close()
	<-b.done
	return err
}
