// Package server is agentd's framed RPC server: it accepts connections on
// a unix listener, speaks the protocol to each connection (handshake,
// request admission and limits, one bounded outbound writer),
// and routes operations through a table that a composition fills once it
// is ready. It moves through the host states (starting, recovering, ready,
// draining), retires after an idle grace, and drains on shutdown.
//
// The host daemon serves its clients with it, and each session's worker
// serves its host with it. It knows nothing of homes, registrations,
// sessions, workers or providers: those belong to its users, plugged in
// through Config.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/internal/transport"
	"github.com/agentd-dev/agentd/protocol"
)

// Composition is what the server serves once it is ready: the domain
// operations. A composition may also implement ConnectionAttacher, Busy,
// HandOff and Reporter.
type Composition interface {
	// Handlers returns the domain operation handlers. Operations missing
	// from it answer operation_unavailable.
	Handlers() Table
	// BeginDrain tells the composition the server is draining.
	BeginDrain()
	// Close releases the composition; called once, after every connection
	// has ended.
	Close(ctx context.Context) error
}

// Busy is implemented by compositions that can keep an idle server alive
// (a running turn with no client attached, say).
type Busy interface {
	Busy() bool
}

// HandOff is implemented by compositions that can hand their live state
// to the host replacing this one: BeginHandOff is called instead of
// BeginDrain, and Close then lets go of what runs instead of stopping it.
type HandOff interface {
	BeginHandOff()
}

// Reporter is implemented by compositions that add their own figures to
// the server's reports: the server fills in what it knows of itself and
// hands the report over, knowing nothing of what the composition adds.
type Reporter interface {
	// ReportStatus adds the composition's part to a host.status answer.
	ReportStatus(st *protocol.HostStatus)
	// ReportDiagnostics adds the composition's part to a
	// host.diagnostics.query answer.
	ReportDiagnostics(res *protocol.DiagnosticsQueryResult)
}

// ComposeFunc builds the composition. It runs while the server is already
// accepting connections in state recovering; requests for domain
// operations meanwhile answer host_not_ready.
type ComposeFunc func(ctx context.Context, srv *Server) (Composition, error)

// Config configures a server.
type Config struct {
	// HostID names the server in host.status.
	HostID  string
	Version string
	// Home and LogFile are reported by host.status: the home the server's
	// host holds and the file it logs to, when it has them.
	Home, LogFile string
	// IdleGrace is how long the server stays with no connection and nothing
	// busy before it retires; zero means never.
	IdleGrace time.Duration
	// HandshakeTimeout bounds the wait for a client's hello (default
	// protocol.HandshakeTimeout).
	HandshakeTimeout time.Duration
	// MessageTimeout bounds how long one message may take to arrive once
	// its first byte has, after the handshake (default
	// protocol.MessageTimeout). A connection whose message is not whole
	// in time is closed, with a diagnostic.
	MessageTimeout time.Duration
	// MaxReadBytes bounds the bytes held at once, across every
	// connection, for messages that outgrow a connection's small read
	// buffer, hellos included (default protocol.MaxReadBytes). A
	// connection whose message would take the total past it is closed,
	// with a diagnostic.
	MaxReadBytes int64
	// MaxConnections bounds the connections served at once, those still
	// in their handshake included (default protocol.MaxConnections). One
	// more is answered protocol.Refused and closed.
	MaxConnections int
	// DrainTimeout bounds how long in-flight operations may run once the
	// server drains before they are cancelled (default 10s).
	DrainTimeout time.Duration
	Logger       *slog.Logger
	// Compose builds the composition; nil serves only the host operations.
	Compose ComposeFunc
	// Operations are served in every state, as the host.* operations
	// every server answers are: the host daemon's own.
	Operations Table
	// OnState, when set, is called with each state the server enters, in
	// order, and never concurrently: the host publishes its registration
	// from it. An error entering starting ends Run with it; a later one
	// is recorded as a diagnostic.
	OnState func(s *Server, state string) error
	// TrustCaller accepts the caller a request names: a worker's server,
	// whose one client is its host, sets it.
	TrustCaller bool
	// CompositionID is what a client's hello must name; default
	// protocol.CompositionInteractive.
	CompositionID string
	// ReceiveFiles keeps the descriptors a client passes beside a
	// request, for its handler to take (Call.TakeFiles): a worker's
	// server, which is lent terminals, sets it.
	ReceiveFiles bool
}

// ErrStopped is wrapped by the error Run returns when the server stopped
// as it was asked to: its context ended, a client asked it to shut down,
// it retired after its idle grace, or it handed off to its replacement.
// The error's text says which.
var ErrStopped = errors.New("server stopped")

var (
	errShutdownRequested = fmt.Errorf("%w: shut down on request", ErrStopped)
	errIdle              = fmt.Errorf("%w: retired after its idle grace", ErrStopped)
	errHandedOff         = fmt.Errorf("%w: handed off to its replacement", ErrStopped)
)

// Server is agentd's framed RPC server: New makes one, Run serves it.
type Server struct {
	cfg       Config // constant
	epoch     string // constant
	startedAt time.Time
	logger    *slog.Logger
	diag      *diagnostics
	hostTable Table             // constant: the operations served in every state
	reads     *transport.Budget // constant: every connection's read buffers beyond the small one
	ops       opCounter         // operations in flight

	ran      atomic.Bool                  // Run was called
	ln       atomic.Pointer[net.Listener] // set as Run starts
	stopReq  chan error                   // the first request to stop, with why; buffered
	base     context.Context              // handlers run under it; cancelled after the drain timeout; set as Run starts
	cancel   context.CancelCauseFunc
	ready    chan struct{}
	draining chan struct{}
	wg       sync.WaitGroup // accept loop, connections, composer

	residencies atomic.Int64
	nextConn    atomic.Uint64
	conns       atomic.Int64 // connections accepted and not yet closed, in their handshake included
	trimming    atomic.Bool  // a trim of the memory read buffers let go is pending

	// Lock order: pubMu before mu.
	pubMu   sync.Mutex // serializes state changes with their publication
	mu      sync.Mutex
	state   string                   // guarded by mu
	comp    Composition              // guarded by mu: nil until ready
	table   Table                    // guarded by mu: comp.Handlers()
	served  map[*connection]struct{} // guarded by mu
	closing bool                     // guarded by mu: stop has taken the connections to close
	idle    *time.Timer              // guarded by mu
}

// New returns a server of cfg, to Run.
func New(cfg Config) (*Server, error) {
	if err := protocol.ValidHostID(cfg.HostID); err != nil {
		return nil, err
	}
	if cfg.CompositionID == "" {
		cfg.CompositionID = protocol.CompositionInteractive
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = protocol.HandshakeTimeout
	}
	if cfg.MessageTimeout <= 0 {
		cfg.MessageTimeout = protocol.MessageTimeout
	}
	if cfg.MaxReadBytes <= 0 {
		cfg.MaxReadBytes = protocol.MaxReadBytes
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 10 * time.Second
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = protocol.MaxConnections
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	srv := &Server{
		cfg:       cfg,
		epoch:     newID(8),
		startedAt: time.Now().UTC(),
		logger:    cfg.Logger.With("host", cfg.HostID),
		stopReq:   make(chan error, 1),
		ready:     make(chan struct{}),
		draining:  make(chan struct{}),
		served:    make(map[*connection]struct{}),
		state:     protocol.StateStarting,
	}
	srv.diag = newDiagnostics(srv.logger)
	srv.reads = transport.NewBudget(cfg.MaxReadBytes)
	srv.hostTable = srv.hostHandlers()
	for name, hd := range cfg.Operations {
		srv.hostTable[name] = hd
	}
	return srv, nil
}

// Run enters state starting, accepts connections on ln (unix sockets:
// their peers' credentials are checked) and composes; it serves until the
// server stops, and returns why it stopped. Cancelling ctx drains the
// server: in-flight operations run on, for at most DrainTimeout (their
// contexts derive from ctx, without its cancellation), and connections
// close once flushed. The error wraps ErrStopped when the server stopped
// as asked (for a cancelled ctx, together with ctx's cause) and is the
// failure otherwise: an OnState that failed entering starting, a
// composition that could not be built. Run closes ln, and may be called
// once.
func (srv *Server) Run(ctx context.Context, ln net.Listener) error {
	if !srv.ran.CompareAndSwap(false, true) {
		ln.Close()
		return errors.New("server: Run called twice")
	}
	srv.ln.Store(&ln)
	srv.base, srv.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	defer srv.cancel(ErrStopped)
	if err := srv.publish(protocol.StateStarting); err != nil {
		ln.Close()
		return err
	}
	srv.wg.Go(srv.acceptLoop)
	srv.setState(protocol.StateRecovering)
	srv.wg.Go(srv.compose)
	srv.logger.Info("server started", "endpoint", srv.Endpoint(), "epoch", srv.epoch)
	var cause error
	select {
	case <-ctx.Done():
		cause = fmt.Errorf("%w: %w", ErrStopped, context.Cause(ctx))
	case cause = <-srv.stopReq:
	}
	srv.end(cause, cause == errHandedOff)
	return cause
}

// requestStop asks Run to stop the server for cause; the first request
// is the one heeded.
func (srv *Server) requestStop(cause error) {
	select {
	case srv.stopReq <- cause:
	default:
	}
}

func newID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Endpoint is the address clients connect to: the socket's path. It is
// empty until Run has started.
func (srv *Server) Endpoint() string {
	if ln := srv.ln.Load(); ln != nil {
		return (*ln).Addr().String()
	}
	return ""
}

// Epoch is this start's host epoch.
func (srv *Server) Epoch() string { return srv.epoch }

// Ready is closed once the composition is ready.
func (srv *Server) Ready() <-chan struct{} { return srv.ready }

// Draining is closed once the server has begun to stop.
func (srv *Server) Draining() <-chan struct{} { return srv.draining }

// ReadBytesHeld returns the bytes the server's connections hold now for
// messages that outgrew their small read buffers, within MaxReadBytes.
func (srv *Server) ReadBytesHeld() int64 { return srv.reads.Held() }

// Logger returns the server's logger, for a composition to share.
func (srv *Server) Logger() *slog.Logger { return srv.logger }

// Diagnostic records a redacted diagnostic that host.diagnostics.query returns.
func (srv *Server) Diagnostic(level slog.Level, msg string) { srv.diag.record(level, kindService, msg) }

// publish tells the server's user the state it entered.
func (srv *Server) publish(state string) error {
	if srv.cfg.OnState == nil {
		return nil
	}
	return srv.cfg.OnState(srv, state)
}

// StartedAt is when the server started.
func (srv *Server) StartedAt() time.Time { return srv.startedAt }

// setState moves the server to state and publishes it.
func (srv *Server) setState(state string) {
	srv.transition(func() bool {
		srv.state = state
		return true
	})
}

// transition runs change with mu held and, when it reports a change,
// publishes the registration; pubMu keeps publications in state order.
func (srv *Server) transition(change func() bool) bool {
	srv.pubMu.Lock()
	defer srv.pubMu.Unlock()
	srv.mu.Lock()
	changed := change()
	state := srv.state
	srv.mu.Unlock()
	if !changed {
		return false
	}
	if err := srv.publish(state); err != nil {
		srv.diag.record(slog.LevelError, kindHost, fmt.Sprintf("publishing state %s: %v", state, err))
	}
	srv.logger.Info("server state", "state", state)
	return true
}

// State returns the server's state.
func (srv *Server) State() string {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.state
}

func (srv *Server) compose() {
	var comp Composition = emptyComposition{}
	if srv.cfg.Compose != nil {
		c, err := srv.cfg.Compose(srv.base, srv)
		if err != nil {
			srv.diag.record(slog.LevelError, kindHost, fmt.Sprintf("composing the host: %v", err))
			srv.requestStop(fmt.Errorf("composing the host: %w", err))
			return
		}
		comp = c
	}
	ready := srv.transition(func() bool {
		select {
		case <-srv.draining:
			return false
		default:
		}
		srv.comp, srv.table, srv.state = comp, comp.Handlers(), protocol.StateReady
		return true
	})
	if !ready {
		comp.Close(context.WithoutCancel(srv.base))
		return
	}
	close(srv.ready)
	srv.checkIdle()
}

type emptyComposition struct{}

func (emptyComposition) Handlers() Table             { return Table{} }
func (emptyComposition) BeginDrain()                 {}
func (emptyComposition) Close(context.Context) error { return nil }

// resolve returns op's handler at dispatch time.
func (srv *Server) resolve(op protocol.Operation) (Handler, *protocol.Error) {
	if hd, ok := srv.hostTable[op.Name]; ok {
		return hd, nil
	}
	srv.mu.Lock()
	state, table := srv.state, srv.table
	srv.mu.Unlock()
	switch state {
	case protocol.StateDraining:
		return nil, protocol.Errorf(protocol.CodeDraining, "the host is draining; %s was not started", op.Name)
	case protocol.StateStarting, protocol.StateRecovering:
		return nil, protocol.Errorf(protocol.CodeHostNotReady, "the host is %s; retry %s once it is ready", state, op.Name)
	}
	if hd, ok := table[op.Name]; ok {
		return hd, nil
	}
	return nil, unavailable(op.Name)
}

// authorize asks the composition, once it is ready and decides access,
// whether call may run; until then, and for a composition that does not,
// the principal alone decides (AuthorizeOwner).
func (srv *Server) authorize(ctx context.Context, call *Call) error {
	if a, ok := srv.composition().(Authorizer); ok {
		return a.Authorize(ctx, call)
	}
	return AuthorizeOwner(call)
}

// confirm asks the composition, when it confirms access, whether call's
// caller may still have the result of the operation that just ran.
func (srv *Server) confirm(call *Call) error {
	if c, ok := srv.composition().(Confirmer); ok {
		return c.Confirm(call)
	}
	return nil
}

func (srv *Server) attacher() ConnectionAttacher {
	a, _ := srv.composition().(ConnectionAttacher)
	return a
}

// composition returns the composition once it is ready, or nil.
func (srv *Server) composition() Composition {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.comp
}

// admission is the server's accounting of one admitted operation.
type admission struct {
	srv      *Server
	finished atomic.Bool
}

func (srv *Server) begin(ctx context.Context, call *Call) (Admission, error) {
	srv.ops.add()
	return &admission{srv: srv}, nil
}

func (a *admission) AcquireResidency() func() {
	a.srv.residencies.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			a.srv.residencies.Add(-1)
			a.srv.checkIdle()
		})
	}
}

func (a *admission) Finish() {
	if a.finished.CompareAndSwap(false, true) {
		a.srv.ops.done()
	}
}

func (srv *Server) acceptLoop() {
	for {
		nc, err := (*srv.ln.Load()).Accept()
		if err != nil {
			select {
			case <-srv.draining:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			srv.diag.record(slog.LevelWarn, kindAccept, fmt.Sprintf("accepting a connection: %v", err))
			time.Sleep(10 * time.Millisecond)
			continue
		}
		c, ok := nc.(*net.UnixConn)
		if !ok {
			nc.Close()
			srv.diag.record(slog.LevelWarn, kindPeer, fmt.Sprintf("refused a connection over %s: only unix sockets tell who their peer is", nc.LocalAddr().Network()))
			continue
		}
		if srv.conns.Add(1) > int64(srv.cfg.MaxConnections) {
			srv.conns.Add(-1)
			srv.refuse(c)
			continue
		}
		srv.wg.Go(func() {
			defer srv.conns.Add(-1)
			srv.serveConn(c)
		})
	}
}

// refuseWriteTimeout bounds the write of a refused frame. A connection
// just accepted has room for it, so the write does not wait in practice.
const refuseWriteTimeout = 100 * time.Millisecond

// refuse answers a connection past MaxConnections with a refused frame,
// without waiting for its hello, and closes it. It runs on the accept
// loop and starts nothing, so connections past the limit hold nothing of
// the host.
func (srv *Server) refuse(c *net.UnixConn) {
	defer c.Close()
	if !srv.peerAllowed(c) {
		return
	}
	reason := fmt.Sprintf("the host serves its maximum of %d connections", srv.cfg.MaxConnections)
	msg, _ := json.Marshal(protocol.Refused{Kind: protocol.KindRefused, Reason: reason, MaxConnections: srv.cfg.MaxConnections})
	c.SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
	c.Write(append(msg, '\n'))
	srv.diag.record(slog.LevelWarn, kindCapacity, "refused a connection: "+reason)
}

// peerAllowed reports whether c's peer may be served, recording a
// diagnostic when it may not: it runs as the server's uid, and not walled
// in by agentd's sandbox (proc.Confined) unless the server is too. The
// agent's commands run in the sandbox; this keeps them from asking a
// host or worker for what the sandbox refuses them, such as a command
// run outside it. A peer whose process is gone before it is looked at is
// refused: the socket may be held by what it started.
func (srv *Server) peerAllowed(c *net.UnixConn) bool {
	uid, pid, err := home.PeerCred(c)
	kind, msg := kindPeer, ""
	switch {
	case err != nil:
		msg = fmt.Sprintf("refused a connection: reading its peer credentials: %v", err)
	case uid != uint32(os.Getuid()):
		msg = fmt.Sprintf("refused a connection from uid %d: only uid %d may connect", uid, os.Getuid())
	default:
		confined, err := proc.Confined(pid)
		switch {
		case err != nil:
			msg = fmt.Sprintf("refused a connection from pid %d: reading its privileges: %v", pid, err)
		case confined && !selfConfined():
			kind, msg = kindSandboxed, fmt.Sprintf("refused a connection from pid %d: it runs in agentd's sandbox", pid)
		default:
			return true
		}
	}
	srv.diag.record(slog.LevelWarn, kind, msg)
	return false
}

// selfConfined reports whether this process runs confined: then every
// process it could tell from a sandboxed one is confined as well.
var selfConfined = sync.OnceValue(func() bool {
	confined, err := proc.Confined(os.Getpid())
	return err == nil && confined
})

// serveConn checks the peer, runs the handshake and serves the connection.
func (srv *Server) serveConn(c *net.UnixConn) {
	if !srv.peerAllowed(c) {
		c.Close()
		return
	}
	srv.serve(c, protocol.LocalOwner)
}

// ServeConn serves nc, a connection accepted and authenticated elsewhere
// (the web listener), for principal, and returns once it has ended: the
// same handshake, limits, queues and eviction as a connection of the
// socket, its count against MaxConnections included.
func (srv *Server) ServeConn(nc net.Conn, principal protocol.Principal) {
	if srv.conns.Add(1) > int64(srv.cfg.MaxConnections) {
		srv.conns.Add(-1)
		defer nc.Close()
		reason := fmt.Sprintf("the host serves its maximum of %d connections", srv.cfg.MaxConnections)
		msg, _ := json.Marshal(protocol.Refused{Kind: protocol.KindRefused, Reason: reason, MaxConnections: srv.cfg.MaxConnections})
		nc.SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
		nc.Write(append(msg, '\n'))
		srv.diag.record(slog.LevelWarn, kindCapacity, "refused a connection: "+reason)
		return
	}
	defer srv.conns.Add(-1)
	srv.serve(nc, principal)
}

// serve runs the handshake of nc, whose peer acts for principal, and
// serves the connection.
func (srv *Server) serve(nc net.Conn, principal protocol.Principal) {
	var files *filesConn
	if uc, ok := nc.(*net.UnixConn); ok && srv.cfg.ReceiveFiles {
		files = newFilesConn(uc)
		nc = files
	}
	t := transport.NewBudgeted(nc, srv.reads)
	// This goroutine reads the connection from the hello to its end.
	defer srv.readsReleased()
	defer t.ReleaseReader()
	id, ok := srv.handshake(nc, t, principal)
	if !ok {
		t.Abort(nil)
		return
	}
	conn := newConnection(connectionConfig{
		transport: t,
		identity:  id,
		base:      srv.base,
		resolve:   srv.resolve,
		authorize: srv.authorize,
		confirm:   srv.confirm,
		attacher:  srv.attacher,
		inline: func(op protocol.Operation) bool {
			_, ok := srv.hostTable[op.Name]
			return ok
		},
		begin:       srv.begin,
		trustCaller: srv.cfg.TrustCaller,
		diagnostic: func(kind, msg string) {
			srv.diag.record(slog.LevelWarn, kind, msg)
		},
		reads:  srv.reads,
		logger: srv.logger,
		files:  files,
	})
	if !srv.addConn(conn) {
		conn.tearDown(errors.New("host stopped"))
		<-conn.writer.Done()
		return
	}
	conn.run()
	srv.removeConn(conn)
}

// Memory that a burst of large messages held is given back to the
// system once their connections have let it go: the runtime would keep
// pooled buffers until two collections pass, and return freed pages over
// minutes. A trim waits trimDelay for the rest of a burst of closes, then
// collects twice and returns what is free; it follows only a fall of at
// least trimAfter bytes and to at most half the peak, so a host that
// reads a large prompt now and then never trims.
const (
	trimAfter = 8 << 20
	trimDelay = 500 * time.Millisecond
)

// readsReleased is called once a connection has let go of its read
// buffers: it starts a trim when they were much of what the host held.
func (srv *Server) readsReleased() {
	peak, held := srv.reads.Peak(), srv.reads.Held()
	if peak-held < trimAfter || held > peak/2 || !srv.trimming.CompareAndSwap(false, true) {
		return
	}
	// The connection's goroutine is one of srv.wg's, so the wait group is
	// not yet waited for.
	srv.wg.Go(srv.trim)
}

func (srv *Server) trim() {
	defer srv.trimming.Store(false)
	t := time.NewTimer(trimDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-srv.base.Done():
		return
	}
	srv.reads.ResetPeak()
	// The first collection moves pooled buffers aside, the second drops
	// them; FreeOSMemory's collection is the second.
	runtime.GC()
	debug.FreeOSMemory()
}

func (srv *Server) handshake(c net.Conn, t *transport.Conn, principal protocol.Principal) (Identity, bool) {
	c.SetReadDeadline(time.Now().Add(srv.cfg.HandshakeTimeout))
	line, err := t.Read()
	if err != nil {
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			srv.diag.record(slog.LevelWarn, kindHandshake, fmt.Sprintf("handshake refused: no hello within %v", srv.cfg.HandshakeTimeout))
		case errors.Is(err, transport.ErrOverBudget):
			srv.diag.record(slog.LevelWarn, kindReadBudget, fmt.Sprintf("handshake refused: %v", readBudgetError(err, srv.reads)))
		case errors.Is(err, transport.ErrTooLarge):
			srv.diag.record(slog.LevelWarn, kindHandshake, fmt.Sprintf("handshake refused: %v", err))
		default:
			srv.logger.Debug("handshake not completed", "err", err)
		}
		return Identity{}, false
	}
	frame, err := protocol.DecodeClientFrame(line)
	if err != nil || frame.Hello == nil {
		if err == nil {
			err = errors.New("the first frame must be a hello")
		}
		srv.diag.record(slog.LevelWarn, kindHandshake, fmt.Sprintf("handshake refused: %v", err))
		return Identity{}, false
	}
	hello := frame.Hello
	if reason := incompatibility(hello, srv.cfg.CompositionID); reason != "" {
		msg, _ := json.Marshal(protocol.Incompatible{
			Kind: protocol.KindIncompatible, Reason: reason,
			HostProtocolMin: protocol.ProtocolVersion, HostProtocolMax: protocol.ProtocolVersion,
			HostCompatibilityEpoch: protocol.CompatibilityEpoch,
		})
		t.WriteFrame(msg)
		t.CloseWrite()
		return Identity{}, false
	}
	c.SetReadDeadline(time.Time{})
	if err := t.SetMessageTimeout(srv.cfg.MessageTimeout); err != nil {
		srv.diag.record(slog.LevelError, kindConnection, fmt.Sprintf("connection failed: %v", err))
		return Identity{}, false
	}
	id := Identity{
		ConnectionID:     "c" + fmt.Sprint(srv.nextConn.Add(1)),
		ClientInstanceID: hello.ClientInstanceID,
		Surface:          hello.Surface,
		Principal:        principal,
	}
	msg, _ := json.Marshal(protocol.Accepted{
		Kind: protocol.KindAccepted, HostEpoch: srv.epoch, ConnectionID: id.ConnectionID,
		Protocol: protocol.ProtocolVersion, Principal: id.Principal,
	})
	if err := t.WriteFrame(msg); err != nil {
		return Identity{}, false
	}
	return id, true
}

func incompatibility(hello *protocol.Hello, composition string) string {
	switch {
	case hello.ProtocolMin > protocol.ProtocolVersion || hello.ProtocolMax < protocol.ProtocolVersion:
		return fmt.Sprintf("the host speaks protocol %d; the client asked for %d..%d",
			protocol.ProtocolVersion, hello.ProtocolMin, hello.ProtocolMax)
	case hello.CompatibilityEpoch != protocol.CompatibilityEpoch:
		return fmt.Sprintf("the host is of compatibility epoch %d; the client of %d",
			protocol.CompatibilityEpoch, hello.CompatibilityEpoch)
	case hello.CompositionID != composition:
		return fmt.Sprintf("the host serves composition %q, not %q", composition, hello.CompositionID)
	}
	return ""
}

// addConn registers conn unless the server is closing its connections:
// stop closes the connections registered when it comes to them, so one
// whose handshake ends after that is refused rather than left open with
// nobody to close it. One that ends during the drain before then is
// served, and closed with the others.
func (srv *Server) addConn(conn *connection) bool {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.closing {
		return false
	}
	srv.served[conn] = struct{}{}
	if srv.idle != nil {
		srv.idle.Stop()
		srv.idle = nil
	}
	return true
}

func (srv *Server) removeConn(conn *connection) {
	srv.mu.Lock()
	delete(srv.served, conn)
	srv.mu.Unlock()
	srv.checkIdle()
}

// CheckIdle tells the server that something its composition reports through
// Busy may have ended, so it can arm its idle timer.
func (srv *Server) CheckIdle() { srv.checkIdle() }

// checkIdle arms the idle timer when nothing needs the server.
func (srv *Server) checkIdle() {
	if srv.cfg.IdleGrace <= 0 || !srv.isIdle() {
		return
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.idle != nil {
		return
	}
	// Whatever changed since is looked at again when the timer fires.
	srv.idle = time.AfterFunc(srv.cfg.IdleGrace, func() {
		srv.mu.Lock()
		srv.idle = nil
		srv.mu.Unlock()
		if srv.isIdle() {
			srv.logger.Info("retiring after idle grace", "grace", srv.cfg.IdleGrace)
			srv.requestStop(errIdle)
		}
	})
}

// isIdle reports whether nothing needs the server: no connection, no
// residency, and a composition that is not busy. The composition is asked
// without srv.mu held: it may take locks of its own, under which it calls
// into the host.
func (srv *Server) isIdle() bool {
	srv.mu.Lock()
	quiet := srv.quietLocked()
	comp := srv.comp
	srv.mu.Unlock()
	if !quiet {
		return false
	}
	b, ok := comp.(Busy)
	return !ok || !b.Busy()
}

// quietLocked reports whether the server is ready with no connection and no
// residency.
func (srv *Server) quietLocked() bool {
	return srv.state == protocol.StateReady && len(srv.served) == 0 && srv.residencies.Load() == 0
}

// Stop asks the server to stop, as host.shutdown does; Run returns once
// it has. It returns at once.
func (srv *Server) Stop() { srv.requestStop(errShutdownRequested) }

// HandOff asks the server to let go for the server replacing it: it stops
// accepting, the composition hands over (rather than stops) what it runs
// (see HandOff), connections close, and Run returns. It returns at once.
func (srv *Server) HandOff() { srv.requestStop(errHandedOff) }

// CanHandOff reports whether the server's composition, once ready, can
// hand what it runs over.
func (srv *Server) CanHandOff() bool {
	_, ok := srv.composition().(HandOff)
	return ok
}

// end stops the server, draining or handing off: state draining, no new
// connections, in-flight operations finish (or are cancelled after
// DrainTimeout), connections close after flushing, and the composition
// closes. Run calls it once.
func (srv *Server) end(cause error, handOff bool) {
	srv.mu.Lock()
	if srv.idle != nil {
		srv.idle.Stop()
		srv.idle = nil
	}
	comp := srv.comp
	srv.mu.Unlock()
	// Stop accepting before the server says it is draining, so no
	// connection arrives after it does.
	close(srv.draining)
	(*srv.ln.Load()).Close()
	srv.setState(protocol.StateDraining)
	if ho, ok := comp.(HandOff); ok && handOff {
		srv.logger.Info("handing the home to the host replacing this one")
		ho.BeginHandOff()
	} else if comp != nil {
		comp.BeginDrain()
	}

	srv.awaitOperations()

	srv.mu.Lock()
	srv.closing = true
	conns := make([]*connection, 0, len(srv.served))
	for conn := range srv.served {
		conns = append(conns, conn)
	}
	srv.mu.Unlock()
	var closing sync.WaitGroup
	for _, conn := range conns {
		closing.Go(func() { conn.closeAfterFlush(time.Second) })
	}
	closing.Wait()
	srv.cancel(errors.New("host stopped"))
	srv.wg.Wait()

	srv.mu.Lock()
	comp = srv.comp
	srv.mu.Unlock()
	if comp != nil {
		if err := comp.Close(context.Background()); err != nil {
			srv.logger.Warn("closing composition", "err", err)
		}
	}
	srv.diag.flush(true)
	srv.logger.Info("server stopped", "why", cause)
}

// awaitOperations waits for in-flight operations to settle, cancelling
// them once DrainTimeout has passed.
func (srv *Server) awaitOperations() {
	t := time.NewTimer(srv.cfg.DrainTimeout)
	defer t.Stop()
	select {
	case <-srv.ops.none():
	case <-t.C:
		srv.cancel(errors.New("host drain timed out"))
	}
}

// opCounter counts the operations in flight and tells when none are. The
// channel that says so is made only for a waiter, so counting costs a
// request no allocation.
type opCounter struct {
	mu     sync.Mutex
	n      int           // guarded by mu
	waiter chan struct{} // guarded by mu: closed, and dropped, once n is 0
}

func (c *opCounter) add() {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

func (c *opCounter) done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n--; c.n == 0 && c.waiter != nil {
		close(c.waiter)
		c.waiter = nil
	}
}

// load returns how many operations are in flight.
func (c *opCounter) load() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// none returns a channel closed once no operation is in flight.
func (c *opCounter) none() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		return closed
	}
	if c.waiter == nil {
		c.waiter = make(chan struct{})
	}
	return c.waiter
}

// closed is a channel closed from the start.
var closed = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// closeAfterFlush ends a connection once its queued frames are written, or
// after grace.
func (c *connection) closeAfterFlush(grace time.Duration) {
	c.writer.CloseAfterFlush()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.writer.Done():
	case <-t.C:
	}
	c.tearDown(errors.New("host stopped"))
}
