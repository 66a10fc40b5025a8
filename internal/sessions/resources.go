package sessions

import (
	"context"
	"encoding/json"
	"maps"
	"slices"

	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/internal/transport"
	"github.com/agentd-dev/agentd/protocol"
)

// A session's runtime resources live in its worker. The host forwards
// their operations (forward.go), fans their frames out, and chooses, for
// the worker's one stream, the PTYs any of its subscriptions chose.

// ptyState is where a subscription stands with a PTY it chose.
type ptyState int

const (
	// ptyAwaiting: the PTY's screen has not reached the subscription yet;
	// its output until then is in that screen, and its updates (its exit)
	// wait for it.
	ptyAwaiting ptyState = iota + 1
	// ptyStreaming: the subscription has the screen and gets the output.
	ptyStreaming
)

// learn records what the answer to a request op says of the worker's
// state before the request lets go of it: a resource the worker answers
// it started runs, though its update frame may not have reached the host
// yet, and the worker must not be stopped as idle meanwhile; unless the
// stream has already said it ended.
func (w *worker) learn(op string, out any) {
	raw, ok := out.(json.RawMessage)
	if !ok || op != string(protocol.OpRuntimeResourceStart) {
		return
	}
	var r protocol.Resource
	if json.Unmarshal(raw, &r) != nil || !holdsWorker(r) {
		return
	}
	w.mu.Lock()
	wasActive := w.activeLocked()
	if !w.ended[r.Ref] {
		w.live[r.Ref] = true
	}
	active := w.activeLocked()
	w.mu.Unlock()
	if active != wasActive {
		w.s.listChanged(w.sessionID)
	}
}

// holdsWorker reports whether r keeps its worker from idling: a command
// that runs. A service (an MCP server, with its Status) runs as long as
// its worker does, and holds nothing.
func holdsWorker(r protocol.Resource) bool {
	return r.State == protocol.ResourceRunning && r.Status == ""
}

// publishResource fans out a runtime resource frame of the worker's
// stream: a resource's state to every subscription (held by those
// awaiting the PTY's screen until it has gone out), a PTY's output to the
// subscriptions that chose the PTY (its screen to those awaiting it). It
// takes f: its bytes are given back once every subscription is done with
// them.
func (w *worker) publishResource(f link.Frame) error {
	kind := f.Kind
	it := &item{kind: kind}
	if kind == protocol.KindRuntimeResourceUpdate {
		var u protocol.RuntimeResourceUpdateFrame
		var r protocol.Resource
		if err := json.Unmarshal(f.Raw, &u); err != nil {
			return err
		}
		if err := json.Unmarshal(u.Resource, &r); err != nil {
			return err
		}
		it.body, _ = json.Marshal(u.RuntimeResourceUpdate)
		w.mu.Lock()
		wasActive := w.activeLocked()
		if holdsWorker(r) {
			w.live[r.Ref] = true
		} else if r.State != protocol.ResourceRunning {
			delete(w.live, r.Ref)
			w.ended[r.Ref] = true
		}
		active := w.activeLocked()
		for sub := range w.subs {
			sub.pushUpdateLocked(r.Ref, it)
		}
		w.mu.Unlock()
		if active != wasActive {
			w.s.listChanged(w.sessionID)
		}
		w.armIdle()
		return nil
	}
	// The output is passed on as the JSON the worker wrote, never
	// decoded: a PTY is the fastest writer a host relays.
	// The frame is the link's until its stream's next frame: the item
	// keeps a copy, given back once every subscription is done with it.
	raw := append(transport.GetBuffer(len(f.Raw)), f.Raw...)
	d, err := protocol.DecodePtyDataFields(raw)
	if err != nil {
		transport.PutBuffer(raw)
		return err
	}
	it.pty, it.raw = &d, raw
	if !d.Screen {
		it.stream = ptyStream(d.Ref)
	}
	it.refs.Store(1) // this call's, until every subscription has its own
	defer it.release()
	w.mu.Lock()
	defer w.mu.Unlock()
	for sub := range w.subs {
		switch st := sub.ptys[d.Ref]; {
		case d.Screen && st == ptyAwaiting:
			sub.ptys[d.Ref] = ptyStreaming
			sub.push(it)
			sub.releaseHeldLocked()
		case !d.Screen && st == ptyStreaming:
			// One that lags past its bound skips ahead to the screen.
			sub.push(it)
		}
	}
	return nil
}

// redraw asks the worker for a PTY's screen again, for the subscriptions
// awaiting it. Should the worker not send it (it refused, or failed to
// answer in time, while it runs on), those subscriptions end as too slow:
// without the screen the output they skipped is lost, and the PTY's
// exit they hold for it would wait for ever. A client opens again and
// starts from the screen as it is then.
func (w *worker) redraw(ref string) {
	w.interest.Lock()
	defer w.interest.Unlock()
	if slices.Contains(w.watched, ref) && w.chooseNow(w.watched, []string{ref}, "asking again for a PTY's screen") == nil {
		return
	}
	select {
	case <-w.exited: // its subscriptions end with it
		return
	case <-w.s.ctx.Done(): // the host closes them
		return
	default:
	}
	w.mu.Lock()
	var stranded []*subscription
	for sub := range w.subs {
		if sub.ptys[ref] == ptyAwaiting {
			stranded = append(stranded, sub)
		}
	}
	w.mu.Unlock()
	for _, sub := range stranded {
		sub.close(protocol.ClosedSlowConsumer)
	}
}

// choose sets the PTYs the worker's stream carries, and those whose
// screen it sends again. Called with w.interest held.
func (w *worker) choose(ctx context.Context, refs, redraw []string) error {
	fwd := protocol.PtyInterestInput{SubscriptionID: w.feedID, Refs: refs, Redraw: redraw}
	if _, err := link.Call(ctx, w.conn, protocol.OpSubscriptionPtyInterestSet, fwd); err != nil {
		return err
	}
	w.watched = refs
	return nil
}

// chooseNow is choose for the host's own ends, with no client waiting:
// a failure is logged as what, unless the worker has gone, and returned.
func (w *worker) chooseNow(refs, redraw []string, what string) error {
	ctx, cancel := context.WithTimeout(w.s.ctx, hostRequestTimeout)
	defer cancel()
	err := w.choose(ctx, refs, redraw)
	if err != nil {
		select {
		case <-w.exited: // the stream went with its worker
		case <-w.s.ctx.Done(): // the host closes
		default:
			w.s.log.Warn(what, "session", w.sessionID, "err", err)
		}
	}
	return err
}

// setPtyInterest chooses the PTYs whose output a subscription receives.
// Each newly chosen gets its screen first: the worker's stream carries
// every PTY some subscription chose, and sends a screen again for one a
// subscription chooses while others already watch it.
func (s *Service) setPtyInterest(ctx context.Context, call *server.Call, in *protocol.PtyInterestInput) (protocol.SubscriptionRef, error) {
	sub, err := subscriptionOf(call, in.SubscriptionID)
	if err != nil {
		return protocol.SubscriptionRef{}, err
	}
	if err := sub.w.choosePTYs(ctx, sub, in.Refs, in.Redraw); err != nil {
		return protocol.SubscriptionRef{}, err
	}
	return protocol.SubscriptionRef{SubscriptionID: in.SubscriptionID}, nil
}

// choosePTYs sets the PTYs whose output sub receives to refs, and sends
// it again the screens of those of redraw it had. On failure sub keeps
// its choice as it was.
func (w *worker) choosePTYs(ctx context.Context, sub *subscription, refs, redraw []string) error {
	w.interest.Lock()
	defer w.interest.Unlock()

	chosen := map[string]bool{}
	for _, ref := range refs {
		chosen[ref] = true
	}
	w.mu.Lock()
	var fresh []string
	for ref := range chosen {
		if sub.ptys[ref] == 0 || slices.Contains(redraw, ref) {
			fresh = append(fresh, ref)
		}
	}
	was := maps.Clone(sub.ptys)
	for ref := range sub.ptys {
		if !chosen[ref] {
			delete(sub.ptys, ref)
		}
	}
	for _, ref := range fresh {
		sub.ptys[ref] = ptyAwaiting
	}
	sub.releaseHeldLocked() // of the PTYs it let go
	watched := w.watchedLocked()
	w.mu.Unlock()

	// The worker sends a screen for a PTY its stream did not carry, and
	// for one carried already that this subscription newly chose.
	var again []string
	for _, ref := range fresh {
		if slices.Contains(w.watched, ref) {
			again = append(again, ref)
		}
	}
	if err := w.choose(ctx, watched, again); err != nil {
		w.mu.Lock()
		sub.ptys = was
		sub.releaseHeldLocked()
		w.mu.Unlock()
		return err
	}
	return nil
}

// narrowInterest stops the worker's stream carrying the PTYs no
// subscription watches any more.
func (w *worker) narrowInterest() {
	w.interest.Lock()
	defer w.interest.Unlock()
	w.mu.Lock()
	watched := w.watchedLocked()
	w.mu.Unlock()
	if !slices.Equal(watched, w.watched) {
		w.chooseNow(watched, nil, "narrowing the PTYs the worker's stream carries")
	}
}

// watchedLocked returns the PTYs some subscription chose, sorted.
func (w *worker) watchedLocked() []string {
	set := map[string]bool{}
	for sub := range w.subs {
		for ref := range sub.ptys {
			set[ref] = true
		}
	}
	out := make([]string, 0, len(set))
	for ref := range set {
		out = append(out, ref)
	}
	slices.Sort(out)
	return out
}

// controllerHeld is a PTY controller a client connection acquired: it is
// released when the connection closes.
type controllerHeld struct {
	caller protocol.Caller
	in     protocol.ControllerRef
}

// trackController remembers a controller call acquired, and forgets one
// it released.
func (s *Service) trackController(call *server.Call, in any, result json.RawMessage) {
	c, err := clientOf(call)
	if err != nil {
		return
	}
	switch call.Operation.Name {
	case string(protocol.OpRuntimeResourceControllerAcquire):
		ref := in.(*protocol.ResourceRef)
		var res protocol.ControllerAcquireResult
		if json.Unmarshal(result, &res) != nil {
			return
		}
		c.mu.Lock()
		c.controllers[res.ControllerID] = controllerHeld{call.Caller, protocol.ControllerRef{SessionID: ref.SessionID, Ref: ref.Ref, ControllerID: res.ControllerID}}
		c.mu.Unlock()
	case string(protocol.OpRuntimeResourceControllerRelease):
		ref := in.(*protocol.ControllerRef)
		c.mu.Lock()
		delete(c.controllers, ref.ControllerID)
		c.mu.Unlock()
	}
}

// releaseControllers releases what a closed connection controlled, in the
// workers that still run: a worker that exited took its PTYs with it.
func (s *Service) releaseControllers(held []controllerHeld) {
	for _, h := range held {
		s.mu.Lock()
		w := s.workers[h.in.SessionID]
		s.mu.Unlock()
		if w == nil {
			continue
		}
		s.wg.Go(func() {
			select {
			case <-w.ready:
			case <-w.exited:
				return
			}
			if w.startErr != nil {
				return
			}
			// A release the worker must hear whether or not the host
			// closes meanwhile: it may run on for the next host.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), hostRequestTimeout)
			defer cancel()
			if _, err := link.CallFor(ctx, w.conn, &h.caller, protocol.OpRuntimeResourceControllerRelease, h.in); err != nil {
				s.log.Warn("releasing a closed connection's PTY controller", "session", h.in.SessionID, "ref", h.in.Ref, "err", err)
			}
		})
	}
}

// resources lists every runtime resource of session sessionID on its
// worker, following the query's cursor to the last page.
func resources(ctx context.Context, c *link.Conn, sessionID string) ([]protocol.Resource, error) {
	var all []protocol.Resource
	in := protocol.ResourceQueryInput{SessionID: sessionID}
	for {
		page, err := link.Call(ctx, c, protocol.OpRuntimeResourceQuery, in)
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
