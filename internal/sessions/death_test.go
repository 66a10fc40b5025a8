package sessions_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/protocol"
)

// TestRequestsRacingAWorkersDeathFailOrReachItsReplacement: a worker
// killed with SIGKILL while its stream flows and requests, queries and
// commands, keep coming: each request is answered or fails at once, none
// hangs, and those after the host saw the death reach a new worker.
func TestRequestsRacingAWorkersDeathFailOrReachItsReplacement(t *testing.T) {
	h, c, work := newHost(t, time.Hour)
	ctx := agentdtest.Context(t)
	s, err := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := subscribe(t, c, protocol.SubscriptionOpenInput{SessionID: s.SessionID})
	if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: "t1",
		Content: protocol.Content{Text: "run `sleep 20`"}, Approval: protocol.ApprovalAll}); err != nil {
		t.Fatal(err)
	}
	for {
		d, _, err := nextDelta(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		if d.Event == protocol.EventToolCallStart {
			break
		}
	}
	pid := workerPID(t, h.Home, s.SessionID)

	stop := make(chan struct{})
	var answered, failed atomic.Int64
	hung := make(chan error, 8)
	var senders sync.WaitGroup
	for i := range 4 {
		senders.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				rctx, cancel := context.WithTimeout(ctx, agentdtest.Timeout)
				var err error
				if (i+n)%2 == 0 {
					_, err = client.Call(rctx, c, protocol.OpSessionTodoQuery, protocol.SessionRef{SessionID: s.SessionID})
				} else {
					_, err = client.Call(rctx, c, protocol.OpModelsThinkingSet, protocol.ThinkingSetInput{SessionID: s.SessionID, Level: "low"})
				}
				late := rctx.Err()
				cancel()
				var re *client.RemoteError
				switch {
				case late != nil:
					hung <- fmt.Errorf("a request to a dying worker hung: %v", err)
					return
				case err == nil:
					answered.Add(1)
				case errors.As(err, &re):
					failed.Add(1)
				default:
					hung <- fmt.Errorf("a request to a dying worker: %v", err)
					return
				}
			}
		})
	}
	defer func() {
		close(stop)
		senders.Wait()
		close(hung)
		for err := range hung {
			t.Error(err)
		}
	}()
	before := answered.Load()
	syscall.Kill(pid, syscall.SIGKILL)
	replaced := func() bool {
		reg, err := home.ReadWorkerRegistration(home.WorkerRegistrationPath(h.Home, s.SessionID))
		return err == nil && reg.PID != pid
	}
	deadline := time.After(agentdtest.Timeout)
	for !replaced() {
		select {
		case <-deadline:
			t.Fatalf("no new worker after the kill (%d requests answered, %d failed)", answered.Load(), failed.Load())
		case err := <-hung:
			t.Fatal(err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	// The new worker answers.
	after := answered.Load()
	for answered.Load() == after {
		select {
		case <-deadline:
			t.Fatal("no request answered by the new worker")
		case err := <-hung:
			t.Fatal(err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if before == 0 {
		t.Log("no request was answered before the kill")
	}
}
