package sessions_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/protocol"
)

// A worker is answered a turn.start before its stream says the turn runs:
// with no client watching and an idle grace far shorter than the stream's
// delay, the host finds it idle by its stream the moment the request lets
// go of it, and must not stop it under the turn it has just begun. The
// turn's command runs to its end; the worker stops once idle after it.
func TestAWorkerIsNotStoppedAsIdleUnderATurnItsStreamHasNotShownYet(t *testing.T) {
	h, c, work := newHost(t, time.Nanosecond)
	ctx := agentdtest.Context(t)
	s := createSession(t, c, work)
	held, gate, done := filepath.Join(work, "held"), filepath.Join(work, "go"), filepath.Join(work, "done")
	if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: "t1",
		Content: protocol.Content{Text: "run `touch held; while [ ! -e go ]; do sleep 0.02; done; touch done`"}, Approval: protocol.ApprovalAll}); err != nil {
		t.Fatal(err)
	}
	gone := workerGone(h.Home, s.SessionID)
	poll.Until(t, "the held command, or the worker's end", func() bool { return exists(held) || gone() })
	if gone() {
		t.Fatal("the worker was stopped as idle under its turn")
	}
	os.WriteFile(gate, nil, 0o644)
	poll.Until(t, "the worker to stop once idle", gone)
	if !exists(done) {
		t.Fatal("the worker stopped before its turn's command ended")
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
