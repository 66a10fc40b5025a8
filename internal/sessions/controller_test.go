package sessions_test

import (
	"encoding/json"
	"testing"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/protocol"
)

// A PTY's state names who controls it, as control changes hands: every
// subscriber is told at once (a guest by its grant's label, over the web;
// the owner over the socket), and told again when control ends; a query
// reads the same.
func TestAPTYsStateNamesWhoControlsItAsControlChangesHands(t *testing.T) {
	w := newWebHost(t, nil)
	ctx := agentdtest.Context(t)
	s, pty := sessionWithPTY(t, w.owner, w.work, "cat")
	g, err := client.Call(ctx, w.owner, protocol.OpGrantCreate, protocol.GrantCreateInput{SessionID: s.SessionID, Level: protocol.GrantControl, Label: "Ana <b>"})
	if err != nil {
		t.Fatal(err)
	}
	guest := w.guestConn(t, g.Token)
	if got := guest.Accepted().Principal; got.Label != "Ana <b>" || got.Kind != protocol.PrincipalGuest {
		t.Fatalf("the guest's principal: %+v, want its grant's label", got)
	}

	// subscribe opens a subscription of c to the session, and returns
	// until: it waits for the PTY's state the subscription tells to be
	// one ok takes, and returns it.
	subscribe := func(c *client.Conn) func(what string, ok func(protocol.Resource) bool) protocol.Resource {
		open, err := client.Call(ctx, c, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: s.SessionID, Transcript: protocol.TranscriptBootstrap{Kind: protocol.TranscriptNone}})
		if err != nil {
			t.Fatal(err)
		}
		watcher := c.Watch(open.SubscriptionID)
		t.Cleanup(func() { watcher.Close() })
		if _, err := client.Call(ctx, c, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}); err != nil {
			t.Fatal(err)
		}
		return func(what string, ok func(protocol.Resource) bool) protocol.Resource {
			t.Helper()
			for {
				f, err := watcher.Next(ctx)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if f.Kind != protocol.KindRuntimeResourceUpdate {
					continue
				}
				var u protocol.RuntimeResourceUpdateFrame
				var r protocol.Resource
				if err := f.Decode(&u); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(u.Resource, &r); err != nil {
					t.Fatal(err)
				}
				if r.Ref == pty.Ref && ok(r) {
					return r
				}
			}
		}
	}
	ownerSees, guestSees := subscribe(w.owner), subscribe(guest)
	query := func() protocol.Resource {
		t.Helper()
		page, err := client.Call(ctx, guest, protocol.OpRuntimeResourceQuery, protocol.ResourceQueryInput{SessionID: s.SessionID, Ref: pty.Ref})
		if err != nil || len(page.Resources) != 1 {
			t.Fatalf("the guest's query: %+v %v", page, err)
		}
		return page.Resources[0]
	}
	if c := query().Controller; c != nil {
		t.Fatalf("a PTY nobody took names a controller: %+v", c)
	}

	ctl, err := client.Call(ctx, guest, protocol.OpRuntimeResourceControllerAcquire, protocol.ResourceRef{SessionID: s.SessionID, Ref: pty.Ref})
	if err != nil {
		t.Fatal(err)
	}
	want := protocol.ResourceController{ConnectionID: guest.Accepted().ConnectionID, Surface: protocol.SurfaceWeb, Principal: guest.Accepted().Principal}
	if c := ctl.Resource.Controller; c == nil || *c != want {
		t.Fatalf("the acquire's resource names %+v, want %+v", c, want)
	}
	ownerSees("the guest's control told to the owner", func(r protocol.Resource) bool { return r.Controller != nil && *r.Controller == want })
	if c := query().Controller; c == nil || *c != want {
		t.Fatalf("a query names %+v, want %+v", c, want)
	}

	if _, err := client.Call(ctx, guest, protocol.OpRuntimeResourceControllerRelease, protocol.ControllerRef{SessionID: s.SessionID, Ref: pty.Ref, ControllerID: ctl.ControllerID}); err != nil {
		t.Fatal(err)
	}
	ownerSees("the release told to the owner", func(r protocol.Resource) bool { return r.Controller == nil })

	if _, err := client.Call(ctx, w.owner, protocol.OpRuntimeResourceControllerAcquire, protocol.ResourceRef{SessionID: s.SessionID, Ref: pty.Ref}); err != nil {
		t.Fatal(err)
	}
	owner := w.owner.Accepted()
	guestSees("the owner's control told to the guest", func(r protocol.Resource) bool {
		return r.Controller != nil && r.Controller.ConnectionID == owner.ConnectionID && r.Controller.Principal == owner.Principal
	})
	// The owner's connection closing ends its control, and the guest is
	// told.
	w.owner.Close()
	guestSees("the end of the owner's control told to the guest", func(r protocol.Resource) bool { return r.Controller == nil })
	if c := query().Controller; c != nil {
		t.Fatalf("once told control ended, a query names %+v", c)
	}
}
