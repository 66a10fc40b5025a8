package resource

// ring keeps the last bytes written to it, up to its size.
type ring struct {
	size  int
	buf   []byte // grows to size as bytes come
	start int    // index of the oldest byte when full
	total int64  // bytes ever written
}

func newRing(size int) *ring { return &ring{size: size} }

func (r *ring) Write(p []byte) {
	r.total += int64(len(p))
	size := r.size
	if len(p) >= size {
		r.buf = append(r.buf[:0], p[len(p)-size:]...)
		r.start = 0
		return
	}
	if room := size - len(r.buf); room > 0 {
		n := min(room, len(p))
		r.buf = append(r.buf, p[:n]...)
		p = p[n:]
	}
	for len(p) > 0 {
		n := copy(r.buf[r.start:], p)
		p = p[n:]
		r.start = (r.start + n) % size
	}
}

// Bytes returns the kept bytes, oldest first.
func (r *ring) Bytes() []byte {
	out := make([]byte, 0, len(r.buf))
	out = append(out, r.buf[r.start:]...)
	return append(out, r.buf[:r.start]...)
}

// Dropped reports how many bytes written are no longer kept.
func (r *ring) Dropped() int64 { return r.total - int64(len(r.buf)) }
