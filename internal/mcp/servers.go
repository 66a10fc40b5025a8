// Package mcp connects a session's worker to MCP servers: it reads their
// configuration (the ecosystem's .mcp.json of a project and of plugin
// packages, and agentd's own list in the home), runs stdio servers as the
// session's commands run (sandboxed, without agentd's keys) and reaches
// HTTP ones, lists each as a runtime resource of the session, and offers
// their tools to the agent as mcp__<server>__<tool>.
//
// A server that fails, hangs or misbehaves fails only the calls of its
// tools, with an error that says why; the turn and the session go on.
//
// It knows nothing of transcripts, the protocol's operations or the host:
// the worker gives it the servers, the environment, the sandbox and the
// resource Manager to list them in.
package mcp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd-dev/agentd/internal/resource"
	"github.com/agentd-dev/agentd/internal/sandbox"
	"github.com/agentd-dev/agentd/protocol"
)

// DefaultStartTimeout bounds a server's start: its process starting (or
// its endpoint answering), initialize, and its first tool list.
const DefaultStartTimeout = 30 * time.Second

// stopGrace is how long a stdio server has to exit once its input is
// closed, and again after SIGTERM.
const stopGrace = 2 * time.Second

// Errors of a tool call that never reached its server.
var (
	// ErrUnknownServer is returned when the session has no server of the
	// name.
	ErrUnknownServer = errors.New("no such MCP server")
	// ErrNotReady is returned when the server was stopped or has ended.
	ErrNotReady = errors.New("is not running")
)

// Options say how a session's servers run.
type Options struct {
	// Dir is the directory stdio servers start in: the session's.
	Dir string
	// Env is the environment stdio servers start with, before their own
	// env: the one the session's commands get, without agentd's keys.
	Env []string
	// Sandbox returns the sandbox a stdio server runs in (nil: none);
	// network says the server may use the network whatever the session
	// says. Nil runs them unsandboxed.
	Sandbox func(network bool) (*sandbox.Policy, error)
	// Resources lists each server as a runtime resource; nil lists none.
	Resources *resource.Manager
	// StartTimeout bounds a server's start; 0: DefaultStartTimeout.
	StartTimeout time.Duration
	// ClientName and ClientVersion are what agentd tells servers it is.
	ClientName, ClientVersion string
	// Logger logs what no caller is told; nil discards.
	Logger *slog.Logger
}

// Servers are a session's running MCP servers.
type Servers struct {
	opts   Options         // constant
	ctx    context.Context // constant: ends when Close is called
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine of every server
	tokens atomic.Uint64  // progress tokens given out

	// Lock order: Servers.mu before server.mu.
	mu     sync.Mutex
	byName map[string]*server // guarded by mu: the servers in force
	order  []*server          // guarded by mu: byName's, by name
	closed bool               // guarded by mu: Close was called
}

// server is one configured server and its connection.
type server struct {
	cfg     Server
	s       *Servers
	svc     *resource.Service // constant; nil without Resources
	start   *launcher         // constant: starts it, with the others put in force with it
	started chan struct{}     // closed once the start has succeeded or failed
	stopped chan struct{}     // closed once the server has ended and is recorded so
	stop    sync.Once

	ctx    context.Context // ends when the server is stopped
	cancel context.CancelFunc

	mu       sync.Mutex
	session  *mcp.ClientSession                               // guarded by mu; nil until started
	proc     *process                                         // guarded by mu; nil for HTTP, or before it started
	tools    []*mcp.Tool                                      // guarded by mu
	failed   error                                            // guarded by mu: why the server cannot be called
	progress map[string]func(*mcp.ProgressNotificationParams) // guarded by mu: by token
	closing  bool                                             // guarded by mu
}

// Start starts every server in the background and returns at once: a
// caller that needs a server's tools waits for its start in Tools.
func Start(servers []Server, opts Options) *Servers {
	opts.StartTimeout = cmp.Or(opts.StartTimeout, DefaultStartTimeout)
	opts.ClientName = cmp.Or(opts.ClientName, "agentd")
	opts.ClientVersion = cmp.Or(opts.ClientVersion, "dev")
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ss := &Servers{opts: opts, byName: map[string]*server{}, ctx: ctx, cancel: cancel}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	l := newLauncher(ss)
	var batch []*server
	for _, cfg := range servers {
		if _, dup := ss.byName[cfg.Name]; !dup {
			batch = append(batch, ss.putLocked(cfg, l))
		}
	}
	ss.launch(l, batch)
	return ss
}

// putLocked puts one server in force, to be started by l.
func (ss *Servers) putLocked(cfg Server, l *launcher) *server {
	sv := &server{cfg: cfg, s: ss, start: l, started: make(chan struct{}), stopped: make(chan struct{}), progress: map[string]func(*mcp.ProgressNotificationParams){}}
	sv.ctx, sv.cancel = context.WithCancel(ss.ctx)
	ss.byName[cfg.Name] = sv
	ss.order = append(ss.order, sv)
	slices.SortFunc(ss.order, func(a, b *server) int { return strings.Compare(a.cfg.Name, b.cfg.Name) })
	if ss.opts.Resources != nil {
		svc, err := ss.opts.Resources.AddService(resource.ServiceInput{
			Kind: protocol.ResourceMCP, Name: sv.cfg.Name, Command: sv.display(), Stop: sv.close,
		})
		if err != nil {
			ss.opts.Logger.Error("an MCP server cannot be listed as a runtime resource", "server", sv.cfg.Name, "err", err)
		}
		sv.svc = svc
	}
	return sv
}

// launch starts servers just put in force, in the background: the stdio
// ones together, from l, and each one's connection as its process is
// there.
func (ss *Servers) launch(l *launcher, servers []*server) {
	if len(servers) == 0 {
		return
	}
	var stdio []*server
	for _, sv := range servers {
		if sv.cfg.Transport == TransportStdio {
			stdio = append(stdio, sv)
		}
	}
	ss.wg.Go(func() { l.start(stdio) })
	for _, sv := range servers {
		ss.wg.Go(sv.run)
	}
}

// Update makes servers the session's servers while it runs: a server
// whose configuration is new or changed starts (the old one of its name
// stopped first), one no longer configured stops, the others run on
// untouched. It returns the names of those it started and stopped. A
// started server's tools reach the agent from the next turn.
func (ss *Servers) Update(servers []Server) (started, stopped []string) {
	want := map[string]Server{}
	for _, cfg := range servers {
		if _, dup := want[cfg.Name]; !dup {
			want[cfg.Name] = cfg
		}
	}
	var gone []*server
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return nil, nil
	}
	for _, sv := range slices.Clone(ss.order) {
		if cfg, ok := want[sv.cfg.Name]; ok && sameServer(cfg, sv.cfg) {
			continue
		}
		gone = append(gone, sv)
		delete(ss.byName, sv.cfg.Name)
		ss.order = slices.DeleteFunc(ss.order, func(o *server) bool { return o == sv })
		stopped = append(stopped, sv.cfg.Name)
	}
	l := newLauncher(ss)
	var batch []*server
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if _, ok := ss.byName[name]; !ok {
			batch = append(batch, ss.putLocked(want[name], l))
			started = append(started, name)
		}
	}
	ss.launch(l, batch)
	ss.mu.Unlock()
	// Out of force, they end on their own: their run records it.
	for _, sv := range gone {
		sv.close()
	}
	return started, stopped
}

// sameServer reports whether a and b run the same server the same way.
func sameServer(a, b Server) bool {
	return a.Transport == b.Transport && a.Command == b.Command && slices.Equal(a.Args, b.Args) &&
		maps.Equal(a.Env, b.Env) && a.URL == b.URL && maps.Equal(a.Headers, b.Headers) && a.Network == b.Network &&
		a.Scope == b.Scope && a.Source == b.Source && a.Trusted == b.Trusted
}

// servers returns the servers in force, by name.
func (ss *Servers) servers() []*server {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return slices.Clone(ss.order)
}

// lookup returns the server in force of name.
func (ss *Servers) lookup(name string) (*server, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	sv, ok := ss.byName[name]
	return sv, ok
}

// display is what listings show of a server: its command line, or its
// URL without what may hold a key.
func (sv *server) display() string {
	if sv.cfg.Transport != TransportStdio {
		return protocol.DisplayURL(sv.cfg.URL)
	}
	return strings.Join(append([]string{sv.cfg.Command}, sv.cfg.Args...), " ")
}

// run starts the server, then waits for its end and records it.
func (sv *server) run() {
	began := time.Now()
	err := sv.connect()
	sv.mu.Lock()
	sv.failed = err
	cs, tools := sv.session, len(sv.tools)
	sv.mu.Unlock()
	if err != nil {
		sv.s.opts.Logger.Warn("an MCP server did not start; its tools fail", "server", sv.cfg.Name, "err", err)
		close(sv.started)
		sv.end(err)
		return
	}
	if sv.svc != nil {
		sv.svc.SetStatus(protocol.ServiceReady, "")
	}
	sv.s.opts.Logger.Info("an MCP server is ready", "server", sv.cfg.Name, "tools", tools, "took", time.Since(began).Round(time.Millisecond))
	close(sv.started)
	waitErr := cs.Wait()
	sv.mu.Lock()
	closing := sv.closing
	if sv.failed == nil {
		sv.failed = fmt.Errorf("%w: it ended unasked (agentd logs %s shows its stderr)", ErrNotReady, sv.ref())
	}
	sv.mu.Unlock()
	if closing {
		sv.end(nil)
		return
	}
	sv.s.opts.Logger.Warn("an MCP server ended; its tools fail", "server", sv.cfg.Name, "err", waitErr)
	sv.end(fmt.Errorf("it ended unasked: %v", cmp.Or(waitErr, errors.New("its connection closed"))))
}

// end closes the connection, ends the process and records how it ended.
func (sv *server) end(why error) {
	sv.mu.Lock()
	cs, p := sv.session, sv.proc
	sv.mu.Unlock()
	if cs != nil {
		cs.Close() // closes the server's input: it should exit
	}
	var code *int
	if p != nil {
		code = p.end()
	}
	if sv.svc != nil {
		detail := ""
		if why != nil {
			detail = why.Error()
		}
		sv.svc.End(code, detail)
	}
	sv.cancel()
	close(sv.stopped)
}

// ref names the server's resource, "-" without one.
func (sv *server) ref() string {
	if sv.svc == nil {
		return "-"
	}
	return sv.svc.Ref()
}

// close asks the server to end: its Service's Stop, and Close's.
func (sv *server) close() {
	sv.stop.Do(func() {
		sv.mu.Lock()
		sv.closing = true
		if sv.failed == nil {
			sv.failed = fmt.Errorf("%w: it was stopped", ErrNotReady)
		}
		cs := sv.session
		sv.mu.Unlock()
		if cs != nil {
			cs.Close() // its Wait in run returns
		} else {
			sv.cancel() // a start still under way ends
		}
	})
}

// connect starts the server and lists its tools, within the start
// timeout.
func (sv *server) connect() error {
	ctx, cancel := context.WithTimeout(sv.ctx, sv.s.opts.StartTimeout)
	defer cancel()
	var transport mcp.Transport
	switch sv.cfg.Transport {
	case TransportHTTP:
		transport = &mcp.StreamableClientTransport{
			Endpoint: sv.cfg.URL, MaxRetries: 1,
			HTTPClient: &http.Client{Transport: headers{sv.cfg.Headers, http.DefaultTransport}},
		}
	case TransportSSE:
		transport = streamFor{life: sv.ctx, Transport: &mcp.SSEClientTransport{
			Endpoint:   sv.cfg.URL,
			HTTPClient: &http.Client{Transport: headers{sv.cfg.Headers, http.DefaultTransport}},
		}}
	default:
		p, err := sv.start.process(sv)
		if err != nil {
			return err
		}
		sv.mu.Lock()
		sv.proc = p
		sv.mu.Unlock()
		transport = &mcp.IOTransport{Reader: p.stdout, Writer: p.stdin, MaxLineLength: maxLineBytes}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: sv.s.opts.ClientName, Version: sv.s.opts.ClientVersion}, &mcp.ClientOptions{
		Capabilities:                &mcp.ClientCapabilities{},
		ProgressNotificationHandler: sv.onProgress,
		ToolListChangedHandler:      sv.onToolsChanged,
	})
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return sv.startFailure(ctx, err)
	}
	sv.mu.Lock()
	sv.session = cs
	closing := sv.closing
	sv.mu.Unlock()
	if closing {
		return fmt.Errorf("%w: it was stopped", ErrNotReady)
	}
	tools, err := listTools(ctx, cs)
	if err != nil {
		return sv.startFailure(ctx, fmt.Errorf("listing its tools: %w", err))
	}
	sv.mu.Lock()
	sv.tools = tools
	sv.mu.Unlock()
	return nil
}

// startFailure says why a start failed, the timeout by name.
func (sv *server) startFailure(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("it did not finish starting (initialize and its tool list) within %s", sv.s.opts.StartTimeout)
	}
	if sv.ctx.Err() != nil {
		return fmt.Errorf("%w: it was stopped while it started", ErrNotReady)
	}
	return err
}

// streamFor connects a transport whose event stream is the connection
// (SSE's GET) for the server's life: the stream is not cut when the start
// that opened it returns, only when it fails or the server stops.
type streamFor struct {
	mcp.Transport
	life context.Context
}

func (t streamFor) Connect(ctx context.Context) (mcp.Connection, error) {
	life, cancel := context.WithCancel(t.life)
	giveUp := context.AfterFunc(ctx, cancel)
	conn, err := t.Transport.Connect(life)
	if !giveUp() || err != nil {
		cancel()
		if err == nil {
			conn.Close()
			err = context.Cause(ctx)
		}
		return nil, err
	}
	return conn, nil
}

// headers adds a server's configured headers to each request.
type headers struct {
	h    map[string]string
	next http.RoundTripper
}

func (t headers) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.h) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.h {
			r.Header.Set(k, v)
		}
	}
	return t.next.RoundTrip(r)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// listTools lists all of a server's tools, page after page.
func listTools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// onToolsChanged lists the server's tools again: the next turn sees them.
func (sv *server) onToolsChanged(context.Context, *mcp.ToolListChangedRequest) {
	sv.s.wg.Go(func() {
		<-sv.started
		sv.mu.Lock()
		cs := sv.session
		sv.mu.Unlock()
		if cs == nil {
			return
		}
		ctx, cancel := context.WithTimeout(sv.s.ctx, sv.s.opts.StartTimeout)
		defer cancel()
		tools, err := listTools(ctx, cs)
		if err != nil {
			sv.s.opts.Logger.Warn("an MCP server's changed tool list cannot be read", "server", sv.cfg.Name, "err", err)
			return
		}
		sv.mu.Lock()
		sv.tools = tools
		sv.mu.Unlock()
	})
}

// onProgress passes a progress notification to the call it is about.
func (sv *server) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p := req.Params
	if p == nil {
		return
	}
	token := fmt.Sprint(p.ProgressToken)
	sv.mu.Lock()
	fn := sv.progress[token]
	sv.mu.Unlock()
	if fn != nil {
		fn(p)
	}
}

// ready waits for the server's start and returns its session, or why it
// cannot be called.
func (sv *server) ready(ctx context.Context) (*mcp.ClientSession, error) {
	select {
	case <-sv.started:
	case <-ctx.Done():
		return nil, fmt.Errorf("MCP server %s is still starting: %w", sv.cfg.Name, context.Cause(ctx))
	}
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.failed != nil {
		return nil, fmt.Errorf("MCP server %s %w", sv.cfg.Name, describe(sv.failed))
	}
	return sv.session, nil
}

// describe words a server's failure to follow its name.
func describe(err error) error {
	if errors.Is(err, ErrNotReady) {
		return err
	}
	return fmt.Errorf("failed: %w", err)
}

// Close stops every server and waits for them.
func (ss *Servers) Close() {
	ss.mu.Lock()
	ss.closed = true
	ss.mu.Unlock()
	for _, sv := range ss.servers() {
		sv.close()
	}
	ss.cancel()
	ss.wg.Wait()
}

// tokenFor returns a new progress token.
func (ss *Servers) tokenFor() string {
	return "agentd-" + strconv.FormatUint(ss.tokens.Add(1), 10)
}
