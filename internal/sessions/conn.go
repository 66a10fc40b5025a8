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

	// Lock order: subscription.mu before mu.
	mu          sync.Mutex
	subs        map[string]*subscription   // guarded by mu: by id
	waiting     map[*subscription]struct{} // guarded by mu: held back while the connection's queue was high
	controllers map[string]controllerHeld  // guarded by mu: PTY controllers it acquired, by id
}

// connBudget is how many bytes a connection may have queued before its
// subscriptions hold their next batches back: however many it holds, they
// never fill its outbound queue (protocol.MaxOutboundQueueBytes), and one
// that then lags is bounded by its own backlog.
const connBudget = protocol.MaxOutboundQueueBytes / 2

// connFrameBudget is the same for frames: a PTY's output may come in
// frames of a few bytes, which would reach the frame bound
// (protocol.MaxOutboundQueueFrames) long before the byte bound.
const connFrameBudget = protocol.MaxOutboundQueueFrames / 2

// hasRoom reports whether sub may hand the connection a batch now; if
// not, sub waits until a batch of the connection has been flushed.
func (c *clientConn) hasRoom(sub *subscription) bool {
	if c.out.Queued() <= connBudget && c.out.QueuedFrames() <= connFrameBudget {
		return true
	}
	c.mu.Lock()
	c.waiting[sub] = struct{}{}
	c.mu.Unlock()
	return false
}

// wake lets the subscriptions held back deliver again, once the
// connection has taken a batch. Called with no subscription's lock held.
func (c *clientConn) wake() {
	c.mu.Lock()
	waiting := c.waiting
	if len(waiting) == 0 {
		c.mu.Unlock()
		return
	}
	c.waiting = map[*subscription]struct{}{}
	c.mu.Unlock()
	for sub := range waiting {
		sub.resume()
	}
}

// Close ends the connection's subscriptions, and releases the PTYs it
// controlled; nothing more is written.
func (c *clientConn) Close(context.Context) error {
	c.mu.Lock()
	subs, held := c.subs, c.controllers
	c.subs, c.controllers = map[string]*subscription{}, map[string]controllerHeld{}
	c.mu.Unlock()
	for _, sub := range subs {
		sub.close(protocol.ClosedClientClosed)
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
	delete(c.waiting, sub)
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
