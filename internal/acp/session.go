package acp

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

// maxToolOutput bounds the output of one tool call an update carries: its
// tail, as the host's projection keeps it.
const maxToolOutput = protocol.MaxRunningOutput

// session is one agentd session an editor has open: a stream of it that
// pump turns into session/update notifications, and the prompts of this
// editor waiting for their turns.
type session struct {
	a        *agent           // constant
	id       string           // constant: the session's full id
	follower *client.Follower // constant
	ctx      context.Context  // constant: ends when the session is closed
	stop     context.CancelFunc
	// replayed is closed once the transcript is replayed (session/load),
	// at once otherwise.
	replayed chan struct{}

	// What pump alone reads and writes.
	replayThrough uint64               // the last record sent as history
	tools         map[string]*toolCall // tool call id → the call
	last          protocol.Session     // the session's header as last sent

	mu      sync.Mutex
	waits   map[string]chan protocol.TurnSnapshot // guarded by mu: turn id → the prompt waiting for it
	queued  map[string]queuedPrompt               // guarded by mu: message id → a prompt waiting for its turn to start
	own     map[string]bool                       // guarded by mu: turn and message ids of this editor's prompts
	running string                                // guarded by mu: the running turn's id
	mode    string                                // guarded by mu: the approval policy the next turn takes
	asks    map[string]context.CancelFunc         // guarded by mu: interaction id → its request_permission
}

// queuedPrompt is a prompt queued behind a running turn.
type queuedPrompt struct {
	entryID string
	done    chan protocol.TurnSnapshot
}

// toolCall is what the updates of one tool call need.
type toolCall struct {
	name   string
	args   json.RawMessage
	output string
	asked  bool // a permission request named it
}

func newSession(a *agent, id string, f *client.Follower, replay bool) *session {
	ctx, stop := context.WithCancel(a.life)
	s := &session{
		a: a, id: id, follower: f, ctx: ctx, stop: stop, replayed: make(chan struct{}),
		tools: map[string]*toolCall{},
		waits: map[string]chan protocol.TurnSnapshot{}, queued: map[string]queuedPrompt{},
		own: map[string]bool{}, asks: map[string]context.CancelFunc{},
	}
	if !replay {
		close(s.replayed)
	}
	return s
}

// close stops following the session; the pump ends.
func (s *session) close() {
	s.stop()
	s.follower.Close()
}

// send sends one update of the session to the editor.
func (s *session) send(u sdk.SessionUpdate) error {
	return s.a.conn.SessionUpdate(s.ctx, sdk.SessionNotification{SessionId: sdk.SessionId(s.id), Update: u})
}

// pump turns the session's stream into updates until the session is
// closed, the editor goes, or the stream ends for good.
func (s *session) pump(snap protocol.SessionProjection) {
	defer s.endWaits()
	s.last = snap.Session
	s.setRunning(snap.RootTurn)
	select {
	case <-s.replayed:
		// Followed from now: the pending permissions are asked.
		if err := s.live(snap, false); err != nil {
			return
		}
	default:
		s.replayThrough = snap.TranscriptSequence
		if s.replayThrough == 0 {
			if err := s.finishReplay(snap); err != nil {
				return
			}
		}
	}
	for {
		ev, err := s.follower.Next(s.ctx)
		if err != nil {
			if s.ctx.Err() == nil {
				s.a.logger.Info("the session's stream ended", "session", s.id, "err", err)
			}
			return
		}
		if ev.Lost != nil {
			s.a.logger.Info("the session's stream was lost; reopening", "session", s.id, "err", ev.Lost)
			continue
		}
		if ev.Reopened && ev.Snapshot != nil {
			s.setRunning(ev.Snapshot.RootTurn)
			continue
		}
		if ev.Resource != nil {
			continue
		}
		if err := s.delta(ev.Delta, ev.Record, snap); err != nil {
			s.a.logger.Info("the editor took no more updates", "session", s.id, "err", err)
			return
		}
	}
}

// endWaits answers every prompt still waiting: the stream ended under
// it, so the turn's end will not be seen here.
func (s *session) endWaits() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, w := range s.waits {
		close(w)
		delete(s.waits, id)
	}
	for id, q := range s.queued {
		close(q.done)
		delete(s.queued, id)
	}
	for id, cancel := range s.asks {
		cancel()
		delete(s.asks, id)
	}
	select {
	case <-s.replayed:
	default:
		close(s.replayed)
	}
}

func (s *session) setRunning(t *protocol.TurnSnapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running = ""
	if t != nil && t.Status == protocol.TurnRunning {
		s.running = t.TurnID
	}
}

// finishReplay sends what the session is doing now, after its history:
// the text of a message still streaming, the tool calls running, the
// todo list, and the permissions it waits for.
func (s *session) finishReplay(snap protocol.SessionProjection) error {
	defer close(s.replayed)
	return s.live(snap, true)
}

// live sends the state of snap a follower from now on needs: with
// partial, what is in flight; always, the plan and the permissions
// pending.
func (s *session) live(snap protocol.SessionProjection, partial bool) error {
	if partial {
		for _, m := range snap.Streams {
			if m.Thinking != "" {
				if err := s.send(sdk.UpdateAgentThoughtText(m.Thinking)); err != nil {
					return err
				}
			}
			if m.Text != "" {
				if err := s.send(sdk.UpdateAgentMessageText(m.Text)); err != nil {
					return err
				}
			}
		}
		for _, c := range snap.ToolCalls {
			_, known := s.tools[c.ID]
			tc := s.toolCall(c.ID, c.Name, c.Arguments)
			tc.output = tail(c.Output)
			u := toolCallUpdate(c.ID, tc, sdk.ToolCallStatusInProgress)
			up := startUpdate(u)
			if known {
				up = sdk.SessionUpdate{ToolCallUpdate: &u}
			}
			if err := s.send(up); err != nil {
				return err
			}
		}
	}
	if len(snap.Todo) > 0 {
		if err := s.send(plan(snap.Todo)); err != nil {
			return err
		}
	}
	for _, in := range snap.Interactions {
		if in.State == protocol.InteractionPending && in.Kind == protocol.InteractionPermission {
			s.ask(in)
		}
	}
	return nil
}

// delta sends the updates of one change of the session.
func (s *session) delta(d protocol.SessionDelta, rec *protocol.TranscriptRecord, snap protocol.SessionProjection) error {
	switch d.Event {
	case protocol.EventEntryAdded:
		if rec == nil {
			return nil
		}
		if rec.Seq <= s.replayThrough {
			if err := s.history(*rec); err != nil {
				return err
			}
			if rec.Seq == s.replayThrough {
				return s.finishReplay(snap)
			}
			return nil
		}
		return s.record(*rec)
	case protocol.EventMessageUpdate:
		if d.Thinking != "" {
			if err := s.send(sdk.UpdateAgentThoughtText(d.Thinking)); err != nil {
				return err
			}
		}
		if d.Text != "" {
			return s.send(sdk.UpdateAgentMessageText(d.Text))
		}
	case protocol.EventToolCallStart:
		if c := d.ToolCall; c != nil {
			_, known := s.tools[c.ID]
			tc := s.toolCall(c.ID, c.Name, c.Arguments)
			u := toolCallUpdate(c.ID, tc, sdk.ToolCallStatusInProgress)
			if !known {
				return s.send(startUpdate(u))
			}
			return s.send(sdk.SessionUpdate{ToolCallUpdate: &u})
		}
	case protocol.EventToolCallUpdate:
		if c := d.ToolCall; c != nil {
			tc := s.toolCall(c.ID, c.Name, c.Arguments)
			tc.output = tail(tc.output + c.Output)
			u := toolCallUpdate(c.ID, tc, sdk.ToolCallStatusInProgress)
			u.Title, u.Kind = nil, nil
			return s.send(sdk.SessionUpdate{ToolCallUpdate: &u})
		}
	case protocol.EventToolCallEnd:
		if c := d.ToolCall; c != nil {
			return s.endTool(c.ID, c.Name, c.Output, c.IsError)
		}
	case protocol.EventRunStart:
		s.setRunning(d.Turn)
	case protocol.EventRunEnd:
		if d.Turn != nil {
			s.turnEnded(*d.Turn)
		}
	case protocol.EventInteractionAdded:
		if in := d.Interaction; in != nil && in.State == protocol.InteractionPending && in.Kind == protocol.InteractionPermission {
			s.ask(*in)
		}
	case protocol.EventInteractionResolved:
		if in := d.Interaction; in != nil {
			s.resolved(in.InteractionID)
		}
	case protocol.EventTodoChanged:
		return s.send(plan(d.Todo))
	case protocol.EventSessionChanged:
		if d.Session != nil {
			return s.changed(*d.Session)
		}
	}
	return nil
}

// changed sends what changed in the session's header: its title, its
// approval policy (the mode), its model or thinking level.
func (s *session) changed(now protocol.Session) error {
	was := s.last
	s.last = now
	if now.Title != was.Title && now.Title != "" {
		if err := s.send(sdk.SessionUpdate{SessionInfoUpdate: &sdk.SessionSessionInfoUpdate{Title: sdk.Ptr(now.Title)}}); err != nil {
			return err
		}
	}
	if now.Approval != was.Approval && now.Approval != "" {
		if err := s.send(sdk.SessionUpdate{CurrentModeUpdate: &sdk.SessionCurrentModeUpdate{CurrentModeId: sdk.SessionModeId(now.Approval)}}); err != nil {
			return err
		}
	}
	if now.Model != was.Model || now.Thinking != was.Thinking {
		opts, err := s.a.configOptions(s.ctx, now)
		if err != nil {
			return nil // the options are sent with the next change
		}
		return s.send(sdk.SessionUpdate{ConfigOptionUpdate: &sdk.SessionConfigOptionUpdate{ConfigOptions: opts}})
	}
	return nil
}

// history sends one record of the transcript replayed by session/load.
func (s *session) history(rec protocol.TranscriptRecord) error {
	switch rec.Type {
	case protocol.RecordUserMessage:
		var m protocol.UserMessageData
		if json.Unmarshal(rec.Data, &m) == nil && m.Text != "" {
			return s.send(sdk.UpdateUserMessageText(m.Text))
		}
	case protocol.RecordAssistantMessage:
		var m protocol.MessageData
		if json.Unmarshal(rec.Data, &m) != nil {
			return nil
		}
		for _, p := range m.Parts {
			var err error
			switch {
			case p.Type == protocol.PartThinking && p.Text != "":
				err = s.send(sdk.UpdateAgentThoughtText(p.Text))
			case p.Type == protocol.PartText && p.Text != "":
				err = s.send(sdk.UpdateAgentMessageText(p.Text))
			case p.Type == protocol.PartToolCall && p.ToolCall != nil:
				err = s.announce(*p.ToolCall)
			}
			if err != nil {
				return err
			}
		}
	case protocol.RecordToolResults:
		var m protocol.MessageData
		if json.Unmarshal(rec.Data, &m) != nil {
			return nil
		}
		for _, p := range m.Parts {
			if r := p.ToolResult; p.Type == protocol.PartToolResult && r != nil {
				if err := s.endTool(r.CallID, r.Name, r.Content, r.IsError); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// record sends what a live record adds that no other delta carries: a
// prompt from another client, the tool calls a message asks for; and
// hands a queued prompt the turn it started.
func (s *session) record(rec protocol.TranscriptRecord) error {
	switch rec.Type {
	case protocol.RecordTurnStart:
		var d protocol.TurnStartData
		if json.Unmarshal(rec.Data, &d) == nil && d.MessageID != "" {
			s.mu.Lock()
			if q, ok := s.queued[d.MessageID]; ok {
				delete(s.queued, d.MessageID)
				s.waits[rec.TurnID] = q.done
				s.own[rec.TurnID] = true
			}
			s.mu.Unlock()
		}
	case protocol.RecordUserMessage:
		var m protocol.UserMessageData
		if json.Unmarshal(rec.Data, &m) != nil || m.Text == "" {
			return nil
		}
		s.mu.Lock()
		mine := s.own[rec.TurnID] && !m.Steering || m.MessageID != "" && s.own[m.MessageID]
		s.mu.Unlock()
		if !mine {
			return s.send(sdk.UpdateUserMessageText(m.Text))
		}
	case protocol.RecordAssistantMessage:
		var m protocol.MessageData
		if json.Unmarshal(rec.Data, &m) != nil {
			return nil
		}
		for _, p := range m.Parts {
			if p.Type == protocol.PartToolCall && p.ToolCall != nil {
				if _, known := s.tools[p.ToolCall.ID]; known {
					continue
				}
				if err := s.announce(*p.ToolCall); err != nil {
					return err
				}
			}
		}
	case protocol.RecordQueueRetract:
		var q protocol.QueueData
		if json.Unmarshal(rec.Data, &q) == nil {
			s.retracted(q.MessageID)
		}
	}
	return nil
}

// announce sends a tool call the model asked for, pending until it runs.
func (s *session) announce(c protocol.ToolCallPart) error {
	tc := s.toolCall(c.ID, c.Name, c.Arguments)
	return s.send(startUpdate(toolCallUpdate(c.ID, tc, sdk.ToolCallStatusPending)))
}

// endTool sends a tool call's end with its result: the diff of an edit
// or a write, the output of anything else.
func (s *session) endTool(id, name, output string, failed bool) error {
	tc := s.toolCall(id, name, nil)
	tc.output = tail(output)
	status := sdk.ToolCallStatusCompleted
	if failed {
		status = sdk.ToolCallStatusFailed
	}
	u := toolCallUpdate(id, tc, status)
	if !failed {
		if diff, ok := toolDiff(tc); ok {
			u.Content = []sdk.ToolCallContent{diff, sdk.ToolContent(sdk.TextBlock(tc.output))}
		}
	}
	delete(s.tools, id)
	return s.send(sdk.SessionUpdate{ToolCallUpdate: &u})
}

// toolCall returns the call id names, recording it when new.
func (s *session) toolCall(id, name string, args json.RawMessage) *toolCall {
	tc := s.tools[id]
	if tc == nil {
		tc = &toolCall{name: name}
		s.tools[id] = tc
	}
	if len(args) > 0 {
		tc.args = args
	}
	if tc.name == "" {
		tc.name = name
	}
	return tc
}

// tail returns the end of out an update carries.
func tail(out string) string {
	if len(out) <= maxToolOutput {
		return out
	}
	return out[len(out)-maxToolOutput:]
}

// toolArgs are the arguments of agentd's tools an update shows.
type toolArgs struct {
	Command   string `json:"command"`
	Path      string `json:"path"`
	Pattern   string `json:"pattern"`
	OldString string `json:"old_string"`
	NewString string `json:"new_string"`
	Content   string `json:"content"`
}

// kinds are the ACP kinds of agentd's tools.
var kinds = map[string]sdk.ToolKind{
	"bash": sdk.ToolKindExecute, "read": sdk.ToolKindRead, "write": sdk.ToolKindEdit, "edit": sdk.ToolKindEdit,
	"ls": sdk.ToolKindSearch, "find": sdk.ToolKindSearch, "grep": sdk.ToolKindSearch, "todo": sdk.ToolKindThink,
}

// toolCallUpdate describes a tool call: its title, kind, arguments,
// the files it names and its output so far.
func toolCallUpdate(id string, tc *toolCall, status sdk.ToolCallStatus) sdk.SessionToolCallUpdate {
	var a toolArgs
	json.Unmarshal(tc.args, &a)
	title := tc.name
	switch {
	case a.Command != "":
		title = a.Command
	case a.Path != "" && a.Pattern != "":
		title = tc.name + " " + a.Pattern + " in " + a.Path
	case a.Path != "":
		title = tc.name + " " + a.Path
	case a.Pattern != "":
		title = tc.name + " " + a.Pattern
	}
	kind, ok := kinds[tc.name]
	if !ok {
		kind = sdk.ToolKindOther
	}
	u := sdk.SessionToolCallUpdate{ToolCallId: sdk.ToolCallId(id), Title: sdk.Ptr(title), Kind: sdk.Ptr(kind), Status: sdk.Ptr(status)}
	if len(tc.args) > 0 {
		u.RawInput = tc.args
	}
	if a.Path != "" {
		u.Locations = []sdk.ToolCallLocation{{Path: a.Path}}
	}
	if tc.output != "" {
		u.Content = []sdk.ToolCallContent{sdk.ToolContent(sdk.TextBlock(tc.output))}
	}
	return u
}

// startUpdate is the tool_call update that first shows a call.
func startUpdate(u sdk.SessionToolCallUpdate) sdk.SessionUpdate {
	return sdk.SessionUpdate{ToolCall: &sdk.SessionUpdateToolCall{
		ToolCallId: u.ToolCallId, Title: *u.Title, Kind: *u.Kind, Status: *u.Status,
		RawInput: u.RawInput, Locations: u.Locations, Content: u.Content,
	}}
}

// toolDiff is the diff an edit or a write made.
func toolDiff(tc *toolCall) (sdk.ToolCallContent, bool) {
	var a toolArgs
	if json.Unmarshal(tc.args, &a) != nil || a.Path == "" {
		return sdk.ToolCallContent{}, false
	}
	switch tc.name {
	case "edit":
		return sdk.ToolDiffContent(a.Path, a.NewString, a.OldString), true
	case "write":
		return sdk.ToolDiffContent(a.Path, a.Content), true
	}
	return sdk.ToolCallContent{}, false
}

// plan is the plan update of a todo list.
func plan(items []protocol.TodoItem) sdk.SessionUpdate {
	entries := make([]sdk.PlanEntry, 0, len(items))
	for _, it := range items {
		status := sdk.PlanEntryStatusPending
		switch it.Status {
		case "in_progress":
			status = sdk.PlanEntryStatusInProgress
		case "done":
			status = sdk.PlanEntryStatusCompleted
		}
		entries = append(entries, sdk.PlanEntry{Content: it.Text, Priority: sdk.PlanEntryPriorityMedium, Status: status})
	}
	return sdk.UpdatePlan(entries...)
}

// promptText is the text of an ACP prompt: its text blocks, embedded
// text resources and links, in order.
func promptText(blocks []sdk.ContentBlock) (string, error) {
	var b strings.Builder
	for i, c := range blocks {
		if i > 0 {
			b.WriteString("\n")
		}
		switch {
		case c.Text != nil:
			b.WriteString(c.Text.Text)
		case c.ResourceLink != nil:
			b.WriteString(c.ResourceLink.Uri)
		case c.Resource != nil && c.Resource.Resource.TextResourceContents != nil:
			r := c.Resource.Resource.TextResourceContents
			b.WriteString(r.Uri + ":\n```\n" + r.Text + "\n```")
		default:
			return "", invalidParams("prompt[%d]: agentd takes text, resource links and embedded text resources", i)
		}
	}
	if strings.TrimSpace(b.String()) == "" {
		return "", invalidParams("prompt: holds no text")
	}
	return b.String(), nil
}

// errClosed answers a prompt whose session stream ended before its turn
// did.
var errClosed = errors.New("the session's stream ended before the turn did: its end is in agentd log")
