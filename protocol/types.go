package protocol

import (
	"encoding/json"
	"strconv"
	"time"
)

// Host states, in the order a host passes through them.
const (
	StateStarting   = "starting"
	StateRecovering = "recovering"
	StateReady      = "ready"
	StateDraining   = "draining"
)

// HostStatusInput is the (empty) input of host.status.
type HostStatusInput struct{}

// HostStatus is the result of host.status.
type HostStatus struct {
	HostID             string    `json:"hostId"`
	HostEpoch          string    `json:"hostEpoch"`
	PID                int       `json:"pid"`
	Version            string    `json:"version"`
	ProtocolMin        int       `json:"protocolMin"`
	ProtocolMax        int       `json:"protocolMax"`
	CompatibilityEpoch int       `json:"compatibilityEpoch"`
	CompositionID      string    `json:"compositionId"`
	State              string    `json:"state"`
	StartedAt          time.Time `json:"startedAt"`
	UptimeMillis       int64     `json:"uptimeMs"`
	// Connections counts accepted connections, the asking one included.
	Connections int `json:"connections"`
	// ActiveOperations counts admitted requests not yet settled, this one included.
	ActiveOperations int `json:"activeOperations"`
	// ActiveResidencies counts operations holding the host resident.
	ActiveResidencies int `json:"activeResidencies"`
	// Home is the home the host holds, when it holds one.
	Home string `json:"home,omitempty"`
	// LogFile is the file the host logs to; empty when it logs to its
	// standard error.
	LogFile string `json:"logFile,omitempty"`
	// Providers are the host's model providers, configured or not.
	Providers []ProviderStatus `json:"providers,omitempty"`
	// Web is the host's web listener, when it runs one (its OwnerToken
	// never set here).
	Web *WebListener `json:"web,omitempty"`
	// WebOff says why the web listener recorded in the home does not
	// run (its address was taken, say), when it does not.
	WebOff string `json:"webOff,omitempty"`
}

// DiagnosticsQueryInput is the input of host.diagnostics.query.
type DiagnosticsQueryInput struct {
	// Limit bounds the number of diagnostics returned; 0 means all kept.
	Limit int `json:"limit,omitempty"`
}

// Validate checks the input.
func (in *DiagnosticsQueryInput) Validate() error {
	if in.Limit < 0 {
		return FieldError("input.limit", "must not be negative")
	}
	return nil
}

// Diagnostic is one recorded host event, already redacted.
type Diagnostic struct {
	Time    time.Time `json:"time"`
	Level   string    `json:"level"`
	Message string    `json:"message"`
}

// DiagnosticsQueryResult is the result of host.diagnostics.query.
type DiagnosticsQueryResult struct {
	Diagnostics []Diagnostic `json:"diagnostics"`
	// Dropped counts diagnostics no longer kept.
	Dropped uint64 `json:"dropped"`
	// Suppressed counts diagnostics neither logged nor kept because more
	// of their kind came at once than the host writes (10 a kind every
	// 10s); for each kind, one diagnostic says how many.
	Suppressed uint64 `json:"suppressed"`
	// Fanout counts what the host's session fan-out has done since it
	// started.
	Fanout FanoutCounters `json:"fanout"`
}

// FanoutCounters count the work of the host's session fan-out: each
// worker's one event stream, decoded once, its deltas encoded once and
// wrapped for every subscriber.
type FanoutCounters struct {
	// Deltas counts the deltas received from workers.
	Deltas uint64 `json:"deltas"`
	// Encodes counts delta bodies the host encoded: at most one for each
	// delta, whatever the number of subscribers.
	Encodes uint64 `json:"encodes"`
	// Frames counts the delta frames handed to subscribers' connections.
	Frames uint64 `json:"frames"`
	// Coalesced counts deltas merged into the one before them because a
	// subscriber lagged.
	Coalesced uint64 `json:"coalesced"`
	// SlowConsumers counts subscriptions closed with slow_consumer.
	SlowConsumers uint64 `json:"slowConsumers"`
	// SkippedBytes counts the live output (a tool's, a model's text, a
	// PTY's) left out for subscribers that read slower than it came: they
	// skipped ahead to the newest.
	SkippedBytes uint64 `json:"skippedBytes"`
}

// HostResourcesQueryInput is the (empty) input of host.resources.query.
type HostResourcesQueryInput struct{}

// HostResourcesQueryResult is the result of host.resources.query.
type HostResourcesQueryResult struct {
	RSSBytes    uint64 `json:"rssBytes"`
	Goroutines  int    `json:"goroutines"`
	OpenFiles   int    `json:"openFiles"`
	Connections int    `json:"connections"`
	Workers     int    `json:"workers"`
}

// UpgradePrepareInput is the input of host.upgrade.prepare.
type UpgradePrepareInput struct{}

// UpgradePrepareResult is the result of host.upgrade.prepare.
type UpgradePrepareResult struct {
	State string `json:"state"`
}

// ShutdownInput is the (empty) input of host.shutdown.
type ShutdownInput struct{}

// ShutdownResult is the result of host.shutdown.
type ShutdownResult struct {
	State string `json:"state"`
}

// SessionRef names one session by id or unique id prefix.
type SessionRef struct {
	SessionID string `json:"sessionId"`
}

// Validate checks the input.
func (in *SessionRef) Validate() error { return requireString("input.sessionId", in.SessionID) }

// Session listing page sizes.
const (
	DefaultSessionPage = 500
	MaxSessionPage     = 2000
)

// SessionListInput is the input of session.list: one page of sessions,
// most recently active first.
type SessionListInput struct {
	IncludeArchived bool `json:"includeArchived,omitempty"`
	// Limit bounds the page; 0 means DefaultSessionPage.
	Limit int `json:"limit,omitempty"`
	// Cursor continues after the previous page (its NextCursor).
	Cursor string `json:"cursor,omitempty"`
}

// Validate checks the input.
func (in *SessionListInput) Validate() error {
	if in.Limit < 0 || in.Limit > MaxSessionPage {
		return FieldError("input.limit", "must be between 0 and %d", MaxSessionPage)
	}
	return nil
}

// SessionListWatchInput is the (empty) input of session.list.watch.
type SessionListWatchInput struct{}

// Session is a session's header.
type Session struct {
	SessionID string `json:"sessionId"`
	Title     string `json:"title"`
	Cwd       string `json:"cwd"`
	Model     string `json:"model,omitempty"`
	// Thinking is the session's thinking level: off, low, medium or high.
	Thinking string `json:"thinking,omitempty"`
	// Approval is the session's approval policy: ask, all or read-only.
	Approval string `json:"approval,omitempty"`
	// Sandbox is what the session's commands may touch: read-only,
	// workspace or full (no sandbox).
	Sandbox string `json:"sandbox,omitempty"`
	// Network is whether its sandboxed commands may open TCP and UDP
	// sockets: on or off.
	Network string `json:"network,omitempty"`
	// Plugins are the directories of the session's plugin packages,
	// loaded by each of its workers; none: absent.
	Plugins          []string  `json:"plugins,omitempty"`
	CreatedAt        time.Time `json:"createdAt"`
	LastActivityAt   time.Time `json:"lastActivityAt"`
	Status           string    `json:"status"`
	Archived         bool      `json:"archived"`
	Damaged          bool      `json:"damaged,omitempty"`
	MetadataRevision uint64    `json:"metadataRevision"`
}

// SessionListResult is the result of session.list.
type SessionListResult struct {
	Sessions []Session `json:"sessions"`
	// NextCursor continues the listing; empty on the last page.
	NextCursor string `json:"nextCursor,omitempty"`
}

// SessionCreateInput is the input of session.create.
type SessionCreateInput struct {
	SessionID string `json:"sessionId,omitempty"`
	Cwd       string `json:"cwd"`
	Title     string `json:"title,omitempty"`
	Model     string `json:"model,omitempty"`
	Approval  string `json:"approval,omitempty"`
	// Sandbox is what the session's commands may touch; empty:
	// workspace.
	Sandbox string `json:"sandbox,omitempty"`
	// Network is whether its sandboxed commands may open TCP and UDP
	// sockets; empty: on.
	Network string `json:"network,omitempty"`
	// Plugins are the directories of the session's plugin packages, in
	// Claude Code's layout, absolute.
	Plugins []string `json:"plugins,omitempty"`
}

// Validate checks the input.
func (in *SessionCreateInput) Validate() error {
	if err := validApproval(in.Approval); err != nil {
		return err
	}
	if err := ValidSandbox("input.sandbox", in.Sandbox, "input.network", in.Network); err != nil {
		return err
	}
	if err := ValidPluginDirs("input.plugins", in.Plugins); err != nil {
		return err
	}
	return requireString("input.cwd", in.Cwd)
}

// ValidSandbox checks a sandbox mode and a network setting, either of
// which may be empty (its default), and names the field at fault:
// sandboxField or networkField. A network off needs a sandboxed mode.
func ValidSandbox(sandboxField, mode, networkField, network string) error {
	switch mode {
	case "", SandboxReadOnly, SandboxWorkspace, SandboxFull:
	default:
		return FieldError(sandboxField, `must be "read-only", "workspace" or "full", not %q`, mode)
	}
	switch network {
	case "", NetworkOn:
	case NetworkOff:
		if mode == SandboxFull {
			return FieldError(networkField, `"off" needs a sandbox: with sandbox "full" commands run without one`)
		}
	default:
		return FieldError(networkField, `must be "on" or "off", not %q`, network)
	}
	return nil
}

func validApproval(policy string) error {
	switch policy {
	case "", "ask", "all", "read-only":
		return nil
	}
	return FieldError("input.approval", `must be "ask", "all" or "read-only"`)
}

// SessionRenameInput is the input of session.rename.
type SessionRenameInput struct {
	SessionID string `json:"sessionId"`
	Title     string `json:"title"`
}

// Validate checks the input.
func (in *SessionRenameInput) Validate() error {
	if err := requireString("input.sessionId", in.SessionID); err != nil {
		return err
	}
	return requireString("input.title", in.Title)
}

// TranscriptPageInput is the input of session.transcript.page: a page of
// the transcript of a subscription's session, or of a session named by id.
type TranscriptPageInput struct {
	SubscriptionID  string  `json:"subscriptionId,omitempty"`
	SessionID       string  `json:"sessionId,omitempty"`
	Direction       string  `json:"direction"`
	ThroughSequence *uint64 `json:"throughSequence"`
	Cursor          *string `json:"cursor"`
	AnchorSequence  *uint64 `json:"anchorSequence"`
	MaxBytes        int     `json:"maxBytes"`
}

// Validate checks the input.
func (in *TranscriptPageInput) Validate() error {
	if (in.SubscriptionID == "") == (in.SessionID == "") {
		return FieldError("input.subscriptionId", "name a subscription or, in input.sessionId, a session: one of the two")
	}
	if in.Direction != "older" && in.Direction != "newer" {
		return FieldError("input.direction", `must be "older" or "newer"`)
	}
	if in.MaxBytes <= 0 || in.MaxBytes > MaxMessageBytes/2 {
		return FieldError("input.maxBytes", "must be between 1 and %d", MaxMessageBytes/2)
	}
	return nil
}

// TranscriptPage is the result of session.transcript.page.
type TranscriptPage struct {
	SessionID          string            `json:"sessionId"`
	Direction          string            `json:"direction"`
	ThroughSequence    *uint64           `json:"throughSequence"`
	RawBytes           int               `json:"rawBytes"`
	Records            []json.RawMessage `json:"records"`
	NextCursor         *string           `json:"nextCursor"`
	EndsAtTurnBoundary bool              `json:"endsAtTurnBoundary"`
}

// TodoItem is one step of the agent's plan.
type TodoItem struct {
	Text   string `json:"text"`
	Status string `json:"status"`
}

// TodoQueryResult is the result of session.todo.query.
type TodoQueryResult struct {
	Items []TodoItem `json:"items"`
}

// Content is a message's content.
type Content struct {
	Text string `json:"text"`
}

// TurnRef names one turn of a session.
type TurnRef struct {
	SessionID string `json:"sessionId"`
	TurnID    string `json:"turnId"`
}

// Validate checks the input.
func (in *TurnRef) Validate() error {
	if err := requireString("input.sessionId", in.SessionID); err != nil {
		return err
	}
	return requireString("input.turnId", in.TurnID)
}

// TurnStartInput is the input of turn.start.
type TurnStartInput struct {
	SessionID string  `json:"sessionId"`
	TurnID    string  `json:"turnId"`
	Content   Content `json:"content"`
	// Approval, when set, becomes the session's approval policy from this
	// turn on.
	Approval string `json:"approval,omitempty"`
}

// Validate checks the input.
func (in *TurnStartInput) Validate() error {
	if err := (&TurnRef{in.SessionID, in.TurnID}).Validate(); err != nil {
		return err
	}
	if err := validApproval(in.Approval); err != nil {
		return err
	}
	return requireString("input.content.text", in.Content.Text)
}

// TurnSnapshot is a turn's state.
type TurnSnapshot struct {
	SessionID string `json:"sessionId"`
	TurnID    string `json:"turnId"`
	RunID     string `json:"runId"`
	Status    string `json:"status"`
	Error     string `json:"error,omitempty"`
	// Usage is what the turn's model calls have used so far, when their
	// provider reported it.
	Usage TurnUsage `json:"usage,omitzero"`
}

// TurnStartResult is the result of turn.start.
type TurnStartResult struct {
	Kind string       `json:"kind"`
	Turn TurnSnapshot `json:"turn"`
}

// Message placements.
const (
	PlacementSteering = "steering"
	PlacementNextTurn = "next_turn"
)

// MessageTurnID returns the id of the turn a submitted message starts,
// when it starts one: "t" and the message's id, in the form of the ids
// clients give the turns they start ("t" and 16 hex digits), when the
// message's id is 16 hex digits.
func MessageTurnID(messageID string) string { return "t" + messageID }

// MessageSubmitInput is the input of turn.message.submit.
type MessageSubmitInput struct {
	SessionID string  `json:"sessionId"`
	MessageID string  `json:"messageId"`
	Content   Content `json:"content"`
	Placement string  `json:"placement"`
}

// Validate checks the input.
func (in *MessageSubmitInput) Validate() error {
	if err := requireString("input.sessionId", in.SessionID); err != nil {
		return err
	}
	if err := requireString("input.messageId", in.MessageID); err != nil {
		return err
	}
	if in.Placement != PlacementSteering && in.Placement != PlacementNextTurn {
		return FieldError("input.placement", "must be %q or %q", PlacementSteering, PlacementNextTurn)
	}
	return requireString("input.content.text", in.Content.Text)
}

// QueueEntry is a message in a session's queue.
type QueueEntry struct {
	EntryID   string  `json:"entryId"`
	MessageID string  `json:"messageId"`
	Content   Content `json:"content"`
	Placement string  `json:"placement"`
	State     string  `json:"state"`
}

// QueueRetractInput is the input of queue.retract.
type QueueRetractInput struct {
	SessionID string `json:"sessionId"`
	EntryID   string `json:"entryId"`
}

// Validate checks the input.
func (in *QueueRetractInput) Validate() error {
	if err := requireString("input.sessionId", in.SessionID); err != nil {
		return err
	}
	return requireString("input.entryId", in.EntryID)
}

// Interaction is a permission request or question from the agent.
type Interaction struct {
	InteractionID string          `json:"interactionId"`
	SessionID     string          `json:"sessionId"`
	Kind          string          `json:"kind"`
	Prompt        string          `json:"prompt"`
	Detail        json.RawMessage `json:"detail,omitempty"`
	State         string          `json:"state"`
	Answer        string          `json:"answer,omitempty"`
	// AnsweredBy is the client that answered it (state answered).
	AnsweredBy *Caller `json:"answeredBy,omitempty"`
}

// Tool names the tool a permission interaction asks about, from its
// detail; "" for any other.
func (in Interaction) Tool() string {
	var d struct {
		Tool string `json:"tool"`
	}
	json.Unmarshal(in.Detail, &d)
	return d.Tool
}

// InteractionQueryResult is the result of interaction.query.
type InteractionQueryResult struct {
	Pending []Interaction `json:"pending"`
}

// InteractionAnswerInput is the input of interaction.answer.
type InteractionAnswerInput struct {
	SessionID     string `json:"sessionId"`
	InteractionID string `json:"interactionId"`
	Answer        string `json:"answer"`
}

// Validate checks the input.
func (in *InteractionAnswerInput) Validate() error {
	if err := requireString("input.sessionId", in.SessionID); err != nil {
		return err
	}
	if err := requireString("input.interactionId", in.InteractionID); err != nil {
		return err
	}
	return requireString("input.answer", in.Answer)
}

// ModelsListInput is the (empty) input of models.list.
type ModelsListInput struct{}

// Model is one model a provider offers.
type Model struct {
	Provider string `json:"provider"`
	ModelID  string `json:"modelId"`
	// Unavailable says why the model cannot run now, and what to do about
	// it; empty when it can.
	Unavailable string `json:"unavailable,omitempty"`
	// Source says where the model is known from: ModelSourceProvider or
	// ModelSourceBuiltin.
	Source string `json:"source,omitempty"`
	// ContextWindow is the model's context window in tokens, 0 when it is
	// not known.
	ContextWindow int `json:"contextWindow,omitempty"`
}

// Where a model is known from (Model.Source).
const (
	// ModelSourceProvider is a model its provider's service listed.
	ModelSourceProvider = "provider"
	// ModelSourceBuiltin is a model of agentd's own table, listed while
	// no listing of the provider's is known (offline, no key yet).
	ModelSourceBuiltin = "built-in"
)

// ModelsListResult is the result of models.list.
type ModelsListResult struct {
	Models  []Model `json:"models"`
	Default *Model  `json:"default"`
	// Providers are the host's model providers, configured or not.
	Providers []ProviderStatus `json:"providers,omitempty"`
}

// Where a provider's API key comes from (ProviderStatus.KeySource).
const (
	// KeySourceEnvironment is a key in the host's environment.
	KeySourceEnvironment = "environment"
	// KeySourceFile is a key in the home's credentials file.
	KeySourceFile = "credentials file"
)

// ProviderStatus says whether a model provider can be called and where
// its API key comes from. It never carries a key.
type ProviderStatus struct {
	Name       string `json:"name"`
	Configured bool   `json:"configured"`
	// KeySource is where the key in use comes from: KeySourceEnvironment
	// or KeySourceFile; empty when the provider has none (it needs none,
	// or talks to a server at a base URL without one).
	KeySource string `json:"keySource,omitempty"`
	// KeyEnv is the environment variable the provider's key is read from;
	// empty for a provider that takes no key.
	KeyEnv string `json:"keyEnv,omitempty"`
	// AnyModel is set when the provider accepts models it does not list
	// (an OpenAI-compatible server at a base URL).
	AnyModel bool `json:"anyModel,omitempty"`
	// Unavailable says why the provider cannot be called, and what to do
	// about it; empty when it is configured.
	Unavailable string `json:"unavailable,omitempty"`
}

// ModelsSelectInput is the input of models.select. Without a session it
// selects the default for new sessions.
type ModelsSelectInput struct {
	SessionID string `json:"sessionId,omitempty"`
	Model     string `json:"model"`
}

// Validate checks the input.
func (in *ModelsSelectInput) Validate() error { return requireString("input.model", in.Model) }

// ThinkingSetInput is the input of models.thinking.set.
type ThinkingSetInput struct {
	SessionID string `json:"sessionId"`
	Level     string `json:"level"`
}

// Validate checks the input.
func (in *ThinkingSetInput) Validate() error {
	if err := requireString("input.sessionId", in.SessionID); err != nil {
		return err
	}
	switch in.Level {
	case "off", "low", "medium", "high":
		return nil
	}
	return FieldError("input.level", "must be off, low, medium or high")
}

// ModelSelection is the result of models.select and models.thinking.set.
type ModelSelection struct {
	SessionID string `json:"sessionId,omitempty"`
	Model     string `json:"model"`
	Thinking  string `json:"thinking,omitempty"`
}

// Transcript bootstrap kinds (TranscriptBootstrap.Kind).
const (
	// TranscriptNone starts a subscription with the projection alone.
	TranscriptNone = "none"
	// TranscriptTail is TranscriptNone: a client pages the tail itself.
	TranscriptTail = "tail"
	// TranscriptAfter first delivers every transcript record after
	// Sequence, as entry_added deltas, then the live deltas: a client that
	// followed the session up to record Sequence resumes with nothing
	// missing or repeated.
	TranscriptAfter = "after"
)

// TranscriptBootstrap says which transcript a subscription starts with.
type TranscriptBootstrap struct {
	Kind string `json:"kind"`
	// Sequence is the last record the client has (kind "after").
	Sequence uint64 `json:"sequence,omitempty"`
}

// SubscriptionOpenInput is the input of subscription.open.
type SubscriptionOpenInput struct {
	SessionID  string              `json:"sessionId"`
	Transcript TranscriptBootstrap `json:"transcript"`
	// Ptys are the PTYs the subscription chooses as it opens, as
	// subscription.pty_interest.set would: each first sends its screen.
	Ptys []string `json:"ptys,omitempty"`
	// Ready starts the subscription's frames once the open's response has
	// been sent, as subscription.ready would: none precedes the response.
	Ready bool `json:"ready,omitempty"`
}

// Validate checks the input.
func (in *SubscriptionOpenInput) Validate() error {
	if err := requireString("input.sessionId", in.SessionID); err != nil {
		return err
	}
	for i, ref := range in.Ptys {
		if err := requireString("input.ptys["+strconv.Itoa(i)+"]", ref); err != nil {
			return err
		}
	}
	switch in.Transcript.Kind {
	case TranscriptNone, TranscriptTail:
		if in.Transcript.Sequence != 0 {
			return FieldError("input.transcript.sequence", `is set only with kind "after"`)
		}
		return nil
	case TranscriptAfter:
		return nil
	}
	return FieldError("input.transcript.kind", `must be "none", "tail" or "after"`)
}

// SubscriptionOpenResult is the result of subscription.open.
type SubscriptionOpenResult struct {
	HostEpoch      string          `json:"hostEpoch"`
	SubscriptionID string          `json:"subscriptionId"`
	NextSequence   uint64          `json:"nextSequence"`
	Snapshot       json.RawMessage `json:"snapshot"`
}

// SubscriptionRef names one subscription of the connection.
type SubscriptionRef struct {
	SubscriptionID string `json:"subscriptionId"`
}

// Validate checks the input.
func (in *SubscriptionRef) Validate() error {
	return requireString("input.subscriptionId", in.SubscriptionID)
}

// PtyInterestInput is the input of subscription.pty_interest.set.
type PtyInterestInput struct {
	SubscriptionID string   `json:"subscriptionId"`
	Refs           []string `json:"refs"`
	// Redraw names PTYs of Refs chosen before whose screen the
	// subscription is sent again.
	Redraw []string `json:"redraw,omitempty"`
}

// Validate checks the input.
func (in *PtyInterestInput) Validate() error {
	return requireString("input.subscriptionId", in.SubscriptionID)
}

// ResourceRef names one runtime resource of a session.
type ResourceRef struct {
	SessionID string `json:"sessionId"`
	Ref       string `json:"ref"`
}

// Validate checks the input.
func (in *ResourceRef) Validate() error {
	if err := requireString("input.sessionId", in.SessionID); err != nil {
		return err
	}
	return requireString("input.ref", in.Ref)
}

// ResourceQueryInput is the input of runtime.resource.query.
type ResourceQueryInput struct {
	SessionID string  `json:"sessionId"`
	Ref       string  `json:"ref,omitempty"`
	Revision  *uint64 `json:"revision,omitempty"`
	Cursor    *string `json:"cursor,omitempty"`
	Limit     int     `json:"limit,omitempty"`
}

// Validate checks the input.
func (in *ResourceQueryInput) Validate() error {
	if in.Limit < 0 {
		return FieldError("input.limit", "must not be negative")
	}
	return requireString("input.sessionId", in.SessionID)
}

// Resource is a runtime resource's state.
type Resource struct {
	SessionID string     `json:"sessionId"`
	Ref       string     `json:"ref"`
	Kind      string     `json:"kind"`
	Command   string     `json:"command"`
	Cwd       string     `json:"cwd"`
	State     string     `json:"state"`
	ExitCode  *int       `json:"exitCode,omitempty"`
	StartedAt time.Time  `json:"startedAt"`
	EndedAt   *time.Time `json:"endedAt,omitempty"`
	// Cols and Rows are a running PTY's size, which its controller sets;
	// a change of it is a change of the resource. 0 for a shell run.
	Cols int `json:"cols,omitempty"`
	Rows int `json:"rows,omitempty"`
	// Name, Status and Detail describe a service (kind mcp): its name,
	// what it is doing (ServiceStarting, ServiceReady, ServiceFailed,
	// ServiceStopped) and, when it failed, why. Empty for a command.
	Name   string `json:"name,omitempty"`
	Status string `json:"status,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Controller is the client that controls a running PTY, nil while
	// none does; taking and letting go of control is a change of the
	// resource.
	Controller *ResourceController `json:"controller,omitempty"`
}

// ResourceController names the client connection that controls a PTY,
// as the host knows it: a client tells whether it is this one by its
// accepted frame's connectionId.
type ResourceController struct {
	// ConnectionID is the host's id of the connection.
	ConnectionID string `json:"connectionId"`
	// Surface is the kind of client it said it is in its hello: cli,
	// tui, web, acp…
	Surface string `json:"surface,omitempty"`
	// Principal is who the connection proved to be: the owner, or a
	// guest by its grant (with the grant's label).
	Principal Principal `json:"principal"`
}

// Runtime resource kinds (Resource.Kind) and states (Resource.State).
const (
	// ResourceShell is a command whose output is kept, not shown live.
	ResourceShell = "shell"
	// ResourcePTY is a command on a pseudo-terminal: its screen is kept and
	// its output streams to the subscriptions that chose it.
	ResourcePTY = "pty"
	// ResourceMCP is an MCP server the session's agent calls tools of: a
	// command whose stderr is kept, or an HTTP endpoint.
	ResourceMCP = "mcp"

	ResourceRunning = "running"
	ResourceExited  = "exited"
)

// What a service resource is doing (Resource.Status).
const (
	ServiceStarting = "starting"
	ServiceReady    = "ready"
	ServiceFailed   = "failed"
	ServiceStopped  = "stopped"
)

// Bounds of runtime resources.
const (
	// MaxPTYCols and MaxPTYRows bound a PTY's size.
	MaxPTYCols = 1000
	MaxPTYRows = 1000
	// MaxControlDataBytes bounds the input one control call writes.
	MaxControlDataBytes = 64 << 10
	// MaxControlSequence is a controller's last sequence: the call that
	// carries it releases the controller. It is the largest integer every
	// JSON peer reads exactly.
	MaxControlSequence = 1<<53 - 1
)

// ResourceQueryResult is the result of runtime.resource.query.
type ResourceQueryResult struct {
	Revision   uint64     `json:"revision"`
	Resources  []Resource `json:"resources"`
	NextCursor *string    `json:"nextCursor"`
}

// MaxOutputRead bounds the output one runtime.resource.output.read
// returns: its JSON, every byte escaped, still fits in a message.
const MaxOutputRead = 64 << 10

// MaxOutputWait bounds how long runtime.resource.output.read waits for
// output to come: it answers with none then, and the client asks again.
const MaxOutputWait = 25 * time.Second

// OutputReadInput is the input of runtime.resource.output.read.
type OutputReadInput struct {
	SessionID string `json:"sessionId"`
	Ref       string `json:"ref"`
	// Offset is where in the output to read from, in bytes; absent, the
	// last MaxBytes of it.
	Offset *int64 `json:"offset,omitempty"`
	// MaxBytes bounds the output returned; 0 means MaxOutputRead.
	MaxBytes int `json:"maxBytes,omitempty"`
	// Wait, when there is no output past Offset yet and the resource
	// runs, answers once some is written, the resource ends, or
	// MaxOutputWait has passed.
	Wait bool `json:"wait,omitempty"`
}

// Validate checks the input.
func (in *OutputReadInput) Validate() error {
	if err := (&ResourceRef{in.SessionID, in.Ref}).Validate(); err != nil {
		return err
	}
	if in.Offset != nil && *in.Offset < 0 {
		return FieldError("input.offset", "must not be negative")
	}
	if in.MaxBytes < 0 || in.MaxBytes > MaxOutputRead {
		return FieldError("input.maxBytes", "must be between 1 and %d, or 0 for %d", MaxOutputRead, MaxOutputRead)
	}
	return nil
}

// ResourceOutput is the result of runtime.resource.output.read: a piece
// of a resource's output, as its log holds it.
type ResourceOutput struct {
	SessionID string `json:"sessionId"`
	Ref       string `json:"ref"`
	// Offset is where Data starts in the output.
	Offset int64 `json:"offset"`
	// Data is the output from Offset; bytes that are not UTF-8 read as
	// U+FFFD. It ends on a whole character, but at the end of a resource
	// that has ended.
	Data string `json:"data"`
	// NextOffset is where the next read goes on from.
	NextOffset int64 `json:"nextOffset"`
	// Size is the output's length when it was read.
	Size int64 `json:"size"`
	// Resource is the resource's state when it was read.
	Resource Resource `json:"resource"`
	// Complete is set once the resource has ended and NextOffset is the
	// end of its output: there is no more to read.
	Complete bool `json:"complete,omitempty"`
}

// ResourceStartInput is the input of runtime.resource.start.
type ResourceStartInput struct {
	SessionID string `json:"sessionId"`
	LaunchID  string `json:"launchId"`
	Command   string `json:"command"`
	PTY       bool   `json:"pty,omitempty"`
	Cols      int    `json:"cols,omitempty"`
	Rows      int    `json:"rows,omitempty"`
	// Sandbox, when "full", runs the command without the session's
	// sandbox; empty runs it in the session's.
	Sandbox string `json:"sandbox,omitempty"`
}

// Validate checks the input.
func (in *ResourceStartInput) Validate() error {
	if in.Sandbox != "" && in.Sandbox != SandboxFull {
		return FieldError("input.sandbox", `must be "full" (no sandbox) or absent (the session's), not %q`, in.Sandbox)
	}
	if err := requireString("input.sessionId", in.SessionID); err != nil {
		return err
	}
	if err := requireString("input.launchId", in.LaunchID); err != nil {
		return err
	}
	if err := requireString("input.command", in.Command); err != nil {
		return err
	}
	return checkPTYSize(in.Cols, in.Rows)
}

// checkPTYSize checks a PTY size, where 0 leaves a dimension as it is.
func checkPTYSize(cols, rows int) error {
	if cols < 0 || cols > MaxPTYCols {
		return FieldError("input.cols", "must be between 1 and %d, or 0 to leave it", MaxPTYCols)
	}
	if rows < 0 || rows > MaxPTYRows {
		return FieldError("input.rows", "must be between 1 and %d, or 0 to leave it", MaxPTYRows)
	}
	return nil
}

// ControllerAcquireResult is the result of runtime.resource.controller.acquire.
type ControllerAcquireResult struct {
	ControllerID string   `json:"controllerId"`
	NextSequence uint64   `json:"nextSequence"`
	Resource     Resource `json:"resource"`
	Screen       string   `json:"screen"`
}

// ControllerRef names a controller of one PTY.
type ControllerRef struct {
	SessionID    string `json:"sessionId"`
	Ref          string `json:"ref"`
	ControllerID string `json:"controllerId"`
}

// Validate checks the input.
func (in *ControllerRef) Validate() error {
	if err := (&ResourceRef{in.SessionID, in.Ref}).Validate(); err != nil {
		return err
	}
	return requireString("input.controllerId", in.ControllerID)
}

// ControlInput is the input of runtime.resource.controller.control.
type ControlInput struct {
	SessionID    string `json:"sessionId"`
	Ref          string `json:"ref"`
	ControllerID string `json:"controllerId"`
	Sequence     uint64 `json:"sequence"`
	Data         string `json:"data,omitempty"`
	Cols         int    `json:"cols,omitempty"`
	Rows         int    `json:"rows,omitempty"`
}

// Validate checks the input.
func (in *ControlInput) Validate() error {
	if err := (&ControllerRef{in.SessionID, in.Ref, in.ControllerID}).Validate(); err != nil {
		return err
	}
	if in.Sequence == 0 || in.Sequence > MaxControlSequence {
		return FieldError("input.sequence", "must be between 1 and %d", uint64(MaxControlSequence))
	}
	if len(in.Data) > MaxControlDataBytes {
		return FieldError("input.data", "is %d bytes, more than the %d one call may write: send it in parts", len(in.Data), MaxControlDataBytes)
	}
	return checkPTYSize(in.Cols, in.Rows)
}

// ControlResult is the result of runtime.resource.controller.control.
type ControlResult struct {
	Sequence uint64 `json:"sequence"`
}

// ControllerDirectResult is the result of
// runtime.resource.controller.direct: where the PTY's worker listens, the
// composition its hello names, and the ticket that binds one connection
// there to the controller.
type ControllerDirectResult struct {
	Endpoint      string `json:"endpoint"`
	CompositionID string `json:"compositionId"`
	Ticket        string `json:"ticket"`
}

// DirectOpenInput is the input of runtime.resource.direct.open, the
// first request of a connection to a PTY's worker.
type DirectOpenInput struct {
	Ticket string `json:"ticket"`
}

// Validate checks the input.
func (in *DirectOpenInput) Validate() error { return requireString("input.ticket", in.Ticket) }

// DirectOpenResult is the result of runtime.resource.direct.open: the
// controller the connection now carries the calls of, and the
// subscription its PTY's output comes on, the screen first.
type DirectOpenResult struct {
	SessionID      string `json:"sessionId"`
	Ref            string `json:"ref"`
	ControllerID   string `json:"controllerId"`
	SubscriptionID string `json:"subscriptionId"`
}

// DirectTerminalInput is the input of runtime.resource.direct.terminal,
// sent on a connection runtime.resource.direct.open bound, with two file
// descriptors passed beside its first byte (SCM_RIGHTS): the client's
// terminal to read keys from, then the one to write the PTY's output to.
// The worker reads the keys and types them into the PTY, and writes the
// PTY's screen and output to the terminal, until it gives the terminal
// back: the call's result.
type DirectTerminalInput struct {
	// DetachKey, when set, is one byte that gives the terminal back when
	// typed (reason detached): the keys typed before it reach the PTY,
	// and it and what follows it in the same read do not.
	DetachKey string `json:"detachKey,omitempty"`
}

// Validate checks the input.
func (in *DirectTerminalInput) Validate() error {
	if len(in.DetachKey) > 1 {
		return FieldError("input.detachKey", "is %d bytes: it is one byte or none", len(in.DetachKey))
	}
	return nil
}

// Why a worker gave a lent terminal back (DirectTerminalResult.Reason).
const (
	// TerminalDetached: the detach key was typed.
	TerminalDetached = "detached"
	// TerminalControlEnded: the controller ended: released, the PTY
	// exited, the controller's connection to the host closed.
	TerminalControlEnded = "control_ended"
	// TerminalSlow: the terminal took the PTY's output slower than the
	// PTY made it; the client goes on through the host, which skips a
	// slow reader to the screen.
	TerminalSlow = "slow_terminal"
	// TerminalReturned: the client asked for it back by half-closing its
	// connection, or the terminal hung up or failed.
	TerminalReturned = "returned"
)

// DirectTerminalResult is the result of runtime.resource.direct.terminal,
// answered once the worker reads and writes the terminal no more and has
// closed its descriptors.
type DirectTerminalResult struct {
	Reason string `json:"reason"`
}
