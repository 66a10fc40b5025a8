package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/protocol"
)

// agentd web starts the listener once and prints where it listens, with
// a new owner's login each time; agentd share prints a grant whose
// token opens the session alone over the WebSocket; share ls lists it and
// share rm revokes it at once; status shows the listener.
func TestWebAndShareGiveAGuestOneSessionUntilRevoked(t *testing.T) {
	p := newPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir()))
	other := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir()))

	var web struct {
		URL          string `json:"url"`
		WebSocketURL string `json:"websocketUrl"`
		OwnerToken   string `json:"ownerToken"`
	}
	if err := json.Unmarshal([]byte(p.mustRun("web", "--json")), &web); err != nil || !strings.HasPrefix(web.URL, "http://127.0.0.1:") || !strings.HasSuffix(web.WebSocketURL, "/ws") || web.OwnerToken == "" {
		t.Fatalf("agentd web --json: %+v %v", web, err)
	}
	again := p.mustRun("web")
	if !strings.Contains(again, web.WebSocketURL) || strings.Contains(again, web.OwnerToken) || !strings.Contains(again, "owner's login") || !strings.Contains(again, web.URL+"#token=") {
		t.Fatalf("a second agentd web:\n%s", again)
	}
	if out := p.mustRun("status"); !strings.Contains(out, web.WebSocketURL) {
		t.Fatalf("agentd status does not show the listener:\n%s", out)
	}

	var share struct {
		GrantID string `json:"grantId"`
		URL     string `json:"url"`
		Token   string `json:"token"`
	}
	if err := json.Unmarshal([]byte(p.mustRun("share", id[:6], "--label", "Ana", "--expires", "2h", "--json")), &share); err != nil || share.GrantID == "" || !strings.HasPrefix(share.URL, web.URL) || share.Token == "" {
		t.Fatalf("agentd share --json: %+v %v", share, err)
	}
	var grants []protocol.Grant
	if err := json.Unmarshal([]byte(p.mustRun("share", "ls", "--json")), &grants); err != nil || len(grants) != 1 || grants[0].SessionID != id || grants[0].Label != "Ana" || grants[0].ExpiresAt == nil || grants[0].Level != protocol.GrantObserve {
		t.Fatalf("agentd share ls --json: %+v %v", grants, err)
	}
	if out := p.mustRun("share", "ls"); !strings.Contains(out, share.GrantID) || !strings.Contains(out, "Ana") {
		t.Fatalf("agentd share ls:\n%s", out)
	}

	ctx := agentdtest.Context(t)
	guest, err := client.Dial(ctx, web.WebSocketURL, client.Options{Surface: protocol.SurfaceWeb, Dial: func(ctx context.Context) (net.Conn, error) {
		ws, _, err := websocket.Dial(ctx, web.WebSocketURL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + share.Token}}})
		if err != nil {
			return nil, err
		}
		return websocket.NetConn(context.Background(), ws, websocket.MessageText), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer guest.Close()
	list, err := client.Call(ctx, guest, protocol.OpSessionList, protocol.SessionListInput{})
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].SessionID != id {
		t.Fatalf("the guest's session.list: %+v %v", list, err)
	}
	if _, err := client.Call(ctx, guest, protocol.OpSessionGet, protocol.SessionRef{SessionID: other}); !strings.Contains(errString(err), "not found") {
		t.Fatalf("the guest's session.get of another session: %v", err)
	}

	if out := p.mustRun("share", "rm", share.GrantID); !strings.Contains(out, "revoked "+share.GrantID) {
		t.Fatalf("agentd share rm: %s", out)
	}
	if _, err := client.Call(ctx, guest, protocol.OpSessionGet, protocol.SessionRef{SessionID: id}); !strings.Contains(errString(err), "not found") {
		t.Fatalf("the guest's session.get once revoked: %v", err)
	}
	if out := strings.TrimSpace(p.mustRun("share", "ls", "--json")); out != "[]" {
		t.Fatalf("agentd share ls --json after the revocation: %s", out)
	}
	if _, stderr, code := p.run("share", "rm", share.GrantID); code == 0 || !strings.Contains(stderr, share.GrantID) {
		t.Fatalf("a second agentd share rm: exit %d, %s", code, stderr)
	}
	if _, stderr, code := p.run("share", id, "--expires", "-1h"); code == 0 || !strings.Contains(stderr, "--expires") {
		t.Fatalf("agentd share --expires -1h: exit %d, %s", code, stderr)
	}
}

// A grant survives agentd upgrade: the replacing host reads it from the
// home, lists it, and its token opens the session once the new host
// listens on the web again; its revocation holds in the new
// host too.
func TestAGrantSurvivesAHostHandOff(t *testing.T) {
	p := newPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir()))
	var share struct {
		GrantID string `json:"grantId"`
		Token   string `json:"token"`
	}
	if err := json.Unmarshal([]byte(p.mustRun("share", id, "--control", "--json")), &share); err != nil {
		t.Fatal(err)
	}
	before := p.statusJSON().PID
	p.mustRun("upgrade")
	if p.statusJSON().PID == before {
		t.Fatal("the host was not replaced")
	}
	var grants []protocol.Grant
	if err := json.Unmarshal([]byte(p.mustRun("share", "ls", "--json")), &grants); err != nil || len(grants) != 1 || grants[0].GrantID != share.GrantID || grants[0].Level != protocol.GrantControl {
		t.Fatalf("the grants after the hand-off: %+v %v", grants, err)
	}
	var web struct {
		WebSocketURL string `json:"websocketUrl"`
	}
	if err := json.Unmarshal([]byte(p.mustRun("web", "--json")), &web); err != nil {
		t.Fatal(err)
	}
	ctx := agentdtest.Context(t)
	guest, err := client.Dial(ctx, web.WebSocketURL, client.Options{Surface: protocol.SurfaceWeb, Dial: func(ctx context.Context) (net.Conn, error) {
		ws, _, err := websocket.Dial(ctx, web.WebSocketURL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + share.Token}}})
		if err != nil {
			return nil, err
		}
		return websocket.NetConn(context.Background(), ws, websocket.MessageText), nil
	}})
	if err != nil {
		t.Fatalf("the grant's token on the new host: %v", err)
	}
	defer guest.Close()
	if s, err := client.Call(ctx, guest, protocol.OpSessionGet, protocol.SessionRef{SessionID: id}); err != nil || s.SessionID != id {
		t.Fatalf("the guest's session.get on the new host: %+v %v", s, err)
	}
	p.mustRun("share", "rm", share.GrantID)
	if _, err := client.Call(ctx, guest, protocol.OpSessionGet, protocol.SessionRef{SessionID: id}); !strings.Contains(errString(err), "not found") {
		t.Fatalf("the guest's session.get once revoked on the new host: %v", err)
	}
}

// agentd share completes a session id, and share rm a grant's id from the
// running host.
func TestShareCompletesSessionsAndGrants(t *testing.T) {
	p := newPlace(t)
	p.mustRun("new", "--id", "beta1", "--cwd", p.workDir(), "--title", "the docs")
	var share struct {
		GrantID string `json:"grantId"`
	}
	if err := json.Unmarshal([]byte(p.mustRun("share", "beta1", "--label", "Ana", "--json")), &share); err != nil {
		t.Fatal(err)
	}
	if got, _ := completions(t, p, "share", "be"); !slices.Contains(got, "beta1\tthe docs, in work") {
		t.Errorf("__complete share be: %q", got)
	}
	want := []string{share.GrantID + "\tobserve of beta1 Ana"}
	if got, directive := completions(t, p, "share", "rm", ""); !slices.Equal(got, want) || directive != ":4" {
		t.Errorf("__complete share rm: %q %s; want %q", got, directive, want)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// agentd web's listener and the owner's login survive agentd upgrade:
// the new host listens on the same address once it serves, and a cookie
// from before opens /ws there; the home holds only the cookie's hash.
func TestTheWebListenerAndItsLoginSurviveAnUpgrade(t *testing.T) {
	p := newPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir()))
	w := p.web()
	before := p.statusJSON()
	if before.Web == nil {
		t.Fatal("agentd status does not show the listener")
	}
	cookie := ownerLogin(t, w)

	rec, err := os.Stat(filepath.Join(p.home, "web.json"))
	if err != nil || rec.Mode().Perm() != 0o600 {
		t.Fatalf("the listener's record: %v %v, want mode 0600", rec, err)
	}
	if b, _ := os.ReadFile(filepath.Join(p.home, "web.json")); strings.Contains(string(b), cookie.Value) || strings.Contains(string(b), w.OwnerToken) {
		t.Fatalf("the listener's record holds a secret:\n%s", b)
	}

	p.mustRun("upgrade")
	poll.Until(t, "the new host listening on the web", func() bool {
		st := p.statusJSON()
		return st.PID != before.PID && st.Web != nil
	})
	if after := p.statusJSON().Web; after.Address != before.Web.Address || after.WebSocketURL != before.Web.WebSocketURL {
		t.Fatalf("the new host listens on %+v, the old one on %+v", after, before.Web)
	}
	c := dialWeb(t, before.Web.WebSocketURL, http.Header{"Cookie": {cookie.String()}})
	list, err := client.Call(agentdtest.Context(t), c, protocol.OpSessionList, protocol.SessionListInput{})
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].SessionID != id {
		t.Fatalf("the owner's session.list on the new host, by the cookie from before: %+v %v", list, err)
	}
}

// agentd web --off stops the listener for good: nothing listens on its
// address, and a host started after a shutdown stays off the web.
func TestWebOffStopsTheListenerForGood(t *testing.T) {
	p := newPlace(t)
	p.mustRun("new", "--cwd", p.workDir())
	p.web()
	addr := p.statusJSON().Web.Address
	if out := p.mustRun("web", "--off"); !strings.Contains(out, "stopped listening on "+addr) {
		t.Fatalf("agentd web --off:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(p.home, "web.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the listener's record after agentd web --off: %v", err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("%s still answers after agentd web --off", addr)
	}
	if out := p.mustRun("web", "--off"); !strings.Contains(out, "did not listen") {
		t.Fatalf("a second agentd web --off:\n%s", out)
	}
	if _, stderr, code := p.run("web", "--off", "--listen", addr); code == 0 || !strings.Contains(stderr, "--off") {
		t.Fatalf("agentd web --off --listen: exit %d, %s", code, stderr)
	}

	p.mustRun("shutdown")
	p.mustRun("ls")
	if st := p.statusJSON(); st.Web != nil {
		t.Fatalf("the restarted host listens on the web: %+v", st.Web)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("%s answers after a restart", addr)
	}
}

// ownerLogin exchanges the owner's login token of w for its cookie.
func ownerLogin(t *testing.T, w webURLs) *http.Cookie {
	t.Helper()
	req, err := http.NewRequestWithContext(agentdtest.Context(t), http.MethodPost, w.URL+"login", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w.OwnerToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == "agentd_session" && res.StatusCode == http.StatusNoContent {
			return c
		}
	}
	t.Fatalf("the owner's login: %s, no cookie", res.Status)
	return nil
}

// dialWeb connects to the host's WebSocket at url with header.
func dialWeb(t *testing.T, url string, header http.Header) *client.Conn {
	t.Helper()
	ctx := agentdtest.Context(t)
	c, err := client.Dial(ctx, url, client.Options{Surface: protocol.SurfaceWeb, Dial: func(ctx context.Context) (net.Conn, error) {
		ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: header})
		if err != nil {
			return nil, err
		}
		return websocket.NetConn(context.Background(), ws, websocket.MessageText), nil
	}})
	if err != nil {
		t.Fatalf("dialling %s: %v", url, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A host started after a shutdown listens on the web again where the one
// before did; when the address is taken then, it stays off the web and
// agentd status says why.
func TestARestartedHostListensAgainUnlessTheAddressIsTaken(t *testing.T) {
	p := newPlace(t)
	p.web()
	addr := p.statusJSON().Web.Address
	p.mustRun("shutdown")
	p.mustRun("ls")
	poll.Until(t, "the restarted host listening on the web", func() bool {
		st := p.statusJSON()
		return st.Web != nil
	})
	if got := p.statusJSON().Web.Address; got != addr {
		t.Fatalf("the restarted host listens on %s, the one before on %s", got, addr)
	}

	p.mustRun("shutdown")
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p.mustRun("ls")
	poll.Until(t, "the restarted host to give up the taken address", func() bool {
		return p.statusJSON().WebOff != ""
	})
	if st := p.statusJSON(); st.Web != nil || !strings.Contains(st.WebOff, "address already in use") {
		t.Fatalf("the host's web with its address taken: %+v %q", st.Web, st.WebOff)
	}
	if out := p.mustRun("status"); !strings.Contains(out, "off: ") || !strings.Contains(out, "address already in use") {
		t.Fatalf("agentd status with the address taken:\n%s", out)
	}
}

// A login made at any moment of agentd upgrade outlives it: logins go on
// over kept-alive connections while the host hands off, each tried again
// while the old host answers 503 or no host answers, as the page does;
// every cookie they got opens /ws on the new host, and on the host after
// it. The owner's login token agentd web printed before the upgrade, not
// yet used, logs in at the new host.
func TestALoginMadeWhileTheHostHandsOffOutlivesIt(t *testing.T) {
	p := newPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir()))
	w := p.web()
	var share struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(p.mustRun("share", id, "--json")), &share); err != nil {
		t.Fatal(err)
	}
	ctx := agentdtest.Context(t)
	login := func(hc *http.Client) *http.Cookie {
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, w.URL+"login", nil)
			req.Header.Set("Authorization", "Bearer "+share.Token)
			res, err := hc.Do(req)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				continue // no host answered: the next one will
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			switch res.StatusCode {
			case http.StatusServiceUnavailable:
				continue
			case http.StatusNoContent:
				for _, c := range res.Cookies() {
					if c.Name == "agentd_session" {
						return c
					}
				}
			}
			t.Errorf("a login: %s", res.Status)
			return nil
		}
	}
	// Browsers log in, each over a connection it keeps alive, until the
	// upgrade is over, and then as many times again.
	const browsers = 6
	var (
		mu      sync.Mutex
		cookies []*http.Cookie
		wg      sync.WaitGroup
	)
	upgraded := make(chan struct{})
	for range browsers {
		wg.Go(func() {
			hc := &http.Client{Transport: &http.Transport{}}
			defer hc.CloseIdleConnections()
			for n, after := 0, -1; after != 0 && n < 150; n, after = n+1, after-1 {
				if c := login(hc); c != nil {
					mu.Lock()
					cookies = append(cookies, c)
					mu.Unlock()
				}
				select {
				case <-upgraded:
					if after < 0 {
						after = max(n, 5)
					}
				default:
				}
			}
		})
	}
	before := p.statusJSON().PID
	p.mustRun("upgrade")
	close(upgraded)
	wg.Wait()
	if p.statusJSON().PID == before {
		t.Fatal("the host was not replaced")
	}
	opens := func(when string) {
		t.Helper()
		for i, c := range cookies {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.URL+"ws", nil)
			req.AddCookie(c)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode == http.StatusUnauthorized {
				t.Fatalf("%s: the cookie of login %d of %d is unknown", when, i+1, len(cookies))
			}
		}
	}
	opens("on the new host")
	ownerLogin(t, w)

	p.mustRun("upgrade")
	poll.Until(t, "the host after listening on the web", func() bool { return p.statusJSON().Web != nil })
	opens("on the host after")
	t.Logf("%d logins across the upgrade", len(cookies))
}
