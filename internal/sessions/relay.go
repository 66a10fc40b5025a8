package sessions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/host"
	"github.com/agentd-dev/agentd/protocol"
)

// clientConn is the service's state for one client connection: the
// subscriptions it holds.
type clientConn struct {
	s   *Service
	id  host.Identity
	out *host.OutboundWriter

	mu     sync.Mutex
	relays map[string]*relay // guarded by mu: by subscription id
}

// Close ends the connection's subscriptions.
func (c *clientConn) Close(context.Context) error {
	c.mu.Lock()
	relays := c.relays
	c.relays = map[string]*relay{}
	c.mu.Unlock()
	for _, r := range relays {
		r.close()
	}
	return nil
}

// relay carries one client subscription: the worker's frames of the
// matching worker subscription, with the host's epoch. The subscription id
// is the worker's, so frames need no other change; a relay delivers in the
// worker's order and never reorders.
type relay struct {
	c      *clientConn
	w      *worker
	id     string
	watch  *client.Watcher
	cancel context.CancelFunc
	once   sync.Once
	done   chan struct{}
	seq    uint64 // the last sequence relayed; read after done
	// readied is set as the client's subscription.ready goes to the
	// worker: only a readied subscription gets a closed frame to wait for.
	readied atomic.Bool
}

func (r *relay) run(ctx context.Context, workerEpoch string) {
	defer close(r.done)
	from := []byte(`"hostEpoch":"` + workerEpoch + `"`)
	to := []byte(`"hostEpoch":"` + r.c.s.host.Epoch() + `"`)
	for {
		f, err := r.watch.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				// The worker's stream ended under the relay (it fell
				// behind, or the connection went): the client must not
				// wait for frames that will not come.
				reason := protocol.ClosedWorkerExited
				if errors.Is(err, client.ErrWatcherSlow) {
					reason = protocol.ClosedSlowConsumer
				}
				r.c.s.wg.Go(func() { r.end(reason) })
			}
			return
		}
		r.seq = f.Sequence
		frame := bytes.Replace(f.Raw, from, to, 1)
		r.noteTurn(frame)
		if bytes.Contains(frame, sessionChanged) {
			frame = r.withHeader(frame)
		}
		class := host.Control
		switch f.Kind {
		case protocol.KindSubscriptionClosed:
			class = host.Fence
		case protocol.KindRuntimeResourcePtyData:
			class = host.Data
		}
		if _, err := r.c.out.Enqueue(class, frame); err != nil {
			return
		}
		if f.Kind == protocol.KindSubscriptionClosed {
			r.detach()
			return
		}
	}
}

var (
	runStart       = []byte(`"delta":{"event":"run_start"`)
	runEnd         = []byte(`"delta":{"event":"run_end"`)
	sessionChanged = []byte(`"delta":{"event":"session_changed"`)
)

// withHeader fills a session_changed delta's session from the catalog:
// the worker knows the session's runtime status, the host its header
// (title, dates, revision).
func (r *relay) withHeader(frame []byte) []byte {
	var f protocol.SessionDeltaFrame
	var d protocol.SessionDelta
	if json.Unmarshal(frame, &f) != nil || json.Unmarshal(f.Delta, &d) != nil || d.Session == nil {
		return frame
	}
	h, err := r.c.s.cat.Get(d.Session.SessionID)
	if err != nil {
		return frame
	}
	status := d.Session.Status
	d.Session = ptr(h.Session(status))
	delta, err := json.Marshal(d)
	if err != nil {
		return frame
	}
	f.Delta = delta
	out, err := json.Marshal(f)
	if err != nil {
		return frame
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// noteTurn follows whether the worker runs a turn, from its deltas.
func (r *relay) noteTurn(frame []byte) {
	switch {
	case bytes.Contains(frame, runStart):
		r.w.mu.Lock()
		r.w.busy = true
		r.w.mu.Unlock()
	case bytes.Contains(frame, runEnd):
		r.w.mu.Lock()
		r.w.busy = false
		r.w.mu.Unlock()
	}
}

// detach forgets the relay on both sides and lets the worker idle.
func (r *relay) detach() {
	r.c.mu.Lock()
	if r.c.relays[r.id] == r {
		delete(r.c.relays, r.id)
	}
	r.c.mu.Unlock()
	r.w.mu.Lock()
	delete(r.w.relays, r)
	r.w.mu.Unlock()
	r.w.armIdle()
}

// close ends the subscription on the worker and stops relaying.
func (r *relay) close() {
	r.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if r.w.conn.Request(ctx, protocol.OpSubscriptionClose, protocol.SubscriptionRef{SubscriptionID: r.id}, nil) == nil && r.readied.Load() {
			// The worker's closed frame follows its deltas; let the relay
			// carry it to the client.
			select {
			case <-r.done:
			case <-ctx.Done():
			}
		}
		r.cancel()
		<-r.done
		r.watch.Close()
		r.detach()
	})
}

// end closes the client's subscription with reason: the worker is gone,
// or its stream could not be followed.
func (r *relay) end(reason string) {
	r.once.Do(func() {
		r.cancel()
		<-r.done
		r.watch.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r.w.conn.Request(ctx, protocol.OpSubscriptionClose, protocol.SubscriptionRef{SubscriptionID: r.id}, nil)
		cancel()
		r.w.mu.Lock()
		delete(r.w.relays, r)
		r.w.busy = false // its deltas no longer say; the idle check asks the worker
		r.w.mu.Unlock()
		r.w.armIdle()
		b, _ := json.Marshal(protocol.SubscriptionClosedFrame{
			Pushed: protocol.Pushed{Kind: protocol.KindSubscriptionClosed, HostEpoch: r.c.s.host.Epoch(), SubscriptionID: r.id, Sequence: r.seq + 1},
			Reason: reason,
		})
		r.c.out.Enqueue(host.Fence, b)
		r.c.mu.Lock()
		delete(r.c.relays, r.id)
		r.c.mu.Unlock()
	})
}
