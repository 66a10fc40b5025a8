package sessions_test

import (
	"encoding/json"
	"testing"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/protocol"
)

// listWatcher reads a subscription to the session list.
type listWatcher struct {
	t  *testing.T
	w  *client.Watcher
	id string
}

// watchList opens a subscription to the session list on c.
func watchList(t *testing.T, c *client.Conn) *listWatcher {
	t.Helper()
	ref, err := client.Call(agentdtest.Context(t), c, protocol.OpSessionListWatch, protocol.SessionListWatchInput{})
	if err != nil {
		t.Fatal(err)
	}
	w := c.Watch(ref.SubscriptionID)
	t.Cleanup(func() { w.Close() })
	return &listWatcher{t: t, w: w, id: ref.SubscriptionID}
}

// until returns the first update of session id ok takes, failing on
// any frame of another session whose id is in others, or on a closed
// frame.
func (l *listWatcher) until(what, id string, ok func(protocol.SessionListUpdateFrame) bool, others ...string) protocol.SessionListUpdateFrame {
	l.t.Helper()
	for {
		f, err := l.w.Next(agentdtest.Context(l.t))
		if err != nil {
			l.t.Fatalf("%s: %v", what, err)
		}
		if f.Kind != protocol.KindSessionListUpdate {
			l.t.Fatalf("%s: a %s frame: %s", what, f.Kind, f.Raw)
		}
		var u protocol.SessionListUpdateFrame
		if err := json.Unmarshal(f.Raw, &u); err != nil {
			l.t.Fatal(err)
		}
		for _, o := range others {
			if u.SessionID == o {
				l.t.Fatalf("%s: told of session %s: %s", what, o, f.Raw)
			}
		}
		if u.SessionID == id && ok(u) {
			return u
		}
	}
}

// closed returns the reason of the subscription's closed frame, after
// the updates before it.
func (l *listWatcher) closed(what string) string {
	l.t.Helper()
	for {
		f, err := l.w.Next(agentdtest.Context(l.t))
		if err != nil {
			l.t.Fatalf("%s: %v, want a closed frame", what, err)
		}
		if f.Kind == protocol.KindSessionListUpdate {
			continue
		}
		var closed protocol.SubscriptionClosedFrame
		if f.Kind != protocol.KindSubscriptionClosed || json.Unmarshal(f.Raw, &closed) != nil {
			l.t.Fatalf("%s: %s, want a closed frame", what, f.Raw)
		}
		return closed.Reason
	}
}

// The host pushes each change of the session list to its subscribers,
// as it happens: a session created, titled by its first prompt, running
// (a PTY of it) and idle again, renamed, archived, removed. A guest's
// subscription is told of its grant's session alone, and ends when the
// grant is revoked; the owner's ends when closed.
func TestTheSessionListsSubscribersAreToldEachChangeAsItHappens(t *testing.T) {
	w := newWebHost(t, nil)
	ctx := agentdtest.Context(t)
	owner := watchList(t, w.owner)

	s := createSession(t, w.owner, w.work)
	owner.until("the new session", s.SessionID, func(u protocol.SessionListUpdateFrame) bool {
		return u.Session != nil && u.Session.Cwd == s.Cwd && u.Session.Status == protocol.SessionIdle
	})
	g := w.share(t, s.SessionID, protocol.GrantObserve)
	guest := watchList(t, w.guestConn(t, g.Token))
	other := createSession(t, w.owner, w.work)
	owner.until("another new session", other.SessionID, func(u protocol.SessionListUpdateFrame) bool { return u.Session != nil })

	if _, err := client.Call(ctx, w.owner, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: "t1", Content: protocol.Content{Text: "tokenizer tabs\nand more"}}); err != nil {
		t.Fatal(err)
	}
	owner.until("the title from the first prompt", s.SessionID, func(u protocol.SessionListUpdateFrame) bool {
		return u.Session != nil && u.Session.Title == "tokenizer tabs"
	})
	// A running PTY keeps the session running until it is stopped.
	pty, err := client.Call(ctx, w.owner, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{SessionID: s.SessionID, LaunchID: "l1", Command: "cat", PTY: true})
	if err != nil {
		t.Fatal(err)
	}
	guest.until("the guest told of its session running", s.SessionID, func(u protocol.SessionListUpdateFrame) bool {
		return u.Session != nil && u.Session.Status == protocol.SessionRunning
	}, other.SessionID)
	if _, err := client.Call(ctx, w.owner, protocol.OpRuntimeResourceStop, protocol.ResourceRef{SessionID: s.SessionID, Ref: pty.Ref}); err != nil {
		t.Fatal(err)
	}
	guest.until("the guest told of its session idle again", s.SessionID, func(u protocol.SessionListUpdateFrame) bool {
		return u.Session != nil && u.Session.Status == protocol.SessionIdle
	}, other.SessionID)

	if _, err := client.Call(ctx, w.owner, protocol.OpSessionRename, protocol.SessionRenameInput{SessionID: other.SessionID, Title: "renamed"}); err != nil {
		t.Fatal(err)
	}
	owner.until("the rename", other.SessionID, func(u protocol.SessionListUpdateFrame) bool { return u.Session != nil && u.Session.Title == "renamed" })
	if _, err := client.Call(ctx, w.owner, protocol.OpSessionArchive, protocol.SessionRef{SessionID: other.SessionID}); err != nil {
		t.Fatal(err)
	}
	owner.until("the archive", other.SessionID, func(u protocol.SessionListUpdateFrame) bool { return u.Session != nil && u.Session.Archived })
	if _, err := client.Call(ctx, w.owner, protocol.OpSessionRemove, protocol.SessionRef{SessionID: other.SessionID}); err != nil {
		t.Fatal(err)
	}
	owner.until("the removal", other.SessionID, func(u protocol.SessionListUpdateFrame) bool { return u.Removed && u.Session == nil })

	if _, err := client.Call(ctx, w.owner, protocol.OpGrantRevoke, protocol.GrantRef{GrantID: g.Grant.GrantID}); err != nil {
		t.Fatal(err)
	}
	if r := guest.closed("the guest's subscription once revoked"); r != protocol.ClosedAccessRevoked {
		t.Fatalf("the guest's subscription closed with %s, want %s", r, protocol.ClosedAccessRevoked)
	}

	if _, err := client.Call(ctx, w.owner, protocol.OpSubscriptionClose, protocol.SubscriptionRef{SubscriptionID: owner.id}); err != nil {
		t.Fatal(err)
	}
	if r := owner.closed("the owner's subscription once closed"); r != protocol.ClosedClientClosed {
		t.Fatalf("closed with %s, want %s", r, protocol.ClosedClientClosed)
	}
}
