package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"

	"github.com/agentd-dev/agentd/protocol"
)

// Resources lists every runtime resource of session sessionID, following
// the query's cursor to the last page.
func (c *Conn) Resources(ctx context.Context, sessionID string) ([]protocol.Resource, error) {
	var all []protocol.Resource
	in := protocol.ResourceQueryInput{SessionID: sessionID}
	for {
		page, err := Call(ctx, c, protocol.OpRuntimeResourceQuery, in)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Resources...)
		if page.NextCursor == nil || *page.NextCursor == "" {
			return all, nil
		}
		rev := page.Revision
		in.Revision, in.Cursor = &rev, page.NextCursor
	}
}

// PTYEvent is one thing a PTYStream reports: output to show, or the PTY's
// changed state.
type PTYEvent struct {
	// Data is output, in order; Screen marks data that redraws the whole
	// screen as it is: the stream's first output, and its output again
	// wherever the stream fell behind. It is valid until the next call of
	// Next.
	Data   []byte
	Screen bool
	// Resource is set when the PTY's state changed: Resource.State is
	// protocol.ResourceExited once it has exited.
	Resource *protocol.Resource
}

// PTYStream is the output of one PTY, received through a subscription of
// its own that chose it: its screen first, then what it prints. A stream
// whose reader falls behind goes on from the PTY's screen, as an event
// with Screen set, never from output with a gap in it. Next is for one
// goroutine; Close may be called from any. Experimental.
type PTYStream struct {
	c            *Conn  // constant
	session, ref string // constant
	data         []byte // Next only: the last output Next returned
	// exit is the PTY's end, found as the stream reopened, to report
	// once the reopened stream's screen has been (awaiting until then);
	// told is set once the PTY's end was reported. Next only.
	exit     *protocol.Resource
	awaiting bool
	told     bool

	// direct is set for a stream of the PTY's worker (Controller.Direct),
	// which never reopens: c is then the connection to the worker, and
	// the stream's end is its client's cue to go on through the host.
	direct bool

	mu           sync.Mutex
	w            *Watcher // guarded by mu: the frames of subscription
	subscription string   // guarded by mu
	closed       bool     // guarded by mu
}

// WatchPTY opens a subscription of session sessionID that chooses PTY
// ref, in one call: the open chooses the PTY and starts the
// subscription's frames, the PTY's screen first. Its frames wait in a
// bounded watcher (see Watcher); one that fills reopens the stream from
// the PTY's screen. A ref that is not a PTY of the session is refused,
// and nothing stays open.
func (c *Conn) WatchPTY(ctx context.Context, sessionID, ref string) (*PTYStream, error) {
	in := protocol.SubscriptionOpenInput{SessionID: sessionID, Transcript: protocol.TranscriptBootstrap{Kind: protocol.TranscriptNone}, Ptys: []string{ref}}
	open, w, err := c.openWatched(ctx, in)
	if knowsNoOpenField(err, "ptys") {
		return c.watchPTYInCalls(ctx, sessionID, ref)
	}
	if err != nil {
		return nil, err
	}
	return &PTYStream{c: c, w: w, subscription: open.SubscriptionID, session: sessionID, ref: ref}, nil
}

// knowsNoOpenField reports whether err is the refusal of a host from
// before subscription.open took PTYs and ready: its strict decoding knows
// no field name of the open's input.
func knowsNoOpenField(err error, name string) bool {
	var re *RemoteError
	return errors.As(err, &re) && re.Code == protocol.CodeInvalidRequest &&
		strings.Contains(re.Message, `field "input.`+name+`": is not a known field`)
}

// watchPTYInCalls is WatchPTY on a host from before subscription.open
// took PTYs: the open, then the subscription readied and the PTY chosen
// at once (the host holds a subscription's frames until it is ready, so
// the PTY's screen comes first whichever of the two it takes first).
func (c *Conn) watchPTYInCalls(ctx context.Context, sessionID, ref string) (*PTYStream, error) {
	in := protocol.SubscriptionOpenInput{SessionID: sessionID, Transcript: protocol.TranscriptBootstrap{Kind: protocol.TranscriptNone}}
	open, err := Call(ctx, c, protocol.OpSubscriptionOpen, in)
	if err != nil {
		return nil, err
	}
	s := &PTYStream{c: c, w: c.Watch(open.SubscriptionID), subscription: open.SubscriptionID, session: sessionID, ref: ref}
	var readying sync.WaitGroup
	var readyErr error
	readying.Go(func() {
		_, readyErr = Call(ctx, c, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID})
	})
	_, err = Call(ctx, c, protocol.OpSubscriptionPtyInterestSet, protocol.PtyInterestInput{SubscriptionID: open.SubscriptionID, Refs: []string{ref}})
	readying.Wait()
	if readyErr != nil {
		err = readyErr
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Next returns the PTY's next output or state change. Frames of the
// session that are neither are skipped.
//
// A stream falls behind in two ways, and goes on from the PTY's screen
// after either. The host skips output its subscription lagged on, and
// sends the PTY's screen in its place (its fan-out's promise: a PTY's
// output is skipped whole, never cut). Or the reader leaves more frames
// waiting than the watcher holds (ErrWatcherSlow), or takes nothing for
// so long that the host closes the subscription as a slow consumer: the
// stream then reopens, and its first output is the screen.
func (s *PTYStream) Next(ctx context.Context) (PTYEvent, error) {
	if s.exit != nil && !s.awaiting {
		r := s.exit
		s.exit, s.told = nil, true
		return PTYEvent{Resource: r}, nil
	}
	for {
		s.mu.Lock()
		w := s.w
		s.mu.Unlock()
		f, err := w.Next(ctx)
		if errors.Is(err, ErrWatcherSlow) && !s.direct {
			if err := s.reopen(ctx); err != nil {
				return PTYEvent{}, err
			}
			continue
		}
		if err != nil {
			return PTYEvent{}, err
		}
		switch f.Kind {
		case protocol.KindRuntimeResourcePtyData:
			d, err := protocol.DecodePtyDataFields(f.Raw)
			if err != nil {
				return PTYEvent{}, fmt.Errorf("a PTY output frame: %w", err)
			}
			if d.Ref == s.ref {
				s.awaiting = s.awaiting && !d.Screen
				s.data = d.AppendData(s.data[:0])
				return PTYEvent{Data: s.data, Screen: d.Screen}, nil
			}
		case protocol.KindRuntimeResourceUpdate:
			var u protocol.RuntimeResourceUpdateFrame
			if err := f.Decode(&u); err != nil {
				return PTYEvent{}, fmt.Errorf("a resource update frame: %w", err)
			}
			if u.Ref != s.ref {
				continue
			}
			var r protocol.Resource
			if err := json.Unmarshal(u.Resource, &r); err != nil {
				return PTYEvent{}, fmt.Errorf("a resource update frame's resource: %w", err)
			}
			if r.State != protocol.ResourceRunning {
				if s.told {
					continue // reported as the stream reopened
				}
				s.exit, s.told = nil, true
			}
			return PTYEvent{Resource: &r}, nil
		case protocol.KindSubscriptionClosed:
			var cl protocol.SubscriptionClosedFrame
			f.Decode(&cl)
			if cl.Reason == protocol.ClosedSlowConsumer && !s.direct {
				if err := s.reopen(ctx); err != nil {
					return PTYEvent{}, err
				}
				continue
			}
			return PTYEvent{}, &ClosedError{Reason: cl.Reason}
		}
	}
}

// reopen replaces the stream's subscription, which fell behind, with one
// opened as WatchPTY opens one, whose first output is the PTY's screen as
// it is now. The PTY may have exited while no subscription of the stream
// carried its state: it is asked for, and an end not reported yet is
// reported after the screen.
func (s *PTYStream) reopen(ctx context.Context) error {
	s.mu.Lock()
	old, oldID := s.w, s.subscription
	s.mu.Unlock()
	old.Close()
	s.c.closeSubscription(oldID) // gone already when the host closed it
	fresh, err := s.c.WatchPTY(ctx, s.session, s.ref)
	if err != nil {
		return err
	}
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.w, s.subscription = fresh.w, fresh.subscription
	}
	s.mu.Unlock()
	if closed {
		fresh.Close()
		return ErrClosed
	}
	q, err := Call(ctx, s.c, protocol.OpRuntimeResourceQuery, protocol.ResourceQueryInput{SessionID: s.session, Ref: s.ref})
	if err != nil {
		return err
	}
	if len(q.Resources) == 1 && q.Resources[0].State != protocol.ResourceRunning && !s.told {
		s.exit, s.awaiting = &q.Resources[0], true
	}
	return nil
}

// Pause stops the PTY's output on the stream while its reader reads the
// PTY elsewhere (Controller.Direct): the subscription stays, and with it
// the PTY's state changes and the stream's end, for when Resume chooses
// the PTY again. Experimental.
func (s *PTYStream) Pause(ctx context.Context) error {
	return s.choose(ctx, nil)
}

// Resume chooses the PTY again on a stream Pause paused: its next output
// is the PTY's screen as it is now, then what it prints. Experimental.
func (s *PTYStream) Resume(ctx context.Context) error {
	return s.choose(ctx, []string{s.ref})
}

func (s *PTYStream) choose(ctx context.Context, refs []string) error {
	s.mu.Lock()
	id := s.subscription
	s.mu.Unlock()
	_, err := Call(ctx, s.c, protocol.OpSubscriptionPtyInterestSet, protocol.PtyInterestInput{SubscriptionID: id, Refs: refs, Redraw: refs})
	return err
}

// Close stops the stream and closes its subscription on the host.
func (s *PTYStream) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	w, id := s.w, s.subscription
	s.mu.Unlock()
	w.Close()
	if s.direct {
		s.c.Close()
		return
	}
	if s.c.Err() == nil {
		s.c.closeSubscription(id)
	}
}

// Controller is the control of one PTY, acquired by this connection: the
// only writer of its input and size while it lasts. Its calls carry
// sequences 1, 2, 3… in order; one call at a time. Experimental.
type Controller struct {
	c            *Conn
	session, ref string
	// Acquired is what acquiring answered: the PTY and its screen then.
	Acquired protocol.ControllerAcquireResult

	mu   sync.Mutex // held across a call, so sequences go in order
	next uint64     // guarded by mu
	// direct, when set, is the connection to the PTY's worker the calls
	// go through (Direct). Guarded by mu.
	direct *Conn
}

// AcquirePTY takes control of PTY ref of session sessionID. While another
// connection controls it, the error is ErrOperationConflict.
func (c *Conn) AcquirePTY(ctx context.Context, sessionID, ref string) (*Controller, error) {
	acquired, err := Call(ctx, c, protocol.OpRuntimeResourceControllerAcquire, protocol.ResourceRef{SessionID: sessionID, Ref: ref})
	if err != nil {
		return nil, err
	}
	return &Controller{c: c, session: sessionID, ref: ref, Acquired: acquired, next: acquired.NextSequence}, nil
}

// Control writes data to the PTY and, when cols and rows are not 0,
// resizes it. A call cut off by a lost connection may be sent again: the
// host answers a retry of the same sequence without writing twice.
func (ctl *Controller) Control(ctx context.Context, data []byte, cols, rows int) error {
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	in := protocol.ControlInput{SessionID: ctl.session, Ref: ctl.ref, ControllerID: ctl.Acquired.ControllerID, Sequence: ctl.next, Data: string(data), Cols: cols, Rows: rows}
	if ctl.direct != nil {
		if _, err := Call(ctx, ctl.direct, protocol.OpRuntimeResourceControllerControl, in); err == nil {
			ctl.next++
			return nil
		}
		// The worker's connection ended, or no longer carries the
		// controller: the call goes through the host, with its sequence,
		// which is answered again if the worker applied it.
		ctl.direct.Close()
		ctl.direct = nil
	}
	if _, err := Call(ctx, ctl.c, protocol.OpRuntimeResourceControllerControl, in); err != nil {
		return err
	}
	ctl.next++
	return nil
}

// LendTerminal lends the PTY's worker the client's terminal, on a stream
// Direct returned: in to read keys from and out to write to, each a
// description of the terminal opened for this (os.OpenFile of
// /proc/self/fd/N, say), which the worker makes nonblocking. The worker
// types the keys into the PTY, the keys before detachKey (one byte, or
// "" for none) and not it, and draws the PTY's screen and output on the
// terminal, with no process of the client's on the way of a key's echo;
// the stream meanwhile carries the PTY's state, not its output. The
// client neither reads nor writes the terminal until LendTerminal
// returns, and sets and restores its modes.
//
// It returns, with one of protocol.TerminalDetached,
// TerminalControlEnded, TerminalSlow and TerminalReturned, once the
// worker has given the terminal back: it reads and writes it no more.
// Whatever the reason, the stream then ends and the client goes on
// through the host, or leaves. ctx ending asks for the terminal back
// (the connection is half-closed: no call goes on it after) and the call
// still waits for the answer. An older worker's refusal is an error, as
// is a connection that is not a Unix socket's. Experimental.
func (s *PTYStream) LendTerminal(ctx context.Context, in, out *os.File, detachKey string) (string, error) {
	if !s.direct {
		return "", errors.New("a terminal is lent on a stream of the PTY's worker (Controller.Direct)")
	}
	stop := context.AfterFunc(ctx, func() {
		if uc, ok := s.c.nc.(*net.UnixConn); ok {
			uc.CloseWrite()
		}
	})
	defer stop()
	r, err := call(context.WithoutCancel(ctx), s.c, protocol.OpRuntimeResourceDirectTerminal, protocol.DirectTerminalInput{DetachKey: detachKey}, nil, []*os.File{in, out})
	return r.Reason, err
}

// Release gives control of the PTY up, and closes the connection to its
// worker Direct opened.
func (ctl *Controller) Release(ctx context.Context) error {
	_, err := Call(ctx, ctl.c, protocol.OpRuntimeResourceControllerRelease, protocol.ControllerRef{SessionID: ctl.session, Ref: ctl.ref, ControllerID: ctl.Acquired.ControllerID})
	ctl.mu.Lock()
	if ctl.direct != nil {
		ctl.direct.Close()
		ctl.direct = nil
	}
	ctl.mu.Unlock()
	return err
}

// Direct moves the controller's calls, and the PTY's output, to a
// connection of their own to the PTY's worker, without the host between,
// and returns the PTY's stream there: the screen first, then the PTY's
// output and state, as WatchPTY's. The host gives the way there only to
// the owner's connections of its socket (ErrUnauthorized otherwise).
//
// The calls keep their sequences: one that fails there goes through the
// host instead, from then on. The stream ends, a *ClosedError with
// protocol.ClosedAccessRevoked, once the control ends however it ends
// (the PTY's end reported first), or when its reader falls behind
// (protocol.ClosedSlowConsumer); it never reopens, and its reader goes on
// with a stream of the host (WatchPTY) in its place. Experimental.
func (ctl *Controller) Direct(ctx context.Context) (*PTYStream, error) {
	t, err := Call(ctx, ctl.c, protocol.OpRuntimeResourceControllerDirect, protocol.ControllerRef{SessionID: ctl.session, Ref: ctl.ref, ControllerID: ctl.Acquired.ControllerID})
	if err != nil {
		return nil, err
	}
	dc, err := dial(ctx, t.Endpoint, Options{}, t.CompositionID)
	if err != nil {
		return nil, err
	}
	w := &Watcher{c: dc, frames: make(chan Frame, watcherBuffer), gone: make(chan struct{})}
	open, err := call(ctx, dc, protocol.OpRuntimeResourceDirectOpen, protocol.DirectOpenInput{Ticket: t.Ticket}, func(resp protocol.Response) {
		var r struct {
			SubscriptionID string `json:"subscriptionId"`
		}
		if !resp.OK || json.Unmarshal(resp.Result, &r) != nil || r.SubscriptionID == "" {
			return
		}
		// Bound as the response is read, before the frames that follow it.
		dc.mu.Lock()
		defer dc.mu.Unlock()
		w.id = r.SubscriptionID
		if dc.err == nil {
			dc.watchers[w.id] = w
		}
	}, nil)
	if err == nil && (w.id == "" || w.id != open.SubscriptionID) {
		err = cmp.Or(dc.Err(), ErrClosed)
	}
	if err != nil {
		dc.Close()
		return nil, err
	}
	ctl.mu.Lock()
	old := ctl.direct
	ctl.direct = dc
	ctl.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return &PTYStream{c: dc, w: w, subscription: open.SubscriptionID, session: ctl.session, ref: ctl.ref, direct: true}, nil
}
