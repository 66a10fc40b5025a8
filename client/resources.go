package client

import (
	"context"
	"encoding/json"
	"fmt"
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
	// screen as it is (the stream's first output). It is valid until the
	// next call of Next.
	Data   []byte
	Screen bool
	// Resource is set when the PTY's state changed: Resource.State is
	// protocol.ResourceExited once it has exited.
	Resource *protocol.Resource
}

// PTYStream is the output of one PTY, received through a subscription of
// its own that chose it: its screen first, then what it prints, none
// missing. Experimental.
type PTYStream struct {
	c            *Conn
	w            *Watcher
	subscription string
	session, ref string
	data         []byte // the last output Next returned
}

// WatchPTY opens a subscription of session sessionID that chooses PTY
// ref. The stream never falls behind by dropping output: while its reader
// is slow, the connection waits (see Follow).
func (c *Conn) WatchPTY(ctx context.Context, sessionID, ref string) (*PTYStream, error) {
	in := protocol.SubscriptionOpenInput{SessionID: sessionID, Transcript: protocol.TranscriptBootstrap{Kind: protocol.TranscriptNone}}
	open, err := Call(ctx, c, protocol.OpSubscriptionOpen, in)
	if err != nil {
		return nil, err
	}
	s := &PTYStream{c: c, w: c.Follow(open.SubscriptionID), subscription: open.SubscriptionID, session: sessionID, ref: ref}
	// The subscription is readied and the PTY chosen at once: the host
	// holds a subscription's frames until it is ready, so the PTY's
	// screen comes first whichever of the two it takes first.
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
func (s *PTYStream) Next(ctx context.Context) (PTYEvent, error) {
	for {
		f, err := s.w.Next(ctx)
		if err != nil {
			return PTYEvent{}, err
		}
		switch f.Kind {
		case protocol.KindRuntimeResourcePtyData:
			d, err := protocol.DecodePtyDataFields(f.Raw)
			if err != nil {
				return PTYEvent{}, fmt.Errorf("a PTY output frame: %w", err)
			}
			mine := d.Ref == s.ref
			if mine {
				s.data = d.AppendData(s.data[:0])
			}
			f.Release() // d.Data shares its memory
			if mine {
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
			return PTYEvent{Resource: &r}, nil
		case protocol.KindSubscriptionClosed:
			var cl protocol.SubscriptionClosedFrame
			f.Decode(&cl)
			return PTYEvent{}, &ClosedError{Reason: cl.Reason}
		}
	}
}

// Close stops the stream and closes its subscription on the host.
func (s *PTYStream) Close() {
	s.w.Close()
	if s.c.Err() == nil {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		Call(ctx, s.c, protocol.OpSubscriptionClose, protocol.SubscriptionRef{SubscriptionID: s.subscription})
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
	if _, err := Call(ctx, ctl.c, protocol.OpRuntimeResourceControllerControl, in); err != nil {
		return err
	}
	ctl.next++
	return nil
}

// Release gives control of the PTY up.
func (ctl *Controller) Release(ctx context.Context) error {
	_, err := Call(ctx, ctl.c, protocol.OpRuntimeResourceControllerRelease, protocol.ControllerRef{SessionID: ctl.session, Ref: ctl.ref, ControllerID: ctl.Acquired.ControllerID})
	return err
}
