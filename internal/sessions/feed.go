package sessions

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/agentd-dev/agentd/internal/catalog"
	"github.com/agentd-dev/agentd/internal/fanout"
	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/protocol"
)

// openFeed opens the worker's one event stream: its projection now, then
// every delta. The host follows it for as long as the worker lives,
// whatever the number of subscribers.
func (w *worker) openFeed(ctx context.Context) (*link.Stream, error) {
	in := protocol.SubscriptionOpenInput{SessionID: w.sessionID, Transcript: protocol.TranscriptBootstrap{Kind: protocol.TranscriptNone}}
	open, err := link.Call(ctx, w.conn, protocol.OpSubscriptionOpen, in)
	if err != nil {
		return nil, fmt.Errorf("opening the worker's stream: %w", err)
	}
	var snap protocol.SessionProjection
	if err := json.Unmarshal(open.Snapshot, &snap); err != nil {
		return nil, fmt.Errorf("reading the worker's projection: %w", err)
	}
	snap.Session = w.s.withHeader(snap.Session)
	w.mu.Lock()
	w.proj = protocol.NewProjector(snap)
	w.busy = snap.Session.Status != protocol.SessionIdle
	w.live, w.ended = map[string]bool{}, map[string]bool{}
	w.mu.Unlock()
	w.s.listChanged(w.sessionID)
	w.feedID = open.SubscriptionID
	watch := w.conn.Stream(open.SubscriptionID)
	if _, err := link.Call(ctx, w.conn, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}); err != nil {
		watch.Close()
		return nil, fmt.Errorf("starting the worker's stream: %w", err)
	}
	return watch, nil
}

// follow reads the worker's stream until it ends: each delta is decoded
// once, applied to the host's copy of the projection, and handed, encoded
// once, to every subscriber.
func (w *worker) follow(watch *link.Stream) {
	defer watch.Close()
	// The stream is read to its end, which the worker's connection's end
	// brings, after the service closes as before.
	ctx := context.WithoutCancel(w.s.ctx)
	for {
		f, err := watch.Next(ctx)
		if err != nil {
			return
		}
		switch f.Kind {
		case protocol.KindSessionDelta:
		case protocol.KindRuntimeResourceUpdate, protocol.KindRuntimeResourcePtyData:
			if err := w.publishResource(f); err != nil {
				w.s.log.Error("a worker frame cannot be read", "session", w.sessionID, "kind", f.Kind, "err", err)
			}
			continue
		case protocol.KindSubscriptionClosed:
			w.s.log.Error("the worker closed the host's stream", "session", w.sessionID, "frame", string(f.Raw))
			continue
		default:
			continue
		}
		var frame protocol.SessionDeltaFrame
		var d protocol.SessionDelta
		if err := json.Unmarshal(f.Raw, &frame); err != nil {
			w.s.log.Error("a worker frame cannot be read", "session", w.sessionID, "err", err)
			continue
		}
		if err := json.Unmarshal(frame.Delta, &d); err != nil {
			w.s.log.Error("a worker delta cannot be read", "session", w.sessionID, "err", err)
			continue
		}
		w.publish(&d, frame.Delta)
	}
}

// publish applies one delta and fans it out.
func (w *worker) publish(d *protocol.SessionDelta, body []byte) {
	w.s.counters.deltas.Add(1)
	switch {
	case d.Event == protocol.EventSessionChanged && d.Session != nil:
		// The worker holds the session's status and settings, the
		// catalog the rest of its header (title, dates, revision), and
		// follows the settings.
		d.Session = ptr(w.s.keepSettings(*d.Session))
		body, _ = json.Marshal(d)
	case d.Event == protocol.EventRunStart:
		if _, err := w.s.cat.Touch(w.sessionID, time.Now()); err != nil {
			w.s.log.Warn("recording the session's activity", "session", w.sessionID, "err", err)
		}
	}
	w.s.counters.encodes.Add(1)
	it := newDeltaItem(body, d)
	w.mu.Lock()
	w.proj.Apply(*d)
	was, wasActive := w.busy, w.activeLocked()
	w.busy = w.proj.Session().Status != protocol.SessionIdle
	active := w.activeLocked()
	for sub := range w.subs {
		sub.push(it)
	}
	w.mu.Unlock()
	if active != wasActive {
		w.s.listChanged(w.sessionID)
	}
	if was && !w.busy {
		w.armIdle()
	}
}

func ptr[T any](v T) *T { return &v }

// withHeader is a worker's session with the catalog's header: its status
// and settings are the worker's.
func (s *Service) withHeader(sess protocol.Session) protocol.Session {
	h, err := s.cat.Get(sess.SessionID)
	if err != nil || h.Damaged {
		return sess
	}
	return sessionWith(h, sess)
}

// sessionWith is sess with the rest of its header from h.
func sessionWith(h catalog.Header, sess protocol.Session) protocol.Session {
	out := h.Session(sess.Status)
	if sess.Model != "" {
		out.Model = sess.Model
	}
	if sess.Thinking != "" {
		out.Thinking = sess.Thinking
	}
	if sess.Approval != "" {
		out.Approval = sess.Approval
	}
	return out
}

// keepSettings records in the catalog the settings a session's worker
// reports, where they changed, so a new worker starts with them, and
// returns the session with the catalog's header.
func (s *Service) keepSettings(sess protocol.Session) protocol.Session {
	h, err := s.cat.Get(sess.SessionID)
	if err != nil {
		return sess
	}
	set := func(what string, change func() (catalog.Header, error)) {
		next, err := change()
		if err != nil {
			s.log.Warn("recording the session's "+what, "session", sess.SessionID, "err", err)
			return
		}
		h = next
	}
	if sess.Model != "" && sess.Model != h.Model {
		set("model", func() (catalog.Header, error) { return s.cat.SetModel(h.ID, sess.Model) })
	}
	if sess.Thinking != "" && sess.Thinking != h.Thinking {
		set("thinking level", func() (catalog.Header, error) { return s.cat.SetThinking(h.ID, sess.Thinking) })
	}
	if sess.Approval != "" && sess.Approval != h.Approval {
		set("approval policy", func() (catalog.Header, error) { return s.cat.SetApproval(h.ID, sess.Approval) })
	}
	return sessionWith(h, sess)
}

// subscribe opens a subscription for c at the stream's present position:
// its snapshot is the projection now, and every later delta follows it.
func (w *worker) subscribe(c *clientConn, in *protocol.SubscriptionOpenInput) (*subscription, protocol.SessionProjection) {
	w.mu.Lock()
	defer w.mu.Unlock()
	snap := w.proj.Projection()
	sub := &subscription{
		id: w.sessionID + "." + w.s.host.Epoch()[:6] + "." + strconv.FormatUint(w.s.nextSub.Add(1), 10),
		c:  c, w: w, s: w.s, upTo: snap.TranscriptSequence, ended: make(chan struct{}), finished: make(chan struct{}), ptys: map[string]ptyState{},
		q: fanout.New[*pending](w.s.queueConfig(), &w.s.counters.queues),
	}
	if in.Transcript.Kind == protocol.TranscriptAfter {
		sub.after = &in.Transcript.Sequence
	}
	w.subs[sub] = struct{}{}
	if w.idle != nil {
		w.idle.Stop()
		w.idle = nil
	}
	return sub, snap
}

// dropSubscription forgets a closed subscription; the worker may idle.
func (w *worker) dropSubscription(sub *subscription) {
	w.mu.Lock()
	delete(w.subs, sub)
	watched := len(sub.ptys) > 0
	w.mu.Unlock()
	if watched {
		w.narrowInterest()
	}
	w.armIdle()
}

// endSubscriptions closes every subscription of the worker with reason,
// and returns them.
func (w *worker) endSubscriptions(reason string) []*subscription {
	w.mu.Lock()
	subs := make([]*subscription, 0, len(w.subs))
	for sub := range w.subs {
		subs = append(subs, sub)
	}
	w.mu.Unlock()
	for _, sub := range subs {
		sub.close(reason)
	}
	return subs
}

// closeWait bounds how long a host that drains or hands off waits for its
// subscriptions' closed frames to be queued, behind what each had waiting:
// a client that stopped reading does not hold the host.
const closeWait = 2 * time.Second

// awaitEnds waits until every started subscription of subs has queued its
// closed frame, or closeWait passed: the connections may close then, and
// their clients know why.
func awaitEnds(subs []*subscription) {
	deadline := time.NewTimer(closeWait)
	defer deadline.Stop()
	for _, sub := range subs {
		if !sub.started.Load() {
			continue
		}
		select {
		case <-sub.finished:
		case <-deadline.C:
			return
		}
	}
}
