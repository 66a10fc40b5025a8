package sessions_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/internal/sessions"
	"github.com/agentd-dev/agentd/protocol"
)

// lockedBuffer is a log the host and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// webHost is a host with the session service, listening on the web.
type webHost struct {
	h     *agentdtest.Host
	owner *client.Conn
	work  string
	web   protocol.WebListener
	log   *lockedBuffer
}

// newWebHost starts a host whose composition is the session service,
// wrapped by wrap when it is set, and its web listener.
func newWebHost(t *testing.T, wrap func(*sessions.Service) server.Composition) *webHost {
	t.Helper()
	w := newWebHostOff(t, wrap)
	web, err := client.Call(agentdtest.Context(t), w.owner, protocol.OpHostWebStart, protocol.WebStartInput{})
	if err != nil {
		t.Fatal(err)
	}
	if !web.Loopback || web.OwnerToken == "" || !strings.HasPrefix(web.Address, "127.0.0.1:") {
		t.Fatalf("the web listener: %+v", web)
	}
	w.web = web
	return w
}

// newWebHostOff is newWebHost without the web listener started.
func newWebHostOff(t *testing.T, wrap func(*sessions.Service) server.Composition) *webHost {
	t.Helper()
	t.Setenv("AGENTD_TEST_AS_CLI", "1")
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	base := agentdtest.ShortDir(t)
	home, runDir := filepath.Join(base, "home"), filepath.Join(base, "run")
	log := &lockedBuffer{}
	cfg := sessions.Config{
		Home: home, RuntimeDir: runDir, HostID: "test",
		WorkerCommand: []string{os.Args[0], "worker"}, WorkerIdleGrace: time.Hour, Models: sessions.EchoModels{},
		Logger: slog.New(slog.NewTextHandler(log, nil)),
	}
	compose := func(ctx context.Context, h *server.Server) (server.Composition, error) {
		s, err := sessions.New(ctx, h, cfg)
		if err != nil || wrap == nil {
			return s, err
		}
		return wrap(s), nil
	}
	h := agentdtest.NewHost(t, agentdtest.Options{Home: home, RuntimeDir: runDir, Compose: compose})
	work := filepath.Join(base, "work")
	os.MkdirAll(work, 0o755)
	return &webHost{h: h, owner: h.Connect(t), work: work, log: log}
}

// share gives a guest a grant on session id at level and returns it.
func (w *webHost) share(t *testing.T, id, level string) protocol.GrantCreateResult {
	t.Helper()
	g, err := client.Call(agentdtest.Context(t), w.owner, protocol.OpGrantCreate, protocol.GrantCreateInput{SessionID: id, Level: level})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// dialWeb opens a WebSocket to the listener with header, as a net.Conn.
func dialWeb(ctx context.Context, url string, header http.Header) (net.Conn, *http.Response, error) {
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: header})
	if err != nil {
		return nil, resp, err
	}
	return websocket.NetConn(context.Background(), ws, websocket.MessageText), resp, nil
}

func bearer(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}

// guestConn connects a client over the WebSocket with token.
func (w *webHost) guestConn(t *testing.T, token string) *client.Conn {
	t.Helper()
	c, err := client.Dial(agentdtest.Context(t), w.web.WebSocketURL, client.Options{
		Surface: protocol.SurfaceWeb,
		Dial: func(ctx context.Context) (net.Conn, error) {
			nc, _, err := dialWeb(ctx, w.web.WebSocketURL, bearer(token))
			return nc, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func remoteCode(err error) protocol.Code {
	var re *client.RemoteError
	if errors.As(err, &re) {
		return re.Code
	}
	return ""
}

// A guest over the WebSocket sees the one session of its grant and no
// other: another session, by its id or a prefix, in session.list, a
// resource query, a subscription or a PTY's control, answers not_found
// word for word as one that does not exist; with observe it may not
// prompt, answer, interrupt or take a PTY; no owner's operation is its.
// The owner's connection is untouched by all of it.
func TestAGuestSeesOnlyTheSessionOfItsGrantAndDoesOnlyWhatItsLevelAllows(t *testing.T) {
	w := newWebHost(t, nil)
	ctx := agentdtest.Context(t)
	mine, pty := sessionWithPTY(t, w.owner, w.work, "cat")
	other := createSession(t, w.owner, w.work)
	g := w.share(t, mine.SessionID, protocol.GrantObserve)
	if len(g.Token) < len("agentd_")+22 || !strings.HasPrefix(g.URL, w.web.URL) || !strings.Contains(g.URL, "#token=") {
		t.Fatalf("the grant's token and link: %+v", g)
	}
	guest := w.guestConn(t, g.Token)
	if p := guest.Accepted().Principal; p.Kind != protocol.PrincipalGuest || p.ID != g.Grant.GrantID {
		t.Fatalf("the guest connection acts for %+v", p)
	}

	list, err := client.Call(ctx, guest, protocol.OpSessionList, protocol.SessionListInput{IncludeArchived: true})
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].SessionID != mine.SessionID {
		t.Fatalf("the guest's session.list: %+v %v", list, err)
	}
	if got, err := client.Call(ctx, guest, protocol.OpSessionGet, protocol.SessionRef{SessionID: mine.SessionID[:6]}); err != nil || got.SessionID != mine.SessionID {
		t.Fatalf("the guest's session.get of its session by a prefix: %+v %v", got, err)
	}

	// Another session, however named, is as one that does not exist.
	prefix := other.SessionID[:len(other.SessionID)-1]
	for strings.HasPrefix(mine.SessionID, prefix) {
		prefix = prefix[:len(prefix)-1]
	}
	hidden := map[string]func(id string) error{
		"session.get": func(id string) error {
			_, err := client.Call(ctx, guest, protocol.OpSessionGet, protocol.SessionRef{SessionID: id})
			return err
		},
		"subscription.open": func(id string) error {
			_, err := client.Call(ctx, guest, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: id, Transcript: protocol.TranscriptBootstrap{Kind: protocol.TranscriptNone}})
			return err
		},
		"runtime.resource.query": func(id string) error {
			_, err := client.Call(ctx, guest, protocol.OpRuntimeResourceQuery, protocol.ResourceQueryInput{SessionID: id})
			return err
		},
		"runtime.resource.controller.acquire": func(id string) error {
			_, err := client.Call(ctx, guest, protocol.OpRuntimeResourceControllerAcquire, protocol.ResourceRef{SessionID: id, Ref: pty.Ref})
			return err
		},
		"turn.start": func(id string) error {
			_, err := client.Call(ctx, guest, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: id, TurnID: "t1", Content: protocol.Content{Text: "hi"}})
			return err
		},
	}
	for op, call := range hidden {
		for _, name := range []string{other.SessionID, prefix} {
			err := call(name)
			if remoteCode(err) != protocol.CodeNotFound {
				t.Errorf("the guest's %s of another session (%s): %v, want not_found", op, name, err)
				continue
			}
			missing := call("zz-missing")
			if want := strings.ReplaceAll(missing.Error(), "zz-missing", name); err.Error() != want {
				t.Errorf("the guest's %s tells another session (%q) from a missing one (%q)", op, err, missing)
			}
		}
	}

	// What observe does not allow, on its own session.
	refused := map[string]func() error{
		"turn.start": func() error {
			_, err := client.Call(ctx, guest, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: mine.SessionID, TurnID: "t1", Content: protocol.Content{Text: "hi"}})
			return err
		},
		"turn.interrupt": func() error {
			_, err := client.Call(ctx, guest, protocol.OpTurnInterrupt, protocol.TurnRef{SessionID: mine.SessionID, TurnID: "t1"})
			return err
		},
		"interaction.answer": func() error {
			_, err := client.Call(ctx, guest, protocol.OpInteractionAnswer, protocol.InteractionAnswerInput{SessionID: mine.SessionID, InteractionID: "i1", Answer: "allow"})
			return err
		},
		"runtime.resource.controller.acquire": func() error {
			_, err := client.Call(ctx, guest, protocol.OpRuntimeResourceControllerAcquire, protocol.ResourceRef{SessionID: mine.SessionID, Ref: pty.Ref})
			return err
		},
		"runtime.resource.controller.control": func() error {
			_, err := client.Call(ctx, guest, protocol.OpRuntimeResourceControllerControl, protocol.ControlInput{SessionID: mine.SessionID, Ref: pty.Ref, ControllerID: "c1", Sequence: 1, Data: "keys\n"})
			return err
		},
		"runtime.resource.start": func() error {
			_, err := client.Call(ctx, guest, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{SessionID: mine.SessionID, LaunchID: "l2", Command: "true"})
			return err
		},
		"session.create": func() error {
			_, err := client.Call(ctx, guest, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: w.work})
			return err
		},
		"models.select of the default": func() error {
			_, err := client.Call(ctx, guest, protocol.OpModelsSelect, protocol.ModelsSelectInput{Model: "echo/echo"})
			return err
		},
		"grant.create": func() error {
			_, err := client.Call(ctx, guest, protocol.OpGrantCreate, protocol.GrantCreateInput{SessionID: mine.SessionID, Level: protocol.GrantControl})
			return err
		},
		"session.mcp.set": func() error {
			_, err := client.Call(ctx, guest, protocol.OpSessionMCPSet, protocol.SessionMCPSetInput{SessionID: mine.SessionID,
				Servers: []protocol.SessionMCPServer{{Name: "x", Transport: protocol.MCPTransportStdio, Command: "/bin/true"}}})
			return err
		},
		"grant.list": func() error {
			_, err := client.Call(ctx, guest, protocol.OpGrantList, protocol.GrantListInput{})
			return err
		},
		"host.web.start": func() error {
			_, err := client.Call(ctx, guest, protocol.OpHostWebStart, protocol.WebStartInput{})
			return err
		},
		"host.web.stop": func() error {
			_, err := client.Call(ctx, guest, protocol.OpHostWebStop, protocol.WebStopInput{})
			return err
		},
		"host.shutdown": func() error {
			_, err := client.Call(ctx, guest, protocol.OpHostShutdown, protocol.ShutdownInput{})
			return err
		},
	}
	for op, call := range refused {
		if err := call(); remoteCode(err) != protocol.CodeUnauthorized {
			t.Errorf("the observing guest's %s: %v, want unauthorized", op, err)
		}
	}
	if st, err := guest.Status(ctx); err != nil || st.Home != "" || st.LogFile != "" || st.Web != nil || len(st.Providers) != 0 {
		t.Errorf("the guest's host.status: %+v %v, want the host's files and setup left out", st, err)
	}
	// Its PTY: the guest reads it, nobody took it.
	if _, err := client.Call(ctx, guest, protocol.OpRuntimeResourceQuery, protocol.ResourceQueryInput{SessionID: mine.SessionID}); err != nil {
		t.Errorf("the guest's runtime.resource.query of its session: %v", err)
	}
	if _, err := client.Call(ctx, w.owner, protocol.OpRuntimeResourceControllerAcquire, protocol.ResourceRef{SessionID: mine.SessionID, Ref: pty.Ref}); err != nil {
		t.Errorf("the owner takes the PTY the guest could not: %v", err)
	}
	all, err := client.Call(ctx, w.owner, protocol.OpSessionList, protocol.SessionListInput{})
	if err != nil || len(all.Sessions) != 2 {
		t.Fatalf("the owner's session.list after the guest's tries: %+v %v", all, err)
	}
}

// gated holds the guest's session.get and session.list in their handler
// until the test lets them go, telling it when one is held: a request
// that is running when the grant is revoked.
type gated struct {
	*sessions.Service
	held    chan string
	release chan struct{}
}

func (g gated) Handlers() server.Table {
	t := g.Service.Handlers()
	out := make(server.Table, len(t))
	for name, h := range t {
		out[name] = h
	}
	for _, name := range []string{string(protocol.OpSessionGet), string(protocol.OpSessionList)} {
		h := t[name]
		out[name] = func(ctx context.Context, call *server.Call) (any, error) {
			v, err := h(ctx, call)
			if call.Caller.Principal.Kind == protocol.PrincipalGuest {
				g.held <- name
				<-g.release
			}
			return v, err
		}
	}
	return out
}

// Seed 004: a guest sees only the session it holds an observation grant
// for, and a grant revoked while a query of its guest runs hides the
// query's result. Over the WebSocket, the guest's session.list lists its
// one session of two; then its session.get and session.list have read
// the session when the owner revokes the grant over its own connection,
// and once they end the guest hears not_found and unauthorized, never
// the session.
func TestAGrantRevokedWhileAGuestsQueryRunsHidesTheResult(t *testing.T) {
	g := gated{held: make(chan string), release: make(chan struct{})}
	w := newWebHost(t, func(s *sessions.Service) server.Composition { g.Service = s; return g })
	ctx := agentdtest.Context(t)
	s := createSession(t, w.owner, w.work)
	createSession(t, w.owner, w.work)

	seeing := w.guestConn(t, w.share(t, s.SessionID, protocol.GrantObserve).Token)
	listed := make(chan protocol.SessionListResult, 1)
	go func() {
		l, _ := client.Call(ctx, seeing, protocol.OpSessionList, protocol.SessionListInput{})
		listed <- l
	}()
	<-g.held
	g.release <- struct{}{}
	if l := <-listed; len(l.Sessions) != 1 || l.Sessions[0].SessionID != s.SessionID {
		t.Fatalf("the guest's session.list: %+v, want its one session", l)
	}

	type answer struct {
		session protocol.Session
		list    protocol.SessionListResult
		err     error
	}
	queries := map[string]func(c *client.Conn) answer{
		"session.get": func(c *client.Conn) answer {
			got, err := client.Call(ctx, c, protocol.OpSessionGet, protocol.SessionRef{SessionID: s.SessionID})
			return answer{session: got, err: err}
		},
		"session.list": func(c *client.Conn) answer {
			got, err := client.Call(ctx, c, protocol.OpSessionList, protocol.SessionListInput{})
			return answer{list: got, err: err}
		},
	}
	for name, query := range queries {
		grant := w.share(t, s.SessionID, protocol.GrantObserve)
		guest := w.guestConn(t, grant.Token)
		answered := make(chan answer, 1)
		go func() { answered <- query(guest) }()
		if held := <-g.held; held != name {
			t.Fatalf("held %s, want %s", held, name)
		}
		if _, err := client.Call(ctx, w.owner, protocol.OpGrantRevoke, protocol.GrantRef{GrantID: grant.Grant.GrantID}); err != nil {
			t.Fatal(err)
		}
		g.release <- struct{}{}
		a := <-answered
		if a.session.SessionID != "" || len(a.list.Sessions) != 0 {
			t.Fatalf("the guest's %s, its grant revoked while it ran, answered the session: %+v", name, a)
		}
		want := protocol.CodeNotFound
		if name == "session.list" {
			want = protocol.CodeUnauthorized
		}
		if remoteCode(a.err) != want {
			t.Fatalf("the guest's %s, its grant revoked while it ran: %v, want %s", name, a.err, want)
		}
		if strings.Contains(a.err.Error(), "revoked") && want == protocol.CodeNotFound {
			t.Fatalf("the not_found of a revoked grant tells it from a missing session: %v", a.err)
		}
	}
}

// Revoking a grant ends its guest's subscriptions with access_revoked
// and releases the PTY it controls, at once, on a connection that stays
// open; its later requests answer as for a session that does not exist.
func TestRevokingAGrantEndsItsGuestsSubscriptionsAndPTYControlAtOnce(t *testing.T) {
	w := newWebHost(t, nil)
	ctx := agentdtest.Context(t)
	s, pty := sessionWithPTY(t, w.owner, w.work, "cat")
	grant := w.share(t, s.SessionID, protocol.GrantControl)
	guest := w.guestConn(t, grant.Token)

	open, err := client.Call(ctx, guest, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: s.SessionID, Transcript: protocol.TranscriptBootstrap{Kind: protocol.TranscriptNone}})
	if err != nil {
		t.Fatal(err)
	}
	watcher := guest.Watch(open.SubscriptionID)
	if _, err := client.Call(ctx, guest, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}); err != nil {
		t.Fatal(err)
	}
	ctl, err := client.Call(ctx, guest, protocol.OpRuntimeResourceControllerAcquire, protocol.ResourceRef{SessionID: s.SessionID, Ref: pty.Ref})
	if err != nil {
		t.Fatalf("the controlling guest takes the PTY: %v", err)
	}
	if _, err := client.Call(ctx, guest, protocol.OpRuntimeResourceControllerControl, protocol.ControlInput{SessionID: s.SessionID, Ref: pty.Ref, ControllerID: ctl.ControllerID, Sequence: 1, Data: "typed by the guest\n"}); err != nil {
		t.Fatalf("the controlling guest types: %v", err)
	}
	_, err = client.Call(ctx, w.owner, protocol.OpRuntimeResourceControllerAcquire, protocol.ResourceRef{SessionID: s.SessionID, Ref: pty.Ref})
	wantCode(t, err, protocol.CodeOperationConflict)

	if _, err := client.Call(ctx, w.owner, protocol.OpGrantRevoke, protocol.GrantRef{GrantID: grant.Grant.GrantID}); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := watcher.Next(ctx)
		if err != nil {
			t.Fatalf("the guest's subscription did not close: %v", err)
		}
		if f.Kind != protocol.KindSubscriptionClosed {
			continue
		}
		var closed protocol.SubscriptionClosedFrame
		if err := f.Decode(&closed); err != nil || closed.Reason != protocol.ClosedAccessRevoked {
			t.Fatalf("the guest's subscription closed with %+v %v, want %s", closed, err, protocol.ClosedAccessRevoked)
		}
		break
	}
	poll.Until(t, "the owner takes the PTY the revoked guest controlled", func() bool {
		_, err := client.Call(ctx, w.owner, protocol.OpRuntimeResourceControllerAcquire, protocol.ResourceRef{SessionID: s.SessionID, Ref: pty.Ref})
		return err == nil
	})
	_, err = client.Call(ctx, guest, protocol.OpRuntimeResourceControllerControl, protocol.ControlInput{SessionID: s.SessionID, Ref: pty.Ref, ControllerID: ctl.ControllerID, Sequence: 2, Data: "after\n"})
	wantCode(t, err, protocol.CodeNotFound)
	_, err = client.Call(ctx, guest, protocol.OpSessionGet, protocol.SessionRef{SessionID: s.SessionID})
	wantCode(t, err, protocol.CodeNotFound)
	if _, err := guest.Status(ctx); err != nil {
		t.Fatalf("the revoked guest's connection closed: %v", err)
	}
	grants, err := client.Call(ctx, w.owner, protocol.OpGrantList, protocol.GrantListInput{})
	if err != nil || len(grants.Grants) != 0 {
		t.Fatalf("the grants after the revocation: %+v %v", grants, err)
	}
	_, err = client.Call(ctx, w.owner, protocol.OpGrantRevoke, protocol.GrantRef{GrantID: grant.Grant.GrantID})
	wantCode(t, err, protocol.CodeNotFound)
}

// A grant that expires ends its guest's subscription as a revocation
// does, and its later requests answer not_found. The grant is given a
// short life, doubled until the guest subscribes within it.
func TestAnExpiringGrantEndsItsGuestsSubscription(t *testing.T) {
	w := newWebHost(t, nil)
	ctx := agentdtest.Context(t)
	s := createSession(t, w.owner, w.work)
	for life := 500 * time.Millisecond; ; life *= 2 {
		until := time.Now().Add(life)
		grant, err := client.Call(ctx, w.owner, protocol.OpGrantCreate, protocol.GrantCreateInput{SessionID: s.SessionID, Level: protocol.GrantObserve, ExpiresAt: &until})
		if err != nil {
			t.Fatal(err)
		}
		guest := w.guestConn(t, grant.Token)
		open, err := client.Call(ctx, guest, protocol.OpSubscriptionOpen, protocol.SubscriptionOpenInput{SessionID: s.SessionID, Transcript: protocol.TranscriptBootstrap{Kind: protocol.TranscriptNone}})
		if err != nil {
			continue // expired before the guest subscribed: a longer life
		}
		watcher := guest.Watch(open.SubscriptionID)
		if _, err := client.Call(ctx, guest, protocol.OpSubscriptionReady, protocol.SubscriptionRef{SubscriptionID: open.SubscriptionID}); err != nil {
			continue
		}
		for {
			f, err := watcher.Next(ctx)
			if err != nil {
				t.Fatalf("the subscription of an expiring grant did not close: %v", err)
			}
			var closed protocol.SubscriptionClosedFrame
			if f.Kind == protocol.KindSubscriptionClosed && f.Decode(&closed) == nil {
				if closed.Reason != protocol.ClosedAccessRevoked {
					t.Fatalf("closed with %q, want %q", closed.Reason, protocol.ClosedAccessRevoked)
				}
				break
			}
		}
		_, err = client.Call(ctx, guest, protocol.OpSessionGet, protocol.SessionRef{SessionID: s.SessionID})
		wantCode(t, err, protocol.CodeNotFound)
		if code := upgradeStatus(t, w.web.WebSocketURL, "", bearer(grant.Token)); code != http.StatusUnauthorized {
			t.Fatalf("the expired grant's token opened a WebSocket: %d", code)
		}
		return
	}
}
