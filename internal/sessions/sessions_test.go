package sessions_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/cli"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/sessions"
	"github.com/agentd-dev/agentd/protocol"
)

// The test binary doubles as the worker command.
func TestMain(m *testing.M) {
	if os.Getenv("AGENTD_TEST_AS_CLI") == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// newHost runs a host in this process with the session service; its
// workers are real processes (this test binary).
func newHost(t *testing.T, grace time.Duration) (*agentdtest.Host, *client.Conn, string) {
	return newHostWith(t, func(cfg *sessions.Config) { cfg.WorkerIdleGrace = grace })
}

// newHostWith is newHost with the service's configuration changed by set.
func newHostWith(t *testing.T, set func(*sessions.Config)) (*agentdtest.Host, *client.Conn, string) {
	t.Setenv("AGENTD_TEST_AS_CLI", "1")
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	base := agentdtest.ShortDir(t)
	home, runDir := filepath.Join(base, "home"), filepath.Join(base, "run")
	cfg := sessions.Config{
		Home: home, RuntimeDir: runDir, HostID: "test",
		WorkerCommand: []string{os.Args[0], "worker"}, WorkerIdleGrace: time.Hour, Models: sessions.EchoModels{},
	}
	set(&cfg)
	h := agentdtest.NewHost(t, agentdtest.Options{Home: home, RuntimeDir: runDir, Compose: sessions.Compose(cfg)})
	work := filepath.Join(base, "work")
	os.MkdirAll(work, 0o755)
	return h, h.Connect(t), work
}

func workerPID(t *testing.T, homeDir, id string) int {
	t.Helper()
	b, err := os.ReadFile(home.WorkerRegistrationPath(homeDir, id))
	var reg home.WorkerRegistration
	if err != nil || json.Unmarshal(b, &reg) != nil {
		t.Fatalf("no worker registered for %s: %v", id, err)
	}
	return reg.PID
}

func workerGone(homeDir, id string) func() bool {
	return func() bool {
		_, err := os.Stat(home.WorkerRegistrationPath(homeDir, id))
		return err != nil
	}
}

func TestRemovingASessionStopsItsWorkerAndClosesItsSubscriptions(t *testing.T) {
	h, c, work := newHost(t, time.Hour)
	ctx := agentdtest.Context(t)
	s, err := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work})
	if err != nil {
		t.Fatal(err)
	}
	open, err := client.Call(ctx, c, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: s.SessionID, Transcript: protocol.TranscriptBootstrap{Kind: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	if open.HostEpoch != h.Epoch() {
		t.Fatalf("open answered with epoch %q, want the host's", open.HostEpoch)
	}
	w := c.Watch(open.SubscriptionID)
	defer w.Close()
	if _, err := client.Call(ctx, c, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}); err != nil {
		t.Fatal(err)
	}
	workerPID(t, h.Home, s.SessionID)
	if _, err := client.Call(ctx, c, protocol.OpSessionRemove, protocol.SessionRef{SessionID: s.SessionID}); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := w.Next(ctx)
		if err != nil {
			t.Fatalf("no closed frame: %v", err)
		}
		if f.Kind == protocol.KindSubscriptionClosed {
			var cl protocol.SubscriptionClosedFrame
			f.Decode(&cl)
			if cl.Reason != protocol.ClosedSessionRemoved || cl.HostEpoch != h.Epoch() {
				t.Fatalf("closed %+v", cl)
			}
			break
		}
	}
	poll.Until(t, "worker exit", workerGone(h.Home, s.SessionID))
	if _, err := client.Call(ctx, c, protocol.OpSessionGet, protocol.SessionRef{SessionID: s.SessionID}); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("get after remove: %v", err)
	}
}

func TestArchivedSessionRefusesTurnsButCanBeRead(t *testing.T) {
	_, c, work := newHost(t, time.Hour)
	ctx := agentdtest.Context(t)
	s, _ := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work, Title: "old"})
	if _, err := client.Call(ctx, c, protocol.OpSessionArchive, protocol.SessionRef{SessionID: s.SessionID}); err != nil {
		t.Fatal(err)
	}
	_, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: "t", Content: protocol.Content{Text: "hi"}})
	if !errors.Is(err, client.ErrSessionArchived) {
		t.Fatalf("turn on an archived session: %v", err)
	}
	got, err := client.Call(ctx, c, protocol.OpSessionGet, protocol.SessionRef{SessionID: s.SessionID[:4]})
	if err != nil || !got.Archived {
		t.Fatalf("get: %+v %v", got, err)
	}
	list, _ := client.Call(ctx, c, protocol.OpSessionList, protocol.SessionListInput{})
	if len(list.Sessions) != 0 {
		t.Fatalf("list without archived: %+v", list.Sessions)
	}
}

func TestIdleWorkerStopsAndTheNextTurnStartsANewOne(t *testing.T) {
	h, c, work := newHost(t, 100*time.Millisecond)
	ctx := agentdtest.Context(t)
	s, _ := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work, Approval: protocol.ApprovalAll})
	start := func(turn string) int {
		// A subscription holds the worker while its pid is read.
		open, err := client.Call(ctx, c, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: s.SessionID, Transcript: protocol.TranscriptBootstrap{Kind: "none"}})
		if err != nil {
			t.Fatal(err)
		}
		pid := workerPID(t, h.Home, s.SessionID)
		if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: turn, Content: protocol.Content{Text: "hello"}}); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "turn end", func() bool {
			var snap protocol.TurnSnapshot
			snap, err := client.Call(ctx, c, protocol.OpTurnQuery, protocol.TurnRef{SessionID: s.SessionID, TurnID: turn})
			return err == nil && snap.Status == protocol.TurnCompleted
		})
		if _, err := client.Call(ctx, c, protocol.OpSubscriptionClose, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	first := start("t1")
	poll.Until(t, "idle worker gone", workerGone(h.Home, s.SessionID))
	if second := start("t2"); second == first {
		t.Fatal("the same worker served both turns")
	}
}

func TestDrainingHostClosesSubscriptionsAsHostDraining(t *testing.T) {
	h, c, work := newHost(t, time.Hour)
	ctx := agentdtest.Context(t)
	s, _ := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work})
	open, err := client.Call(ctx, c, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: s.SessionID, Transcript: protocol.TranscriptBootstrap{Kind: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	w := c.Watch(open.SubscriptionID)
	defer w.Close()
	if _, err := client.Call(ctx, c, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- h.Shutdown(ctx) }()
	f, err := w.Next(ctx)
	if err != nil || f.Kind != protocol.KindSubscriptionClosed {
		t.Fatalf("frame %+v %v", f, err)
	}
	var cl protocol.SubscriptionClosedFrame
	f.Decode(&cl)
	if cl.Reason != protocol.ClosedHostDraining {
		t.Fatalf("closed as %q", cl.Reason)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "worker exit", workerGone(h.Home, s.SessionID))
}

func TestSessionListPagesCoverEverySessionOnce(t *testing.T) {
	_, c, work := newHost(t, time.Hour)
	ctx := agentdtest.Context(t)
	want := map[string]bool{}
	for range 7 {
		s, err := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work})
		if err != nil {
			t.Fatal(err)
		}
		want[s.SessionID] = true
	}
	got := map[string]bool{}
	in := protocol.SessionListInput{Limit: 3}
	pages := 0
	for {
		res, err := client.Call(ctx, c, protocol.OpSessionList, in)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, s := range res.Sessions {
			if got[s.SessionID] {
				t.Fatalf("%s listed twice", s.SessionID)
			}
			got[s.SessionID] = true
		}
		if res.NextCursor == "" {
			break
		}
		in.Cursor = res.NextCursor
	}
	if pages != 3 || len(got) != len(want) {
		t.Fatalf("%d pages, %d sessions; want 3 pages, %d sessions", pages, len(got), len(want))
	}
	_, err := client.Call(ctx, c, protocol.OpSessionList, protocol.SessionListInput{Cursor: "not-a-cursor"})
	if !errors.Is(err, client.ErrInvalidRequest) {
		t.Fatalf("bad cursor: %v", err)
	}
}

func TestADetachedTurnRunsOnAndItsWorkerIdlesAfterIt(t *testing.T) {
	h, c, work := newHost(t, 100*time.Millisecond)
	ctx := agentdtest.Context(t)
	s, _ := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work, Approval: protocol.ApprovalAll})
	open, err := client.Call(ctx, c, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: s.SessionID, Transcript: protocol.TranscriptBootstrap{Kind: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	w := c.Watch(open.SubscriptionID)
	client.Call(ctx, c, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID})
	if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: "t1", Content: protocol.Content{Text: "run `sleep 1`"}}); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := w.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if f.Kind == protocol.KindSessionDelta && strings.Contains(string(f.Raw), `"event":"tool_call_start"`) {
			break
		}
	}
	// The client lets go mid-turn; the turn goes on and the host knows it runs.
	if _, err := client.Call(ctx, c, protocol.OpSubscriptionClose, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	got, err := client.Call(ctx, c, protocol.OpSessionGet, protocol.SessionRef{SessionID: s.SessionID})
	if err != nil || got.Status != protocol.SessionRunning {
		t.Fatalf("detached session: %+v %v", got, err)
	}
	poll.Until(t, "the worker idles out after the turn", workerGone(h.Home, s.SessionID))
	snap, err := client.Call(ctx, c, protocol.OpTurnQuery, protocol.TurnRef{SessionID: s.SessionID, TurnID: "t1"})
	if err != nil || snap.Status != protocol.TurnCompleted {
		t.Fatalf("the detached turn: %+v %v", snap, err)
	}
}

func TestSessionChangesCarryTheCatalogsHeader(t *testing.T) {
	_, c, work := newHost(t, time.Hour)
	ctx := agentdtest.Context(t)
	s, _ := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work, Title: "named", Approval: protocol.ApprovalAll})
	open, _ := client.Call(ctx, c, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: s.SessionID, Transcript: protocol.TranscriptBootstrap{Kind: "none"}})
	w := c.Watch(open.SubscriptionID)
	defer w.Close()
	client.Call(ctx, c, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID})
	client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: "t1", Content: protocol.Content{Text: "hello"}})
	for {
		f, err := w.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var fr protocol.SessionDeltaFrame
		var d protocol.SessionDelta
		f.Decode(&fr)
		json.Unmarshal(fr.Delta, &d)
		if d.Event == protocol.EventSessionChanged {
			if d.Session.Title != "named" || d.Session.CreatedAt.IsZero() || d.Session.MetadataRevision == 0 || d.Session.Status != protocol.SessionRunning {
				t.Fatalf("session_changed carries %+v", d.Session)
			}
			return
		}
	}
}

// TestTwoClientsSeeOneSessionDirectory: what one client creates or removes,
// the other lists at once; when a session both watch is removed, both
// subscriptions close with session_removed.
func TestTwoClientsSeeOneSessionDirectory(t *testing.T) {
	h, first, work := newHost(t, time.Hour)
	second := h.Connect(t)
	ctx := agentdtest.Context(t)
	create := func(c *client.Conn, id string) {
		t.Helper()
		if _, err := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{SessionID: id, Cwd: work}); err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
	}
	list := func(c *client.Conn) string {
		t.Helper()
		res, err := client.Call(ctx, c, protocol.OpSessionList, protocol.SessionListInput{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range res.Sessions {
			ids = append(ids, s.SessionID)
		}
		sort.Strings(ids)
		return strings.Join(ids, " ")
	}
	bothList := func(want string) {
		t.Helper()
		if a, b := list(first), list(second); a != want || b != want {
			t.Fatalf("the clients list %q and %q, want %q", a, b, want)
		}
	}
	create(first, "demo-1")
	create(second, "demo-2")
	bothList("demo-1 demo-2")
	create(first, "demo-3")
	bothList("demo-1 demo-2 demo-3")

	watch := func(c *client.Conn) *client.Watcher {
		t.Helper()
		open, err := client.Call(ctx, c, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: "demo-1", Transcript: protocol.TranscriptBootstrap{Kind: "none"}})
		if err != nil {
			t.Fatal(err)
		}
		w := c.Watch(open.SubscriptionID)
		t.Cleanup(func() { w.Close() })
		if _, err := client.Call(ctx, c, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}); err != nil {
			t.Fatal(err)
		}
		return w
	}
	watchers := []*client.Watcher{watch(first), watch(second)}
	if _, err := client.Call(ctx, first, protocol.OpSessionRemove, protocol.SessionRef{SessionID: "demo-1"}); err != nil {
		t.Fatal(err)
	}
	for i, w := range watchers {
		for {
			f, err := w.Next(ctx)
			if err != nil {
				t.Fatalf("client %d: no closed frame: %v", i+1, err)
			}
			if f.Kind != protocol.KindSubscriptionClosed {
				continue
			}
			var cl protocol.SubscriptionClosedFrame
			f.Decode(&cl)
			if cl.Reason != protocol.ClosedSessionRemoved {
				t.Fatalf("client %d: closed %+v", i+1, cl)
			}
			break
		}
	}
	bothList("demo-2 demo-3")
}
