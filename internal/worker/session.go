package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd-dev/agentd/internal/agent"
	"github.com/agentd-dev/agentd/internal/fanout"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/mcp"
	"github.com/agentd-dev/agentd/internal/redact"
	"github.com/agentd-dev/agentd/internal/resource"
	"github.com/agentd-dev/agentd/internal/sandbox"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/internal/tools"
	"github.com/agentd-dev/agentd/internal/transcript"
	"github.com/agentd-dev/agentd/protocol"
)

// turn is one run of the agent loop. A turn recovered from the transcript
// has no loop: it ran in an earlier worker.
type turn struct {
	snap    protocol.TurnSnapshot // guarded by session.mu
	usage   llm.Usage             // guarded by session.mu: the model calls' so far
	calls   int                   // guarded by session.mu: the model calls made so far
	window  int                   // guarded by session.mu: the model's context window, once described
	context int                   // guarded by session.mu: the tokens the last call that reported usage saw
	loop    *agent.Loop           // constant once started; nil when recovered
	cancel  context.CancelFunc    // constant once started; nil when recovered
	done    chan struct{}
}

// runningLocked reports whether t runs in this worker now.
func (t *turn) runningLocked() bool { return t.loop != nil && t.snap.Status == protocol.TurnRunning }

// interaction is a tool call waiting for a person's answer.
type interaction struct {
	info   protocol.Interaction // guarded by session.mu
	turnID string               // constant
	answer chan string          // buffered 1; the first answer wins
}

// session is the live state of the worker's one session. One mutex guards
// everything mutable; every change is emitted to subscribers under it, so
// they see changes in the order they happened.
type session struct {
	id        string            // constant
	epoch     string            // constant: the worker's epoch
	log       *transcript.Log   // constant; safe for concurrent use
	providers ProviderResolver  // constant
	tools     []tools.Tool      // constant
	toolEnv   func() []string   // constant; nil: the worker's environment
	sandbox   *sandbox.Policy   // constant; nil: commands run unsandboxed
	system    string            // constant
	logger    *slog.Logger      // constant
	todo      *tools.Todo       // constant; safe for concurrent use
	res       *resource.Manager // constant: the session's shell runs and PTYs; never called with mu held
	mcp       *mcp.Servers      // constant: the session's MCP servers; never called with mu held
	closeNets func()            // constant: releases the MCP servers' sandbox with the network on
	reloads   mcpReloads        // serialises changes of the MCP servers while the worker runs
	freeing   atomic.Bool       // memory of slept screens is about to go back to the system
	runs      sync.WaitGroup    // turn goroutines
	pumps     sync.WaitGroup    // subscription deliveries waiting for their batch
	draws     sync.WaitGroup    // PTY screens drawn for subscriptions once their call is answered
	fanout    fanout.Counters   // what the subscriptions' queues merged, skipped and evicted
	base      context.Context   // cancelled when the worker stops
	checkIdle func()            // constant once serving: the host's CheckIdle
	homeDir   string            // constant: the home the worker registers in
	plugins   *packages         // constant: the session's plugin packages; safe for concurrent use
	endpoint  string            // constant: where the worker listens
	direct    directs           // tickets to the worker's PTYs, and the connections they bound
	header    protocol.Session  // guarded by mu: with the session's model, thinking and approval policy

	mu       sync.Mutex
	history  []llm.Message                  // guarded by mu
	turns    map[string]*turn               // guarded by mu: every turn of this worker's life
	current  *turn                          // guarded by mu: the running turn
	queue    protocol.Queue                 // guarded by mu
	taken    []protocol.QueueEntry          // guarded by mu: steering handed to the loop, not yet recorded
	pending  map[string]*interaction        // guarded by mu
	live     *protocol.Projector            // guarded by mu: every delta emitted, for what streams now
	subs     map[string]*subscription       // guarded by mu
	nextSub  int                            // guarded by mu
	nextID   int                            // guarded by mu: interaction and entry ids
	lastTurn *protocol.TurnSnapshot         // guarded by mu: the latest turn, recovered ones included
	claimed  bool                           // guarded by mu: a host has attached
	host     *connection                    // guarded by mu: the latest host connection
	reg      home.WorkerRegistration        // guarded by mu: the worker's registration, once serving
	messages map[string]protocol.QueueEntry // guarded by mu: submitted messages by id, as they stand
	allowed  map[string]bool                // guarded by mu: tools a person allowed for the rest of the session

	defaultCompactAt int     // constant: the host's compaction threshold, percent; 0 for protocol.DefaultCompactAt
	compactAt        int     // guarded by mu: the session's own threshold, percent; 0 for the default
	compacting       bool    // guarded by mu: a compaction a person asked for runs; turns wait
	usageTokens      int     // guarded by mu: the tokens of the conversation up to history[usageAt], as reported
	usageAt          int     // guarded by mu: 0 when no reported usage measures the conversation
	tokenRatio       float64 // guarded by mu: the provider's last count over the bytes/4 estimate; 0 before one
	lastFixed        int     // guarded by mu: the bytes of the last request's system prompt and tools
}

// ProviderResolver finds the provider of a "provider/model" spec.
type ProviderResolver interface {
	Resolve(spec string) (llm.Provider, string, error)
}

func (s *session) handlers() server.Table {
	t := server.Table{}
	server.Handle(t, protocol.OpTurnStart, s.startTurn)
	server.Handle(t, protocol.OpTurnQuery, s.queryTurn)
	server.Handle(t, protocol.OpTurnStop, s.stopTurn)
	server.Handle(t, protocol.OpTurnInterrupt, s.interruptTurn)
	server.Handle(t, protocol.OpTurnMessageSubmit, s.submitMessage)
	server.Handle(t, protocol.OpQueueRetract, s.retract)
	server.Handle(t, protocol.OpInteractionQuery, s.queryInteractions)
	server.Handle(t, protocol.OpInteractionAnswer, s.answerInteraction)
	server.Handle(t, protocol.OpSessionTodoQuery, s.queryTodo)
	server.Handle(t, protocol.OpSessionMCPList, s.listMCP)
	server.Handle(t, protocol.OpSessionToolCall, s.callTool)
	server.Handle(t, protocol.OpSessionMCPSet, s.setMCP)
	server.Handle(t, protocol.OpSessionTranscriptPage, s.pageTranscript)
	server.Handle(t, protocol.OpModelsSelect, s.selectModel)
	server.Handle(t, protocol.OpModelsThinkingSet, s.setThinking)
	server.Handle(t, protocol.OpSessionGet, s.getSession)
	server.Handle(t, protocol.OpSessionCompact, s.compactNow)
	server.Handle(t, protocol.OpSessionCompactionSet, s.setCompaction)
	server.Handle(t, protocol.OpSessionCommands, s.listCommands)
	server.Handle(t, protocol.OpSessionCommandExpand, s.expandCommand)
	server.Handle(t, protocol.OpSessionPluginsSet, s.setPlugins)
	server.Handle(t, protocol.OpSubscriptionOpen, s.openSubscription)
	server.Handle(t, protocol.OpSubscriptionReady, s.readySubscription)
	server.Handle(t, protocol.OpSubscriptionClose, s.closeSubscription)
	server.Handle(t, protocol.OpSubscriptionPtyInterestSet, s.setPtyInterest)
	server.Handle(t, protocol.OpRuntimeResourceQuery, s.queryResources)
	server.Handle(t, protocol.OpRuntimeResourceStart, s.startResource)
	server.Handle(t, protocol.OpRuntimeResourceStop, s.stopResource)
	server.Handle(t, protocol.OpRuntimeResourceControllerAcquire, s.acquireController)
	server.Handle(t, protocol.OpRuntimeResourceControllerControl, s.controlController)
	server.Handle(t, protocol.OpRuntimeResourceControllerRelease, s.releaseController)
	server.Handle(t, protocol.OpRuntimeResourceControllerDirect, s.giveTicket)
	server.Handle(t, protocol.OpRuntimeResourceDirectOpen, s.openDirect)
	server.Handle(t, protocol.OpRuntimeResourceDirectTerminal, s.lendTerminal)
	return t
}

func (s *session) checkSession(id string) error {
	if id != s.id {
		return protocol.Errorf(protocol.CodeNotFound, "this worker serves session %s, not %s", s.id, id)
	}
	return nil
}

// projectionLocked returns the session's live state.
func (s *session) projectionLocked() protocol.SessionProjection {
	p := protocol.SessionProjection{
		Session:            s.sessionLocked(),
		Queue:              cloneQueue(s.queue),
		Interactions:       []protocol.Interaction{},
		Todo:               append([]protocol.TodoItem{}, s.todo.Items()...),
		TranscriptSequence: s.log.Last(),
	}
	// Messages streaming and tool calls running are as the deltas said.
	live := s.live.Projection()
	p.Streams, p.ToolCalls = live.Streams, live.ToolCalls
	if s.lastTurn != nil {
		t := *s.lastTurn
		p.RootTurn = &t
	}
	for _, in := range s.pending {
		p.Interactions = append(p.Interactions, in.info)
	}
	return p
}

func (s *session) sessionLocked() protocol.Session {
	h := s.header
	switch {
	case len(s.pending) > 0:
		h.Status = protocol.SessionWaiting
	case s.current != nil:
		h.Status = protocol.SessionRunning
	default:
		h.Status = protocol.SessionIdle
	}
	return h
}

func cloneQueue(q protocol.Queue) protocol.Queue {
	return protocol.Queue{
		Steering: append([]protocol.QueueEntry{}, q.Steering...),
		FollowUp: append([]protocol.QueueEntry{}, q.FollowUp...),
	}
}

func (s *session) getSession(_ context.Context, _ *server.Call, in *protocol.SessionRef) (protocol.Session, error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.Session{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessionLocked(), nil
}

func (s *session) startTurn(_ context.Context, _ *server.Call, in *protocol.TurnStartInput) (_ protocol.TurnStartResult, err error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.TurnStartResult{}, err
	}
	defer s.syncAfter(&err)
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.turns[in.TurnID]; ok {
		return protocol.TurnStartResult{Kind: "existing", Turn: t.snap}, nil
	}
	if s.current != nil {
		return protocol.TurnStartResult{}, protocol.Errorf(protocol.CodeOperationConflict,
			"turn %s is running; submit the message with placement %q or %q", s.current.snap.TurnID, protocol.PlacementSteering, protocol.PlacementNextTurn)
	}
	if s.compacting {
		return protocol.TurnStartResult{}, protocol.Errorf(protocol.CodeOperationConflict,
			"the session is compacting; submit the message with placement %q to have it start the next turn", protocol.PlacementNextTurn)
	}
	if in.Approval != "" {
		s.header.Approval = in.Approval
	}
	t, err := s.beginTurnLocked(in.TurnID, "", in.Content.Text)
	if err != nil {
		return protocol.TurnStartResult{}, err
	}
	return protocol.TurnStartResult{Kind: "started", Turn: t.snap}, nil
}

// beginTurnLocked records and starts a turn for text, the content of the
// submitted message messageID when there is one.
func (s *session) beginTurnLocked(turnID, messageID, text string) (*turn, error) {
	prov, model, err := s.providers.Resolve(s.header.Model)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeOperationUnavailable, "%v", err)
	}
	runID := "run-" + turnID
	// The project's instructions are read at each turn's start, so an
	// edit counts from the next turn. They are small and bounded, and read
	// under mu so that the turn's records stay in order.
	instructions, err := agent.LoadInstructions(s.header.Cwd, 0)
	if err != nil {
		s.logger.Warn("a project instruction file was left out", "err", err)
	}
	if _, err := s.appendLocked(protocol.RecordTurnStart, turnID, protocol.TurnStartData{
		RunID: runID, Text: text, Model: s.header.Model, MessageID: messageID, Instructions: instructionRecords(instructions),
	}); err != nil {
		return nil, s.transcriptFailure(err)
	}
	if _, err := s.appendLocked(protocol.RecordUserMessage, turnID, protocol.UserMessageData{Text: text}); err != nil {
		return nil, s.transcriptFailure(err)
	}
	s.history = append(s.history, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText, Text: text}}})
	ctx, cancel := context.WithCancel(s.base)
	t := &turn{
		snap:   protocol.TurnSnapshot{SessionID: s.id, TurnID: turnID, RunID: runID, Status: protocol.TurnRunning},
		cancel: cancel,
		done:   make(chan struct{}),
	}
	turnTools, skills := s.turnTools()
	t.loop = &agent.Loop{
		Provider: prov, Model: model, Thinking: s.header.Thinking, System: agent.SystemPrompt(s.system, instructions) + skills, Tools: turnTools,
		Env: &tools.Env{Cwd: s.header.Cwd, Todo: s.todo, Environ: s.turnEnviron(), Sandbox: s.sandbox, Background: background{s},
			Changed: func(c tools.FileChange) { s.recordChange(t, c) }},
		Approve: func(ctx context.Context, call llm.ToolCall, tool tools.Tool) (agent.Decision, error) {
			return s.approve(ctx, t, call, tool)
		},
		Steering: s.takeSteering,
		Compact:  func(ctx context.Context, req llm.Request) []llm.Message { return s.autoCompact(ctx, t, prov, req) },
		Emit:     func(e agent.Event) { s.onAgentEvent(t, e) },
		Commit:   func(m llm.Message) error { return s.commit(t, m) },
	}
	s.turns[turnID] = t
	s.current = t
	snap := t.snap
	s.lastTurn = &snap
	s.emitLocked(protocol.SessionDelta{Event: protocol.EventRunStart, TurnID: turnID, Turn: &snap})
	s.emitLocked(protocol.SessionDelta{Event: protocol.EventSessionChanged, Session: ptr(s.sessionLocked())})
	history := append([]llm.Message(nil), s.history[:len(s.history)-1]...)
	first := s.history[len(s.history)-1]
	s.runs.Go(func() { s.runTurn(ctx, t, append(history, first)) })
	return t, nil
}

// turnEnviron is the environment a turn's tools run commands with; nil
// means the worker's own.
func (s *session) turnEnviron() []string {
	if s.toolEnv == nil {
		return nil
	}
	return s.toolEnv()
}

func ptr[T any](v T) *T { return &v }

// appendLocked appends a record to the transcript and tells subscribers:
// the entry_added deltas are the transcript, record for record.
func (s *session) appendLocked(typ, turnID string, data any) (transcript.Record, error) {
	// No key the worker holds reaches the transcript (a command that
	// printed one, a model that repeated one).
	raw, err := json.Marshal(data)
	if err != nil {
		return transcript.Record{}, err
	}
	rec, err := s.log.Append(typ, turnID, json.RawMessage(redact.Bytes(raw)))
	if err != nil {
		return rec, err
	}
	entry, err := json.Marshal(rec)
	if err != nil {
		return rec, err
	}
	s.emitLocked(protocol.SessionDelta{Event: protocol.EventEntryAdded, TurnID: turnID, Entry: entry})
	return rec, nil
}

// syncAfter makes what a command appended to the transcript durable before
// the command is acknowledged, once it has let go of mu: queries, answers
// and deltas do not wait on the disk. Deferred before mu is taken, it runs
// after mu is released.
func (s *session) syncAfter(err *error) {
	if *err != nil {
		return
	}
	if serr := s.log.Sync(); serr != nil {
		*err = s.transcriptFailure(serr)
	}
}

func (s *session) transcriptFailure(err error) error {
	s.logger.Error("transcript write failed", "err", err)
	return protocol.Errorf(protocol.CodeInternalFailure, "the session's transcript cannot be written: %v", err)
}

// runTurn runs the loop and records how the turn ended; a queued
// follow-up then starts the next turn.
func (s *session) runTurn(ctx context.Context, t *turn, history []llm.Message) {
	defer s.fellIdle() // last, once the turn is done
	defer close(t.done)
	defer t.cancel()
	// The MCP servers' tools as they are now, once those still starting
	// have started (or failed), join the turn's own (the worker's and the
	// skill tool): a changed list counts from the next turn.
	t.loop.Tools = append(slices.Clip(t.loop.Tools), s.mcp.Tools(ctx)...)
	outcome, err := t.loop.Run(ctx, history)
	status, cause := outcome, ""
	if err != nil {
		status, cause = protocol.TurnFailed, err.Error()
	}
	if s.base.Err() != nil && status != protocol.TurnCompleted {
		status, cause = protocol.TurnInterrupted, "the worker stopped"
	}
	s.mu.Lock()
	s.cancelInteractionsLocked(t)
	s.taken = nil // a turn that failed may not have recorded all it took
	_, werr := s.appendLocked(protocol.RecordTurnEnd, t.snap.TurnID, protocol.TurnEndData{Status: status, Error: cause, Usage: t.snap.Usage})
	s.mu.Unlock()
	if werr == nil {
		werr = s.log.Sync() // outside mu: nothing waits on the disk but this turn
	}
	s.mu.Lock()
	if werr != nil {
		s.logger.Error("recording the end of a turn", "turn", t.snap.TurnID, "err", werr)
		if status != protocol.TurnFailed {
			status, cause = protocol.TurnFailed, fmt.Sprintf("the transcript cannot be written: %v", werr)
		}
	}
	t.snap.Status, t.snap.Error = status, cause
	snap := t.snap
	s.lastTurn = &snap
	s.current = nil
	s.emitLocked(protocol.SessionDelta{Event: protocol.EventRunEnd, TurnID: snap.TurnID, Turn: &snap})
	s.emitLocked(protocol.SessionDelta{Event: protocol.EventSessionChanged, Session: ptr(s.sessionLocked())})
	s.leadWithSteeringLocked()
	s.startQueuedLocked()
	s.mu.Unlock()
	// A queued message's turn started: its records are made durable.
	if err := s.log.Sync(); err != nil {
		s.logger.Error("recording the start of a queued turn", "err", err)
	}
}

// startQueuedLocked starts the turn of the oldest message queued for the
// next turn, unless none is or the worker is stopping. While the session's
// model cannot run (its provider is not configured), the messages stay
// queued: the end of the next turn tries again.
func (s *session) startQueuedLocked() {
	if s.base.Err() != nil || len(s.queue.FollowUp) == 0 {
		return
	}
	next := s.queue.FollowUp[0]
	if _, _, err := s.providers.Resolve(s.header.Model); err != nil {
		s.logger.Warn("a queued message waits: the session's model cannot run", "message", next.MessageID, "err", err)
		return
	}
	s.queue.FollowUp = s.queue.FollowUp[1:]
	next.State = protocol.QueueDelivered
	s.messages[next.MessageID] = next
	s.emitLocked(protocol.SessionDelta{Event: protocol.EventQueueChanged, Queue: ptr(cloneQueue(s.queue))})
	if _, err := s.beginTurnLocked(protocol.MessageTurnID(next.MessageID), next.MessageID, next.Content.Text); err != nil {
		s.logger.Error("starting a queued turn", "message", next.MessageID, "err", err)
	}
}

// leadWithSteeringLocked puts steering that came too late for a turn at the
// head of the next-turn queue: it leads the next turn.
func (s *session) leadWithSteeringLocked() {
	if len(s.queue.Steering) > 0 {
		s.queue.FollowUp = append(s.queue.Steering, s.queue.FollowUp...)
		s.queue.Steering = nil
	}
}

// fellIdle runs when a turn has ended. If no other turn runs, the worker
// hands the memory its turns used back to the system — an idle worker
// waits, perhaps for hours, and the runtime would otherwise keep the pages
// of a turn's garbage for itself, at the cost of one collection of a small
// heap — and its host looks at whether it is idle: an orphan, with no host
// connected, retires after its grace.
func (s *session) fellIdle() {
	s.mu.Lock()
	idle := s.current == nil
	s.mu.Unlock()
	if idle {
		debug.FreeOSMemory()
		s.checkIdle()
	}
}

func (s *session) onAgentEvent(t *turn, e agent.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := protocol.SessionDelta{TurnID: t.snap.TurnID, MessageID: e.MessageID}
	switch e.Kind {
	case agent.MessageStart:
		d.Event, d.Role = protocol.EventMessageStart, llm.RoleAssistant
	case agent.MessageUpdate:
		d.Event, d.Text, d.Thinking = protocol.EventMessageUpdate, e.Text, e.Thinking
	case agent.MessageEnd:
		d.Event, d.Role = protocol.EventMessageEnd, llm.RoleAssistant
		if e.Message != nil {
			d.Text = e.Message.Text()
		}
		t.calls++
		t.usage = t.usage.Add(e.Usage)
		if !e.IsError {
			s.noteUsageLocked(e.Usage, e.Message)
		}
		if u := e.Usage; !u.IsZero() {
			t.context = u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens + u.OutputTokens
		}
		t.snap.Usage = t.usageLocked()
	case agent.ToolCallStart, agent.ToolCallUpdate, agent.ToolCallEnd:
		d.Event = map[string]string{
			agent.ToolCallStart: protocol.EventToolCallStart, agent.ToolCallUpdate: protocol.EventToolCallUpdate, agent.ToolCallEnd: protocol.EventToolCallEnd,
		}[e.Kind]
		d.ToolCall = &protocol.ToolCallInfo{ID: e.ToolCall.ID, Name: e.ToolCall.Name, Output: e.Output, IsError: e.IsError}
		if e.Kind == agent.ToolCallStart {
			d.ToolCall.Arguments = e.ToolCall.Arguments
		}
	case agent.Retry:
		r := e.Retry
		d.Event = protocol.EventModelRetry
		d.Retry = &protocol.RetryNotice{
			Attempt: r.Attempt, MaxAttempts: r.MaxAttempts, DelayMs: r.Delay.Milliseconds(),
			RetryAt: time.Now().Add(r.Delay).UTC(), Reason: redact.String(r.Reason),
		}
	default:
		return
	}
	s.emitLocked(d)
}

// commit records a finished message in the transcript and the history.
func (s *session) commit(t *turn, m llm.Message) error {
	typ := protocol.RecordAssistantMessage
	var data any = messageData(m)
	if m.Role == llm.RoleTool {
		typ = protocol.RecordToolResults
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.Role == llm.RoleUser {
		// A steering message, committed in the order takeSteering gave.
		d := protocol.UserMessageData{Text: m.Text(), Steering: true}
		if len(s.taken) > 0 {
			d.MessageID = s.taken[0].MessageID
			s.taken = s.taken[1:]
		}
		typ, data = protocol.RecordUserMessage, d
	}
	if _, err := s.appendLocked(typ, t.snap.TurnID, data); err != nil {
		return fmt.Errorf("recording the turn: %w", err)
	}
	if m.Role != llm.RoleUser {
		s.history = append(s.history, m)
	}
	return nil
}

// takeSteering hands the loop the steering messages queued so far.
func (s *session) takeSteering() []llm.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue.Steering) == 0 {
		return nil
	}
	var msgs []llm.Message
	for _, e := range s.queue.Steering {
		msgs = append(msgs, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText, Text: e.Content.Text}}})
		s.history = append(s.history, msgs[len(msgs)-1])
		e.State = protocol.QueueDelivered
		s.messages[e.MessageID] = e
		s.taken = append(s.taken, e)
	}
	s.queue.Steering = nil
	s.emitLocked(protocol.SessionDelta{Event: protocol.EventQueueChanged, Queue: ptr(cloneQueue(s.queue))})
	return msgs
}

func (s *session) lookupTurn(in *protocol.TurnRef) (*turn, error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return nil, err
	}
	t, ok := s.turns[in.TurnID]
	if !ok {
		return nil, protocol.Errorf(protocol.CodeNotFound, "no turn %q in session %s", in.TurnID, s.id)
	}
	return t, nil
}

func (s *session) queryTurn(_ context.Context, _ *server.Call, in *protocol.TurnRef) (protocol.TurnSnapshot, error) {
	return s.onTurn(in, nil)
}

func (s *session) stopTurn(_ context.Context, _ *server.Call, in *protocol.TurnRef) (protocol.TurnSnapshot, error) {
	return s.onTurn(in, func(t *turn) { t.loop.Stop() })
}

func (s *session) interruptTurn(_ context.Context, _ *server.Call, in *protocol.TurnRef) (protocol.TurnSnapshot, error) {
	return s.onTurn(in, func(t *turn) { t.cancel() })
}

// onTurn applies act to the turn in names, if it runs here now, and
// answers with the turn's state.
func (s *session) onTurn(in *protocol.TurnRef, act func(*turn)) (protocol.TurnSnapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.lookupTurn(in)
	if err != nil {
		return protocol.TurnSnapshot{}, err
	}
	if act != nil && t.runningLocked() {
		act(t)
	}
	return t.snap, nil
}

func (s *session) submitMessage(_ context.Context, _ *server.Call, in *protocol.MessageSubmitInput) (_ protocol.QueueEntry, err error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.QueueEntry{}, err
	}
	defer s.syncAfter(&err)
	s.mu.Lock()
	defer s.mu.Unlock()
	// A retried submission answers with what became of the first.
	if e, ok := s.messages[in.MessageID]; ok {
		return e, nil
	}
	if _, ok := s.turns[protocol.MessageTurnID(in.MessageID)]; ok {
		return protocol.QueueEntry{EntryID: "q-" + in.MessageID, MessageID: in.MessageID, Content: in.Content, Placement: in.Placement, State: protocol.QueueDelivered}, nil
	}
	entry := protocol.QueueEntry{EntryID: "q-" + in.MessageID, MessageID: in.MessageID, Content: in.Content, Placement: in.Placement, State: protocol.QueueQueued}
	if s.current == nil && !s.compacting && len(s.queue.FollowUp) == 0 {
		// Nothing runs: the message starts a turn now, whatever its placement.
		if _, err := s.beginTurnLocked(protocol.MessageTurnID(in.MessageID), in.MessageID, in.Content.Text); err != nil {
			return protocol.QueueEntry{}, err
		}
		entry.State = protocol.QueueDelivered
		s.messages[in.MessageID] = entry
		return entry, nil
	}
	// Recorded before it is acknowledged: a queued message outlives the
	// worker.
	turnID := ""
	if s.current != nil {
		turnID = s.current.snap.TurnID
	}
	if _, err := s.appendLocked(protocol.RecordQueueAdd, turnID, protocol.QueueData{
		EntryID: entry.EntryID, MessageID: entry.MessageID, Placement: entry.Placement, Text: entry.Content.Text,
	}); err != nil {
		return protocol.QueueEntry{}, s.transcriptFailure(err)
	}
	s.enqueueLocked(entry)
	s.emitLocked(protocol.SessionDelta{Event: protocol.EventQueueChanged, Queue: ptr(cloneQueue(s.queue))})
	if s.current == nil && !s.compacting {
		// Messages a previous worker queued go first.
		s.startQueuedLocked()
	}
	return entry, nil
}

// enqueueLocked adds a queued entry to its lane.
func (s *session) enqueueLocked(entry protocol.QueueEntry) {
	s.messages[entry.MessageID] = entry
	if entry.Placement == protocol.PlacementSteering {
		s.queue.Steering = append(s.queue.Steering, entry)
	} else {
		s.queue.FollowUp = append(s.queue.FollowUp, entry)
	}
}

// dequeueLocked takes the entry of messageID out of its lane and records
// its new state; it reports whether the entry was queued.
func (s *session) dequeueLocked(messageID, state string) (protocol.QueueEntry, bool) {
	for _, lane := range []*[]protocol.QueueEntry{&s.queue.Steering, &s.queue.FollowUp} {
		for i, e := range *lane {
			if e.MessageID == messageID {
				*lane = append((*lane)[:i:i], (*lane)[i+1:]...)
				e.State = state
				s.messages[messageID] = e
				return e, true
			}
		}
	}
	return protocol.QueueEntry{}, false
}

func (s *session) retract(_ context.Context, _ *server.Call, in *protocol.QueueRetractInput) (_ protocol.QueueEntry, err error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.QueueEntry{}, err
	}
	defer s.syncAfter(&err)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range slices.Concat(s.queue.Steering, s.queue.FollowUp) {
		if e.EntryID != in.EntryID {
			continue
		}
		if _, err := s.appendLocked(protocol.RecordQueueRetract, "", protocol.QueueData{EntryID: e.EntryID, MessageID: e.MessageID}); err != nil {
			return protocol.QueueEntry{}, s.transcriptFailure(err)
		}
		e, _ = s.dequeueLocked(e.MessageID, protocol.QueueRetracted)
		s.emitLocked(protocol.SessionDelta{Event: protocol.EventQueueChanged, Queue: ptr(cloneQueue(s.queue))})
		return e, nil
	}
	return protocol.QueueEntry{}, protocol.Errorf(protocol.CodeNotFound, "no queued entry %q: it was delivered or never queued", in.EntryID)
}

// approve asks a person about a tool call when the session's policy wants it.
func (s *session) approve(ctx context.Context, t *turn, call llm.ToolCall, tool tools.Tool) (agent.Decision, error) {
	s.mu.Lock()
	policy := s.header.Approval
	if policy == protocol.ApprovalAll || tool.ReadOnly() || s.allowed[call.Name] {
		s.mu.Unlock()
		return agent.Decision{Allow: true}, nil
	}
	if policy == protocol.ApprovalReadOnly {
		s.mu.Unlock()
		return agent.Decision{Reason: fmt.Sprintf("the session's approval policy is read-only, which refuses %s: it changes files or runs commands. "+
			"To allow it, run again with --approve ask to approve each such call (at the prompt, or with agentd answer) or --approve all to allow them all", call.Name)}, nil
	}
	s.nextID++
	in := &interaction{
		info: protocol.Interaction{
			InteractionID: fmt.Sprintf("i%d-%s", s.nextID, s.epoch[:4]), SessionID: s.id,
			Kind: protocol.InteractionPermission, Prompt: describeCall(call), Detail: toolDetail(call),
			State: protocol.InteractionPending,
		},
		turnID: t.snap.TurnID,
		answer: make(chan string, 1),
	}
	s.pending[in.info.InteractionID] = in
	s.emitLocked(protocol.SessionDelta{Event: protocol.EventInteractionAdded, TurnID: t.snap.TurnID, Interaction: ptr(in.info)})
	s.emitLocked(protocol.SessionDelta{Event: protocol.EventSessionChanged, Session: ptr(s.sessionLocked())})
	s.mu.Unlock()
	select {
	case a := <-in.answer:
		return agent.Decision{Allow: a == protocol.AnswerAllow || a == protocol.AnswerAllowAlways}, nil
	case <-ctx.Done():
		return agent.Decision{}, errors.New("the turn was interrupted")
	}
}

func describeCall(call llm.ToolCall) string {
	var args map[string]any
	json.Unmarshal(call.Arguments, &args)
	if cmd, ok := args["command"].(string); ok {
		return fmt.Sprintf("run %s: %s", call.Name, cmd)
	}
	if p, ok := args["path"].(string); ok {
		return fmt.Sprintf("%s %s", call.Name, p)
	}
	return fmt.Sprintf("run %s", call.Name)
}

func toolDetail(call llm.ToolCall) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"tool": call.Name, "arguments": call.Arguments})
	return b
}

// cancelInteractionsLocked resolves t's pending interactions as cancelled.
func (s *session) cancelInteractionsLocked(t *turn) {
	for id, in := range s.pending {
		delete(s.pending, id)
		in.info.State = protocol.InteractionCancelled
		s.emitLocked(protocol.SessionDelta{Event: protocol.EventInteractionResolved, TurnID: t.snap.TurnID, Interaction: ptr(in.info)})
	}
}

func (s *session) queryInteractions(_ context.Context, _ *server.Call, in *protocol.SessionRef) (protocol.InteractionQueryResult, error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.InteractionQueryResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := protocol.InteractionQueryResult{Pending: []protocol.Interaction{}}
	for _, in := range s.pending {
		out.Pending = append(out.Pending, in.info)
	}
	return out, nil
}

func (s *session) answerInteraction(_ context.Context, call *server.Call, in *protocol.InteractionAnswerInput) (_ protocol.Interaction, err error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.Interaction{}, err
	}
	answer := strings.ToLower(in.Answer)
	switch answer {
	case protocol.AnswerAllow, protocol.AnswerDeny, protocol.AnswerAllowAlways:
	default:
		return protocol.Interaction{}, protocol.Errorf(protocol.CodeInvalidRequest, `field "input.answer": must be %q, %q or %q`, protocol.AnswerAllow, protocol.AnswerDeny, protocol.AnswerAllowAlways)
	}
	if answer == protocol.AnswerAllowAlways {
		defer s.syncAfter(&err) // the rule it records
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.pending[in.InteractionID]
	if !ok {
		return protocol.Interaction{}, protocol.Errorf(protocol.CodeNotFound, "no pending interaction %q: it was answered or cancelled", in.InteractionID)
	}
	if answer == protocol.AnswerAllowAlways {
		// Recorded before it is acknowledged: the rule outlives the worker.
		tool := it.info.Tool()
		if _, err := s.appendLocked(protocol.RecordToolAllowed, it.turnID, protocol.ToolAllowedData{Tool: tool}); err != nil {
			return protocol.Interaction{}, s.transcriptFailure(err)
		}
		s.allowed[tool] = true
	}
	delete(s.pending, in.InteractionID)
	it.info.State, it.info.Answer, it.info.AnsweredBy = protocol.InteractionAnswered, answer, &call.Caller
	it.answer <- answer
	s.emitLocked(protocol.SessionDelta{Event: protocol.EventInteractionResolved, TurnID: it.turnID, Interaction: ptr(it.info)})
	s.emitLocked(protocol.SessionDelta{Event: protocol.EventSessionChanged, Session: ptr(s.sessionLocked())})
	return it.info, nil
}

func (s *session) pageTranscript(_ context.Context, _ *server.Call, in *protocol.TranscriptPageInput) (protocol.TranscriptPage, error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.TranscriptPage{}, err
	}
	req := transcript.PageRequest{Direction: in.Direction, MaxBytes: in.MaxBytes}
	if in.Cursor != nil {
		req.Cursor = *in.Cursor
	}
	if in.AnchorSequence != nil {
		req.AnchorSequence = *in.AnchorSequence
	}
	if in.ThroughSequence != nil {
		req.ThroughSequence = *in.ThroughSequence
	}
	p, err := s.log.Page(req)
	switch {
	case errors.Is(err, transcript.ErrBadCursor):
		return protocol.TranscriptPage{}, protocol.Errorf(protocol.CodeInvalidRequest, `field "input.cursor": is not a cursor of this transcript`)
	case err != nil:
		s.logger.Error("paging the transcript", "err", err)
		return protocol.TranscriptPage{}, protocol.Errorf(protocol.CodeInternalFailure, "the session's transcript cannot be read")
	}
	out := protocol.TranscriptPage{
		SessionID: s.id, Direction: in.Direction, ThroughSequence: &p.ThroughSeq, RawBytes: p.RawBytes,
		Records: p.Records, EndsAtTurnBoundary: p.EndsAtTurnBoundary,
	}
	for i, r := range out.Records {
		// A record larger than a page makes a page of its own; one larger
		// than the wire goes without its data.
		out.Records[i] = protocol.FitRecord(r)
	}
	if out.Records == nil {
		out.Records = []json.RawMessage{}
	}
	if p.NextCursor != "" {
		out.NextCursor = &p.NextCursor
	}
	return out, nil
}

func (s *session) queryTodo(_ context.Context, _ *server.Call, in *protocol.SessionRef) (protocol.TodoQueryResult, error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.TodoQueryResult{}, err
	}
	return protocol.TodoQueryResult{Items: s.todo.Items()}, nil
}

func (s *session) selectModel(_ context.Context, _ *server.Call, in *protocol.ModelsSelectInput) (protocol.ModelSelection, error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.ModelSelection{}, err
	}
	// The host checked the model; whether it can run is decided when a
	// turn starts.
	s.mu.Lock()
	defer s.mu.Unlock()
	s.header.Model = in.Model
	s.emitLocked(protocol.SessionDelta{Event: protocol.EventSessionChanged, Session: ptr(s.sessionLocked())})
	return protocol.ModelSelection{SessionID: s.id, Model: in.Model, Thinking: s.header.Thinking}, nil
}

func (s *session) setThinking(_ context.Context, _ *server.Call, in *protocol.ThinkingSetInput) (protocol.ModelSelection, error) {
	if err := s.checkSession(in.SessionID); err != nil {
		return protocol.ModelSelection{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.header.Thinking = in.Level
	s.emitLocked(protocol.SessionDelta{Event: protocol.EventSessionChanged, Session: ptr(s.sessionLocked())})
	return protocol.ModelSelection{SessionID: s.id, Model: s.header.Model, Thinking: in.Level}, nil
}

// Busy reports whether a turn, a compaction or a runtime resource runs, or no host has
// claimed the worker yet: a worker is an orphan only once the host that
// started it has gone.
func (s *session) Busy() bool {
	if s.res.Running() > 0 {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current != nil || s.compacting || !s.claimed
}
