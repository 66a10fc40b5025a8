package protocol

import (
	"encoding/json"
	"time"
)

// Turn statuses.
const (
	TurnRunning     = "running"
	TurnCompleted   = "completed"
	TurnStopped     = "stopped"
	TurnInterrupted = "interrupted"
	TurnFailed      = "failed"
)

// Session statuses (Session.Status).
const (
	SessionIdle    = "idle"
	SessionRunning = "running"
	SessionWaiting = "waiting" // a pending interaction holds the turn
)

// Approval policies: which tool calls wait for a person.
const (
	ApprovalAsk      = "ask"
	ApprovalAll      = "all"
	ApprovalReadOnly = "read-only"
)

// Sandbox modes: what a session's commands may touch (Session.Sandbox).
const (
	// SandboxReadOnly lets commands read the filesystem and write only
	// their private tmp.
	SandboxReadOnly = "read-only"
	// SandboxWorkspace lets them write beneath the session's directory
	// and their private tmp too. The default.
	SandboxWorkspace = "workspace"
	// SandboxFull runs them without a sandbox.
	SandboxFull = "full"
)

// Network settings of a sandboxed session's commands (Session.Network).
const (
	NetworkOn  = "on"
	NetworkOff = "off"
)

// Interaction kinds and states.
const (
	InteractionPermission = "permission"
	InteractionPending    = "pending"
	InteractionAnswered   = "answered"
	InteractionCancelled  = "cancelled"
	// Answers to a permission interaction.
	AnswerAllow = "allow"
	AnswerDeny  = "deny"
	// AnswerAllowAlways allows the call, and every later call of the same
	// tool in the session without asking: the rule is recorded in the
	// transcript and outlives the worker.
	AnswerAllowAlways = "allow_always"
)

// Queue entry states.
const (
	QueueQueued    = "queued"
	QueueDelivered = "delivered"
	QueueRetracted = "retracted"
)

// SessionProjection is the live state of a session a subscriber receives
// when it opens a subscription; deltas then change it in order.
type SessionProjection struct {
	Session      Session         `json:"session"`
	RootTurn     *TurnSnapshot   `json:"rootTurn"`
	Queue        Queue           `json:"queue"`
	Interactions []Interaction   `json:"interactions"`
	Todo         []TodoItem      `json:"todo"`
	Streams      []MessageStream `json:"streams"`
	// ToolCalls are the tool calls running now, with the tail of their
	// output so far.
	ToolCalls []RunningToolCall `json:"toolCalls"`
	// TranscriptSequence is the last transcript record the projection includes.
	TranscriptSequence uint64 `json:"transcriptSequence"`
}

// Queue holds the messages waiting for a turn: steering ones for the
// running turn's next model call, follow-ups for the next turn.
type Queue struct {
	Steering []QueueEntry `json:"steering"`
	FollowUp []QueueEntry `json:"followup"`
}

// MessageStream is an assistant message still streaming.
type MessageStream struct {
	TurnID    string `json:"turnId"`
	MessageID string `json:"messageId"`
	Text      string `json:"text"`
	Thinking  string `json:"thinking,omitempty"`
}

// MaxRunningOutput bounds the output a running tool call carries in a
// projection: its tail, at most this many bytes.
const MaxRunningOutput = 64 << 10

// RunningToolCall is a tool call that has started and not ended.
type RunningToolCall struct {
	TurnID    string          `json:"turnId"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Output is the tail of the call's output so far, at most
	// MaxRunningOutput bytes.
	Output string `json:"output"`
}

// Delta events, in the order a turn produces them.
const (
	EventRunStart            = "run_start"
	EventMessageStart        = "message_start"
	EventMessageUpdate       = "message_update"
	EventMessageEnd          = "message_end"
	EventToolCallStart       = "tool_call_start"
	EventToolCallUpdate      = "tool_call_update"
	EventToolCallEnd         = "tool_call_end"
	EventEntryAdded          = "entry_added"
	EventRunEnd              = "run_end"
	EventQueueChanged        = "queue_changed"
	EventInteractionAdded    = "interaction_added"
	EventInteractionResolved = "interaction_resolved"
	EventTodoChanged         = "todo_changed"
	EventSessionChanged      = "session_changed"
	// EventModelRetry says that a model call of the turn failed before its
	// reply began and will be made again after a wait: Retry says when
	// and why. It comes between the message's message_start and its first
	// message_update (or its message_end, when the call fails for good).
	EventModelRetry = "model_retry"
)

// RetryNotice describes a model call about to be made again
// (model_retry).
type RetryNotice struct {
	// Attempt is the number of the call that failed, from 1.
	Attempt int `json:"attempt"`
	// MaxAttempts is the most calls that will be made.
	MaxAttempts int `json:"maxAttempts"`
	// DelayMs is the wait before the next call, in milliseconds.
	DelayMs int64 `json:"delayMs"`
	// RetryAt is when the next call is made.
	RetryAt time.Time `json:"retryAt"`
	// Reason is the failure, for people: the provider's status and words.
	Reason string `json:"reason"`
}

// ToolCallInfo describes a tool call in a delta.
type ToolCallInfo struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Output is a chunk (tool_call_update) or the whole result (tool_call_end).
	Output  string `json:"output,omitempty"`
	IsError bool   `json:"isError,omitempty"`
}

// SessionDelta is one ordered change to a session's projection: the Event
// says which fields are set.
type SessionDelta struct {
	Event     string `json:"event"`
	TurnID    string `json:"turnId,omitempty"`
	MessageID string `json:"messageId,omitempty"`
	Role      string `json:"role,omitempty"`
	// Text is a text delta (message_update) or the whole text (message_end).
	Text string `json:"text,omitempty"`
	// Thinking is a thinking delta (message_update).
	Thinking string `json:"thinking,omitempty"`
	// Skipped, on a message_update or tool_call_update, counts the bytes
	// of this message's text and thinking (or this tool call's output)
	// left out just before this delta for this subscriber alone, which
	// read slower than they came: it skipped ahead to the newest. The
	// transcript keeps them (and a shell run's resource log its output).
	Skipped     int64           `json:"skipped,omitempty"`
	ToolCall    *ToolCallInfo   `json:"toolCall,omitempty"`
	Turn        *TurnSnapshot   `json:"turn,omitempty"`
	Interaction *Interaction    `json:"interaction,omitempty"`
	Queue       *Queue          `json:"queue,omitempty"`
	Todo        []TodoItem      `json:"todo,omitempty"`
	Session     *Session        `json:"session,omitempty"`
	Entry       json.RawMessage `json:"entry,omitempty"`
	// Retry is set on model_retry.
	Retry *RetryNotice `json:"retry,omitempty"`
	// Compaction is a compaction's progress (compaction).
	Compaction *CompactionInfo `json:"compaction,omitempty"`
}

// Continues reports whether next carries more of what d does, so the two
// may travel as one delta: both update the text of one message, or the
// output of one tool call.
func (d *SessionDelta) Continues(next *SessionDelta) bool {
	if d.Event != next.Event || d.TurnID != next.TurnID {
		return false
	}
	switch next.Event {
	case EventMessageUpdate:
		return d.MessageID == next.MessageID
	case EventToolCallUpdate:
		return d.ToolCall != nil && next.ToolCall != nil && d.ToolCall.ID == next.ToolCall.ID
	}
	return false
}
