package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentd-dev/agentd/protocol"
)

// SessionOptions say how OpenSession starts a session's stream.
type SessionOptions struct {
	// Resume asks for every transcript record after After first, as
	// entry_added events, before the live events: a client that has
	// followed the session up to record After goes on with nothing missing
	// or repeated. Without it the stream starts from the projection alone.
	Resume bool
	// After is the last transcript record the caller has (with Resume).
	After uint64
	// Resources asks Next to return the changed states of the session's
	// runtime resources too, as events with Resource set; without it they
	// are skipped.
	Resources bool
}

// ClosedError ends a session stream whose subscription the host closed,
// with the host's reason (protocol.ClosedWorkerExited, …).
type ClosedError struct {
	Reason string
}

func (e *ClosedError) Error() string {
	switch e.Reason {
	case protocol.ClosedHostDraining:
		return ErrHostShutDown.Error()
	case protocol.ClosedSessionRemoved:
		return ErrSessionRemoved.Error()
	}
	return "the session's stream closed: " + e.Reason
}

// Is matches a stream the host closed as shut down to ErrHostShutDown, and
// one closed as removed to ErrSessionRemoved.
func (e *ClosedError) Is(target error) bool {
	return target == ErrHostShutDown && e.Reason == protocol.ClosedHostDraining ||
		target == ErrSessionRemoved && e.Reason == protocol.ClosedSessionRemoved
}

// Why a session's stream ended for good, matched by errors.Is.
var (
	// ErrHostShutDown ends a stream whose host was shut down (agentd
	// shutdown, a signal): it stopped the session's worker, and following
	// on would start another host.
	ErrHostShutDown = errors.New("the host was shut down")
	// ErrSessionRemoved ends a stream whose session was removed or
	// archived.
	ErrSessionRemoved = errors.New("session removed")
	// ErrClosedUnready is returned by OpenSession when the host closed
	// the subscription before it was ready (it fell behind while it
	// opened, say): opening it again may succeed.
	ErrClosedUnready = errors.New("the session's stream closed before it was ready")
)

// SessionEvent is one change to a session, in the order the host sent it.
type SessionEvent struct {
	// Sequence is the frame's sequence in its subscription.
	Sequence uint64
	// Delta is the change; its Event is empty for a whole projection.
	Delta protocol.SessionDelta
	// Raw is the delta as the host sent it.
	Raw json.RawMessage
	// Record is the transcript record an entry_added delta carries.
	Record *protocol.TranscriptRecord
	// Snapshot is set when the host replaced the whole projection.
	Snapshot *protocol.SessionProjection
	// Resource is a runtime resource's changed state (with
	// SessionOptions.Resources); Delta is empty then.
	Resource *protocol.Resource
}

// Session is a live stream of one session: its projection at opening, then
// its changes in order. Next is for one goroutine; the other methods are
// safe for concurrent use.
type Session struct {
	c         *Conn
	id        string                     // constant: the subscription's id
	sessionID string                     // constant
	snap      protocol.SessionProjection // constant: the projection at opening
	w         *Watcher                   // constant
	resources bool                       // constant: Next returns resource updates

	mu   sync.Mutex
	proj *protocol.Projector // guarded by mu
	last uint64              // guarded by mu: the last transcript record seen
	err  error               // guarded by mu: why the stream ended
}

// OpenSession opens a stream of sessionID: it opens a subscription ready
// at once, and reads the projection it opened with. On a host from before
// subscription.open took ready it opens, then readies, in two calls.
func (c *Conn) OpenSession(ctx context.Context, sessionID string, opts SessionOptions) (*Session, error) {
	boot := protocol.TranscriptBootstrap{Kind: protocol.TranscriptNone}
	if opts.Resume {
		boot = protocol.TranscriptBootstrap{Kind: protocol.TranscriptAfter, Sequence: opts.After}
	}
	in := protocol.SubscriptionOpenInput{SessionID: sessionID, Transcript: boot}
	open, w, err := c.openWatched(ctx, in)
	if knowsNoOpenField(err, "ready") {
		return c.openSessionInCalls(ctx, in, opts)
	}
	if err != nil {
		return nil, err
	}
	s, err := c.newSession(open, w, sessionID, opts)
	if err != nil {
		w.Close()
		c.closeSubscription(open.SubscriptionID)
		return nil, err
	}
	return s, nil
}

// openSessionInCalls is OpenSession on a host from before
// subscription.open took ready: the open, then subscription.ready.
func (c *Conn) openSessionInCalls(ctx context.Context, in protocol.SubscriptionOpenInput, opts SessionOptions) (*Session, error) {
	open, err := Call(ctx, c, protocol.OpSubscriptionOpen, in)
	if err != nil {
		return nil, err
	}
	w := c.Watch(open.SubscriptionID)
	s, err := c.newSession(open, w, in.SessionID, opts)
	if err != nil {
		w.Close()
		c.closeSubscription(open.SubscriptionID)
		return nil, err
	}
	if _, err := Call(ctx, c, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}); err != nil {
		s.Close()
		if errors.Is(err, ErrNotFound) {
			// The subscription, not the session, is gone.
			return nil, fmt.Errorf("%w: %v", ErrClosedUnready, err)
		}
		return nil, err
	}
	return s, nil
}

// newSession is the stream of the subscription open opened, its frames
// read by w.
func (c *Conn) newSession(open protocol.SubscriptionOpenResult, w *Watcher, sessionID string, opts SessionOptions) (*Session, error) {
	var snap protocol.SessionProjection
	if err := json.Unmarshal(open.Snapshot, &snap); err != nil {
		return nil, fmt.Errorf("%s: decoding the projection: %w", protocol.OpSubscriptionOpen, err)
	}
	s := &Session{
		c: c, id: open.SubscriptionID, sessionID: snap.Session.SessionID, snap: snap,
		w: w, proj: protocol.NewProjector(snap), last: snap.TranscriptSequence,
		resources: opts.Resources,
	}
	if s.sessionID == "" {
		s.sessionID = sessionID
	}
	if opts.Resume {
		s.last = opts.After
	}
	return s, nil
}

// ID returns the subscription's id.
func (s *Session) ID() string { return s.id }

// SessionID returns the session's id.
func (s *Session) SessionID() string { return s.sessionID }

// Conn returns the connection the stream is on.
func (s *Session) Conn() *Conn { return s.c }

// Snapshot returns the projection at opening.
func (s *Session) Snapshot() protocol.SessionProjection { return s.snap }

// Projection returns the projection with every event Next has returned
// applied.
func (s *Session) Projection() protocol.SessionProjection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proj.Projection()
}

// LastRecord returns the last transcript record the stream has brought:
// the After it resumed from, or the projection's TranscriptSequence, then
// each entry_added record's seq. Resume from it.
func (s *Session) LastRecord() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Next returns the next event. A subscription the host closed ends the
// stream with a *ClosedError; a lost connection with the connection's
// error. It reports ctx's error before the stream's. An entry_added record
// the stream has brought already is not returned again.
func (s *Session) Next(ctx context.Context) (SessionEvent, error) {
	for {
		if err := ctx.Err(); err != nil {
			return SessionEvent{}, err
		}
		s.mu.Lock()
		err := s.err
		s.mu.Unlock()
		if err != nil {
			return SessionEvent{}, err
		}
		f, err := s.w.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return SessionEvent{}, ctx.Err()
			}
			return SessionEvent{}, s.end(err)
		}
		ev, ok, err := s.decode(f)
		if err != nil {
			if ctx.Err() != nil {
				return SessionEvent{}, ctx.Err()
			}
			return SessionEvent{}, s.end(err)
		}
		if ok {
			return ev, nil
		}
	}
}

// decode turns a frame into an event and applies it; ok is false for a
// frame that brings nothing new.
func (s *Session) decode(f Frame) (ev SessionEvent, ok bool, err error) {
	ev.Sequence = f.Sequence
	switch f.Kind {
	case protocol.KindSessionDelta:
		var d protocol.SessionDeltaFrame
		if err := f.Decode(&d); err != nil {
			return ev, false, fmt.Errorf("decoding a session delta: %w", err)
		}
		if err := json.Unmarshal(d.Delta, &ev.Delta); err != nil {
			return ev, false, fmt.Errorf("decoding a session delta: %w", err)
		}
		ev.Raw = d.Delta
		if ev.Delta.Event == protocol.EventEntryAdded {
			var rec protocol.TranscriptRecord
			if err := json.Unmarshal(ev.Delta.Entry, &rec); err != nil {
				return ev, false, fmt.Errorf("decoding a transcript record: %w", err)
			}
			ev.Record = &rec
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if ev.Record != nil {
			if ev.Record.Seq <= s.last {
				return ev, false, nil
			}
			s.last = ev.Record.Seq
		}
		s.proj.Apply(ev.Delta)
		return ev, true, nil
	case protocol.KindSessionProjection:
		var p protocol.SessionProjectionFrame
		if err := f.Decode(&p); err != nil {
			return ev, false, fmt.Errorf("decoding a session projection: %w", err)
		}
		var snap protocol.SessionProjection
		if err := json.Unmarshal(p.Snapshot, &snap); err != nil {
			return ev, false, fmt.Errorf("decoding a session projection: %w", err)
		}
		ev.Snapshot = &snap
		s.mu.Lock()
		s.proj = protocol.NewProjector(snap)
		s.mu.Unlock()
		return ev, true, nil
	case protocol.KindRuntimeResourceUpdate:
		if !s.resources {
			return ev, false, nil
		}
		// The resource's shape is read leniently (docs/protocol.md): a
		// frame that does not read as one is skipped.
		var u protocol.RuntimeResourceUpdateFrame
		var r protocol.Resource
		if f.Decode(&u) != nil || json.Unmarshal(u.Resource, &r) != nil {
			return ev, false, nil
		}
		if r.Ref == "" {
			r.Ref = u.Ref
		}
		ev.Resource = &r
		return ev, true, nil
	case protocol.KindSubscriptionClosed:
		var cl protocol.SubscriptionClosedFrame
		if err := f.Decode(&cl); err != nil {
			return ev, false, fmt.Errorf("decoding a closed frame: %w", err)
		}
		return ev, false, s.end(&ClosedError{Reason: cl.Reason})
	}
	return ev, false, nil // a kind this client does not follow
}

// end records why the stream ended, the first reason winning, and
// returns it.
func (s *Session) end(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
	return s.err
}

// closeTimeout bounds the subscription.close that Close sends.
const closeTimeout = 5 * time.Second

// Close closes the subscription on the host and stops the stream. The
// connection stays open.
func (s *Session) Close() error {
	s.end(ErrClosed)
	err := s.c.closeSubscription(s.id)
	s.w.Close()
	if errors.Is(err, ErrNotFound) || s.c.Err() != nil {
		return nil // closed by the host, or with the connection
	}
	return err
}

func (c *Conn) closeSubscription(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_, err := Call(ctx, c, protocol.OpSubscriptionClose, protocol.SubscriptionRef{SubscriptionID: id})
	return err
}
