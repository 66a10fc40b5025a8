package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

// Prompt starts a turn with the prompt, or queues it behind the turn that
// runs, as agentd does, and answers when its turn ends, with its stop
// reason. The request's own context is not waited on: session/cancel
// interrupts the turn, which then ends as cancelled; an editor that goes
// leaves the turn running.
func (a *agent) Prompt(_ context.Context, p sdk.PromptRequest) (sdk.PromptResponse, error) {
	s, err := a.session(p.SessionId)
	if err != nil {
		return sdk.PromptResponse{}, err
	}
	text, err := promptText(p.Prompt)
	if err != nil {
		return sdk.PromptResponse{}, err
	}
	if text, err = s.expand(s.ctx, text); err != nil {
		return sdk.PromptResponse{}, hostError(err)
	}
	done := make(chan protocol.TurnSnapshot, 1)
	turnID := newID("t")
	s.mu.Lock()
	s.waits[turnID], s.own[turnID] = done, true
	mode := s.mode
	s.mu.Unlock()
	_, err = call(s.ctx, a, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.id, TurnID: turnID, Content: protocol.Content{Text: text}, Approval: mode})
	s.mu.Lock()
	if err != nil {
		delete(s.waits, turnID)
	} else if s.mode == mode {
		s.mode = ""
	}
	s.mu.Unlock()
	if errors.Is(err, client.ErrOperationConflict) {
		err = s.queue(text, done)
	}
	if err != nil {
		return sdk.PromptResponse{}, hostError(err)
	}
	select {
	case t, ok := <-done:
		switch {
		case ok:
			return stopReason(t)
		case s.ctx.Err() != nil:
			// session/close, or the editor going, ended the wait.
			return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
		}
		return sdk.PromptResponse{}, &sdk.RequestError{Code: -32603, Message: errClosed.Error()}
	case <-s.ctx.Done():
		return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
	}
}

// queue submits the prompt for the next turn.
func (s *session) queue(text string, done chan protocol.TurnSnapshot) error {
	msgID := newID("m")
	s.mu.Lock()
	s.queued[msgID], s.own[msgID] = queuedPrompt{done: done}, true
	s.mu.Unlock()
	e, err := call(s.ctx, s.a, protocol.OpTurnMessageSubmit, protocol.MessageSubmitInput{SessionID: s.id, MessageID: msgID, Content: protocol.Content{Text: text}, Placement: protocol.PlacementNextTurn})
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		delete(s.queued, msgID)
		return err
	}
	if q, ok := s.queued[msgID]; ok {
		q.entryID = e.EntryID
		s.queued[msgID] = q
	}
	return nil
}

// stopReason is the answer to a prompt whose turn ended as t.
func stopReason(t protocol.TurnSnapshot) (sdk.PromptResponse, error) {
	r := sdk.PromptResponse{}
	if u := t.Usage; u.ModelCalls > 0 {
		r.Usage = &sdk.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.InputTokens + u.OutputTokens}
		if u.CacheReadTokens > 0 {
			r.Usage.CachedReadTokens = sdk.Ptr(u.CacheReadTokens)
		}
		if u.CacheWriteTokens > 0 {
			r.Usage.CachedWriteTokens = sdk.Ptr(u.CacheWriteTokens)
		}
	}
	switch t.Status {
	case protocol.TurnCompleted:
		r.StopReason = sdk.StopReasonEndTurn
	case protocol.TurnInterrupted, protocol.TurnStopped:
		r.StopReason = sdk.StopReasonCancelled
	default:
		msg := "the turn " + t.Status
		if t.Error != "" {
			msg += ": " + t.Error
		}
		return sdk.PromptResponse{}, &sdk.RequestError{Code: -32603, Message: msg}
	}
	return r, nil
}

// turnEnded answers the prompt waiting for turn t.
func (s *session) turnEnded(t protocol.TurnSnapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == t.TurnID {
		s.running = ""
	}
	if w, ok := s.waits[t.TurnID]; ok {
		delete(s.waits, t.TurnID)
		w <- t
	}
}

// retracted answers a queued prompt taken back before its turn started.
func (s *session) retracted(msgID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q, ok := s.queued[msgID]; ok {
		delete(s.queued, msgID)
		q.done <- protocol.TurnSnapshot{SessionID: s.id, Status: protocol.TurnInterrupted}
	}
}

// Cancel interrupts the session's running turn and takes back this
// editor's queued prompts. With no turn running it does nothing.
func (a *agent) Cancel(ctx context.Context, p sdk.CancelNotification) error {
	s, err := a.session(p.SessionId)
	if err != nil {
		return err
	}
	return s.cancel(ctx)
}

// cancel interrupts the turn an own prompt waits on, and retracts the
// queued ones.
func (s *session) cancel(ctx context.Context) error {
	s.mu.Lock()
	running := s.running
	_, waited := s.waits[running]
	var entries []queuedPrompt
	var msgIDs []string
	for id, q := range s.queued {
		entries, msgIDs = append(entries, q), append(msgIDs, id)
	}
	s.mu.Unlock()
	for i, q := range entries {
		if q.entryID == "" {
			continue
		}
		_, err := call(ctx, s.a, protocol.OpQueueRetract, protocol.QueueRetractInput{SessionID: s.id, EntryID: q.entryID})
		if err == nil {
			s.retracted(msgIDs[i])
		}
	}
	if running == "" || !waited {
		return nil
	}
	_, err := call(ctx, s.a, protocol.OpTurnInterrupt, protocol.TurnRef{SessionID: s.id, TurnID: running})
	if errors.Is(err, client.ErrNotFound) || errors.Is(err, client.ErrOperationConflict) {
		return nil // it ended meanwhile
	}
	return err
}

// Permission options, mapped onto agentd's answers.
var permissionOptions = []sdk.PermissionOption{
	{OptionId: protocol.AnswerAllow, Name: "Allow", Kind: sdk.PermissionOptionKindAllowOnce},
	{OptionId: protocol.AnswerAllowAlways, Name: "Allow this tool for the session", Kind: sdk.PermissionOptionKindAllowAlways},
	{OptionId: protocol.AnswerDeny, Name: "Deny", Kind: sdk.PermissionOptionKindRejectOnce},
}

// ask sends session/request_permission for a pending interaction, and
// answers the interaction with the editor's choice. Whichever client
// answers first wins; when another does, the request is cancelled.
func (s *session) ask(in protocol.Interaction) {
	s.mu.Lock()
	if _, asked := s.asks[in.InteractionID]; asked || s.ctx.Err() != nil {
		s.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.asks[in.InteractionID] = cancel
	s.mu.Unlock()
	u := s.permissionCall(in)
	s.a.wg.Go(func() {
		defer s.resolved(in.InteractionID)
		resp, err := s.a.connection().RequestPermission(ctx, sdk.RequestPermissionRequest{SessionId: sdk.SessionId(s.id), ToolCall: u, Options: permissionOptions})
		if err != nil || resp.Outcome.Selected == nil {
			return
		}
		answer := string(resp.Outcome.Selected.OptionId)
		_, err = call(ctx, s.a, protocol.OpInteractionAnswer, protocol.InteractionAnswerInput{SessionID: s.id, InteractionID: in.InteractionID, Answer: answer})
		if err != nil && ctx.Err() == nil {
			s.a.logger.Info("answering a permission", "session", s.id, "interaction", in.InteractionID, "err", err)
		}
	})
}

// permissionCall is the tool call a permission interaction asks about:
// the announced call of that tool with those arguments not yet asked
// about, or one described by the interaction alone.
func (s *session) permissionCall(in protocol.Interaction) sdk.ToolCallUpdate {
	var d struct {
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	}
	json.Unmarshal(in.Detail, &d)
	for id, tc := range s.tools {
		if !tc.asked && tc.name == d.Tool && string(compact(tc.args)) == string(compact(d.Arguments)) {
			tc.asked = true
			u := toolCallUpdate(id, tc, sdk.ToolCallStatusPending)
			return sdk.ToolCallUpdate{ToolCallId: u.ToolCallId, Title: u.Title, Kind: u.Kind, Status: u.Status, RawInput: u.RawInput, Locations: u.Locations}
		}
	}
	tc := &toolCall{name: d.Tool}
	tc.setArgs(d.Arguments)
	u := toolCallUpdate(in.InteractionID, tc, sdk.ToolCallStatusPending)
	return sdk.ToolCallUpdate{ToolCallId: u.ToolCallId, Title: sdk.Ptr(in.Prompt), Kind: u.Kind, Status: u.Status, RawInput: u.RawInput, Locations: u.Locations}
}

// resolved cancels the permission request of an interaction answered,
// here or elsewhere.
func (s *session) resolved(id string) {
	s.mu.Lock()
	cancel := s.asks[id]
	delete(s.asks, id)
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// compact returns raw without insignificant space, for comparing.
func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}
