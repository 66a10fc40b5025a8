package sessions

import (
	"context"
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

	mu   sync.Mutex
	subs map[string]*subscription // guarded by mu: by id
}

// Close ends the connection's subscriptions; nothing more is written.
func (c *clientConn) Close(context.Context) error {
	c.mu.Lock()
	subs := c.subs
	c.subs = map[string]*subscription{}
	c.mu.Unlock()
	for _, sub := range subs {
		sub.close(protocol.ClosedClientClosed)
	}
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
