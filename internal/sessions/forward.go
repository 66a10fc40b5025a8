package sessions

import (
	"context"
	"encoding/json"
	"reflect"

	"github.com/agentd-dev/agentd/internal/catalog"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// sessionOps are the operations the session's worker does, which alone
// holds the live session (its model, thinking, approval policy, turns,
// queue, interactions, plan). The host does the same for each: it
// resolves the session the input names, checks the caller may act on it,
// and passes the operation on with the caller's identity. A command
// refuses an archived session.
var sessionOps = []struct {
	name    string
	command bool
}{
	{protocol.OpSessionTodoQuery, false},
	{protocol.OpTurnStart, true},
	{protocol.OpTurnQuery, false},
	{protocol.OpTurnStop, true},
	{protocol.OpTurnInterrupt, true},
	{protocol.OpTurnMessageSubmit, true},
	{protocol.OpQueueRetract, true},
	{protocol.OpInteractionQuery, false},
	{protocol.OpInteractionAnswer, true},
	{protocol.OpModelsThinkingSet, true},
	{protocol.OpRuntimeResourceQuery, false},
	{protocol.OpRuntimeResourceStart, true},
	{protocol.OpRuntimeResourceStop, true},
	{protocol.OpRuntimeResourceControllerAcquire, true},
	{protocol.OpRuntimeResourceControllerControl, true},
	{protocol.OpRuntimeResourceControllerRelease, true},
}

// addSessionOps fills t with the forwarded session operations.
func (s *Service) addSessionOps(t server.Table) {
	for _, op := range sessionOps {
		t[op.name] = func(ctx context.Context, call *server.Call) (any, error) {
			return s.forwardCall(ctx, call, op.command)
		}
	}
}

// forwardCall runs a session operation on the session's worker.
func (s *Service) forwardCall(ctx context.Context, call *server.Call, command bool) (json.RawMessage, error) {
	in := call.Decoded()
	field := reflect.ValueOf(in).Elem().FieldByName("SessionID")
	resolve := s.resolve
	if command {
		resolve = s.resolveLive
	}
	h, err := resolve(field.String())
	if err != nil {
		return nil, err
	}
	if err := authorize(call, h); err != nil {
		return nil, err
	}
	field.SetString(h.ID)
	res, err := forward[json.RawMessage](ctx, s, h, &call.Caller, call.Operation.Name, in)
	if err == nil {
		s.keepRequested(in)
		s.trackController(call, in, res)
	}
	return res, err
}

// keepRequested records in the catalog a setting a command the worker
// carried out changed, before the client hears it did: the worker's
// session_changed says so too, but a worker that dies at once must not
// take the change with it.
func (s *Service) keepRequested(in any) {
	switch in := in.(type) {
	case *protocol.TurnStartInput:
		if in.Approval != "" {
			s.keepSettings(protocol.Session{SessionID: in.SessionID, Approval: in.Approval})
		}
	case *protocol.ThinkingSetInput:
		s.keepSettings(protocol.Session{SessionID: in.SessionID, Thinking: in.Level})
	}
}

// authorize checks that call's client may act on the session: for now
// every connection is the local owner's, and only the owner may.
func authorize(call *server.Call, h catalog.Header) error {
	if call.Caller.Principal.Kind != protocol.PrincipalLocalOwner {
		return protocol.Errorf(protocol.CodeUnauthorized, "session %s is not yours to act on", h.ID)
	}
	return nil
}
