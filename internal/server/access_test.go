package server

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentd-dev/agentd/protocol"
)

// A caller other than the local owner is held to the owner's rule where
// no Authorizer decides: it may ask host.status, and an owner's operation
// answers unauthorized without its handler running.
func TestTheOwnersRuleRefusesOthersBeforeTheHandlerRuns(t *testing.T) {
	cli, srv := pair(t)
	var ran atomic.Int32
	table := Table{}
	Handle(table, protocol.OpSessionCreate, func(context.Context, *Call, *protocol.SessionCreateInput) (protocol.Session, error) {
		ran.Add(1)
		return protocol.Session{}, nil
	})
	guest := protocol.Principal{ID: "g-1", Kind: protocol.PrincipalGuest}
	startSession(t, srv, table, nil, nil, func(cfg *connectionConfig) { cfg.identity.Principal = guest })

	send(t, cli, request("r1", string(protocol.OpSessionCreate), map[string]any{"cwd": "/"}))
	if r := readResponse(t, cli); r.OK || r.Error.Code != protocol.CodeUnauthorized {
		t.Fatalf("a guest's session.create: %+v", r)
	}
	send(t, cli, request("r2", string(protocol.OpHostStatus), map[string]any{}))
	if r := readResponse(t, cli); !r.OK {
		t.Fatalf("a guest's host.status: %+v", r.Error)
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("the refused operation's handler ran %d times", n)
	}
}

// Every call passes the one Authorizer before its handler, host.* ones
// too; what it refuses never runs, and the session it resolves in place is
// the one the handler sees.
func TestEveryCallPassesTheAuthorizerOnce(t *testing.T) {
	cli, srv := pair(t)
	var mu sync.Mutex
	var seen []string
	table := Table{}
	var got atomic.Value
	Handle(table, protocol.OpSessionGet, func(_ context.Context, _ *Call, in *protocol.SessionRef) (protocol.Session, error) {
		got.Store(in.SessionID)
		return protocol.Session{SessionID: in.SessionID}, nil
	})
	authorize := func(_ context.Context, call *Call) error {
		mu.Lock()
		seen = append(seen, call.Operation.Name)
		mu.Unlock()
		ref, ok := call.Decoded().(protocol.SessionScoped)
		if !ok {
			return nil
		}
		switch *ref.SessionRef() {
		case "s-7":
			*ref.SessionRef() = "s-7f3a9c"
			return nil
		default:
			return protocol.Errorf(protocol.CodeNotFound, "session %q not found", *ref.SessionRef())
		}
	}
	startSession(t, srv, table, nil, nil, func(cfg *connectionConfig) { cfg.authorize = authorize })

	send(t, cli, request("r1", string(protocol.OpSessionGet), map[string]any{"sessionId": "s-7"}))
	if r := readResponse(t, cli); !r.OK {
		t.Fatalf("session.get: %+v", r.Error)
	}
	if id, _ := got.Load().(string); id != "s-7f3a9c" {
		t.Fatalf("the handler saw session %q, not the one the authorizer resolved", id)
	}
	got.Store("")
	send(t, cli, request("r2", string(protocol.OpSessionGet), map[string]any{"sessionId": "other"}))
	if r := readResponse(t, cli); r.OK || r.Error.Code != protocol.CodeNotFound {
		t.Fatalf("session.get of a session the caller may not see: %+v", r)
	}
	if id, _ := got.Load().(string); id != "" {
		t.Fatalf("the refused call's handler ran, for %q", id)
	}
	send(t, cli, request("r3", string(protocol.OpHostStatus), map[string]any{}))
	if r := readResponse(t, cli); !r.OK {
		t.Fatalf("host.status: %+v", r.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"session.get", "session.get", "host.status"}
	if len(seen) != len(want) {
		t.Fatalf("the authorizer saw %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("the authorizer saw %v, want %v", seen, want)
		}
	}
}
