package protocol

// Long sessions: context compaction, fork and rewind.

// Record types of long sessions (TranscriptRecord.Type). A transcript
// written before them has none, and reads as it did.
const (
	// RecordCompaction is a summary of the conversation's older part that
	// the model is sent from then on instead of it: CompactionData. The
	// records it summarizes stay in the transcript.
	RecordCompaction = "compaction"
	// RecordCompactionSetting sets the session's automatic compaction
	// threshold: CompactionSettingData.
	RecordCompactionSetting = "compaction_setting"
	// RecordFileChange is a file the agent's write or edit tool changed,
	// with what it held before: FileChangeData.
	RecordFileChange = "file_change"
	// RecordForked opens the records a fork added to the transcript it
	// copied: ForkedData.
	RecordForked = "forked"
)

// Compaction triggers (CompactionData.Trigger).
const (
	// CompactionAuto: the next request would have passed the session's
	// threshold share of the model's context window.
	CompactionAuto = "auto"
	// CompactionManual: a person asked (session.compact).
	CompactionManual = "manual"
)

// Compaction threshold bounds, in percent of the model's context window.
const (
	DefaultCompactAt = 80
	MinCompactAt     = 10
	MaxCompactAt     = 95
)

// CompactionData is the data of a compaction record.
type CompactionData struct {
	// Summary is what the model is sent in place of the messages it
	// replaces.
	Summary string `json:"summary"`
	// Messages is how many of the conversation's messages, oldest first
	// (an earlier summary counting as one), the summary replaces; the
	// messages after them are sent as they are.
	Messages int `json:"messages"`
	// Kept is how many recent messages were kept as they are.
	Kept int `json:"kept"`
	// Trigger is CompactionAuto or CompactionManual.
	Trigger string `json:"trigger"`
	// Model is the "provider/model" that wrote the summary.
	Model string `json:"model"`
	// ContextWindow is the model's window, in tokens, as its provider
	// describes it.
	ContextWindow int `json:"contextWindow"`
	// TokensBefore and TokensAfter estimate the request's tokens before and
	// after: from the provider's reported usage where known, else a byte
	// count divided by 4.
	TokensBefore int `json:"tokensBefore"`
	TokensAfter  int `json:"tokensAfter"`
	// Usage is what the summary's model call used.
	Usage TurnUsage `json:"usage,omitzero"`
}

// CompactionSettingData is the data of a compaction_setting record.
type CompactionSettingData struct {
	// CompactAt is the share of the model's context window, in percent,
	// past which a turn's request is compacted first; 0 restores the
	// host's default.
	CompactAt int `json:"compactAt"`
}

// FileChangeData is the data of a file_change record.
type FileChangeData struct {
	// Path is the changed file's absolute path.
	Path string `json:"path"`
	// Tool is the tool that changed it: write or edit.
	Tool string `json:"tool"`
	// CallID is the tool call that changed it.
	CallID string `json:"callId,omitempty"`
	// Existed reports whether the file existed before the change.
	Existed bool `json:"existed"`
	// Before is the SHA-256 (hex) of the content before the change, kept
	// beside the session under that name; empty when the file did not
	// exist.
	Before string `json:"before,omitempty"`
	// BeforeBytes is the size of the content before.
	BeforeBytes int64 `json:"beforeBytes,omitempty"`
	// NotKept is set when the content before was larger than MaxKeptFile
	// and was not kept: a rewind cannot put it back.
	NotKept bool `json:"notKept,omitempty"`
	// After is the SHA-256 (hex) of the content the tool wrote.
	After string `json:"after"`
}

// MaxKeptFile bounds the content a file_change keeps of one file.
const MaxKeptFile = 4 << 20

// ChangesDir is the folder, beside a session's transcript, that keeps the
// content of files before a file_change, each under its SHA-256 in hex.
const ChangesDir = "changes"

// ForkedData is the data of a forked record.
type ForkedData struct {
	// FromSessionID is the session the transcript was copied from.
	FromSessionID string `json:"fromSessionId"`
	// AtSequence is the last record copied.
	AtSequence uint64 `json:"atSequence"`
	// RewoundTurnID is the turn a rewind went back to, when the fork was one.
	RewoundTurnID string `json:"rewoundTurnId,omitempty"`
	// Restored lists the files a rewind put back as they were, and
	// Removed those it removed: the rewound turns created them.
	Restored []string `json:"restored,omitempty"`
	Removed  []string `json:"removed,omitempty"`
}

// EventCompaction reports a compaction as it happens: SessionDelta's
// Compaction says which step.
const EventCompaction = "compaction"

// Compaction states (CompactionInfo.State).
const (
	CompactionStarted  = "started"
	CompactionFinished = "finished"
	CompactionFailed   = "failed"
)

// CompactionInfo is a compaction's progress, on a compaction delta.
type CompactionInfo struct {
	State   string `json:"state"`
	Trigger string `json:"trigger"`
	// TokensBefore estimates the request's tokens before; TokensAfter
	// after (finished only).
	TokensBefore int `json:"tokensBefore,omitempty"`
	TokensAfter  int `json:"tokensAfter,omitempty"`
	// ContextWindow is the model's window in tokens.
	ContextWindow int `json:"contextWindow,omitempty"`
	// Error says why it failed (failed only); the session is as it was.
	Error string `json:"error,omitempty"`
}

// CompactInput is the input of session.compact.
type CompactInput struct {
	SessionID string `json:"sessionId"`
	// Keep is how many of the most recent messages to keep as they are;
	// 0 lets the worker choose (what fits a quarter of the window). A
	// tool's result is never kept without its call.
	Keep int `json:"keep,omitempty"`
}

// Validate checks the input.
func (in *CompactInput) Validate() error {
	if err := requireString("input.sessionId", in.SessionID); err != nil {
		return err
	}
	if in.Keep < 0 {
		return FieldError("input.keep", "must be 0 or more, not %d", in.Keep)
	}
	return nil
}

// CompactResult is the result of session.compact.
type CompactResult struct {
	SessionID string `json:"sessionId"`
	// Sequence is the compaction record's.
	Sequence   uint64         `json:"sequence"`
	Compaction CompactionData `json:"compaction"`
}

// CompactionSetInput is the input of session.compaction.set.
type CompactionSetInput struct {
	SessionID string `json:"sessionId"`
	// CompactAt is the share of the model's window, in percent (MinCompactAt
	// to MaxCompactAt), past which a request is compacted first; 0 restores
	// the host's default.
	CompactAt int `json:"compactAt"`
}

// Validate checks the input.
func (in *CompactionSetInput) Validate() error {
	if err := requireString("input.sessionId", in.SessionID); err != nil {
		return err
	}
	if in.CompactAt != 0 && (in.CompactAt < MinCompactAt || in.CompactAt > MaxCompactAt) {
		return FieldError("input.compactAt", "%d is not a percent from %d to %d (or 0 for the default)", in.CompactAt, MinCompactAt, MaxCompactAt)
	}
	return nil
}

// CompactionSetting is the result of session.compaction.set.
type CompactionSetting struct {
	SessionID string `json:"sessionId"`
	// CompactAt is the threshold in force, in percent.
	CompactAt int `json:"compactAt"`
	// ContextWindow is the session's model's window in tokens.
	ContextWindow int `json:"contextWindow"`
}

// ForkInput is the input of session.fork.
type ForkInput struct {
	SessionID string `json:"sessionId"`
	// AtSequence is the last record the fork copies; omitted, the whole
	// transcript.
	AtSequence *uint64 `json:"atSequence,omitempty"`
	// Title is the new session's; empty, the original's with " (fork)".
	Title string `json:"title,omitempty"`
}

// Validate checks the input.
func (in *ForkInput) Validate() error {
	if err := requireString("input.sessionId", in.SessionID); err != nil {
		return err
	}
	if in.AtSequence != nil && *in.AtSequence == 0 {
		return FieldError("input.atSequence", "records are numbered from 1")
	}
	return nil
}

// RewindInput is the input of session.rewind.
type RewindInput struct {
	SessionID string `json:"sessionId"`
	// TurnID is the turn to go back to: the new session holds the
	// transcript from before it.
	TurnID string `json:"turnId"`
	// Files puts back the files the agent's write and edit tools changed
	// in that turn and after, as they were before it.
	Files bool   `json:"files,omitempty"`
	Title string `json:"title,omitempty"`
}

// Validate checks the input.
func (in *RewindInput) Validate() error {
	if err := requireString("input.sessionId", in.SessionID); err != nil {
		return err
	}
	return requireString("input.turnId", in.TurnID)
}

// RewindResult is the result of session.rewind.
type RewindResult struct {
	// Session is the new branch.
	Session Session `json:"session"`
	// Restored lists the files put back, by absolute path.
	Restored []string `json:"restored"`
	// Removed lists the files the rewound turns created, removed.
	Removed []string `json:"removed"`
}

func (in *CompactInput) SessionRef() *string       { return &in.SessionID }
func (in *CompactionSetInput) SessionRef() *string { return &in.SessionID }
func (in *ForkInput) SessionRef() *string          { return &in.SessionID }
func (in *RewindInput) SessionRef() *string        { return &in.SessionID }
