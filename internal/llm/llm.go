// Package llm holds the types the agent loop, the model providers and the
// tools share: conversation messages, tool specifications, tool calls and
// results, and the events of a streamed model reply. It knows no provider's
// wire format and runs nothing.
package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Roles of a message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	// RoleTool messages carry tool results back to the model.
	RoleTool = "tool"
)

// Part kinds.
const (
	PartText       = "text"
	PartThinking   = "thinking"
	PartToolCall   = "tool_call"
	PartToolResult = "tool_result"
)

// Part is one piece of a message.
type Part struct {
	Type string `json:"type"`
	// Text is the text of a text or thinking part.
	Text string `json:"text,omitempty"`
	// Signature is the provider's opaque proof of a thinking part, to send
	// back unchanged (Anthropic extended thinking).
	Signature  string      `json:"signature,omitempty"`
	ToolCall   *ToolCall   `json:"toolCall,omitempty"`
	ToolResult *ToolResult `json:"toolResult,omitempty"`
}

// Message is one message of a conversation.
type Message struct {
	Role  string `json:"role"`
	Parts []Part `json:"parts"`
}

// Text returns the concatenated text parts of m.
func (m Message) Text() string {
	var s string
	for _, p := range m.Parts {
		if p.Type == PartText {
			s += p.Text
		}
	}
	return s
}

// ToolCalls returns the tool calls of m, in order.
func (m Message) ToolCalls() []ToolCall {
	var calls []ToolCall
	for _, p := range m.Parts {
		if p.Type == PartToolCall && p.ToolCall != nil {
			calls = append(calls, *p.ToolCall)
		}
	}
	return calls
}

// ToolCall is the model's request to run a tool.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolResult is a tool's answer to one call.
type ToolResult struct {
	CallID  string `json:"callId"`
	Name    string `json:"name"`
	Content string `json:"content"`
	IsError bool   `json:"isError,omitempty"`
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Parameters is the JSON Schema of the tool's arguments (an object).
	Parameters json.RawMessage `json:"parameters"`
}

// Thinking levels.
const (
	ThinkingOff    = "off"
	ThinkingLow    = "low"
	ThinkingMedium = "medium"
	ThinkingHigh   = "high"
)

// Request is one call to a model.
type Request struct {
	Model    string
	System   string
	Messages []Message
	Tools    []ToolSpec
	// Thinking is one of the Thinking* levels; "" means off.
	Thinking  string
	MaxTokens int
}

// Event kinds of a streamed reply.
const (
	// EventText carries a text delta.
	EventText = "text"
	// EventThinking carries a thinking delta.
	EventThinking = "thinking"
	// EventToolCallStart announces a tool call (ID and Name set).
	EventToolCallStart = "tool_call_start"
	// EventToolCallDelta carries a fragment of a tool call's JSON arguments.
	EventToolCallDelta = "tool_call_delta"
	// EventToolCall carries a complete tool call.
	EventToolCall = "tool_call"
	// EventRetry says that the call failed before any of its reply came
	// and is about to be made again after a wait (Retry set). It is no
	// part of the reply.
	EventRetry = "retry"
)

// Event is one piece of a streamed reply.
type Event struct {
	Kind     string
	Text     string
	ToolCall *ToolCall
	Retry    *Retry
}

// Retry describes a model call about to be made again.
type Retry struct {
	// Attempt is the number of the call that failed, from 1.
	Attempt int
	// MaxAttempts is the most calls that will be made.
	MaxAttempts int
	// Delay is the wait before the next call.
	Delay time.Duration
	// Reason is the failure, for people; it never carries a key.
	Reason string
}

// Stop reasons.
const (
	StopEnd      = "end"
	StopToolUse  = "tool_use"
	StopMaxToken = "max_tokens"
)

// Usage is what model calls used, as their provider reported it. The
// input is split three ways, each priced apart: InputTokens are the
// prompt's tokens neither read from nor written to the provider's prompt
// cache, so the whole prompt is InputTokens + CacheReadTokens +
// CacheWriteTokens.
type Usage struct {
	InputTokens      int `json:"inputTokens"`
	OutputTokens     int `json:"outputTokens"`
	CacheReadTokens  int `json:"cacheReadTokens,omitempty"`
	CacheWriteTokens int `json:"cacheWriteTokens,omitempty"`
	// Cost is what the tokens cost in US dollars, when Priced: the
	// provider knows the model's prices. It is never guessed.
	Cost   float64 `json:"cost,omitempty"`
	Priced bool    `json:"priced,omitempty"`
}

// IsZero reports whether u counts no token.
func (u Usage) IsZero() bool {
	return u.InputTokens == 0 && u.OutputTokens == 0 && u.CacheReadTokens == 0 && u.CacheWriteTokens == 0
}

// Add returns the usage of u's calls and v's together. Its cost is known
// only when every call that used tokens had a known cost.
func (u Usage) Add(v Usage) Usage {
	sum := Usage{
		InputTokens:      u.InputTokens + v.InputTokens,
		OutputTokens:     u.OutputTokens + v.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens + v.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
	}
	switch {
	case v.IsZero() && !v.Priced:
		sum.Cost, sum.Priced = u.Cost, u.Priced
	case u.IsZero() && !u.Priced:
		sum.Cost, sum.Priced = v.Cost, v.Priced
	case u.Priced && v.Priced:
		sum.Cost, sum.Priced = u.Cost+v.Cost, true
	}
	return sum
}

// Price is what a model's tokens cost, in US dollars per million tokens.
type Price struct {
	Input      float64
	Output     float64
	CacheRead  float64
	CacheWrite float64
}

// Priced returns u with its cost at price p.
func (p Price) Priced(u Usage) Usage {
	u.Cost = (float64(u.InputTokens)*p.Input + float64(u.OutputTokens)*p.Output +
		float64(u.CacheReadTokens)*p.CacheRead + float64(u.CacheWriteTokens)*p.CacheWrite) / 1e6
	u.Priced = true
	return u
}

// DefaultContextWindow is the window assumed for a model nobody describes:
// small enough that any model of 2024 or later holds it, so compaction
// starts early rather than a turn failing.
const DefaultContextWindow = 32_000

// ModelInfo is what is known of one model beyond its name.
type ModelInfo struct {
	// ContextWindow is the most tokens one request may hold, the prompt
	// and the reply together.
	ContextWindow int
	// Known reports whether ContextWindow comes from a table or the
	// provider's own listing; false means DefaultContextWindow was assumed.
	Known bool
	// Price is the model's price, nil when it is not known.
	Price *Price
}

// Describer is implemented by a provider that knows its models' windows
// and prices.
type Describer interface {
	// Describe returns what the provider knows of model; Known is false
	// when it knows nothing.
	Describe(model string) ModelInfo
}

// Describe returns what p knows of model, with DefaultContextWindow when it
// knows no window.
func Describe(p Provider, model string) ModelInfo {
	var info ModelInfo
	if d, ok := p.(Describer); ok {
		info = d.Describe(model)
	}
	if info.ContextWindow <= 0 {
		info.ContextWindow, info.Known = DefaultContextWindow, false
	}
	return info
}

// Reply is a finished model reply.
type Reply struct {
	Message    Message
	StopReason string
	Usage      Usage
}

// Provider streams replies from one family of models.
type Provider interface {
	// Name is the provider's name in "provider/model" ("faux", "anthropic", "openai").
	Name() string
	// Models lists the models the provider offers, best known first.
	Models() []string
	// Stream calls the model, passing each event to emit as it arrives,
	// and returns the whole reply. An emit error stops the stream and is
	// returned. Failures are *ProviderError when they come from the
	// provider's service.
	Stream(ctx context.Context, req Request, emit func(Event) error) (Reply, error)
}

// ProviderError is a failure reported by a provider's service.
type ProviderError struct {
	Provider string
	// Status is the HTTP status, 0 when there was none.
	Status int
	// Message is safe to show to people: it never carries a key.
	Message string
	// Retryable reports whether the same request may succeed later
	// (rate limits, overload, server errors).
	Retryable bool
}

func (e *ProviderError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s: %s (HTTP %d)", e.Provider, e.Message, e.Status)
	}
	return fmt.Sprintf("%s: %s", e.Provider, e.Message)
}
