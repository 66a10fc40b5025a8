package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

// settleWait is how long a client whose request failed reads its stream
// for news of a lost connection or worker before it retries, when the
// stream stays open.
const settleWait = 250 * time.Millisecond

// sessionRun is one session's client: it runs turns one after another
// through a Follower, which reconnects across faults, and keeps what it
// saw for the checks.
type sessionRun struct {
	s  *Soak
	id string           // constant
	f  *client.Follower // constant; Next is for loop's goroutine alone

	mu       sync.Mutex
	seen     map[uint64]seenRecord           // guarded by mu: records received, by seq
	ends     map[string]protocol.TurnEndData // guarded by mu: turn ends received, by turn
	acked    []string                        // guarded by mu: turns whose start was acknowledged
	turns    []turnRun                       // guarded by mu: turns whose end was received
	faultAt  time.Time                       // guarded by mu: the fault not yet followed by a success
	longest  time.Duration                   // guarded by mu: longest wait from a fault to a success
	repeated []string                        // guarded by mu: records the stream brought twice, differently
}

// seenRecord is what a client received of a transcript record.
type seenRecord struct {
	typ, turn string
}

// turnRun is a turn as its client ran it.
type turnRun struct {
	id            string
	began, ended  time.Time // the first start request, and the end received
	status, cause string
}

func newSessionRun(s *Soak, id string, f *client.Follower) *sessionRun {
	return &sessionRun{s: s, id: id, f: f, seen: map[uint64]seenRecord{}, ends: map[string]protocol.TurnEndData{}}
}

// loop runs turns until the gate ends the soak.
func (r *sessionRun) loop(ctx context.Context) error {
	for n := 1; ; n++ {
		t, err := r.turn(ctx, fmt.Sprintf("soak-%d", n))
		if err != nil {
			return err
		}
		if end, err := r.s.gate.pass(ctx, t.began); end || err != nil {
			return err
		}
	}
}

// turn starts a turn, retrying its start until acknowledged, and follows
// the session until the turn's end record arrives.
func (r *sessionRun) turn(ctx context.Context, id string) (turnRun, error) {
	t := turnRun{id: id, began: time.Now()}
	tctx, cancel := context.WithTimeout(ctx, turnTimeout)
	defer cancel()
	in := protocol.TurnStartInput{SessionID: r.id, TurnID: id, Content: protocol.Content{Text: r.s.prompt}}
	for {
		_, err := client.Call(tctx, r.f.Conn(), protocol.OpTurnStart, in)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return t, context.Cause(ctx)
		}
		if tctx.Err() != nil || final(err) {
			return t, fmt.Errorf("session %s: starting turn %s: %w", r.id, id, err)
		}
		if err := r.settle(tctx); err != nil {
			return t, fmt.Errorf("session %s: starting turn %s: %w", r.id, id, err)
		}
	}
	r.progress()
	r.mu.Lock()
	r.acked = append(r.acked, id)
	r.mu.Unlock()
	for {
		r.mu.Lock()
		end, ok := r.ends[id]
		r.mu.Unlock()
		if ok {
			t.ended, t.status, t.cause = time.Now(), end.Status, end.Error
			break
		}
		ev, err := r.f.Next(tctx)
		if err != nil {
			if ctx.Err() != nil {
				return t, context.Cause(ctx)
			}
			return t, fmt.Errorf("session %s: waiting for turn %s to end: %w", r.id, id, err)
		}
		r.handle(ev)
	}
	r.mu.Lock()
	r.turns = append(r.turns, t)
	r.mu.Unlock()
	return t, nil
}

// final reports whether a request failed for a reason no retry changes.
func final(err error) bool {
	for _, e := range []error{client.ErrInvalidRequest, client.ErrNotFound, client.ErrSessionArchived,
		client.ErrSessionAmbiguous, client.ErrUnauthorized, client.ErrOperationUnavailable} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// settle reads the stream after a failed request, so that the follower
// notices a lost connection or worker and opens the stream again: until
// it has, or, while the stream stays open, for settleWait.
func (r *sessionRun) settle(ctx context.Context) error {
	for {
		var ev client.FollowEvent
		var err error
		if r.f.Session() != nil {
			wait, cancel := context.WithTimeout(ctx, settleWait)
			ev, err = r.f.Next(wait)
			cancel()
		} else {
			// Reopening, which may start a host, is never cut short.
			ev, err = r.f.Next(ctx)
		}
		switch {
		case err == nil:
			r.handle(ev)
			if ev.Reopened {
				return nil
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			return nil
		default:
			return err
		}
	}
}

// handle keeps what an event says: a record received, a turn's end.
func (r *sessionRun) handle(ev client.FollowEvent) {
	if ev.Lost != nil {
		return
	}
	r.progress()
	rec := ev.Record
	if rec == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	got := seenRecord{rec.Type, rec.TurnID}
	if was, ok := r.seen[rec.Seq]; ok && was != got {
		r.repeated = append(r.repeated, fmt.Sprintf("record %d came as %s of %q, then as %s of %q", rec.Seq, was.typ, was.turn, got.typ, got.turn))
	}
	r.seen[rec.Seq] = got
	if rec.Type == protocol.RecordTurnEnd {
		var d protocol.TurnEndData
		json.Unmarshal(rec.Data, &d)
		r.ends[rec.TurnID] = d
	}
}

// faulted starts the client's wait to resume, from a fault at at.
func (r *sessionRun) faulted(at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.faultAt.IsZero() {
		r.faultAt = at
	}
}

// progress ends the client's wait to resume: a request succeeded, or an
// event came.
func (r *sessionRun) progress() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.faultAt.IsZero() {
		r.longest = max(r.longest, time.Since(r.faultAt))
		r.faultAt = time.Time{}
	}
}

// view is what the client has seen, for a check.
type view struct {
	seen     map[uint64]seenRecord
	acked    []string
	turns    []turnRun
	longest  time.Duration
	repeated []string
}

func (r *sessionRun) view() view {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make(map[uint64]seenRecord, len(r.seen))
	for k, v := range r.seen {
		seen[k] = v
	}
	return view{seen: seen, acked: append([]string(nil), r.acked...), turns: append([]turnRun(nil), r.turns...), longest: r.longest, repeated: append([]string(nil), r.repeated...)}
}

// gate parks the sessions once each has completed a turn begun after a
// moment the driver chose, so that the transcripts are checked with
// nothing running, then lets them go on.
type gate struct {
	n int // constant: the sessions

	mu     sync.Mutex
	after  time.Time     // guarded by mu: park after a turn begun after this; zero when not asked
	parked int           // guarded by mu
	full   chan struct{} // guarded by mu: closed once all are parked
	free   chan struct{} // guarded by mu: closed to let them go
	end    bool          // guarded by mu: the soak ends as they go
}

func newGate(n int) *gate { return &gate{n: n} }

// shut asks each session to park after its next turn begun after after,
// and returns a channel closed once all have.
func (g *gate) shut(after time.Time) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.after, g.parked = after, 0
	g.full, g.free = make(chan struct{}), make(chan struct{})
	return g.full
}

// open lets the parked sessions go: on with their turns, or to their end.
func (g *gate) open(end bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.after, g.end = time.Time{}, end
	close(g.free)
}

// pass is called by a session after each turn, begun at began: it parks
// the session when asked, and reports whether the soak ends.
func (g *gate) pass(ctx context.Context, began time.Time) (end bool, err error) {
	g.mu.Lock()
	if g.after.IsZero() || began.Before(g.after) {
		g.mu.Unlock()
		return false, nil
	}
	g.parked++
	if g.parked == g.n {
		close(g.full)
	}
	free := g.free
	g.mu.Unlock()
	select {
	case <-free:
	case <-ctx.Done():
		return true, context.Cause(ctx)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.end, nil
}
