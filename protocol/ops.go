package protocol

import (
	"reflect"
	"slices"
	"sort"
	"sync"
)

// Mode says whether an operation is safe to retry.
type Mode string

const (
	// Query operations change nothing and are safe to retry.
	Query Mode = "query"
	// Command operations change state; they carry client-chosen ids so a
	// retry after a lost connection is recognised, not executed twice.
	Command Mode = "command"
)

// Access is what a caller must be allowed to do to run an operation. It
// is decided once, when a request is dispatched, from the caller's
// principal and the session the input names; nothing else decides it.
type Access string

const (
	// AccessRead reads a session the caller may see: its header,
	// transcript, live stream, plan, runtime resources and PTY screens.
	AccessRead Access = "read"
	// AccessWrite drives a session: starts, steers, stops and interrupts
	// turns, answers its interactions, changes its model settings.
	AccessWrite Access = "write"
	// AccessControl types into a PTY of a session, once the caller has
	// taken control of it.
	AccessControl Access = "control"
	// AccessOwner is the host's owner's alone: the host itself, creating,
	// renaming, archiving and removing sessions, starting and stopping
	// their runtime resources.
	AccessOwner Access = "owner"
)

// Op names one operation together with its input and result types, so a
// call or a handler through it is checked when it is compiled. Its value
// is the operation's name on the wire.
type Op[In, Out any] string

// Operation describes one entry of the operation table.
type Operation struct {
	Name   string
	Mode   Mode
	Access Access
	Input  reflect.Type
	Result reflect.Type
	// Serial operations run one at a time per connection, in arrival order.
	Serial bool
	Doc    string

	newInput func() any
}

// NewInput returns a new zero input of the operation, a pointer to its
// input type, to decode a request into.
func (o Operation) NewInput() any { return o.newInput() }

// Domain reports whether the operation counts against
// MaxInFlightDomainRequests; only host.status does not.
func (o Operation) Domain() bool { return o.Name != string(OpHostStatus) }

// Operation names: the contract.
const (
	OpHostStatus           Op[HostStatusInput, HostStatus]                       = "host.status"
	OpHostDiagnosticsQuery Op[DiagnosticsQueryInput, DiagnosticsQueryResult]     = "host.diagnostics.query"
	OpHostResourcesQuery   Op[HostResourcesQueryInput, HostResourcesQueryResult] = "host.resources.query"
	OpHostUpgradePrepare   Op[UpgradePrepareInput, UpgradePrepareResult]         = "host.upgrade.prepare"
	OpHostShutdown         Op[ShutdownInput, ShutdownResult]                     = "host.shutdown"
	OpHostWebStart         Op[WebStartInput, WebListener]                        = "host.web.start"
	OpHostWebStop          Op[WebStopInput, WebStopResult]                       = "host.web.stop"

	OpGrantCreate Op[GrantCreateInput, GrantCreateResult] = "grant.create"
	OpGrantList   Op[GrantListInput, GrantListResult]     = "grant.list"
	OpGrantRevoke Op[GrantRef, Grant]                     = "grant.revoke"

	OpSessionList           Op[SessionListInput, SessionListResult]    = "session.list"
	OpSessionListWatch      Op[SessionListWatchInput, SubscriptionRef] = "session.list.watch"
	OpSessionCreate         Op[SessionCreateInput, Session]            = "session.create"
	OpSessionGet            Op[SessionRef, Session]                    = "session.get"
	OpSessionRename         Op[SessionRenameInput, Session]            = "session.rename"
	OpSessionArchive        Op[SessionRef, Session]                    = "session.archive"
	OpSessionUnarchive      Op[SessionRef, Session]                    = "session.unarchive"
	OpSessionRemove         Op[SessionRef, SessionRef]                 = "session.remove"
	OpSessionTranscriptPage Op[TranscriptPageInput, TranscriptPage]    = "session.transcript.page"
	OpSessionTodoQuery      Op[SessionRef, TodoQueryResult]            = "session.todo.query"
	OpSessionMCPList        Op[SessionRef, MCPListResult]              = "session.mcp.list"
	OpSessionToolCall       Op[ToolCallInput, ToolCallResult]          = "session.tool.call"

	OpSessionMCPSet Op[SessionMCPSetInput, SessionMCPSetResult] = "session.mcp.set"

	OpSessionCompact       Op[CompactInput, CompactResult]           = "session.compact"
	OpSessionCompactionSet Op[CompactionSetInput, CompactionSetting] = "session.compaction.set"
	OpSessionFork          Op[ForkInput, Session]                    = "session.fork"
	OpSessionRewind        Op[RewindInput, RewindResult]             = "session.rewind"
	OpSessionPluginsSet    Op[SessionPluginsSetInput, Session]       = "session.plugins.set"
	OpSessionCommands      Op[SessionRef, SessionCommandsResult]     = "session.commands"
	OpSessionCommandExpand Op[CommandExpandInput, CommandExpansion]  = "session.command.expand"

	OpTurnStart         Op[TurnStartInput, TurnStartResult] = "turn.start"
	OpTurnQuery         Op[TurnRef, TurnSnapshot]           = "turn.query"
	OpTurnStop          Op[TurnRef, TurnSnapshot]           = "turn.stop"
	OpTurnInterrupt     Op[TurnRef, TurnSnapshot]           = "turn.interrupt"
	OpTurnMessageSubmit Op[MessageSubmitInput, QueueEntry]  = "turn.message.submit"
	OpQueueRetract      Op[QueueRetractInput, QueueEntry]   = "queue.retract"

	OpInteractionQuery  Op[SessionRef, InteractionQueryResult]  = "interaction.query"
	OpInteractionAnswer Op[InteractionAnswerInput, Interaction] = "interaction.answer"

	OpModelsList        Op[ModelsListInput, ModelsListResult] = "models.list"
	OpModelsSelect      Op[ModelsSelectInput, ModelSelection] = "models.select"
	OpModelsThinkingSet Op[ThinkingSetInput, ModelSelection]  = "models.thinking.set"

	OpSubscriptionOpen           Op[SubscriptionOpenInput, SubscriptionOpenResult] = "subscription.open"
	OpSubscriptionReady          Op[SubscriptionRef, SubscriptionRef]              = "subscription.ready"
	OpSubscriptionClose          Op[SubscriptionRef, SubscriptionRef]              = "subscription.close"
	OpSubscriptionPtyInterestSet Op[PtyInterestInput, SubscriptionRef]             = "subscription.pty_interest.set"

	OpRuntimeResourceQuery             Op[ResourceQueryInput, ResourceQueryResult]   = "runtime.resource.query"
	OpRuntimeResourceOutputRead        Op[OutputReadInput, ResourceOutput]           = "runtime.resource.output.read"
	OpRuntimeResourceStart             Op[ResourceStartInput, Resource]              = "runtime.resource.start"
	OpRuntimeResourceStop              Op[ResourceRef, Resource]                     = "runtime.resource.stop"
	OpRuntimeResourceControllerAcquire Op[ResourceRef, ControllerAcquireResult]      = "runtime.resource.controller.acquire"
	OpRuntimeResourceControllerControl Op[ControlInput, ControlResult]               = "runtime.resource.controller.control"
	OpRuntimeResourceControllerRelease Op[ControllerRef, ResourceRef]                = "runtime.resource.controller.release"
	OpRuntimeResourceControllerDirect  Op[ControllerRef, ControllerDirectResult]     = "runtime.resource.controller.direct"
	OpRuntimeResourceDirectOpen        Op[DirectOpenInput, DirectOpenResult]         = "runtime.resource.direct.open"
	OpRuntimeResourceDirectTerminal    Op[DirectTerminalInput, DirectTerminalResult] = "runtime.resource.direct.terminal"
)

func op[In, Out any](name Op[In, Out], mode Mode, access Access, doc string) Operation {
	return Operation{
		Name: string(name), Mode: mode, Access: access, Doc: doc,
		newInput: func() any { return new(In) },
		Input:    reflect.TypeFor[In](), Result: reflect.TypeFor[Out](),
	}
}

func serial(o Operation) Operation { o.Serial = true; return o }

// Operations returns the operation table, in documentation order: a copy
// the caller may keep.
func Operations() []Operation { return slices.Clone(operations()) }

// operations is the operation table, built on first use: a process that
// makes no call (agentd version, the completions) never needs it.
var operations = sync.OnceValue(func() []Operation {
	return []Operation{
		op(OpHostStatus, Query, AccessRead, "The host's identity, state and load. Always admitted through a reserved slot."),
		op(OpHostDiagnosticsQuery, Query, AccessOwner, "Recent host diagnostics, newest last, redacted."),
		op(OpHostResourcesQuery, Query, AccessOwner, "The host's process resources: memory, descriptors, goroutines, workers."),
		op(OpHostUpgradePrepare, Command, AccessOwner, "Prepares the host to hand its home to a newer host."),
		op(OpHostShutdown, Command, AccessOwner, "Drains the host and makes it exit."),
		op(OpHostWebStart, Command, AccessOwner, "Starts the host's web listener, or returns the one it runs."),
		op(OpHostWebStop, Command, AccessOwner, "Stops the host's web listener for good: no host listens again until asked."),

		op(OpGrantCreate, Command, AccessOwner, "Gives a guest a grant on one session, and returns its token."),
		op(OpGrantList, Query, AccessOwner, "Lists the grants in force with their last use."),
		op(OpGrantRevoke, Command, AccessOwner, "Revokes a grant: its guest's requests, subscriptions and PTY control end at once."),

		op(OpSessionList, Query, AccessRead, "Lists sessions from the catalog."),
		op(OpSessionListWatch, Command, AccessRead, "Subscribes to the session list: each change of a session's entry is pushed."),
		op(OpSessionCreate, Command, AccessOwner, "Creates a session."),
		op(OpSessionGet, Query, AccessRead, "Returns one session's header."),
		op(OpSessionRename, Command, AccessOwner, "Renames a session."),
		op(OpSessionArchive, Command, AccessOwner, "Archives a session."),
		op(OpSessionUnarchive, Command, AccessOwner, "Brings an archived session back."),
		op(OpSessionRemove, Command, AccessOwner, "Removes a session and its transcript."),
		serial(op(OpSessionTranscriptPage, Query, AccessRead, "Reads a page of a subscribed session's transcript; serialized per connection.")),
		op(OpSessionTodoQuery, Query, AccessRead, "Returns the agent's plan for a session."),
		op(OpSessionCompact, Command, AccessWrite, "Compacts a session's context now: a summary record replaces its older messages for the model."),
		op(OpSessionCompactionSet, Command, AccessWrite, "Sets the share of the model's window past which a session compacts before a request."),
		op(OpSessionFork, Command, AccessOwner, "Makes a new session whose transcript is the original's up to a record."),
		op(OpSessionRewind, Command, AccessOwner, "Makes a new session from before a turn, and may put back the files that turn and later ones changed."),
		op(OpSessionPluginsSet, Command, AccessOwner, "Records a session's plugin packages; its worker loads them, now and at every start."),
		op(OpSessionCommands, Query, AccessRead, "Lists the plugin packages a session's worker loaded, their prompt commands and skills."),
		op(OpSessionCommandExpand, Query, AccessRead, "Expands a prompt command typed as /name args into its prompt."),
		op(OpSessionMCPList, Query, AccessRead, "Lists a session's MCP servers, their state and their tools."),
		op(OpSessionToolCall, Command, AccessControl, "Calls a tool of one of a session's MCP servers, as its worker runs them."),
		op(OpSessionMCPSet, Command, AccessOwner, "Adds, replaces or removes a session's own MCP servers by name; its workers run them, now and at every start."),

		op(OpTurnStart, Command, AccessWrite, "Starts a turn; the same turnId twice starts one turn."),
		op(OpTurnQuery, Query, AccessRead, "Returns a turn's state."),
		op(OpTurnStop, Command, AccessWrite, "Stops a turn after its current step."),
		op(OpTurnInterrupt, Command, AccessWrite, "Aborts a turn now, killing a running tool."),
		op(OpTurnMessageSubmit, Command, AccessWrite, "Steers the running turn or queues a follow-up for the next."),
		op(OpQueueRetract, Command, AccessWrite, "Retracts a queued message."),

		op(OpInteractionQuery, Query, AccessRead, "Lists a session's pending interactions."),
		op(OpInteractionAnswer, Command, AccessWrite, "Answers a pending interaction; the first answer wins."),

		op(OpModelsList, Query, AccessRead, "Lists configured providers and their models."),
		op(OpModelsSelect, Command, AccessWrite, "Selects the model of a session, or the default for new sessions."),
		op(OpModelsThinkingSet, Command, AccessWrite, "Sets a session's thinking level."),

		op(OpSubscriptionOpen, Command, AccessRead, "Opens a subscription to a session; frames start after subscription.ready."),
		op(OpSubscriptionReady, Command, AccessRead, "Starts a subscription's frames."),
		op(OpSubscriptionClose, Command, AccessRead, "Closes a subscription."),
		op(OpSubscriptionPtyInterestSet, Command, AccessRead, "Chooses the PTYs whose output a subscription receives."),

		op(OpRuntimeResourceQuery, Query, AccessRead, "Lists or reads a session's runtime resources, paged by revision and cursor."),
		op(OpRuntimeResourceOutputRead, Query, AccessRead, "Reads a shell run's or PTY's output from its log, waiting for more when asked."),
		op(OpRuntimeResourceStart, Command, AccessOwner, "Starts a shell run or PTY; launchId makes a retry idempotent."),
		op(OpRuntimeResourceStop, Command, AccessOwner, "Stops a runtime resource."),
		op(OpRuntimeResourceControllerAcquire, Command, AccessControl, "Takes control of a PTY."),
		op(OpRuntimeResourceControllerControl, Command, AccessControl, "Writes input to or resizes a controlled PTY, in sequence."),
		op(OpRuntimeResourceControllerRelease, Command, AccessControl, "Releases control of a PTY."),
		op(OpRuntimeResourceControllerDirect, Command, AccessControl, "Hands a PTY's controller a ticket to its worker, to type and read there without the host between (the owner's socket only)."),
		op(OpRuntimeResourceDirectOpen, Command, AccessControl, "On a PTY's worker: binds the connection to the controller a ticket names, and streams the PTY."),
		op(OpRuntimeResourceDirectTerminal, Command, AccessControl, "On a PTY's worker: lends it the client's terminal, passed with the request, to read keys from and draw the PTY on until it gives it back."),
	}
})

var operationIndex = sync.OnceValue(func() map[string]Operation {
	m := make(map[string]Operation, len(operations()))
	for _, o := range operations() {
		m[o.Name] = o
	}
	return m
})

// Lookup returns the table entry for name.
func Lookup(name string) (Operation, bool) {
	o, ok := operationIndex()[name]
	return o, ok
}

// OperationNames returns every operation name, sorted.
func OperationNames() []string {
	names := make([]string, 0, len(operations()))
	for _, o := range operations() {
		names = append(names, o.Name)
	}
	sort.Strings(names)
	return names
}

// SessionScoped is an input that names one session: the session its
// operation reads or acts on. SessionRef returns the field that names it,
// which may hold an id's unique prefix until the host resolves it, in
// place, to the session's id; an empty name scopes the input to no
// session (models.select of the default, a transcript page of a
// subscription).
type SessionScoped interface {
	SessionRef() *string
}

func (in *SessionRef) SessionRef() *string             { return &in.SessionID }
func (in *SessionRenameInput) SessionRef() *string     { return &in.SessionID }
func (in *TranscriptPageInput) SessionRef() *string    { return &in.SessionID }
func (in *TurnRef) SessionRef() *string                { return &in.SessionID }
func (in *TurnStartInput) SessionRef() *string         { return &in.SessionID }
func (in *MessageSubmitInput) SessionRef() *string     { return &in.SessionID }
func (in *QueueRetractInput) SessionRef() *string      { return &in.SessionID }
func (in *InteractionAnswerInput) SessionRef() *string { return &in.SessionID }
func (in *ModelsSelectInput) SessionRef() *string      { return &in.SessionID }
func (in *ThinkingSetInput) SessionRef() *string       { return &in.SessionID }
func (in *SubscriptionOpenInput) SessionRef() *string  { return &in.SessionID }
func (in *ResourceRef) SessionRef() *string            { return &in.SessionID }
func (in *ResourceQueryInput) SessionRef() *string     { return &in.SessionID }
func (in *OutputReadInput) SessionRef() *string        { return &in.SessionID }
func (in *ResourceStartInput) SessionRef() *string     { return &in.SessionID }
func (in *ControllerRef) SessionRef() *string          { return &in.SessionID }
func (in *ControlInput) SessionRef() *string           { return &in.SessionID }
