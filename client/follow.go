package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/agentd-dev/agentd/protocol"
)

// DialFunc connects to the host serving a session: Open with the caller's
// options, say, which finds a replaced host and starts one when none runs.
type DialFunc func(ctx context.Context) (*Conn, error)

// FollowEvent is what a Follower's Next returns: an event of the session,
// or news of the stream itself.
type FollowEvent struct {
	SessionEvent
	// Lost is set when the stream ended and the follower is about to open
	// it again: why it ended.
	Lost error
	// Reopened is set when the stream was opened again; Snapshot holds the
	// projection it opened with, and the records after the last one seen
	// follow as entry_added events.
	Reopened bool
}

// Follower follows one session across lost connections, replaced hosts
// and exited workers: when its stream ends it dials again and reopens the
// stream after the last transcript record it has returned, so that, with
// a host that resumes streams, nothing is missed or repeated. It stops on
// a closing that reopening cannot undo: the session removed
// (ErrSessionRemoved), the host shut down (ErrHostShutDown: dialing again
// would start another). Next is for one goroutine; the other methods are
// safe for concurrent use.
type Follower struct {
	dial      DialFunc // constant
	sessionID string   // constant: the session's full id
	resources bool     // constant: SessionOptions.Resources

	mu     sync.Mutex
	conn   *Conn    // guarded by mu: the connection in use
	sess   *Session // guarded by mu: the stream in use; nil while lost
	last   uint64   // guarded by mu: the last transcript record returned
	closed bool     // guarded by mu
}

// Backoff bounds of a Follower's reconnection attempts.
const (
	followRetryMin = 20 * time.Millisecond
	followRetryMax = time.Second
)

// FollowSession dials and opens a stream of sessionID with opts, and returns a
// Follower for it. An error opening the first stream is returned as is.
func FollowSession(ctx context.Context, dial DialFunc, sessionID string, opts SessionOptions) (*Follower, error) {
	c, err := dial(ctx)
	if err != nil {
		return nil, err
	}
	s, err := c.OpenSession(ctx, sessionID, opts)
	if err != nil {
		c.Close()
		return nil, err
	}
	return Follow(dial, s), nil
}

// Follow returns a Follower of stream s, opened already (OpenSession),
// with the options it was opened with: a caller that opened it beside
// other requests. The Follower owns s and its connection from then on;
// dial serves its reopening.
func Follow(dial DialFunc, s *Session) *Follower {
	return &Follower{dial: dial, sessionID: s.SessionID(), resources: s.resources, conn: s.c, sess: s, last: s.LastRecord()}
}

// Session returns the stream in use, or nil while it is being reopened.
func (f *Follower) Session() *Session {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sess
}

// Conn returns the connection in use, for requests about the session. It
// may have ended; a request on it then fails at once.
func (f *Follower) Conn() *Conn {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.conn
}

// SessionID returns the followed session's id.
func (f *Follower) SessionID() string { return f.sessionID }

// LastRecord returns the last transcript record the follower has returned.
func (f *Follower) LastRecord() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// Next returns the next event. When the stream ends it returns an event
// with Lost set; the call after reconnects, retrying until ctx ends, and
// returns an event with Reopened set. It reports ctx's error first, and
// ends with the error of a closing reopening cannot undo.
func (f *Follower) Next(ctx context.Context) (FollowEvent, error) {
	f.mu.Lock()
	s, closed := f.sess, f.closed
	f.mu.Unlock()
	if closed {
		return FollowEvent{}, ErrClosed
	}
	if s == nil {
		return f.reopen(ctx)
	}
	ev, err := s.Next(ctx)
	if err == nil {
		f.mu.Lock()
		if ev.Record != nil {
			f.last = ev.Record.Seq
		}
		f.mu.Unlock()
		return FollowEvent{SessionEvent: ev}, nil
	}
	if ctx.Err() != nil {
		return FollowEvent{}, ctx.Err()
	}
	if s.c.Err() != nil && s.c.lostReason() == ReasonHostDraining {
		// The connection ended before the closed frame came, but the host
		// had said it was shutting down.
		err = &ClosedError{Reason: protocol.ClosedHostDraining}
	}
	if !reopenable(err) {
		return FollowEvent{}, err
	}
	f.mu.Lock()
	closed = f.closed
	if f.sess == s {
		f.sess = nil
	}
	f.mu.Unlock()
	if closed {
		return FollowEvent{}, ErrClosed
	}
	s.w.Close()
	return FollowEvent{Lost: err}, nil
}

// reopenable reports whether a stream that ended with err can be opened
// again: after a hand-off, a lost connection, a stream that fell behind or
// a worker that exited, but not after a shutdown or a removal.
func reopenable(err error) bool {
	var ce *ClosedError
	if errors.As(err, &ce) {
		switch ce.Reason {
		case protocol.ClosedWorkerExited, protocol.ClosedSlowConsumer, protocol.ClosedHostReplaced:
			return true
		}
		return false
	}
	return true // the connection ended, or the stream fell behind
}

// reopen opens the stream again, dialing again when the connection has
// ended, until it succeeds, ctx ends, or the host refuses for good.
func (f *Follower) reopen(ctx context.Context) (FollowEvent, error) {
	wait := followRetryMin
	for {
		f.mu.Lock()
		c, after := f.conn, f.last
		f.mu.Unlock()
		var err error
		if c == nil || c.Err() != nil {
			if c != nil {
				c.Close()
			}
			c, err = f.dial(ctx)
			if err == nil {
				f.mu.Lock()
				f.conn = c
				f.mu.Unlock()
			}
		}
		var s *Session
		if err == nil {
			s, err = c.OpenSession(ctx, f.sessionID, SessionOptions{Resume: true, After: after, Resources: f.resources})
		}
		if err == nil {
			f.mu.Lock()
			closed := f.closed
			if !closed {
				f.sess = s
			}
			f.mu.Unlock()
			if closed {
				s.Close()
				return FollowEvent{}, ErrClosed
			}
			snap := s.Snapshot()
			return FollowEvent{SessionEvent: SessionEvent{Snapshot: &snap}, Reopened: true}, nil
		}
		if ctx.Err() != nil {
			return FollowEvent{}, ctx.Err()
		}
		if final(err) {
			return FollowEvent{}, err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return FollowEvent{}, ctx.Err()
		}
		wait = min(2*wait, followRetryMax)
	}
}

// final reports whether reopening failed for a reason retrying cannot
// change.
func final(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalidRequest) ||
		errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrSessionAmbiguous)
}

// Close stops following: it closes the stream and the connection.
func (f *Follower) Close() error {
	f.mu.Lock()
	s, c := f.sess, f.conn
	f.closed, f.sess = true, nil
	f.mu.Unlock()
	if s != nil {
		s.Close()
	}
	if c != nil {
		c.Close()
	}
	return nil
}
