package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	a    *agent          // constant
	id   string          // constant: the session's full id
	ctx  context.Context // constant: ends when the session is closed
	stop context.CancelFunc

	// What the history's replay, then pump, alone read and write.
	replayThrough uint64               // the last record sent as history
	unsent        []string             // history's tool calls waiting for their results
	msgs          map[string]*message  // turn/message id → what was sent of a message streaming
	tools         map[string]*toolCall // tool call id → the call
	last          protocol.Session     // the session's header as last sent
	usage         usage                // the session's usage as its records say
	usageSent     usage                // the usage last sent

	mu       sync.Mutex
	follower *client.Follower                      // guarded by mu: the stream, once open
	waits    map[string]chan protocol.TurnSnapshot // guarded by mu: turn id → the prompt waiting for it
	queued   map[string]queuedPrompt               // guarded by mu: message id → a prompt waiting for its turn to start
	own      map[string]bool                       // guarded by mu: turn and message ids of this editor's prompts
	running  string                                // guarded by mu: the running turn's id
	mode     string                                // guarded by mu: the approval policy the next turn takes
	asks     map[string]context.CancelFunc         // guarded by mu: interaction id → its request_permission
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
	parsed toolArgs // args, decoded
	output string
	asked  bool // a permission request named it
}

// setArgs sets the call's arguments.
func (tc *toolCall) setArgs(args json.RawMessage) {
	tc.args, tc.parsed = args, toolArgs{}
	json.Unmarshal(args, &tc.parsed)
}

func newSession(a *agent, id string) *session {
	ctx, stop := context.WithCancel(a.life)
	s := &session{
		a: a, id: id, ctx: ctx, stop: stop,
		tools: map[string]*toolCall{}, msgs: map[string]*message{},
		waits: map[string]chan protocol.TurnSnapshot{}, queued: map[string]queuedPrompt{},
		own: map[string]bool{}, asks: map[string]context.CancelFunc{},
	}
	return s
}

// close stops following the session; the pump ends.
func (s *session) close() {
	s.stop()
	s.mu.Lock()
	f := s.follower
	s.mu.Unlock()
	if f != nil {
		f.Close()
	}
}

// replay sends the session's transcript as history, read in pages, and
// returns the last record sent.
func (s *session) replay(ctx context.Context) (uint64, error) {
	c, err := s.a.hostConn(ctx)
	if err != nil {
		return 0, err
	}
	var last uint64
	s.usage.costKnown = true
	req := client.PageRequest{Direction: client.PageNewer, MaxBytes: protocol.MaxMessageBytes / 2}
	for {
		page, err := c.TranscriptPage(ctx, s.id, req)
		if err != nil {
			return last, err
		}
		for _, rec := range page.Records {
			if err := s.history(rec); err != nil {
				return last, err
			}
			last = rec.Seq
		}
		if page.NextCursor == "" {
			return last, s.sendUsage()
		}
		req.Cursor = page.NextCursor
	}
}

// send sends one update of the session to the editor.
func (s *session) send(u sdk.SessionUpdate) error {
	w := wire(u)
	if w == nil {
		return s.a.connection().SessionUpdate(s.ctx, sdk.SessionNotification{SessionId: sdk.SessionId(s.id), Update: u})
	}
	if err := s.ctx.Err(); err != nil {
		return err
	}
	b, err := line(s.id, w)
	if err != nil {
		return err
	}
	_, err = s.a.out.Write(b)
	return err
}

// pump turns the session's stream into updates until the session is
// closed, the editor goes, or the stream ends for good. With f nil the
// history was sent up to record after: pump opens the stream after it,
// and the records after it the projection includes are history too, then
// what is in flight.
func (s *session) pump(f *client.Follower, after uint64) {
	defer s.endWaits()
	replay := f == nil
	if replay {
		var err error
		if f, err = client.FollowSession(s.ctx, s.a.dial, s.id, client.SessionOptions{Resume: true, After: after}); err != nil {
			if s.ctx.Err() == nil {
				s.a.logger.Warn("following a loaded session", "session", s.id, "err", err)
			}
			return
		}
	}
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		f.Close()
		return
	}
	s.follower = f
	s.mu.Unlock()
	snap := f.Session().Snapshot()
	s.last = snap.Session
	s.setRunning(snap.RootTurn)
	if len(snap.Session.Plugins) > 0 {
		// The commands of the session's plugin packages; a session with
		// none has no commands to announce.
		if err := s.sendCommands(); err != nil && s.ctx.Err() == nil {
			s.a.logger.Info("listing the session's commands", "session", s.id, "err", err)
		}
	}
	if !replay {
		// Followed from now: the context as the last turn left it (the
		// session's cost is not known without its history), and the
		// pending permissions are asked.
		s.lastUsage(snap.RootTurn)
		if err := s.sendUsage(); err != nil {
			return
		}
		if err := s.live(snap, false); err != nil {
			return
		}
	} else {
		s.replayThrough = snap.TranscriptSequence
		if s.replayThrough <= after {
			if err := s.finishReplay(snap); err != nil {
				return
			}
		}
	}
	for {
		ev, err := f.Next(s.ctx)
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
			for _, m := range ev.Snapshot.Streams {
				if err := s.catchUp(m); err != nil {
					return
				}
			}
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
	if err := s.flushCalls(); err != nil {
		return err
	}
	if err := s.sendUsage(); err != nil {
		return err
	}
	return s.live(snap, true)
}

// maxHeld bounds the text held for a message whose stream skipped ahead.
const maxHeld = 1 << 20

// message is what this editor has had of an assistant message's text.
type message struct {
	sent int // bytes of the message's text sent, its prefix
	// behind is set once the stream skipped ahead: what comes after is
	// held, and the text from sent on goes out when the message ends,
	// whole when its end carries it.
	behind bool
	held   strings.Builder // the deltas after the skip, gaps marked
	broken bool            // held text went out: sent is no prefix now
}

func (s *session) message(turnID, msgID string) *message {
	key := turnID + "/" + msgID
	m := s.msgs[key]
	if m == nil {
		m = &message{}
		s.msgs[key] = m
	}
	return m
}

// streamText sends a text delta, or holds it once the stream has skipped
// ahead for this editor: the host skips a reader that lags, and an editor
// has no other way to the text it missed.
func (s *session) streamText(d protocol.SessionDelta) error {
	m := s.message(d.TurnID, d.MessageID)
	if d.Skipped > 0 {
		m.behind = true
		fmt.Fprintf(&m.held, "[… %d bytes skipped …]", d.Skipped)
	}
	if !m.behind {
		if d.Text == "" {
			return nil
		}
		m.sent += len(d.Text)
		return s.send(sdk.UpdateAgentMessageText(d.Text))
	}
	m.held.WriteString(d.Text)
	if m.held.Len() < maxHeld {
		return nil
	}
	m.broken = true
	text := m.held.String()
	m.held.Reset()
	return s.send(sdk.UpdateAgentMessageText(text))
}

// endText sends what the editor lacks of a message that ended: the rest
// of its text, from the message's end when it carries the text (it does
// unless the text passes the wire's limit), else what was held.
func (s *session) endText(d protocol.SessionDelta) error {
	key := d.TurnID + "/" + d.MessageID
	m := s.msgs[key]
	delete(s.msgs, key)
	switch {
	case m == nil:
		return nil
	case !m.broken && d.Text != "" && m.sent <= len(d.Text):
		if rest := d.Text[m.sent:]; rest != "" {
			return s.send(sdk.UpdateAgentMessageText(rest))
		}
	case m.held.Len() > 0:
		return s.send(sdk.UpdateAgentMessageText(m.held.String()))
	}
	return nil
}

// endMessages sends what is held of the messages of turn turnID that
// never ended (the turn was interrupted mid-message), and forgets them.
func (s *session) endMessages(turnID string) error {
	for key, m := range s.msgs {
		if !strings.HasPrefix(key, turnID+"/") {
			continue
		}
		delete(s.msgs, key)
		if m.held.Len() > 0 {
			if err := s.send(sdk.UpdateAgentMessageText(m.held.String())); err != nil {
				return err
			}
		}
	}
	return nil
}

// catchUp sends the text of a message still streaming that this editor
// has not had, from a projection.
func (s *session) catchUp(ms protocol.MessageStream) error {
	m := s.message(ms.TurnID, ms.MessageID)
	if m.broken || m.sent >= len(ms.Text) {
		return nil
	}
	rest := ms.Text[m.sent:]
	m.sent, m.behind = len(ms.Text), false
	m.held.Reset()
	return s.send(sdk.UpdateAgentMessageText(rest))
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
			if err := s.catchUp(m); err != nil {
				return err
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
		return s.streamText(d)
	case protocol.EventMessageEnd:
		return s.endText(d)
	case protocol.EventModelRetry:
		// A wait an editor shows as the agent's thought, apart from its
		// answer.
		if r := d.Retry; r != nil {
			secs := (max(r.DelayMs, 0) + 999) / 1000
			return s.send(sdk.UpdateAgentThoughtText(fmt.Sprintf("retrying in %ds: %s (attempt %d of %d failed)\n", secs, r.Reason, r.Attempt, r.MaxAttempts)))
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
		if err := s.endMessages(d.TurnID); err != nil {
			return err
		}
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
	if !slices.Equal(now.Plugins, was.Plugins) {
		if err := s.sendCommands(); err != nil && s.ctx.Err() == nil {
			s.a.logger.Info("listing the session's commands", "session", s.id, "err", err)
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
// A tool call is sent once, as it ended, when its result follows its
// message (with only approvals between); one with no result yet is sent
// pending when anything else comes, or the history ends.
func (s *session) history(rec protocol.TranscriptRecord) error {
	if rec.Type != protocol.RecordToolResults && rec.Type != protocol.RecordToolAllowed {
		if err := s.flushCalls(); err != nil {
			return err
		}
	}
	switch rec.Type {
	case protocol.RecordTurnEnd:
		return s.recordedEnd(rec, false)
	case protocol.RecordCompaction:
		s.usage.compaction(rec)
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
				c := p.ToolCall
				s.toolCall(c.ID, c.Name, c.Arguments)
				s.unsent = append(s.unsent, c.ID)
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
			r := p.ToolResult
			if p.Type != protocol.PartToolResult || r == nil {
				continue
			}
			if i := slices.Index(s.unsent, r.CallID); i >= 0 {
				// Calls before it with no result are sent first, pending.
				for _, id := range s.unsent[:i] {
					if err := s.send(startUpdate(toolCallUpdate(id, s.tools[id], sdk.ToolCallStatusPending))); err != nil {
						return err
					}
				}
				s.unsent = s.unsent[i+1:]
				tc := s.toolCall(r.CallID, r.Name, nil)
				tc.output = tail(r.Content)
				if err := s.send(startUpdate(s.ended(r.CallID, tc, r.IsError))); err != nil {
					return err
				}
				delete(s.tools, r.CallID)
				continue
			}
			if err := s.endTool(r.CallID, r.Name, r.Content, r.IsError); err != nil {
				return err
			}
		}
	}
	return nil
}

// recordedEnd answers the prompt waiting for the turn a turn_end record
// ends: its run_end may have gone by while the stream was not open. A
// live one sends the usage it leaves first; history's is sent once, when
// the history ends.
func (s *session) recordedEnd(rec protocol.TranscriptRecord, live bool) error {
	if err := s.endMessages(rec.TurnID); err != nil {
		return err
	}
	var d protocol.TurnEndData
	if json.Unmarshal(rec.Data, &d) == nil {
		s.usage.turn(d.Usage)
		if live {
			if err := s.sendUsage(); err != nil {
				return err
			}
		}
		s.turnEnded(protocol.TurnSnapshot{SessionID: s.id, TurnID: rec.TurnID, Status: d.Status, Error: d.Error, Usage: d.Usage})
	}
	return nil
}

// flushCalls sends the tool calls of the history still waiting for their
// results, pending.
func (s *session) flushCalls() error {
	for _, id := range s.unsent {
		if err := s.send(startUpdate(toolCallUpdate(id, s.tools[id], sdk.ToolCallStatusPending))); err != nil {
			return err
		}
	}
	s.unsent = s.unsent[:0]
	return nil
}

// record sends what a live record adds that no other delta carries: a
// prompt from another client, the tool calls a message asks for; and
// hands a queued prompt the turn it started.
func (s *session) record(rec protocol.TranscriptRecord) error {
	switch rec.Type {
	case protocol.RecordTurnEnd:
		return s.recordedEnd(rec, true)
	case protocol.RecordCompaction:
		s.usage.compaction(rec)
		return s.sendUsage()
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
	u := s.ended(id, tc, failed)
	delete(s.tools, id)
	return s.send(sdk.SessionUpdate{ToolCallUpdate: &u})
}

// ended describes a tool call that ended.
func (s *session) ended(id string, tc *toolCall, failed bool) sdk.SessionToolCallUpdate {
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
	return u
}

// toolCall returns the call id names, recording it when new.
func (s *session) toolCall(id, name string, args json.RawMessage) *toolCall {
	tc := s.tools[id]
	if tc == nil {
		tc = &toolCall{name: name}
		s.tools[id] = tc
	}
	if len(args) > 0 {
		tc.setArgs(args)
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
	a := tc.parsed
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
	a := tc.parsed
	if a.Path == "" {
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
