package protocol

import (
	"reflect"
	"sort"
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

// Operation describes one entry of the operation table.
type Operation struct {
	Name   string
	Mode   Mode
	Input  reflect.Type
	Result reflect.Type
	// Serial operations run one at a time per connection, in arrival order.
	Serial bool
	Doc    string
}

// Domain reports whether the operation counts against
// MaxInFlightDomainRequests; only host.status does not.
func (o Operation) Domain() bool { return o.Name != OpHostStatus }

// Operation names: the contract.
const (
	OpHostStatus           = "host.status"
	OpHostDiagnosticsQuery = "host.diagnostics.query"
	OpHostResourcesQuery   = "host.resources.query"
	OpHostUpgradePrepare   = "host.upgrade.prepare"
	OpHostShutdown         = "host.shutdown"

	OpSessionList           = "session.list"
	OpSessionCreate         = "session.create"
	OpSessionGet            = "session.get"
	OpSessionRename         = "session.rename"
	OpSessionArchive        = "session.archive"
	OpSessionUnarchive      = "session.unarchive"
	OpSessionRemove         = "session.remove"
	OpSessionTranscriptPage = "session.transcript.page"
	OpSessionTodoQuery      = "session.todo.query"

	OpTurnStart         = "turn.start"
	OpTurnQuery         = "turn.query"
	OpTurnStop          = "turn.stop"
	OpTurnInterrupt     = "turn.interrupt"
	OpTurnMessageSubmit = "turn.message.submit"
	OpQueueRetract      = "queue.retract"

	OpInteractionQuery  = "interaction.query"
	OpInteractionAnswer = "interaction.answer"

	OpModelsList        = "models.list"
	OpModelsSelect      = "models.select"
	OpModelsThinkingSet = "models.thinking.set"

	OpSubscriptionOpen           = "subscription.open"
	OpSubscriptionReady          = "subscription.ready"
	OpSubscriptionClose          = "subscription.close"
	OpSubscriptionPtyInterestSet = "subscription.pty_interest.set"

	OpRuntimeResourceQuery             = "runtime.resource.query"
	OpRuntimeResourceStart             = "runtime.resource.start"
	OpRuntimeResourceStop              = "runtime.resource.stop"
	OpRuntimeResourceControllerAcquire = "runtime.resource.controller.acquire"
	OpRuntimeResourceControllerControl = "runtime.resource.controller.control"
	OpRuntimeResourceControllerRelease = "runtime.resource.controller.release"
)

func op[In, Out any](name string, mode Mode, doc string) Operation {
	return Operation{
		Name: name, Mode: mode, Doc: doc,
		Input: reflect.TypeFor[In](), Result: reflect.TypeFor[Out](),
	}
}

func serial(o Operation) Operation { o.Serial = true; return o }

// Operations is the operation table, in documentation order.
var Operations = []Operation{
	op[HostStatusInput, HostStatus](OpHostStatus, Query, "The host's identity, state and load. Always admitted through a reserved slot."),
	op[DiagnosticsQueryInput, DiagnosticsQueryResult](OpHostDiagnosticsQuery, Query, "Recent host diagnostics, newest last, redacted."),
	op[HostResourcesQueryInput, HostResourcesQueryResult](OpHostResourcesQuery, Query, "The host's process resources: memory, descriptors, goroutines, workers."),
	op[UpgradePrepareInput, UpgradePrepareResult](OpHostUpgradePrepare, Command, "Prepares the host to hand its home to a newer host."),
	op[ShutdownInput, ShutdownResult](OpHostShutdown, Command, "Drains the host and makes it exit."),

	op[SessionListInput, SessionListResult](OpSessionList, Query, "Lists sessions from the catalog."),
	op[SessionCreateInput, Session](OpSessionCreate, Command, "Creates a session."),
	op[SessionRef, Session](OpSessionGet, Query, "Returns one session's header."),
	op[SessionRenameInput, Session](OpSessionRename, Command, "Renames a session."),
	op[SessionRef, Session](OpSessionArchive, Command, "Archives a session."),
	op[SessionRef, Session](OpSessionUnarchive, Command, "Brings an archived session back."),
	op[SessionRef, SessionRef](OpSessionRemove, Command, "Removes a session and its transcript."),
	serial(op[TranscriptPageInput, TranscriptPage](OpSessionTranscriptPage, Query, "Reads a page of a subscribed session's transcript; serialized per connection.")),
	op[SessionRef, TodoQueryResult](OpSessionTodoQuery, Query, "Returns the agent's plan for a session."),

	op[TurnStartInput, TurnStartResult](OpTurnStart, Command, "Starts a turn; the same turnId twice starts one turn."),
	op[TurnRef, TurnSnapshot](OpTurnQuery, Query, "Returns a turn's state."),
	op[TurnRef, TurnSnapshot](OpTurnStop, Command, "Stops a turn after its current step."),
	op[TurnRef, TurnSnapshot](OpTurnInterrupt, Command, "Aborts a turn now, killing a running tool."),
	op[MessageSubmitInput, QueueEntry](OpTurnMessageSubmit, Command, "Steers the running turn or queues a follow-up for the next."),
	op[QueueRetractInput, QueueEntry](OpQueueRetract, Command, "Retracts a queued message."),

	op[SessionRef, InteractionQueryResult](OpInteractionQuery, Query, "Lists a session's pending interactions."),
	op[InteractionAnswerInput, Interaction](OpInteractionAnswer, Command, "Answers a pending interaction; the first answer wins."),

	op[ModelsListInput, ModelsListResult](OpModelsList, Query, "Lists configured providers and their models."),
	op[ModelsSelectInput, ModelSelection](OpModelsSelect, Command, "Selects the model of a session, or the default for new sessions."),
	op[ThinkingSetInput, ModelSelection](OpModelsThinkingSet, Command, "Sets a session's thinking level."),

	op[SubscriptionOpenInput, SubscriptionOpenResult](OpSubscriptionOpen, Command, "Opens a subscription to a session; frames start after subscription.ready."),
	op[SubscriptionRef, SubscriptionRef](OpSubscriptionReady, Command, "Starts a subscription's frames."),
	op[SubscriptionRef, SubscriptionRef](OpSubscriptionClose, Command, "Closes a subscription."),
	op[PtyInterestInput, SubscriptionRef](OpSubscriptionPtyInterestSet, Command, "Chooses the PTYs whose output a subscription receives."),

	op[ResourceQueryInput, ResourceQueryResult](OpRuntimeResourceQuery, Query, "Lists or reads a session's runtime resources, paged by revision and cursor."),
	op[ResourceStartInput, Resource](OpRuntimeResourceStart, Command, "Starts a shell run or PTY; launchId makes a retry idempotent."),
	op[ResourceRef, Resource](OpRuntimeResourceStop, Command, "Stops a runtime resource."),
	op[ResourceRef, ControllerAcquireResult](OpRuntimeResourceControllerAcquire, Command, "Takes control of a PTY."),
	op[ControlInput, ControlResult](OpRuntimeResourceControllerControl, Command, "Writes input to or resizes a controlled PTY, in sequence."),
	op[ControllerRef, ResourceRef](OpRuntimeResourceControllerRelease, Command, "Releases control of a PTY."),
}

var operationIndex = func() map[string]Operation {
	m := make(map[string]Operation, len(Operations))
	for _, o := range Operations {
		m[o.Name] = o
	}
	return m
}()

// Lookup returns the table entry for name.
func Lookup(name string) (Operation, bool) {
	o, ok := operationIndex[name]
	return o, ok
}

// OperationNames returns every operation name, sorted.
func OperationNames() []string {
	names := make([]string, 0, len(Operations))
	for _, o := range Operations {
		names = append(names, o.Name)
	}
	sort.Strings(names)
	return names
}
