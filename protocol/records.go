package protocol

import (
	"encoding/json"
	"strings"
)

// Transcript record types (TranscriptRecord.Type).
const (
	// RecordTurnStart opens a turn: TurnStartData.
	RecordTurnStart = "turn_start"
	// RecordTurnEnd closes a turn: TurnEndData.
	RecordTurnEnd = "turn_end"
	// RecordUserMessage is a turn's prompt or a steering message:
	// UserMessageData.
	RecordUserMessage = "user_message"
	// RecordAssistantMessage is a model's reply: MessageData.
	RecordAssistantMessage = "assistant_message"
	// RecordToolResults answers a reply's tool calls: MessageData.
	RecordToolResults = "tool_results"
	// RecordQueueAdd is a message queued while a turn ran: QueueData.
	RecordQueueAdd = "queue_add"
	// RecordQueueRetract takes a queued message back: QueueData without
	// Text and Placement.
	RecordQueueRetract = "queue_retract"
	// RecordToolAllowed allows a tool for the rest of the session:
	// ToolAllowedData.
	RecordToolAllowed = "tool_allowed"
)

// ToolAllowedData is the data of a tool_allowed record.
type ToolAllowedData struct {
	Tool string `json:"tool"`
}

// TurnStartData is the data of a turn_start record.
type TurnStartData struct {
	RunID string `json:"runId"`
	Text  string `json:"text"`
	Model string `json:"model"`
	// MessageID is the submitted message the turn answers, if any.
	MessageID string `json:"messageId,omitempty"`
	// Instructions are the project instruction files the model was given
	// for the turn, outermost first.
	Instructions []InstructionFile `json:"instructions,omitempty"`
}

// InstructionFile is a project instruction file (AGENTS.md, or CLAUDE.md
// where a directory has no AGENTS.md) read at a turn's start and given to
// the model.
type InstructionFile struct {
	// Path is the file's absolute path.
	Path string `json:"path"`
	// Bytes is how many of its bytes the model was given.
	Bytes int `json:"bytes"`
	// Truncated is set when the file was cut (to Bytes, perhaps 0) to keep
	// the instructions within their bound.
	Truncated bool `json:"truncated,omitempty"`
}

// TurnEndData is the data of a turn_end record.
type TurnEndData struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// Usage is what the turn's model calls used, when their provider
	// reported it.
	Usage TurnUsage `json:"usage,omitzero"`
}

// TurnUsage is what a turn's model calls used, summed over the calls, as
// their provider reported it. The prompt's tokens are split as they are
// priced: InputTokens neither read from nor written to the provider's
// prompt cache, CacheReadTokens and CacheWriteTokens.
type TurnUsage struct {
	// ModelCalls is how many model calls the turn made.
	ModelCalls       int `json:"modelCalls"`
	InputTokens      int `json:"inputTokens"`
	OutputTokens     int `json:"outputTokens"`
	CacheReadTokens  int `json:"cacheReadTokens,omitempty"`
	CacheWriteTokens int `json:"cacheWriteTokens,omitempty"`
	// CostUSD is what the tokens cost in US dollars at the provider's
	// published prices; 0, and absent, when a call's model has no known
	// price.
	CostUSD float64 `json:"costUsd,omitempty"`
	// ContextTokens is the size, in tokens, of the conversation as the
	// last model call that reported usage saw it: its prompt (cached or
	// not) and its reply. Absent in records written before it was kept.
	ContextTokens int `json:"contextTokens,omitempty"`
	// ContextWindow is the window, in tokens, of the model the turn's
	// calls went to, as its provider describes it; absent when unknown.
	ContextWindow int `json:"contextWindow,omitempty"`
}

// UserMessageData is the data of a user_message record.
type UserMessageData struct {
	Text     string `json:"text"`
	Steering bool   `json:"steering,omitempty"`
	// MessageID is the submitted message a steering message delivers.
	MessageID string `json:"messageId,omitempty"`
}

// QueueData is the data of a queue_add or queue_retract record. A queued
// message is delivered by a turn_start (next turn) or a steering
// user_message with its MessageID; until then it survives the worker.
type QueueData struct {
	EntryID   string `json:"entryId"`
	MessageID string `json:"messageId"`
	Placement string `json:"placement,omitempty"`
	Text      string `json:"text,omitempty"`
}

// Message part types (MessagePart.Type).
const (
	PartText       = "text"
	PartThinking   = "thinking"
	PartToolCall   = "tool_call"
	PartToolResult = "tool_result"
)

// MessageData is the data of an assistant_message or tool_results record:
// a model message (role assistant) or the results of its tool calls (role
// tool).
type MessageData struct {
	Role  string        `json:"role"`
	Parts []MessagePart `json:"parts"`
}

// Text returns the message's text parts, joined.
func (m MessageData) Text() string {
	var text strings.Builder
	for _, p := range m.Parts {
		if p.Type == PartText {
			text.WriteString(p.Text)
		}
	}
	return text.String()
}

// MessagePart is one piece of a message.
type MessagePart struct {
	Type string `json:"type"`
	// Text is the text of a text or thinking part.
	Text string `json:"text,omitempty"`
	// Signature is a provider's opaque proof of a thinking part.
	Signature  string          `json:"signature,omitempty"`
	ToolCall   *ToolCallPart   `json:"toolCall,omitempty"`
	ToolResult *ToolResultPart `json:"toolResult,omitempty"`
}

// ToolCallPart is the model's request to run a tool.
type ToolCallPart struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolResultPart is a tool's answer to one call.
type ToolResultPart struct {
	CallID  string `json:"callId"`
	Name    string `json:"name"`
	Content string `json:"content"`
	IsError bool   `json:"isError,omitempty"`
}
