package worker

import (
	"context"
	"crypto/rand"
	"runtime"
	"runtime/debug"
	"slices"
	"time"

	"github.com/agentd-dev/agentd/internal/resource"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/internal/tools"
	"github.com/agentd-dev/agentd/internal/transport"
	"github.com/agentd-dev/agentd/protocol"
)

// The session's runtime resources: shell runs and PTYs its clients (and,
// later, its agent) start. The worker owns them; its subscriptions carry
// their changes as runtime_resource_update frames, and a PTY's output as
// runtime_resource_pty_data frames to the subscriptions that chose it.
//
// Lock order: the resource Manager's locks before session.mu. The Manager
// calls back into the session (admit, resourceChanged, ptyOutput) with its
// locks held, so the session never calls the Manager while holding mu.

// newResources returns the session's resource Manager, its output logs in
// dir.
func (s *session) newResources(dir string, env []string) *resource.Manager {
	return resource.New(resource.Config{
		SessionID: s.id, Dir: dir, Env: env, Sandbox: s.sandbox, Logger: s.logger,
		Admit: s.admitResource, OnUpdate: s.resourceChanged, OnOutput: s.ptyOutput,
		OnScreenSleep: s.screenSlept, OnControlEnd: s.controlEnded,
	})
}

// screenSlept gives the memory of the PTY screen models that fell asleep
// back to the system, a moment after the first of them: an idle worker
// allocates nothing, so Go would otherwise hold it for minutes.
func (s *session) screenSlept() {
	if s.freeing.CompareAndSwap(false, true) {
		time.AfterFunc(time.Second, func() {
			s.freeing.Store(false)
			debug.FreeOSMemory()
		})
	}
}

// admitResource answers the directory a resource starts in, read with the
// session's header: an archived session starts nothing.
func (s *session) admitResource() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.header.Archived {
		return "", protocol.Errorf(protocol.CodeSessionArchived, "session %s is archived: `agentd unarchive %s` makes it usable again", s.id, s.id)
	}
	return s.header.Cwd, nil
}

// resourceChanged tells every subscription of a resource's new state.
func (s *session) resourceChanged(r protocol.Resource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deliverLocked(func() *pendingDelta { return &pendingDelta{kind: itemResource, res: r} }, nil)
	if r.State == protocol.ResourceExited && s.checkIdle != nil {
		go s.checkIdle() // the worker may be idle now
	}
}

// ptyOutput passes a PTY's output to the subscriptions that chose it,
// then waits while one of them holds too much of it: the PTY is read no
// faster than its output goes out.
func (s *session) ptyOutput(ref string, seq uint64, data []byte) {
	quoted := protocol.AppendJSONString(transport.GetBuffer(len(data)+len(data)/8+2), data)
	s.mu.Lock()
	var watching []*subscription
	for _, sub := range s.subs {
		if sub.watches(ref) {
			watching = append(watching, sub)
		}
	}
	s.deliverLocked(ptyItems(ref, seq, quoted, false, len(watching)),
		func(sub *subscription) bool { return sub.watches(ref) })
	s.mu.Unlock()
	direct := false
	for _, sub := range watching {
		if sub.ptyOnly {
			direct = true
			if sub.pendingPTY() > maxPTYPending {
				s.slowDirect(sub)
			}
			continue
		}
		sub.waitPTYRoom(s.base.Done())
	}
	if direct {
		// The PTY's controller reads it on a connection to this worker:
		// its pump, readied by the delivery, writes the output (a key's
		// echo, most often) now, before this reader goes on to the
		// output's log. On the worker's one processor it would otherwise
		// wait for this goroutine to block.
		runtime.Gosched()
	}
}

// ptyItems returns the maker of a PTY's output items for the n
// subscriptions that carry it. quoted is the output as a JSON string, in
// a buffer from transport.GetBuffer: each item but the last is given a
// copy of its own, and the last quoted itself, which a subscription may
// then merge into another item and give back at once. With no
// subscription, quoted is given back now.
func ptyItems(ref string, seq uint64, quoted []byte, screen bool, n int) func() *pendingDelta {
	if n == 0 {
		transport.PutBuffer(quoted)
	}
	made, stream := 0, ""
	if !screen {
		stream = "pty " + ref // a screen starts the stream anew: a record
	}
	return func() *pendingDelta {
		data := quoted
		if made++; made < n {
			data = append(transport.GetBuffer(len(quoted)), quoted...)
		}
		return &pendingDelta{kind: itemPTY, stream: stream, ref: ref, ptySeq: seq, screen: screen, ptyData: data}
	}
}

func (s *session) queryResources(_ context.Context, _ *server.Call, in *protocol.ResourceQueryInput) (protocol.ResourceQueryResult, error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.ResourceQueryResult{}, err
	}
	return s.res.Query(*in)
}

func (s *session) startResource(_ context.Context, _ *server.Call, in *protocol.ResourceStartInput) (protocol.Resource, error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.Resource{}, err
	}
	return s.res.Start(resource.StartInput{
		LaunchID: in.LaunchID, Command: in.Command, PTY: in.PTY, Cols: in.Cols, Rows: in.Rows,
		Unsandboxed: in.Sandbox == protocol.SandboxFull,
	})
}

func (s *session) stopResource(_ context.Context, _ *server.Call, in *protocol.ResourceRef) (protocol.Resource, error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.Resource{}, err
	}
	return s.res.Stop(in.Ref)
}

// A PTY's controller is the end client's connection, as the host names it.

func (s *session) acquireController(_ context.Context, call *server.Call, in *protocol.ResourceRef) (protocol.ControllerAcquireResult, error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.ControllerAcquireResult{}, err
	}
	who := protocol.ResourceController{ConnectionID: call.Caller.ConnectionID, Surface: call.Caller.Surface, Principal: call.Caller.Principal}
	return s.res.Acquire(controllerOwner(call), who, in.Ref)
}

func (s *session) controlController(_ context.Context, call *server.Call, in *protocol.ControlInput) (protocol.ControlResult, error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.ControlResult{}, err
	}
	owner, err := s.controlOwner(call, in.Ref, in.ControllerID)
	if err != nil {
		return protocol.ControlResult{}, err
	}
	return s.res.Control(owner, *in)
}

func (s *session) releaseController(_ context.Context, call *server.Call, in *protocol.ControllerRef) (protocol.ResourceRef, error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.ResourceRef{}, err
	}
	owner, err := s.controlOwner(call, in.Ref, in.ControllerID)
	if err != nil {
		return protocol.ResourceRef{}, err
	}
	return protocol.ResourceRef{SessionID: in.SessionID, Ref: in.Ref}, s.res.Release(owner, in.Ref, in.ControllerID)
}

// setPtyInterest chooses the PTYs whose output a subscription carries.
// Each PTY newly chosen, or named in Redraw, first gets its screen as it is
// now, marked as one, then its output from there on.
//
// The screens are drawn once the call is answered: drawing one takes the
// worker's processor for a while (taking in the output since the model's
// last feed, then rendering every cell), and a client attaching to a PTY
// waits for both the answer and the screen, which the host passes on as
// they come (a subscription awaits a PTY's screen before its output).
func (s *session) setPtyInterest(_ context.Context, call *server.Call, in *protocol.PtyInterestInput) (protocol.SubscriptionRef, error) {
	s.mu.Lock()
	sub, ok := s.subs[in.SubscriptionID]
	s.mu.Unlock()
	if !ok {
		return protocol.SubscriptionRef{}, protocol.Errorf(protocol.CodeNotFound, "no subscription %q", in.SubscriptionID)
	}
	chosen := map[string]bool{}
	for _, ref := range in.Refs {
		chosen[ref] = true
	}
	for _, ref := range in.Redraw {
		if !chosen[ref] {
			return protocol.SubscriptionRef{}, protocol.InvalidField("input.redraw", "names %s, which input.refs does not", ref)
		}
	}
	for ref := range chosen {
		r, err := s.res.Get(ref)
		if err != nil {
			return protocol.SubscriptionRef{}, err
		}
		if r.Kind != protocol.ResourcePTY {
			return protocol.SubscriptionRef{}, protocol.InvalidField("input.refs", "%s is a shell run: only a PTY's output streams", ref)
		}
	}
	s.mu.Lock()
	for ref := range sub.ptys {
		if !chosen[ref] {
			delete(sub.ptys, ref)
		}
	}
	sub.choice++
	choice := sub.choice
	var draw []string
	for _, ref := range in.Refs {
		if !sub.ptys[ref] || slices.Contains(in.Redraw, ref) {
			draw = append(draw, ref)
		}
	}
	s.mu.Unlock()
	if len(draw) > 0 {
		call.AfterResponse(func() { s.draws.Go(func() { s.sendScreens(sub, choice, draw) }) })
	}
	return protocol.SubscriptionRef{SubscriptionID: in.SubscriptionID}, nil
}

// sendScreens queues for sub the screens of PTYs refs, which its PTY
// choice numbered choice asked for, each followed by the PTY's output. A
// later choice draws the screens it asks for itself: those of an earlier
// one are not sent.
func (s *session) sendScreens(sub *subscription, choice uint64, refs []string) {
	for _, ref := range refs {
		// The screen is queued with the PTY's output held back, so the
		// output after it follows it, none missing.
		err := s.res.Screen(ref, func(screen string, seq uint64) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if sub.choice != choice {
				return
			}
			sub.ptys[ref] = true
			quoted := protocol.AppendJSONString(transport.GetBuffer(len(screen)+len(screen)/8+2), screen)
			s.deliverLocked(ptyItems(ref, seq, quoted, true, 1),
				func(other *subscription) bool { return other == sub })
		})
		if err != nil {
			// The PTY was looked up as the call was answered: a screen
			// model is never taken from a PTY.
			s.logger.Warn("drawing a PTY's screen for a subscription", "ref", ref, "subscription", sub.id, "err", err)
		}
	}
}

// background is the agent's side of the session's resources: the runs
// bash starts with background true, and what bash_output and bash_stop
// read and stop. Its calls come from a turn's tools, never with mu held.
type background struct{ s *session }

func (b background) Start(command string, pty bool) (protocol.Resource, error) {
	return b.s.res.Start(resource.StartInput{LaunchID: b.launch(), Command: command, PTY: pty})
}

func (b background) Run(command string, output func([]byte)) (protocol.Resource, <-chan struct{}, error) {
	return b.s.res.Run(resource.StartInput{LaunchID: b.launch(), Command: command}, output)
}

// launch returns a launch id for a command of the agent's: unique across
// the session's workers too, whose launches the records keep.
func (b background) launch() string {
	return "agent-" + rand.Text()
}

func (b background) Read(ref string) (tools.BackgroundRun, error) {
	r, err := b.s.res.Get(ref)
	if err != nil {
		return tools.BackgroundRun{}, err
	}
	run := tools.BackgroundRun{Resource: r, Log: b.s.res.LogPath(ref)}
	if r.Kind == protocol.ResourcePTY {
		run.Output, err = b.s.res.ScreenText(ref)
		return run, err
	}
	out, dropped, err := b.s.res.Output(ref)
	run.Output, run.Dropped = string(out), dropped
	return run, err
}

func (b background) Stop(ref string) (protocol.Resource, error) { return b.s.res.Stop(ref) }
