package sessions_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/protocol"
)

// upgradeStatus sends a WebSocket upgrade to the listener with header
// (and Host host, when set) and returns the status it is answered.
func upgradeStatus(t *testing.T, url, host string, header http.Header) int {
	t.Helper()
	ws, resp, err := websocket.Dial(agentdtest.Context(t), url, &websocket.DialOptions{HTTPHeader: header, Host: host})
	if err == nil {
		ws.CloseNow()
		return http.StatusSwitchingProtocols
	}
	if resp == nil {
		t.Fatalf("the upgrade failed without an answer: %v", err)
	}
	return resp.StatusCode
}

// The web listener refuses, before a connection exists, a missing,
// wrong or revoked token, a Host header naming another site (DNS
// rebinding), an Origin of another site with a good token (a cross-site
// WebSocket), and the owner's login token anywhere but the login; it
// says plainly that it has no page, under a strict policy.
func TestTheWebListenerRefusesBadTokensOtherHostsAndOtherSites(t *testing.T) {
	w := newWebHost(t, nil)
	ctx := agentdtest.Context(t)
	s := createSession(t, w.owner, w.work)
	good := w.share(t, s.SessionID, protocol.GrantObserve)
	revoked := w.share(t, s.SessionID, protocol.GrantObserve)
	if _, err := client.Call(ctx, w.owner, protocol.OpGrantRevoke, protocol.GrantRef{GrantID: revoked.Grant.GrantID}); err != nil {
		t.Fatal(err)
	}
	port := w.web.Address[strings.LastIndex(w.web.Address, ":"):]
	cases := []struct {
		name   string
		host   string
		header http.Header
		want   int
	}{
		{"no token", "", nil, http.StatusUnauthorized},
		{"a wrong token", "", bearer("agentd_" + strings.Repeat("A", 43)), http.StatusUnauthorized},
		{"a revoked token", "", bearer(revoked.Token), http.StatusUnauthorized},
		{"the owner's login token, not at the login", "", bearer(w.web.OwnerToken), http.StatusUnauthorized},
		{"a Host of another name", "rebound.example" + port, bearer(good.Token), http.StatusMisdirectedRequest},
		{"a Host of another port", "127.0.0.1:1", bearer(good.Token), http.StatusMisdirectedRequest},
		{"an Origin of another site", "", http.Header{"Authorization": {"Bearer " + good.Token}, "Origin": {"http://other.example"}}, http.StatusForbidden},
		{"a good token", "", bearer(good.Token), http.StatusSwitchingProtocols},
		{"a good token from the listener's own origin", "", http.Header{"Authorization": {"Bearer " + good.Token}, "Origin": {"http://" + w.web.Address}}, http.StatusSwitchingProtocols},
		{"a good token by localhost", "localhost" + port, bearer(good.Token), http.StatusSwitchingProtocols},
	}
	for _, c := range cases {
		if got := upgradeStatus(t, w.web.WebSocketURL, c.host, c.header); got != c.want {
			t.Errorf("%s: answered %d, want %d", c.name, got, c.want)
		}
	}

	resp, err := http.Get(w.web.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `<script src="/app.js"`) {
		t.Errorf("the root answered %d %q", resp.StatusCode, body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self';") {
		t.Errorf("the root's Content-Security-Policy: %q", csp)
	}
}

// The owner's web login token is exchanged once, by a POST, for an
// HttpOnly, SameSite=Strict cookie; a new one replaces one not yet
// exchanged; the cookie opens a WebSocket acting for the owner, who sees
// every session.
func TestTheOwnersLoginTokenIsExchangedOnceForAStrictCookie(t *testing.T) {
	w := newWebHost(t, nil)
	ctx := agentdtest.Context(t)
	createSession(t, w.owner, w.work)
	login := func(method, token string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, method, w.web.URL+"login", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := login(http.MethodGet, w.web.OwnerToken); r.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("a GET of the login answered %d", r.StatusCode)
	}
	r := login(http.MethodPost, w.web.OwnerToken)
	if r.StatusCode != http.StatusNoContent || len(r.Cookies()) != 1 {
		t.Fatalf("the login answered %d with cookies %v", r.StatusCode, r.Cookies())
	}
	cookie := r.Cookies()[0]
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Value == w.web.OwnerToken {
		t.Fatalf("the login's cookie: %+v", cookie)
	}
	if again := login(http.MethodPost, w.web.OwnerToken); again.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the owner's login token exchanged twice: %d", again.StatusCode)
	}
	// A new login token replaces one not yet exchanged.
	first, err := client.Call(ctx, w.owner, protocol.OpHostWebStart, protocol.WebStartInput{})
	if err != nil {
		t.Fatal(err)
	}
	second, err := client.Call(ctx, w.owner, protocol.OpHostWebStart, protocol.WebStartInput{})
	if err != nil {
		t.Fatal(err)
	}
	if r := login(http.MethodPost, first.OwnerToken); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a replaced login token was exchanged: %d", r.StatusCode)
	}
	if r := login(http.MethodPost, second.OwnerToken); r.StatusCode != http.StatusNoContent {
		t.Fatalf("the latest login token: %d", r.StatusCode)
	}
	c, err := client.Dial(ctx, w.web.WebSocketURL, client.Options{Surface: protocol.SurfaceWeb, Dial: func(ctx context.Context) (net.Conn, error) {
		nc, _, err := dialWeb(ctx, w.web.WebSocketURL, http.Header{"Cookie": {cookie.String()}})
		return nc, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := c.Accepted().Principal; p.Kind != protocol.PrincipalLocalOwner {
		t.Fatalf("the cookie's connection acts for %+v", p)
	}
	list, err := client.Call(ctx, c, protocol.OpSessionList, protocol.SessionListInput{})
	if err != nil || len(list.Sessions) != 1 {
		t.Fatalf("the web owner's session.list: %+v %v", list, err)
	}
	st, err := client.Call(ctx, w.owner, protocol.OpHostStatus, protocol.HostStatusInput{})
	if err != nil || st.Web == nil || st.Web.WebSocketURL != w.web.WebSocketURL || st.Web.OwnerToken != "" {
		t.Fatalf("host.status's web listener: %+v %v", st.Web, err)
	}
}

// A thousand failed token attempts are slowed (past a burst, answered
// 429 before their token is looked at) and logged, crash nothing, and
// harm no other connection, the owner's or a guest's over the web; the
// right token works again once the attempts stop.
func TestAThousandFailedTokenAttemptsAreSlowedAndLoggedAndHarmNoOne(t *testing.T) {
	w := newWebHost(t, nil)
	ctx := agentdtest.Context(t)
	s := createSession(t, w.owner, w.work)
	good := w.share(t, s.SessionID, protocol.GrantObserve)
	guest := w.guestConn(t, good.Token)

	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 250 {
				code := upgradeStatus(t, w.web.WebSocketURL, "", bearer("agentd_wrong"))
				mu.Lock()
				counts[code]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if counts[http.StatusUnauthorized]+counts[http.StatusTooManyRequests] != 1000 || counts[http.StatusTooManyRequests] == 0 {
		t.Fatalf("a thousand wrong tokens were answered %v, want 401s and, once slowed, 429s", counts)
	}
	log := w.log.String()
	if !strings.Contains(log, "proves nothing") || !strings.Contains(log, "slowed") {
		t.Errorf("the failed attempts were not logged:\n%s", log)
	}
	if _, err := client.Call(ctx, guest, protocol.OpSessionGet, protocol.SessionRef{SessionID: s.SessionID}); err != nil {
		t.Errorf("the guest's connection after the attempts: %v", err)
	}
	if _, err := w.owner.Status(ctx); err != nil {
		t.Errorf("the owner's connection after the attempts: %v", err)
	}
	poll.Until(t, "the right token to open a WebSocket again", func() bool {
		return upgradeStatus(t, w.web.WebSocketURL, "", bearer(good.Token)) == http.StatusSwitchingProtocols
	})
	if errors.Is(guest.Err(), client.ErrClosed) {
		t.Fatal("the guest's connection closed")
	}
}

// The WebSocket has the socket's limits: a message over the size limit,
// sent by a guest, closes that connection alone, as on the unix socket;
// another guest's connection and the owner's carry on.
func TestAnOversizedMessageOverTheWebSocketClosesThatConnectionAlone(t *testing.T) {
	w := newWebHost(t, nil)
	ctx := agentdtest.Context(t)
	s := createSession(t, w.owner, w.work)
	good := w.share(t, s.SessionID, protocol.GrantObserve)
	other := w.guestConn(t, good.Token)

	nc, _, err := dialWeb(ctx, w.web.WebSocketURL, bearer(good.Token))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	hello := `{"kind":"hello","clientInstanceId":"big","protocolMin":1,"protocolMax":1,"compatibilityEpoch":1,"compositionId":"agentd.interactive","surface":"web"}` + "\n"
	if _, err := nc.Write([]byte(hello)); err != nil {
		t.Fatal(err)
	}
	big := `{"requestId":"r1","operation":"host.status","input":{"pad":"` + strings.Repeat("x", protocol.MaxMessageBytes) + `"}}` + "\n"
	go nc.Write([]byte(big)) // the host may close before it has read it all
	if _, err := io.Copy(io.Discard, nc); err != nil && !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "close") {
		t.Logf("reading the closed connection: %v", err)
	}
	if _, err := client.Call(ctx, other, protocol.OpSessionGet, protocol.SessionRef{SessionID: s.SessionID}); err != nil {
		t.Fatalf("the other guest's connection: %v", err)
	}
	if _, err := w.owner.Status(ctx); err != nil {
		t.Fatalf("the owner's connection: %v", err)
	}
	poll.Until(t, "a diagnostic of the oversized message", func() bool {
		d, err := client.Call(ctx, w.owner, protocol.OpHostDiagnosticsQuery, protocol.DiagnosticsQueryInput{})
		if err != nil {
			return false
		}
		for _, e := range d.Diagnostics {
			if strings.Contains(e.Message, "protocol violation") || strings.Contains(e.Message, "exceeds") || strings.Contains(e.Message, "too large") {
				return true
			}
		}
		return false
	})
}

// host.web.start refuses a bad address, or half a certificate, naming the
// field; a listener that runs is returned as it is, with a new owner's
// login token, and another address for it is a conflict.
func TestHostWebStartRefusesBadInputNamingTheField(t *testing.T) {
	w := newWebHost(t, nil)
	ctx := agentdtest.Context(t)
	again, err := client.Call(ctx, w.owner, protocol.OpHostWebStart, protocol.WebStartInput{})
	if err != nil || again.Address != w.web.Address || again.OwnerToken == "" || again.OwnerToken == w.web.OwnerToken {
		t.Fatalf("a second host.web.start: %+v %v", again, err)
	}
	_, err = client.Call(ctx, w.owner, protocol.OpHostWebStart, protocol.WebStartInput{Listen: "127.0.0.1:1"})
	if remoteCode(err) != protocol.CodeOperationConflict || !strings.Contains(err.Error(), `"listen"`) {
		t.Fatalf("host.web.start on another address: %v", err)
	}

	fresh := newWebHostOff(t, nil).owner
	for in, field := range map[protocol.WebStartInput]string{
		{Listen: "no port"}:             `"listen"`,
		{Listen: "256.1.1.1:0"}:         `"listen"`,
		{CertFile: "/no/such/cert"}:     `"certFile"`,
		{CertFile: "/a", KeyFile: "/b"}: `"certFile"`,
	} {
		_, err := client.Call(ctx, fresh, protocol.OpHostWebStart, in)
		if remoteCode(err) != protocol.CodeInvalidRequest || !strings.Contains(err.Error(), field) {
			t.Errorf("host.web.start %+v: %v, want invalid_request naming %s", in, err, field)
		}
	}
	if st, err := fresh.Status(ctx); err != nil || st.Web != nil {
		t.Fatalf("a host whose web listener never started: %+v %v", st.Web, err)
	}
}
