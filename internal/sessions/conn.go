package sessions

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// clientConn is the service's state for one client connection: the
// subscriptions it holds.
type clientConn struct {
	s   *Service
	id  server.Identity
	out *server.OutboundWriter

	mu          sync.Mutex
	subs        map[string]*subscription  // guarded by mu: by id
	lists       map[string]*listWatch     // guarded by mu: its subscriptions to the session list, by id
	room        chan struct{}             // guarded by mu: closed when a batch of the connection is flushed
	turn        chan struct{}             // buffered 1: held by the subscription queuing a batch
	slowed      sync.Once                 // its socket's buffer is cut down for a slow reader
	controllers map[string]controllerHeld // guarded by mu: PTY controllers it acquired, by id
}

// connBudget is how many bytes a connection may have queued before its
// subscriptions hold their next batches back: however many it holds, they
// never fill its outbound queue (protocol.MaxOutboundQueueBytes), and one
// that then lags is bounded by its own queue.
const connBudget = protocol.MaxOutboundQueueBytes / 2

// connFrameBudget is the same for frames: a PTY's output may come in
// frames of a few bytes, which would reach the frame bound
// (protocol.MaxOutboundQueueFrames) long before the byte bound.
const connFrameBudget = protocol.MaxOutboundQueueFrames / 2

// send queues a subscription's next batch with write once the
// connection's queue has room for it, one subscription at a time, so that
// together they stay within the budget. It reports false when done, or
// the connection's writer, ended first.
func (c *clientConn) send(done <-chan struct{}, write func()) bool {
	for {
		select {
		case c.turn <- struct{}{}:
		case <-done:
			return false
		case <-c.out.Done():
			return false
		}
		c.mu.Lock()
		room := c.out.Queued() <= connBudget && c.out.QueuedFrames() <= connFrameBudget
		var flushed chan struct{}
		if !room {
			if c.room == nil {
				c.room = make(chan struct{})
			}
			flushed = c.room
		}
		c.mu.Unlock()
		if room {
			write()
			<-c.turn
			return true
		}
		<-c.turn
		select {
		case <-flushed:
		case <-done:
			return false
		case <-c.out.Done():
			return false
		}
	}
}

// slowSocketBuffer is what a connection's socket holds on its way to a
// client found reading slower than its session prints: about 10 ms of
// reading at 1 MB/s, instead of the system's default of 200 KiB or more.
const slowSocketBuffer = 8 << 10

// slow cuts down the connection's socket buffer once a subscription of it
// skipped ahead: the output the kernel holds for it is output it sees
// late.
func (c *clientConn) slow() {
	c.slowed.Do(func() {
		if err := c.out.LimitSocketBuffer(slowSocketBuffer); err != nil {
			c.s.log.Warn("cutting down a slow client's socket buffer", "connection", c.id.ConnectionID, "err", err)
		}
	})
}

// flushed runs on the connection's writer once a batch is written: the
// subscriptions waiting for room look again.
func (c *clientConn) flushed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.room != nil {
		close(c.room)
		c.room = nil
	}
}

// Close ends the connection's subscriptions, and releases the PTYs it
// controlled; nothing more is written.
func (c *clientConn) Close(context.Context) error {
	c.mu.Lock()
	subs, held, lists := c.subs, c.controllers, c.lists
	c.subs, c.controllers, c.lists = map[string]*subscription{}, map[string]controllerHeld{}, map[string]*listWatch{}
	c.mu.Unlock()
	c.s.mu.Lock()
	delete(c.s.guests, c)
	c.s.mu.Unlock()
	for _, sub := range subs {
		sub.abort()
	}
	for _, lw := range lists {
		lw.end(c.s, "")
	}
	c.s.releaseControllers(slices.Collect(maps.Values(held)))
	return nil
}

// subscription returns the connection's subscription id.
func (c *clientConn) subscription(id string) (*subscription, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sub, ok := c.subs[id]
	if !ok {
		return nil, protocol.Errorf(protocol.CodeNotFound, "no subscription %q on this connection", id)
	}
	return sub, nil
}

// forget drops a closed subscription.
func (c *clientConn) forget(sub *subscription) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.subs[sub.id] == sub {
		delete(c.subs, sub.id)
	}
}

func clientOf(call *server.Call) (*clientConn, error) {
	c, ok := call.Attachment().(*clientConn)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeInternalFailure, "connection not attached")
	}
	return c, nil
}

// subscriptionOf returns the subscription id of call's connection.
func subscriptionOf(call *server.Call, id string) (*subscription, error) {
	c, err := clientOf(call)
	if err != nil {
		return nil, err
	}
	return c.subscription(id)
}
