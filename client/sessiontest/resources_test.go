package sessiontest_test

import (
	"testing"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/protocol"
)

// TestAStreamReturnsResourceChangesOnlyWhenAskedTo: with
// SessionOptions.Resources a session's stream returns a shell run's start
// and exit as events with Resource set and no delta; without it, none.
func TestAStreamReturnsResourceChangesOnlyWhenAskedTo(t *testing.T) {
	p := newSessionPlace(t)
	c := p.conn()
	id := p.newSession(c)
	ctx := agentdtest.Context(t)
	with, err := c.OpenSession(ctx, id, client.SessionOptions{Resources: true})
	if err != nil {
		t.Fatal(err)
	}
	defer with.Close()
	without, err := c.OpenSession(ctx, id, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer without.Close()
	run, err := client.Call(ctx, c, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{SessionID: id, LaunchID: "l-1", Command: "exit 7"})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := with.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := ev.Resource
		if r == nil {
			continue // a change of the session's
		}
		if ev.Delta.Event != "" || r.Ref != run.Ref || r.Kind != protocol.ResourceShell {
			t.Fatalf("an event of the stream that asked for resources: %+v", ev)
		}
		if r.State == protocol.ResourceExited {
			if r.ExitCode == nil || *r.ExitCode != 7 {
				t.Fatalf("the exited run: %+v", r)
			}
			break
		}
	}
	// The stream that did not ask is at the same point: a turn shows it
	// skipped the resource frames between.
	startTurn(t, c, id, "t1", "hello")
	for _, ev := range untilEnd(t, without, "t1") {
		if ev.Resource != nil {
			t.Fatalf("a resource event on a stream that did not ask for them: %+v", ev.Resource)
		}
	}
}
