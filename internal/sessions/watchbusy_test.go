package sessions

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/host"
	"github.com/agentd-dev/agentd/protocol"
)

// echoModels offers the offline model alone: faux/echo.
type echoModels struct{}

func (echoModels) Available() []protocol.Model {
	return []protocol.Model{{Provider: "faux", ModelID: "echo"}}
}
func (echoModels) Default() string           { return "faux/echo" }
func (m echoModels) Ready(spec string) error { return m.Check(spec) }
func (echoModels) Check(spec string) error {
	if spec != "faux/echo" {
		return errors.New("unknown model " + spec)
	}
	return nil
}

// TestFollowingAnEndedTurnLeavesNoSubscriptionOnTheWorker: when the host
// follows a turn that has already ended, it closes the subscription it
// opened on the worker, which would otherwise get every later delta.
func TestFollowingAnEndedTurnLeavesNoSubscriptionOnTheWorker(t *testing.T) {
	t.Setenv("AGENTD_TEST_AS_CLI", "1")
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	base := agentdtest.ShortDir(t)
	home, runDir := filepath.Join(base, "home"), filepath.Join(base, "run")
	work := filepath.Join(base, "work")
	os.MkdirAll(work, 0o755)
	var svc *Service
	h := agentdtest.NewHost(t, agentdtest.Options{Home: home, RuntimeDir: runDir, Compose: func(_ context.Context, h *host.Host) (host.Composition, error) {
		s, err := New(h, Config{Home: home, RuntimeDir: runDir, HostID: "test",
			WorkerCommand: []string{os.Args[0], "worker"}, WorkerIdleGrace: time.Hour, Models: echoModels{}})
		svc = s
		return s, err
	}})
	c := h.Connect(t)
	ctx := agentdtest.Context(t)
	var s protocol.Session
	if err := c.Request(ctx, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work}, &s); err != nil {
		t.Fatal(err)
	}
	if err := c.Request(ctx, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: "t1", Content: protocol.Content{Text: "hello"}}, nil); err != nil {
		t.Fatal(err)
	}
	for {
		var snap protocol.TurnSnapshot
		if err := c.Request(ctx, protocol.OpTurnQuery, protocol.TurnRef{SessionID: s.SessionID, TurnID: "t1"}, &snap); err != nil {
			t.Fatal(err)
		}
		if snap.Status != protocol.TurnRunning {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	w := svc.liveWorker(s.SessionID)
	if w == nil {
		t.Fatal("no worker")
	}
	// Wait for any following the host does itself, then follow once more:
	// the turn has ended.
	for {
		w.mu.Lock()
		watching := w.watching
		w.watching = true
		w.mu.Unlock()
		if !watching {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	w.watchBusy()
	st, err := w.conn.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ActiveResidencies != 0 {
		t.Fatalf("the worker holds %d subscriptions after the host stopped following it", st.ActiveResidencies)
	}
}
