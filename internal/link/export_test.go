package link

// Buffers reports the pooled buffers c holds: queued frames and those in
// its streams' readers' hands.
func Buffers(c *Conn) int64 { return c.buffers.Load() }

// StreamBuffer is the frames a stream queues before the link waits.
const StreamBuffer = streamBuffer

// OnStreamFull has f called whenever a link's reader waits for a full
// stream, until the test ends. Set it before Dial.
func OnStreamFull(t interface{ Cleanup(func()) }, f func()) {
	onStreamFull = f
	t.Cleanup(func() { onStreamFull = nil })
}
