package client

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/agentd-dev/agentd/protocol"
)

// watcherBuffer bounds the frames a watcher holds before it is ended as
// too slow; the host applies its own bound as well.
const watcherBuffer = 1024

// ErrWatcherSlow ends a watcher whose reader left more frames waiting
// than it holds (1024).
var ErrWatcherSlow = errors.New("watcher fell too far behind")

// Frame is one host-pushed frame.
type Frame struct {
	protocol.Pushed
	// Raw is the whole frame, to decode into its kind's type. Its bytes
	// are the frame's own.
	Raw json.RawMessage
}

// Decode decodes the frame into v, one of the protocol's *…Frame types,
// as json.Unmarshal does. A PTY's output is read in one pass.
func (f Frame) Decode(v any) error {
	if pty, ok := v.(*protocol.RuntimeResourcePtyDataFrame); ok {
		return protocol.DecodePtyDataFrame(f.Raw, pty)
	}
	return json.Unmarshal(f.Raw, v)
}

// Watcher receives the pushed frames of one subscription, in order. It
// holds up to 1024 frames its reader has not taken; one more ends it with
// ErrWatcherSlow, and the subscription's later frames are dropped, so
// that a slow reader never holds back the connection's other
// subscriptions and responses.
type Watcher struct {
	c      *Conn
	id     string
	frames chan Frame

	mu   sync.Mutex
	err  error // guarded by mu: why the watcher ended
	once sync.Once
	gone chan struct{}
}

// Watch returns a watcher for the frames of subscriptionID. Frames that
// arrive before Watch is called for their subscription are dropped, so
// call it before sending subscription.ready.
func (c *Conn) Watch(subscriptionID string) *Watcher {
	w := &Watcher{c: c, id: subscriptionID, frames: make(chan Frame, watcherBuffer), gone: make(chan struct{})}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		w.end(err)
		return w
	}
	c.watchers[subscriptionID] = w
	c.mu.Unlock()
	return w
}

// openWatched opens a subscription with in, started at once (in.Ready),
// and returns the open's result with a watcher of the subscription's
// frames. The watcher is bound as the response is read, before any frame
// after it: the host sends the subscription's frames only after the
// response. The subscription of an open cut off before its response is
// closed once the response comes.
func (c *Conn) openWatched(ctx context.Context, in protocol.SubscriptionOpenInput) (protocol.SubscriptionOpenResult, *Watcher, error) {
	w := &Watcher{c: c, frames: make(chan Frame, watcherBuffer), gone: make(chan struct{})}
	in.Ready = true
	open, err := call(ctx, c, protocol.OpSubscriptionOpen, in, func(resp protocol.Response) {
		var r struct {
			SubscriptionID string `json:"subscriptionId"`
		}
		if !resp.OK || json.Unmarshal(resp.Result, &r) != nil || r.SubscriptionID == "" {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		select {
		case <-w.gone:
			// Given up on before the response came: the host opened a
			// subscription, started, for no one. It is closed, off the
			// reader's goroutine.
			go c.closeSubscription(r.SubscriptionID)
			return
		default:
		}
		w.id = r.SubscriptionID
		if c.err == nil {
			c.watchers[w.id] = w
		}
	}, nil)
	if err != nil {
		w.Close()
		return protocol.SubscriptionOpenResult{}, nil, err
	}
	if w.id == "" || w.id != open.SubscriptionID {
		// The connection ended as the response came.
		err := c.Err()
		if err == nil {
			err = ErrClosed
		}
		w.end(err)
	}
	return open, w, nil
}

// Next returns the next frame. It reports ctx's error before the watcher's.
func (w *Watcher) Next(ctx context.Context) (Frame, error) {
	if err := ctx.Err(); err != nil {
		return Frame{}, err
	}
	select {
	case f := <-w.frames:
		return f, nil
	case <-ctx.Done():
		return Frame{}, ctx.Err()
	case <-w.gone:
		select {
		case f := <-w.frames:
			return f, nil
		default:
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		return Frame{}, w.err
	}
}

// Close stops the watcher. It does not close the subscription on the host.
func (w *Watcher) Close() {
	w.c.mu.Lock()
	if w.c.watchers[w.id] == w {
		delete(w.c.watchers, w.id)
	}
	w.c.mu.Unlock()
	w.end(ErrClosed)
}

func (w *Watcher) end(err error) {
	w.once.Do(func() {
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
		close(w.gone)
	})
}

// push routes a pushed frame to its watcher. A subscription.closed frame
// is delivered and then ends the watcher.
func (c *Conn) push(head protocol.Pushed, raw []byte) {
	kind := head.Kind
	c.mu.Lock()
	w := c.watchers[head.SubscriptionID]
	if kind == protocol.KindSubscriptionClosed {
		delete(c.watchers, head.SubscriptionID)
		var closed protocol.SubscriptionClosedFrame
		if json.Unmarshal(raw, &closed) == nil {
			switch closed.Reason {
			case protocol.ClosedHostDraining:
				c.draining = true
			case protocol.ClosedHostReplaced:
				c.replaced = true
			}
		}
	}
	c.mu.Unlock()
	if w == nil {
		return
	}
	select {
	case w.frames <- Frame{Pushed: head, Raw: raw}:
	default:
		c.mu.Lock()
		delete(c.watchers, head.SubscriptionID)
		c.mu.Unlock()
		w.end(ErrWatcherSlow)
		return
	}
	if kind == protocol.KindSubscriptionClosed {
		w.end(ErrClosed)
	}
}
