package server

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/agentd-dev/agentd/protocol"
)

// Handler runs one operation for one call. It returns the result to encode,
// or an error: a *protocol.Error is answered as it is; any other error is
// answered as internal_failure without its details and recorded.
type Handler func(ctx context.Context, call *Call) (any, error)

// Table maps operation names to handlers. Routing is this table: the server
// fills the host.* entries, a composition fills the domain ones, and an
// operation no one fills answers operation_unavailable.
type Table map[string]Handler

// Handle registers fn for operation o in t, decoding the request's input
// strictly into In first. o's type names the operation's input and result,
// so a handler of the wrong shape does not compile; it panics when o is
// not in the protocol's table: a programming error.
func Handle[In, Out any](t Table, o protocol.Op[In, Out], fn func(ctx context.Context, call *Call, in *In) (Out, error)) {
	name := string(o)
	if _, ok := protocol.Lookup(name); !ok {
		panic(fmt.Sprintf("server: no operation %q in the protocol table", name))
	}
	t[name] = func(ctx context.Context, call *Call) (any, error) {
		in, ok := call.input.(*In)
		if !ok {
			in = new(In)
			if err := protocol.DecodeInput(call.Input, in); err != nil {
				return nil, &protocol.Error{Code: protocol.CodeInvalidRequest, Message: err.Error()}
			}
		}
		out, err := fn(ctx, call, in)
		if err != nil {
			return nil, err
		}
		return out, nil
	}
}

// Authorizer is implemented by a composition that decides who may run
// what: the server asks it once for every call, as the call is
// dispatched and before its handler runs, so it is the one place access
// is decided. It returns a *protocol.Error (not_found, unauthorized) to
// refuse. It may rewrite the session an input names (protocol.
// SessionScoped) to the session's canonical id.
type Authorizer interface {
	Authorize(ctx context.Context, call *Call) error
}

// Confirmer is implemented by an Authorizer whose decision can be
// withdrawn while a call runs (a guest's grant, revoked): the server asks
// it once more after a handler succeeded, and answers what it returns
// instead of the result, which the caller then never sees.
type Confirmer interface {
	Confirm(call *Call) error
}

// AuthorizeOwner is the rule where no Authorizer decides: the local owner
// may run every operation, anyone else only host.status, which reads no
// session.
func AuthorizeOwner(call *Call) error {
	if call.Caller.Principal.Kind == protocol.PrincipalLocalOwner || call.Operation.Name == string(protocol.OpHostStatus) {
		return nil
	}
	return protocol.Errorf(protocol.CodeUnauthorized, "%s is the host owner's alone", call.Operation.Name)
}

// Identity is who a connection is: fixed at the handshake.
type Identity struct {
	ConnectionID     string
	ClientInstanceID string
	Surface          string
	Principal        protocol.Principal
}

// caller is the connection's identity as a request's caller.
func (id Identity) caller() protocol.Caller {
	return protocol.Caller{ConnectionID: id.ConnectionID, ClientInstanceID: id.ClientInstanceID, Surface: id.Surface, Principal: id.Principal}
}

// Call is one admitted request.
type Call struct {
	Operation protocol.Operation
	RequestID string
	Input     json.RawMessage
	// Identity is the connection the request came on.
	Identity Identity
	// Caller is the client the operation runs for: the connection's own,
	// or, on a worker, the end client its host forwarded it for.
	Caller protocol.Caller

	// InputClosed is closed once the client has half-closed its side:
	// no more requests will come, but this one's response will be sent.
	InputClosed <-chan struct{}

	op            Admission
	attachment    Attachment
	input         any        // the decoded input, of the operation's input type
	afterResponse func()     // set by AfterResponse
	files         *filesConn // the connection's, when it takes descriptors
}

// TakeFiles returns the n descriptors passed on the call's connection
// first and not yet taken, with the request's bytes or before them; nil
// when fewer were passed, or the server takes none (Config.ReceiveFiles).
// Each is nonblocking, read and written through the runtime's poller, so
// that a deadline ends a read or a write. The caller closes them.
func (c *Call) TakeFiles(n int) []*os.File {
	if c.files == nil {
		return nil
	}
	return c.files.take(n)
}

// AfterResponse has fn called once the call's successful response has
// been written to the connection, by the goroutine that wrote it (the
// connection's writer, or the call's own): fn must not block. What fn
// queues follows the response. fn is not called when the call fails or
// the response is not written.
func (c *Call) AfterResponse(fn func()) { c.afterResponse = fn }

// Decoded returns the call's input, decoded and checked: a pointer to the
// operation's input type.
func (c *Call) Decoded() any { return c.input }

// Attachment returns what the composition attached to the call's
// connection (see ConnectionAttacher), or nil.
func (c *Call) Attachment() Attachment { return c.attachment }

// AcquireResidency marks the call as holding the server resident (a running
// turn, say) until release is called; host.status counts residencies.
func (c *Call) AcquireResidency() (release func()) { return c.op.AcquireResidency() }

func unavailable(name string) *protocol.Error {
	return protocol.Errorf(protocol.CodeOperationUnavailable, "%s is not available on this host yet", name)
}
