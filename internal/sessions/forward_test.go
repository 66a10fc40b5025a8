package sessions_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/protocol"
)

// TestTheWorkerLearnsWhichClientActed: an approval answered by one client
// reaches every subscriber naming that client, as its host admitted it.
func TestTheWorkerLearnsWhichClientActed(t *testing.T) {
	h, c, work := newHost(t, time.Hour)
	ctx := agentdtest.Context(t)
	s, _ := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work, Approval: protocol.ApprovalAsk})
	w, _ := subscribe(t, c, protocol.SubscriptionOpenInput{SessionID: s.SessionID})
	if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: "t1", Content: protocol.Content{Text: "run `echo hi`"}}); err != nil {
		t.Fatal(err)
	}
	var pending protocol.Interaction
	for pending.InteractionID == "" {
		d, _, err := nextDelta(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		if d.Event == protocol.EventInteractionAdded {
			pending = *d.Interaction
		}
	}
	answerer, err := client.Dial(ctx, h.Endpoint(), client.Options{ClientInstanceID: "the-answerer", Surface: protocol.SurfaceTUI})
	if err != nil {
		t.Fatal(err)
	}
	defer answerer.Close()
	if _, err := client.Call(ctx, answerer, protocol.OpInteractionAnswer, protocol.InteractionAnswerInput{SessionID: s.SessionID, InteractionID: pending.InteractionID, Answer: protocol.AnswerAllow}); err != nil {
		t.Fatal(err)
	}
	for {
		d, _, err := nextDelta(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		if d.Event != protocol.EventInteractionResolved {
			continue
		}
		by := d.Interaction.AnsweredBy
		if by == nil || by.ClientInstanceID != "the-answerer" || by.Surface != protocol.SurfaceTUI ||
			by.ConnectionID != answerer.Accepted().ConnectionID || by.Principal != protocol.LocalOwner {
			t.Fatalf("answered by %+v, want the answering client (connection %s)", by, answerer.Accepted().ConnectionID)
		}
		return
	}
}

// TestAClientThatNamesACallerLosesItsConnection: only a host forwarding
// to a worker may say whom a request is for.
func TestAClientThatNamesACallerLosesItsConnection(t *testing.T) {
	h, c, _ := newHost(t, time.Hour)
	rc := dialRaw(t, h.Endpoint())
	rc.send(`{"requestId":"r1","operation":"session.list","input":{},"caller":{"connectionId":"c9","clientInstanceId":"someone-else","principal":{"id":"local_os_user","kind":"local_owner"}}}`)
	rc.nc.SetReadDeadline(time.Now().Add(agentdtest.Timeout))
	if line, err := rc.r.ReadString('\n'); err == nil {
		t.Fatalf("the host answered %s", line)
	}
	diag, err := client.Call(agentdtest.Context(t), c, protocol.OpHostDiagnosticsQuery, protocol.DiagnosticsQueryInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diag.Diagnostics {
		if strings.Contains(d.Message, `field "caller"`) {
			return
		}
	}
	t.Fatalf("no diagnostic names the caller field: %+v", diag.Diagnostics)
}

// TestTheCatalogFollowsTheSettingsTheWorkerHolds: a thinking level and an
// approval policy set through the host are the worker's; the catalog's
// header follows them, so a new worker starts with them.
func TestTheCatalogFollowsTheSettingsTheWorkerHolds(t *testing.T) {
	h, c, work := newHost(t, 50*time.Millisecond)
	ctx := agentdtest.Context(t)
	s, _ := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work, Approval: protocol.ApprovalReadOnly})
	other := h.Connect(t)
	w, snap := subscribe(t, other, protocol.SubscriptionOpenInput{SessionID: s.SessionID})
	if snap.Session.Thinking != "off" || snap.Session.Approval != protocol.ApprovalReadOnly {
		t.Fatalf("snapshot's session %+v", snap.Session)
	}
	sel, err := client.Call(ctx, c, protocol.OpModelsThinkingSet, protocol.ThinkingSetInput{SessionID: s.SessionID, Level: "high"})
	if err != nil || sel.Thinking != "high" {
		t.Fatalf("thinking.set: %+v %v", sel, err)
	}
	if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: "t1", Content: protocol.Content{Text: "hello"}, Approval: protocol.ApprovalAll}); err != nil {
		t.Fatal(err)
	}
	// The other client sees the session's settings change.
	for {
		d, _, err := nextDelta(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		if d.Event == protocol.EventSessionChanged && d.Session.Thinking == "high" && d.Session.Approval == protocol.ApprovalAll && d.Session.Status == protocol.SessionIdle {
			break
		}
	}
	other.Close()
	// The worker idles out; the catalog has what it held.
	pid := workerPID(t, h.Home, s.SessionID)
	poll.Until(t, "the worker to idle out", workerGone(h.Home, s.SessionID))
	got, err := client.Call(ctx, c, protocol.OpSessionGet, protocol.SessionRef{SessionID: s.SessionID})
	if err != nil || got.Thinking != "high" || got.Approval != protocol.ApprovalAll {
		t.Fatalf("catalog's session after worker %d left: %+v %v", pid, got, err)
	}
	// A new worker starts with them.
	_, snap = subscribe(t, c, protocol.SubscriptionOpenInput{SessionID: s.SessionID})
	if snap.Session.Thinking != "high" || snap.Session.Approval != protocol.ApprovalAll {
		t.Fatalf("a new worker's session %+v", snap.Session)
	}
}
