package sessions_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/internal/sessions"
	"github.com/agentd-dev/agentd/protocol"
)

// asGuest is the session service with the callers of web connections
// taken for a guest that holds no grant (its grant never given, or
// revoked), decided by the service's own Authorize.
type asGuest struct{ *sessions.Service }

var guest = protocol.Principal{ID: "g-1", Kind: protocol.PrincipalGuest}

func (g asGuest) Authorize(ctx context.Context, call *server.Call) error {
	if call.Identity.Surface == protocol.SurfaceWeb {
		call.Caller.Principal = guest
	}
	return g.Service.Authorize(ctx, call)
}

// A caller the owner has granted nothing sees no session: every operation
// on one answers not_found, word for word as for a session that does not
// exist, so its existence does not leak; an owner's operation answers
// unauthorized; host.status answers. The owner's connection, meanwhile,
// acts on the session by a prefix of its id, which the one check resolved.
func TestAnUngrantedCallerSeesNoSessionAndTheOwnerAll(t *testing.T) {
	t.Setenv("AGENTD_TEST_AS_CLI", "1")
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	base := agentdtest.ShortDir(t)
	home, runDir := filepath.Join(base, "home"), filepath.Join(base, "run")
	cfg := sessions.Config{
		Home: home, RuntimeDir: runDir, HostID: "test",
		WorkerCommand: []string{os.Args[0], "worker"}, WorkerIdleGrace: time.Hour, Models: sessions.EchoModels{},
	}
	compose := func(ctx context.Context, h *server.Server) (server.Composition, error) {
		s, err := sessions.New(ctx, h, cfg)
		if err != nil {
			return nil, err
		}
		return asGuest{s}, nil
	}
	h := agentdtest.NewHost(t, agentdtest.Options{Home: home, RuntimeDir: runDir, Compose: compose})
	work := filepath.Join(base, "work")
	os.MkdirAll(work, 0o755)
	owner := h.Connect(t)
	ctx := agentdtest.Context(t)
	s := createSession(t, owner, work)

	g, err := client.Dial(ctx, h.Endpoint(), client.Options{Surface: protocol.SurfaceWeb})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ref := protocol.SessionRef{SessionID: s.SessionID}
	hidden := map[string]func(id string) error{
		"session.get": func(id string) error {
			_, err := client.Call(ctx, g, protocol.OpSessionGet, protocol.SessionRef{SessionID: id})
			return err
		},
		"session.rename": func(id string) error {
			_, err := client.Call(ctx, g, protocol.OpSessionRename, protocol.SessionRenameInput{SessionID: id, Title: "mine"})
			return err
		},
		"session.remove": func(id string) error {
			_, err := client.Call(ctx, g, protocol.OpSessionRemove, protocol.SessionRef{SessionID: id})
			return err
		},
		"turn.start": func(id string) error {
			_, err := client.Call(ctx, g, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: id, TurnID: "t1", Content: protocol.Content{Text: "hi"}})
			return err
		},
		"subscription.open": func(id string) error {
			_, err := client.Call(ctx, g, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: id, Transcript: protocol.TranscriptBootstrap{Kind: protocol.TranscriptNone}})
			return err
		},
		"runtime.resource.start": func(id string) error {
			_, err := client.Call(ctx, g, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{SessionID: id, LaunchID: "l1", Command: "true"})
			return err
		},
	}
	for op, call := range hidden {
		err := call(s.SessionID)
		if !errors.Is(err, client.ErrNotFound) {
			t.Errorf("a guest's %s of the owner's session: %v, want not_found", op, err)
			continue
		}
		missing := call("no-such-session")
		if want := strings.ReplaceAll(missing.Error(), "no-such-session", s.SessionID); err.Error() != want {
			t.Errorf("a guest's %s tells the owner's session (%q) from a missing one (%q)", op, err, missing)
		}
	}
	if _, err := client.Call(ctx, g, protocol.OpSessionList, protocol.SessionListInput{}); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("a guest's session.list: %v, want unauthorized", err)
	}
	if _, err := client.Call(ctx, g, protocol.OpHostShutdown, protocol.ShutdownInput{}); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("a guest's host.shutdown: %v, want unauthorized", err)
	}
	if _, err := g.Status(ctx); err != nil {
		t.Errorf("a guest's host.status: %v", err)
	}

	// Nothing the guest asked reached the session.
	got, err := client.Call(ctx, owner, protocol.OpSessionGet, ref)
	if err != nil || got.Title != s.Title {
		t.Fatalf("the owner's session after the guest's tries: %+v %v", got, err)
	}
	// The owner names it by a prefix; the handler acts on the session.
	renamed, err := client.Call(ctx, owner, protocol.OpSessionRename, protocol.SessionRenameInput{SessionID: s.SessionID[:4], Title: "renamed"})
	if err != nil || renamed.SessionID != s.SessionID || renamed.Title != "renamed" {
		t.Fatalf("the owner's rename by a prefix: %+v %v", renamed, err)
	}
}
