// Package web owns the host's HTTP listener: a WebSocket endpoint that
// carries the same frames as the host's unix socket to clients that
// prove a token, and the exchange of the owner's web login token for a
// cookie. It checks each request's Host and Origin, and slows failed
// token attempts. It serves the web page, embedded in the binary, at
// "/". It decides nothing of what a
// connection may do: it names the connection's principal, and the
// server's one access check decides the rest.
package web

import (
	"context"
	"crypto/tls"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/agentd-dev/agentd/internal/atomicfile"
	"github.com/agentd-dev/agentd/internal/guest"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// Paths the listener serves.
const (
	// PathWebSocket is the WebSocket endpoint.
	PathWebSocket = "/ws"
	// PathLogin exchanges a token for a cookie.
	PathLogin = "/login"
)

// The page: its files, embedded, and the paths that serve them. The page
// is plain files (no build step); vendor/ holds @xterm/xterm as its npm
// package (page/package-lock.json) ships it. Each file is a string the
// executable holds read-only, so that no agentd process pays for the
// page before it serves it (an embed.FS's ReadFile copied its 540 KB
// into the heap of every process, each CLI command's too).
var (
	//go:embed page/index.html
	pageIndex string
	//go:embed page/app.js
	pageApp string
	//go:embed page/app.css
	pageStyle string
	//go:embed page/vendor/xterm.js
	pageXterm string
	//go:embed page/vendor/xterm.css
	pageXtermStyle string
)

// pageAssets holds each path of the page: its file and content type.
var pageAssets = map[string]asset{
	"/":                 {pageIndex, "text/html; charset=utf-8"},
	"/app.js":           {pageApp, "text/javascript; charset=utf-8"},
	"/app.css":          {pageStyle, "text/css; charset=utf-8"},
	"/vendor/xterm.js":  {pageXterm, "text/javascript; charset=utf-8"},
	"/vendor/xterm.css": {pageXtermStyle, "text/css; charset=utf-8"},
}

type asset struct {
	body        string
	contentType string
}

// contentSecurityPolicy lets the page load its own scripts, styles and
// WebSocket, and nothing else: no inline script, no other site, no frame.
// Styles may also be inline because xterm.js writes the terminal's theme
// and cell size into <style> elements it creates; scripts may not.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// CookieName is the cookie a login sets.
const CookieName = "agentd_session"

// maxCookies bounds the logins a listener remembers.
const maxCookies = 1024

// cookieLifetime is how long a login lasts.
const cookieLifetime = 30 * 24 * time.Hour

// FileName is the file of the home that records the listener, mode 0600:
// where it listens, and the hashes of its logins' cookies with their
// expiry, so that a host started later (a restart, a hand-off) listens
// there again and its logins still hold.
const FileName = "web.json"

// record is what FileName holds.
type record struct {
	Listen   string `json:"listen"`
	CertFile string `json:"certFile,omitempty"`
	KeyFile  string `json:"keyFile,omitempty"`
	// OwnerToken is the hash of the owner's login token not yet
	// exchanged, if any: a host that takes this one's place accepts it.
	OwnerToken string        `json:"ownerToken,omitempty"`
	Cookies    []storedLogin `json:"cookies"`
}

// storedLogin is one login: its cookie's hash, its principal and expiry.
type storedLogin struct {
	Hash      string             `json:"hash"`
	Principal protocol.Principal `json:"principal"`
	ExpiresAt time.Time          `json:"expiresAt"`
}

// login is a login the listener holds, by its cookie's hash.
type login struct {
	principal protocol.Principal
	expiresAt time.Time
}

// Recorded returns the settings of the listener recorded in home (Listen,
// CertFile and KeyFile of the Config, and Resume), and whether one is.
func Recorded(home string) (Config, bool, error) {
	r, ok, err := readRecord(home)
	if err != nil || !ok {
		return Config{}, false, err
	}
	return Config{Listen: r.Listen, CertFile: r.CertFile, KeyFile: r.KeyFile, Resume: true}, true, nil
}

// Forget removes the listener's record from home, and its logins with it:
// no host listens there again until asked.
func Forget(home string) error {
	path := filepath.Join(home, FileName)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the web listener's record: %w", err)
	}
	return atomicfile.SyncDir(home)
}

func readRecord(home string) (record, bool, error) {
	b, err := os.ReadFile(filepath.Join(home, FileName))
	if errors.Is(err, os.ErrNotExist) {
		return record{}, false, nil
	}
	if err != nil {
		return record{}, false, fmt.Errorf("reading the web listener's record: %w", err)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return record{}, false, fmt.Errorf("reading the web listener's record %s: %w", FileName, err)
	}
	return r, true, nil
}

// Owner is the principal of the owner's web connections: the owner, who
// proved the web login token.
var Owner = protocol.Principal{ID: "web_owner", Kind: protocol.PrincipalLocalOwner}

// Config configures a listener.
type Config struct {
	// Server serves the connections.
	Server *server.Server
	// Grants authenticates guests' tokens.
	Grants *guest.Store
	// Listen is the address; empty is a free port on 127.0.0.1.
	Listen string
	// Home, when set, is where the listener records itself and its
	// logins (FileName), and whose recorded logins it holds from its
	// start.
	Home string
	// CertFile and KeyFile, given together, serve TLS.
	CertFile, KeyFile string
	// Resume takes the place of the listener recorded in Home: the
	// owner's login token it issued and was not yet exchanged is
	// accepted, and Start issues none.
	Resume bool
	Logger *slog.Logger
	// Rate and Burst bound failed token attempts: past Burst, at most
	// Rate a second are looked at; the rest are refused at once with 429.
	// Zero means 10 a second, in bursts of 20.
	Rate  float64
	Burst int
}

// Listener is a running web listener.
type Listener struct {
	cfg     Config                 // constant
	ln      net.Listener           // constant
	http    *http.Server           // constant
	info    protocol.WebListener   // constant, without the owner's token
	hosts   func(host string) bool // constant: the Host headers it answers
	limiter *limiter               // constant

	wg sync.WaitGroup // the HTTP server and the connections it handed over

	mu         sync.Mutex
	ownerToken string                // guarded by mu: the hash of the owner's latest login token until it is exchanged
	record     record                // guarded by mu: what it records in the home, without the cookies
	cookies    map[string]login      // guarded by mu: by the hash of their value
	conns      map[net.Conn]struct{} // guarded by mu: the WebSocket connections served
	closed     bool                  // guarded by mu
	// unrecorded is set once the listener stops accepting, or is
	// forgotten: what it does then is no longer written to the home,
	// which may be a newer host's or no one's. Guarded by mu.
	unrecorded bool
}

// Start listens and serves; it returns the listener and the owner's web
// login token, which it holds only as a hash and accepts once.
func Start(cfg Config) (*Listener, string, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if (cfg.CertFile == "") != (cfg.KeyFile == "") {
		return nil, "", errors.New(`fields "certFile" and "keyFile": give both or neither`)
	}
	addr := cfg.Listen
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, "", fmt.Errorf(`field "listen": %q is not host:port: %w`, cfg.Listen, err)
	}
	var tlsConfig *tls.Config
	if cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, "", fmt.Errorf(`fields "certFile" and "keyFile": %w`, err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf(`field "listen": %w`, err)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	loopback := isLoopback(host)
	scheme, wsScheme := "http", "ws"
	if tlsConfig != nil {
		scheme, wsScheme = "https", "wss"
	}
	shown := host
	if host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified() {
		shown, _ = os.Hostname()
	}
	hostPort := net.JoinHostPort(shown, strconv.Itoa(port))
	cookies := map[string]login{}
	var pending string
	if cfg.Home != "" {
		// Read once bound: a host this one takes the place of has stopped
		// accepting, and records nothing more (StopAccepting).
		old, _, err := readRecord(cfg.Home)
		if err != nil {
			ln.Close()
			return nil, "", err
		}
		now := time.Now()
		for _, c := range old.Cookies {
			if c.ExpiresAt.After(now) {
				cookies[c.Hash] = login{c.Principal, c.ExpiresAt}
			}
		}
		pending = old.OwnerToken
	}
	var token, hash string
	if cfg.Resume {
		hash = pending
	} else {
		token, hash = guest.NewToken()
	}
	l := &Listener{
		cfg: cfg, ln: ln,
		info: protocol.WebListener{
			Address: ln.Addr().String(), Loopback: loopback,
			URL: scheme + "://" + hostPort + "/", WebSocketURL: wsScheme + "://" + hostPort + PathWebSocket,
		},
		hosts:      allowedHosts(host, loopback, port),
		limiter:    newLimiter(cfg.Rate, cfg.Burst),
		ownerToken: hash,
		// The port bound, with the host as given: a name stays a name.
		record:  record{Listen: net.JoinHostPort(host, strconv.Itoa(port)), CertFile: cfg.CertFile, KeyFile: cfg.KeyFile},
		cookies: cookies,
		conns:   map[net.Conn]struct{}{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc(PathWebSocket, l.serveWebSocket)
	mux.HandleFunc(PathLogin, l.serveLogin)
	mux.HandleFunc("/", l.servePage)
	l.http = &http.Server{
		Handler:           l.checked(mux),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	}
	l.mu.Lock()
	err = l.writeLocked()
	l.mu.Unlock()
	if err != nil {
		ln.Close()
		return nil, "", err
	}
	l.wg.Go(func() { l.http.Serve(ln) })
	return l, token, nil
}

// NewOwnerToken returns a new owner's web login token, accepted once;
// the one before it, if not yet exchanged, is no longer accepted.
func (l *Listener) NewOwnerToken() string {
	token, hash := guest.NewToken()
	l.mu.Lock()
	l.ownerToken = hash
	if err := l.writeLocked(); err != nil {
		// It holds in this host; a host after it does not know it.
		l.cfg.Logger.Warn("the owner's web login token is not recorded", "err", err)
	}
	l.mu.Unlock()
	return token
}

// Info describes the listener, without the owner's token.
func (l *Listener) Info() protocol.WebListener { return l.info }

// StopAccepting stops listening: the connections it handed over carry
// on until the server ends them, or Close.
func (l *Listener) StopAccepting() {
	l.mu.Lock()
	l.unrecorded = true
	l.mu.Unlock()
	l.ln.Close()
}

// Forget stops accepting, and removes the listener's record and its
// logins from the home (Forget): no host listens there again until asked.
func (l *Listener) Forget() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unrecorded = true
	l.ln.Close()
	if l.cfg.Home == "" {
		return nil
	}
	return Forget(l.cfg.Home)
}

// Close stops listening and ends the connections it handed over, then
// waits for them.
func (l *Listener) Close() error {
	l.mu.Lock()
	l.closed = true
	conns := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	err := l.http.Close()
	for _, c := range conns {
		c.Close()
	}
	l.wg.Wait()
	return err
}

// writeLocked records the listener and its logins in the home, if it
// has one. Called with mu held.
func (l *Listener) writeLocked() error {
	if l.cfg.Home == "" || l.unrecorded {
		return nil
	}
	r := l.record
	r.OwnerToken = l.ownerToken
	r.Cookies = make([]storedLogin, 0, len(l.cookies))
	for hash, c := range l.cookies {
		r.Cookies = append(r.Cookies, storedLogin{hash, c.principal, c.expiresAt})
	}
	slices.SortFunc(r.Cookies, func(a, b storedLogin) int { return a.ExpiresAt.Compare(b.ExpiresAt) })
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteDurable(filepath.Join(l.cfg.Home, FileName), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("recording the web listener: %w", err)
	}
	return nil
}

// isLoopback reports whether host names only this machine.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// allowedHosts returns the check of a request's Host header. A name the
// listener was not given could be any site's, pointed at this address
// (DNS rebinding), so a listener on loopback answers only loopback
// addresses and localhost; one on a named host that name; one on an
// address that address, or, on all addresses, any address literal and
// this machine's name.
func allowedHosts(host string, loopback bool, port int) func(string) bool {
	name, _ := os.Hostname()
	ip := net.ParseIP(host)
	if host == "" {
		ip = net.IPv4zero // ":port" listens on every address
	}
	return func(h string) bool {
		hh, p, err := net.SplitHostPort(h)
		if err != nil || p != strconv.Itoa(port) {
			return false
		}
		hip := net.ParseIP(hh)
		switch {
		case loopback:
			return hh == "localhost" || hip != nil && hip.IsLoopback()
		case ip == nil:
			return strings.EqualFold(hh, host)
		case ip.IsUnspecified():
			return hip != nil || name != "" && strings.EqualFold(hh, name)
		}
		return hip != nil && hip.Equal(ip)
	}
}

// checked refuses a request whose Host the listener does not answer to,
// or whose Origin is another site's, and sets the headers every answer
// carries.
func (l *Listener) checked(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if !l.hosts(r.Host) {
			http.Error(w, "agentd does not answer to this host name", http.StatusMisdirectedRequest)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r) {
			http.Error(w, "agentd refuses requests from another site", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sameOrigin reports whether origin is the listener's own, as r reached it.
func sameOrigin(origin string, r *http.Request) bool {
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return strings.EqualFold(origin, scheme+r.Host)
}

// servePage serves the page's files; any other path is not found. The
// page holds no secret: it logs in with the token its link carries.
func (l *Listener) servePage(w http.ResponseWriter, r *http.Request) {
	a, ok := pageAssets[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the page is read with GET", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", a.contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(a.body)))
	if r.Method == http.MethodGet {
		io.WriteString(w, a.body)
	}
}

// serveLogin exchanges a token, sent as Authorization: Bearer TOKEN in a
// POST, for an HttpOnly, SameSite=Strict cookie: the owner's login token
// once, a guest's as often as it is in force.
func (l *Listener) serveLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST a token to log in", http.StatusMethodNotAllowed)
		return
	}
	l.mu.Lock()
	unrecorded := l.unrecorded
	l.mu.Unlock()
	if unrecorded {
		// The listener has stopped accepting: a new host takes its place,
		// which has read the logins already. One made here would be
		// forgotten with this host, so none is: the token is left as it
		// was, and the browser, its connection closed, logs in again at
		// the next host.
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "1")
		http.Error(w, "agentd is handing over to a new host: log in again in a moment", http.StatusServiceUnavailable)
		return
	}
	p, ok := l.authenticate(w, r, true)
	if !ok {
		return
	}
	value, hash := guest.NewToken()
	now := time.Now()
	expires := now.Add(cookieLifetime)
	l.mu.Lock()
	for k, c := range l.cookies {
		if !c.expiresAt.After(now) {
			delete(l.cookies, k)
		}
	}
	if len(l.cookies) >= maxCookies {
		// Logins are bounded: the one that expires first goes; its
		// browser logs in again.
		first := ""
		for k, c := range l.cookies {
			if first == "" || c.expiresAt.Before(l.cookies[first].expiresAt) {
				first = k
			}
		}
		delete(l.cookies, first)
	}
	if l.unrecorded {
		// It stopped accepting while the token was proved: the owner's
		// token, if it was, is not spent.
		if p == Owner {
			l.ownerToken = guest.HashToken(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		}
		l.mu.Unlock()
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "1")
		http.Error(w, "agentd is handing over to a new host: log in again in a moment", http.StatusServiceUnavailable)
		return
	}
	l.cookies[hash] = login{p, expires}
	err := l.writeLocked()
	l.mu.Unlock()
	if err != nil {
		// The login holds in this host; a host after it does not know it.
		l.cfg.Logger.Warn("a web login is not recorded", "err", err)
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: value, Path: "/", Expires: expires, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	w.WriteHeader(http.StatusNoContent)
}

// serveWebSocket upgrades a request that proves a token, or carries the
// cookie of one, to a WebSocket, and serves it as a connection of the
// host.
func (l *Listener) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	p, ok := l.authenticate(w, r, false)
	if !ok {
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{})
	if err != nil {
		return // Accept answered it
	}
	nc := websocket.NetConn(context.Background(), ws, websocket.MessageText)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		nc.Close()
		return
	}
	l.conns[nc] = struct{}{}
	l.wg.Add(1)
	l.mu.Unlock()
	defer l.wg.Done()
	l.cfg.Server.ServeConn(nc, p)
	nc.Close()
	l.mu.Lock()
	delete(l.conns, nc)
	l.mu.Unlock()
}

// authenticate returns the principal r proves: by its bearer token (the
// owner's login token only at the login), or by its cookie. A failure is
// answered 401, and counted; past the limit of failures every attempt is
// answered 429 at once, whatever its token.
func (l *Listener) authenticate(w http.ResponseWriter, r *http.Request, login bool) (protocol.Principal, bool) {
	token, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	cookie, _ := r.Cookie(CookieName)
	if !bearer && cookie == nil {
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, "send Authorization: Bearer TOKEN", http.StatusUnauthorized)
		return protocol.Principal{}, false
	}
	if !l.limiter.allow() {
		if n := l.limiter.slow(); n == 1 || n%100 == 0 {
			l.cfg.Logger.Warn("web token attempts slowed: refused before their token is looked at", "refused", n, "remote", r.RemoteAddr)
		}
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many failed token attempts; try again shortly", http.StatusTooManyRequests)
		return protocol.Principal{}, false
	}
	if p, ok := l.prove(token, bearer, cookie, login); ok {
		return p, true
	}
	n := l.limiter.fail()
	if n <= 10 || n%100 == 0 {
		l.cfg.Logger.Warn("a web request's token proves nothing", "failures", n, "remote", r.RemoteAddr, "path", r.URL.Path)
	}
	w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	http.Error(w, "the token is wrong, expired or revoked", http.StatusUnauthorized)
	return protocol.Principal{}, false
}

func (l *Listener) prove(token string, bearer bool, cookie *http.Cookie, login bool) (protocol.Principal, bool) {
	if bearer {
		hash := guest.HashToken(token)
		if login {
			l.mu.Lock()
			owner := l.ownerToken != "" && guest.SameHash(l.ownerToken, hash)
			if owner {
				l.ownerToken = "" // exchanged once
			}
			l.mu.Unlock()
			if owner {
				return Owner, true
			}
		}
		if g, err := l.cfg.Grants.Authenticate(token); err == nil {
			return protocol.Principal{ID: g.GrantID, Kind: protocol.PrincipalGuest, Label: g.Label}, true
		}
		return protocol.Principal{}, false
	}
	hash := guest.HashToken(cookie.Value)
	l.mu.Lock()
	c, ok := l.cookies[hash]
	l.mu.Unlock()
	if ok && !c.expiresAt.After(time.Now()) {
		return protocol.Principal{}, false
	}
	p := c.principal
	if ok && p.Kind == protocol.PrincipalGuest {
		if _, inForce := l.cfg.Grants.Get(p.ID); !inForce {
			return protocol.Principal{}, false
		}
	}
	return p, ok
}
