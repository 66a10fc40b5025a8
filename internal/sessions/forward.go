package sessions

import (
	"context"
	"encoding/json"

	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// sessionOps are the operations the session's worker does, which alone
// holds the live session (its model, thinking, approval policy, turns,
// queue, interactions, plan). The host passes each on with the caller's
// identity, once the dispatch has checked the caller may (Authorize) and
// resolved the session the input names; a command refuses an archived
// session.
var sessionOps = []struct {
	name    string
	command bool
}{
	{string(protocol.OpSessionTodoQuery), false},
	{string(protocol.OpSessionCommands), false},
	{string(protocol.OpSessionCommandExpand), false},
	{string(protocol.OpSessionMCPList), false},
	{string(protocol.OpSessionToolCall), true},
	{string(protocol.OpTurnStart), true},
	{string(protocol.OpTurnQuery), false},
	{string(protocol.OpTurnStop), true},
	{string(protocol.OpTurnInterrupt), true},
	{string(protocol.OpTurnMessageSubmit), true},
	{string(protocol.OpQueueRetract), true},
	{string(protocol.OpInteractionQuery), false},
	{string(protocol.OpInteractionAnswer), true},
	{string(protocol.OpModelsThinkingSet), true},
	{string(protocol.OpSessionCompact), true},
	{string(protocol.OpSessionCompactionSet), true},
	{string(protocol.OpRuntimeResourceQuery), false},
	{string(protocol.OpRuntimeResourceStart), true},
	{string(protocol.OpRuntimeResourceStop), true},
	{string(protocol.OpRuntimeResourceControllerAcquire), true},
	{string(protocol.OpRuntimeResourceControllerControl), true},
	{string(protocol.OpRuntimeResourceControllerRelease), true},
	{string(protocol.OpRuntimeResourceControllerDirect), true},
}

// addSessionOps fills t with the forwarded session operations.
func (s *Service) addSessionOps(t server.Table) {
	for _, op := range sessionOps {
		t[op.name] = func(ctx context.Context, call *server.Call) (any, error) {
			return s.forwardCall(ctx, call, op.command)
		}
	}
}

// forwardCall runs a session operation on the session's worker. Its
// input is SessionScoped, as the operation table's test holds, and names
// the session by its id: Authorize resolved it.
func (s *Service) forwardCall(ctx context.Context, call *server.Call, command bool) (json.RawMessage, error) {
	in := call.Decoded()
	resolve := s.resolve
	if command {
		resolve = s.resolveLive
	}
	h, err := resolve(*in.(protocol.SessionScoped).SessionRef())
	if err != nil {
		return nil, err
	}
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
// take the change with it. The first prompt a session takes titles it
// when it has no title.
func (s *Service) keepRequested(in any) {
	switch in := in.(type) {
	case *protocol.TurnStartInput:
		if in.Approval != "" {
			s.keepSettings(protocol.Session{SessionID: in.SessionID, Approval: in.Approval})
		}
		s.titleFrom(in.SessionID, in.Content.Text)
	case *protocol.MessageSubmitInput:
		s.titleFrom(in.SessionID, in.Content.Text)
	case *protocol.ThinkingSetInput:
		s.keepSettings(protocol.Session{SessionID: in.SessionID, Thinking: in.Level})
	}
}

// Authorize implements server.Authorizer: the one place the host decides
// whether a call's caller may run its operation, from the operation's
// access level (protocol.Operations()), the caller's principal and the
// session the input names, which it resolves in place to the session's
// id. The owner may run every operation. A guest may run what its grant
// allows on the grant's session (authorizeGuest); any other session is
// not_found to it, as one that does not exist. Anyone else may run only
// host.status.
func (s *Service) Authorize(_ context.Context, call *server.Call) error {
	if call.Operation.Name == string(protocol.OpRuntimeResourceControllerDirect) && !ownSocket(call.Caller.Principal) {
		// A ticket to a worker is of use only on this machine, as the
		// owner's uid: a guest's control, and the web's, stay with the host.
		return protocol.Errorf(protocol.CodeUnauthorized, "%s is for the owner's connections of the host's socket", call.Operation.Name)
	}
	var ref *string
	if in, ok := call.Decoded().(protocol.SessionScoped); ok && *in.SessionRef() != "" {
		ref = in.SessionRef()
	}
	switch call.Caller.Principal.Kind {
	case protocol.PrincipalLocalOwner:
	case protocol.PrincipalGuest:
		return s.authorizeGuest(call, ref)
	default:
		if ref != nil {
			return notFound(*ref)
		}
		return server.AuthorizeOwner(call)
	}
	if ref == nil {
		return nil
	}
	// A damaged session resolves too: session.remove removes it, and
	// every other operation says it is damaged.
	h, err := s.cat.Resolve(*ref)
	if err != nil {
		return catalogError(err)
	}
	*ref = h.ID
	return nil
}

// ownSocket reports whether p is the owner connected through the host's
// unix socket, whose peer the host checked is the owner's uid and not in
// agentd's sandbox.
func ownSocket(p protocol.Principal) bool {
	return p.ID == protocol.LocalOwner.ID && p.Kind == protocol.LocalOwner.Kind
}

// titleFrom titles session id from prompt when it has no title yet.
func (s *Service) titleFrom(id, prompt string) {
	if h, err := s.cat.Get(id); err != nil || h.Title != "" {
		return
	}
	if _, _, err := s.cat.TitleFromPrompt(id, prompt); err != nil {
		s.log.Warn("titling the session from its prompt", "session", id, "err", err)
	}
}
