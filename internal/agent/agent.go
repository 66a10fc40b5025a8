// Package agent is the agent loop: it streams a model's reply, runs the
// tools the model calls (after the approval the session's policy asks
// for), feeds their results back, and ends when the model stops calling
// tools, when asked to stop after the current step, when interrupted, or on
// failure. It knows nothing of sessions, transcripts or the protocol: the
// worker gives it a provider, tools and hooks.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/tools"
)

// DefaultMaxSteps bounds the model calls of one run.
const DefaultMaxSteps = 100

// Event kinds the loop reports.
const (
	MessageStart   = "message_start"
	MessageUpdate  = "message_update"
	MessageEnd     = "message_end"
	ToolCallStart  = "tool_call_start"
	ToolCallUpdate = "tool_call_update"
	ToolCallEnd    = "tool_call_end"
	// Retry says that the model call of MessageID failed before its reply
	// began and is made again after a wait (Retry set).
	Retry = "retry"
)

// Event is one thing the loop did, in order.
type Event struct {
	Kind      string
	MessageID string
	// Text and Thinking are deltas on MessageUpdate.
	Text     string
	Thinking string
	// Message is the whole message on MessageEnd.
	Message *llm.Message
	// ToolCall is set on the tool call events.
	ToolCall *llm.ToolCall
	// Output is a chunk (ToolCallUpdate) or the result (ToolCallEnd).
	Output  string
	IsError bool
	// Usage is what the model call used, on MessageEnd, as its provider
	// reported it: a call that failed may have used tokens too.
	Usage llm.Usage
	// Retry is set on Retry.
	Retry *llm.Retry
}

// Decision is the answer to a tool call that needs approval.
type Decision struct {
	Allow  bool
	Reason string
}

// Loop runs turns. Its hooks are called from the goroutine running Run.
type Loop struct {
	Provider llm.Provider
	Model    string
	Thinking string
	System   string
	Tools    []tools.Tool
	Env      *tools.Env
	MaxSteps int
	// Logger records what the model is not told, such as the stack of a
	// tool that panicked; nil discards.
	Logger *slog.Logger

	// Approve decides whether a tool call may run; nil allows every call.
	Approve func(ctx context.Context, call llm.ToolCall, tool tools.Tool) (Decision, error)
	// Steering returns messages to add before the next model call.
	Steering func() []llm.Message
	// Emit receives every event.
	Emit func(Event)
	// Compact, when set, is called before each model call with its
	// request. When it compacted the conversation it returns the one to
	// send instead, which the loop goes on with; nil sends the request as
	// it is.
	Compact func(ctx context.Context, req llm.Request) []llm.Message
	// Commit is called with each finished message (an assistant reply, a
	// tool result, a steering message) before the loop goes on; an error
	// (the transcript cannot be written) fails the run.
	Commit func(llm.Message) error

	stop    atomic.Bool
	nextMsg atomic.Uint64
}

// Stop asks the loop to end after its current step.
func (l *Loop) Stop() { l.stop.Store(true) }

// Outcomes of a run.
const (
	OutcomeCompleted   = "completed"
	OutcomeStopped     = "stopped"
	OutcomeInterrupted = "interrupted"
)

// ErrMaxSteps ends a run that used all its steps.
var ErrMaxSteps = errors.New("the model kept calling tools past the step limit")

// Run continues the conversation history until the model is done. It
// returns the outcome, or an error when the run failed.
func (l *Loop) Run(ctx context.Context, history []llm.Message) (string, error) {
	maxSteps := l.MaxSteps
	if maxSteps <= 0 {
		maxSteps = DefaultMaxSteps
	}
	set, err := tools.NewSet(l.Tools...)
	if err != nil {
		return "", err
	}
	specs := set.Specs()
	messages := Repair(history)
	for step := 0; ; step++ {
		if l.Steering != nil {
			for _, m := range l.Steering() {
				if err := l.commit(m); err != nil {
					return "", err
				}
				messages = append(messages, m)
			}
		}
		if err := ctx.Err(); err != nil {
			return OutcomeInterrupted, nil
		}
		if step >= maxSteps {
			return "", ErrMaxSteps
		}
		req := llm.Request{Model: l.Model, System: l.System, Messages: messages, Tools: specs, Thinking: l.Thinking}
		if l.Compact != nil {
			if compacted := l.Compact(ctx, req); compacted != nil {
				messages = Repair(compacted)
				req.Messages = messages
			}
		}
		reply, err := l.callModel(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return OutcomeInterrupted, nil
			}
			return "", err
		}
		if err := l.commit(reply.Message); err != nil {
			return "", err
		}
		messages = append(messages, reply.Message)
		calls := reply.Message.ToolCalls()
		if len(calls) == 0 {
			return OutcomeCompleted, nil
		}
		results := llm.Message{Role: llm.RoleTool}
		for _, call := range calls {
			res := l.runTool(ctx, set, call)
			results.Parts = append(results.Parts, llm.Part{Type: llm.PartToolResult, ToolResult: &res})
		}
		if err := l.commit(results); err != nil {
			return "", err
		}
		messages = append(messages, results)
		if ctx.Err() != nil {
			return OutcomeInterrupted, nil
		}
		if l.stop.Load() {
			return OutcomeStopped, nil
		}
	}
}

func (l *Loop) emit(e Event) {
	if l.Emit != nil {
		l.Emit(e)
	}
}

func (l *Loop) commit(m llm.Message) error {
	if l.Commit == nil {
		return nil
	}
	return l.Commit(m)
}

// callModel streams one reply, reporting its text as it arrives.
func (l *Loop) callModel(ctx context.Context, req llm.Request) (llm.Reply, error) {
	id := "m" + strconv.FormatUint(l.nextMsg.Add(1), 10)
	l.emit(Event{Kind: MessageStart, MessageID: id})
	reply, err := l.Provider.Stream(ctx, req, func(ev llm.Event) error {
		switch ev.Kind {
		case llm.EventText:
			l.emit(Event{Kind: MessageUpdate, MessageID: id, Text: ev.Text})
		case llm.EventThinking:
			l.emit(Event{Kind: MessageUpdate, MessageID: id, Thinking: ev.Text})
		case llm.EventRetry:
			if ev.Retry != nil {
				l.emit(Event{Kind: Retry, MessageID: id, Retry: ev.Retry})
			}
		}
		return nil
	})
	if err != nil {
		l.emit(Event{Kind: MessageEnd, MessageID: id, Message: &llm.Message{Role: llm.RoleAssistant}, IsError: true, Usage: reply.Usage})
		return llm.Reply{}, err
	}
	reply.Message.Role = llm.RoleAssistant
	l.emit(Event{Kind: MessageEnd, MessageID: id, Message: &reply.Message, Usage: reply.Usage})
	return reply, nil
}

// runTool runs one tool call after its approval; every failure, a panic of
// the tool included, becomes an error result for the model, so the turn
// goes on.
func (l *Loop) runTool(ctx context.Context, set *tools.Set, call llm.ToolCall) llm.ToolResult {
	l.emit(Event{Kind: ToolCallStart, ToolCall: &call})
	res := llm.ToolResult{CallID: call.ID, Name: call.Name}
	finish := func(content string, isError bool) llm.ToolResult {
		res.Content, res.IsError = content, isError
		l.emit(Event{Kind: ToolCallEnd, ToolCall: &call, Output: content, IsError: isError})
		return res
	}
	tool, ok := set.Lookup(call.Name)
	if !ok {
		return finish(fmt.Sprintf("there is no tool named %q; the tools are: %s", call.Name, strings.Join(set.Names(), ", ")), true)
	}
	if len(call.Arguments) == 0 || !json.Valid(call.Arguments) {
		return finish(fmt.Sprintf("%s: arguments are not valid JSON", call.Name), true)
	}
	if l.Approve != nil {
		d, err := l.Approve(ctx, call, tool)
		if err != nil {
			return finish(fmt.Sprintf("%s was not run: %v", call.Name, err), true)
		}
		if !d.Allow {
			reason := d.Reason
			if reason == "" {
				reason = "the user denied it"
			}
			return finish(fmt.Sprintf("%s was not run: %s", call.Name, reason), true)
		}
	}
	env := *l.Env
	env.Progress = func(chunk string) {
		l.emit(Event{Kind: ToolCallUpdate, ToolCall: &call, Output: chunk})
	}
	if changed := l.Env.Changed; changed != nil {
		env.Changed = func(c tools.FileChange) {
			c.Tool, c.CallID = call.Name, call.ID
			changed(c)
		}
	}
	out := tools.Call(ctx, l.Logger, tool, &env, call.Arguments)
	return finish(out.Content, out.IsError)
}

// Repair returns history with an error result for every tool call that has
// none — a turn interrupted while its tools ran — so providers, which
// refuse unanswered calls, accept the conversation.
func Repair(history []llm.Message) []llm.Message {
	h := append([]llm.Message(nil), history...)
	out := make([]llm.Message, 0, len(h))
	for i, m := range h {
		out = append(out, m)
		calls := m.ToolCalls()
		if m.Role != llm.RoleAssistant || len(calls) == 0 {
			continue
		}
		hasResults := i+1 < len(h) && h[i+1].Role == llm.RoleTool
		answered := map[string]bool{}
		if hasResults {
			for _, p := range h[i+1].Parts {
				if p.ToolResult != nil {
					answered[p.ToolResult.CallID] = true
				}
			}
		}
		var missing []llm.Part
		for _, c := range calls {
			if !answered[c.ID] {
				missing = append(missing, llm.Part{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{
					CallID: c.ID, Name: c.Name, Content: "the tool call was interrupted before it finished", IsError: true,
				}})
			}
		}
		switch {
		case len(missing) == 0:
		case hasResults:
			// h is a copy: the next message's parts grow there, not in history.
			h[i+1].Parts = append(append([]llm.Part(nil), h[i+1].Parts...), missing...)
		default:
			out = append(out, llm.Message{Role: llm.RoleTool, Parts: missing})
		}
	}
	return out
}
