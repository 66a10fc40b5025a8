// Package server is agentd's framed RPC server: it accepts connections on
// a unix listener, speaks the protocol to each through a connection session
// (handshake, request admission and limits, one bounded outbound writer),
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
	"github.com/agentd-dev/agentd/internal/transport"
	"github.com/agentd-dev/agentd/protocol"
)

// Composition is what the host serves once it is ready: the domain
// operations. A composition may also implement ConnectionAttacher and Busy.
type Composition interface {
	// Handlers returns the domain operation handlers. Operations missing
	// from it answer operation_unavailable.
	Handlers() Table
	// BeginDrain tells the composition the host is draining.
	BeginDrain()
	// Close releases the composition; called once, after every connection
	// has ended.
	Close(ctx context.Context) error
}

// Busy is implemented by compositions that can keep an idle host alive
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

// Fanout is implemented by compositions that fan session streams out to
// subscribers: host.diagnostics.query reports their counters.
type Fanout interface {
	Fanout() protocol.FanoutCounters
}

// Providers is implemented by compositions that run model providers:
// host.status reports them.
type Providers interface {
	Providers() []protocol.ProviderStatus
}

// ComposeFunc builds the composition. It runs while the host is already
// accepting connections in state recovering; requests for domain
// operations meanwhile answer host_not_ready.
type ComposeFunc func(ctx context.Context, h *Server) (Composition, error)

// Config configures a host.
type Config struct {
	// HostID names the server in host.status.
	HostID  string
	Version string
	// Home and LogFile are reported by host.status: the home the server's
	// host holds and the file it logs to, when it has them.
	Home, LogFile string
	// IdleGrace is how long the host stays with no connection and nothing
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
	// host drains before they are cancelled (default 10s).
	DrainTimeout time.Duration
	Logger       *slog.Logger
	// Compose builds the composition; nil serves only the host operations.
	Compose ComposeFunc
	// Listener is what the server accepts connections on; it closes it
	// when it stops.
	Listener *net.UnixListener
	// OnState, when set, is called with each state the server enters, in
	// order, and never concurrently: the host publishes its registration
	// from it. An error entering starting fails Start; a later one is
	// recorded as a diagnostic.
	OnState func(s *Server, state string) error
	// TrustCaller accepts the caller a request names: a worker's server,
	// whose one client is its host, sets it.
	TrustCaller bool
	// OnStopped, when set, is called once the server has stopped, its
	// connections and composition closed, before Done is closed: the host
	// lets go of its home from it.
	OnStopped func()
	// CompositionID is what a client's hello must name; default
	// protocol.CompositionInteractive.
	CompositionID string
}

// Host is a running daemon.
type Server struct {
	cfg       Config // constant after Start
	epoch     string // constant
	startedAt time.Time
	logger    *slog.Logger
	diag      *diagnostics
	ln        *net.UnixListener
	hostTable Table             // constant: host.* handlers
	reads     *transport.Budget // constant: every connection's read buffers beyond the small one

	base     context.Context // handlers run under it; cancelled after the drain timeout
	cancel   context.CancelCauseFunc
	ready    chan struct{}
	draining chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup // accept loop, connections, composer

	activeOps   atomic.Int64
	residencies atomic.Int64
	nextConn    atomic.Uint64
	conns       atomic.Int64 // connections accepted and not yet closed, in their handshake included
	trimming    atomic.Bool  // a trim of the memory read buffers let go is pending

	// Lock order: pubMu before mu.
	pubMu    sync.Mutex // serializes state changes with their publication
	mu       sync.Mutex
	state    string                    // guarded by mu
	comp     Composition               // guarded by mu: nil until ready
	table    Table                     // guarded by mu: comp.Handlers()
	sessions map[*connSession]struct{} // guarded by mu
	closing  bool                      // guarded by mu: stop has taken the sessions to close
	idle     *time.Timer               // guarded by mu
	err      error                     // guarded by mu: why the host stopped
}

// Start enters state starting (an OnState that fails then fails Start),
// accepts connections and starts composing. It returns while the server is
// still recovering; Ready is closed once it serves domain operations.
func Start(cfg Config) (*Server, error) {
	if cfg.Listener == nil {
		return nil, errors.New("server: a Listener is required")
	}
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
	ln := cfg.Listener
	h := &Server{
		cfg:       cfg,
		epoch:     newID(8),
		startedAt: time.Now().UTC(),
		logger:    cfg.Logger.With("host", cfg.HostID),
		ln:        ln,
		ready:     make(chan struct{}),
		draining:  make(chan struct{}),
		done:      make(chan struct{}),
		sessions:  make(map[*connSession]struct{}),
		state:     protocol.StateStarting,
	}
	h.diag = newDiagnostics(h.logger)
	h.reads = transport.NewBudget(cfg.MaxReadBytes)
	h.base, h.cancel = context.WithCancelCause(context.Background())
	h.hostTable = h.hostHandlers()
	if err := h.publish(protocol.StateStarting); err != nil {
		ln.Close()
		return nil, err
	}
	h.wg.Go(h.acceptLoop)
	h.setState(protocol.StateRecovering)
	h.wg.Go(h.compose)
	h.logger.Info("host started", "endpoint", h.Endpoint(), "epoch", h.epoch)
	return h, nil
}

func newID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Endpoint is the socket path clients connect to.
func (h *Server) Endpoint() string { return h.ln.Addr().String() }

// Epoch is this start's host epoch.
func (h *Server) Epoch() string { return h.epoch }

// Ready is closed once the composition is ready.
func (h *Server) Ready() <-chan struct{} { return h.ready }

// Done is closed once the host has stopped and let go of its home.
func (h *Server) Done() <-chan struct{} { return h.done }

// Err returns why the host stopped, once Done is closed: nil for a
// requested shutdown or idle retirement.
func (h *Server) Err() error {
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// ReadBytesHeld returns the bytes the server's connections hold now for
// messages that outgrew their small read buffers, within MaxReadBytes.
func (h *Server) ReadBytesHeld() int64 { return h.reads.Held() }

// Logger returns the host's logger, for a composition to share.
func (h *Server) Logger() *slog.Logger { return h.logger }

// Diagnostic records a redacted diagnostic that host.diagnostics.query returns.
func (h *Server) Diagnostic(level slog.Level, msg string) { h.diag.record(level, kindService, msg) }

// publish tells the server's user the state it entered.
func (h *Server) publish(state string) error {
	if h.cfg.OnState == nil {
		return nil
	}
	return h.cfg.OnState(h, state)
}

// StartedAt is when the server started.
func (h *Server) StartedAt() time.Time { return h.startedAt }

// setState moves the host to state and publishes it.
func (h *Server) setState(state string) {
	h.transition(func() bool {
		h.state = state
		return true
	})
}

// transition runs change with mu held and, when it reports a change,
// publishes the registration; pubMu keeps publications in state order.
func (h *Server) transition(change func() bool) bool {
	h.pubMu.Lock()
	defer h.pubMu.Unlock()
	h.mu.Lock()
	changed := change()
	state := h.state
	h.mu.Unlock()
	if !changed {
		return false
	}
	if err := h.publish(state); err != nil {
		h.diag.record(slog.LevelError, kindHost, fmt.Sprintf("publishing state %s: %v", state, err))
	}
	h.logger.Info("host state", "state", state)
	return true
}

// State returns the host's state.
func (h *Server) State() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state
}

func (h *Server) compose() {
	var comp Composition = emptyComposition{}
	if h.cfg.Compose != nil {
		c, err := h.cfg.Compose(h.base, h)
		if err != nil {
			h.diag.record(slog.LevelError, kindHost, fmt.Sprintf("composing the host: %v", err))
			go h.stop(fmt.Errorf("composing the host: %w", err))
			return
		}
		comp = c
	}
	ready := h.transition(func() bool {
		select {
		case <-h.draining:
			return false
		default:
		}
		h.comp, h.table, h.state = comp, comp.Handlers(), protocol.StateReady
		return true
	})
	if !ready {
		comp.Close(context.WithoutCancel(h.base))
		return
	}
	close(h.ready)
	h.checkIdle()
}

type emptyComposition struct{}

func (emptyComposition) Handlers() Table             { return Table{} }
func (emptyComposition) BeginDrain()                 {}
func (emptyComposition) Close(context.Context) error { return nil }

// resolve returns op's handler at dispatch time.
func (h *Server) resolve(op protocol.Operation) (Handler, *protocol.Error) {
	if hd, ok := h.hostTable[op.Name]; ok {
		return hd, nil
	}
	h.mu.Lock()
	state, table := h.state, h.table
	h.mu.Unlock()
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
func (h *Server) authorize(ctx context.Context, call *Call) error {
	if a, ok := h.composition().(Authorizer); ok {
		return a.Authorize(ctx, call)
	}
	return AuthorizeOwner(call)
}

func (h *Server) attacher() ConnectionAttacher {
	a, _ := h.composition().(ConnectionAttacher)
	return a
}

// composition returns the composition once it is ready, or nil.
func (h *Server) composition() Composition {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.comp
}

// admission is the host's accounting of one admitted operation.
type admission struct {
	h        *Server
	finished atomic.Bool
}

func (h *Server) begin(ctx context.Context, call *Call) (Admission, error) {
	h.activeOps.Add(1)
	return &admission{h: h}, nil
}

func (a *admission) AcquireResidency() func() {
	a.h.residencies.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			a.h.residencies.Add(-1)
			a.h.checkIdle()
		})
	}
}

func (a *admission) Finish() {
	if a.finished.CompareAndSwap(false, true) {
		a.h.activeOps.Add(-1)
	}
}

func (h *Server) acceptLoop() {
	for {
		c, err := h.ln.AcceptUnix()
		if err != nil {
			select {
			case <-h.draining:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			h.diag.record(slog.LevelWarn, kindAccept, fmt.Sprintf("accepting a connection: %v", err))
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if h.conns.Add(1) > int64(h.cfg.MaxConnections) {
			h.conns.Add(-1)
			h.refuse(c)
			continue
		}
		h.wg.Go(func() {
			defer h.conns.Add(-1)
			h.serveConn(c)
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
func (h *Server) refuse(c *net.UnixConn) {
	defer c.Close()
	if !h.peerAllowed(c) {
		return
	}
	reason := fmt.Sprintf("the host serves its maximum of %d connections", h.cfg.MaxConnections)
	msg, _ := json.Marshal(protocol.Refused{Kind: protocol.KindRefused, Reason: reason, MaxConnections: h.cfg.MaxConnections})
	c.SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
	c.Write(append(msg, '\n'))
	h.diag.record(slog.LevelWarn, kindCapacity, "refused a connection: "+reason)
}

// peerAllowed reports whether c's peer runs as the host's uid, recording
// a diagnostic when it does not.
func (h *Server) peerAllowed(c *net.UnixConn) bool {
	uid, err := home.PeerUID(c)
	if err == nil && uid == uint32(os.Getuid()) {
		return true
	}
	msg := fmt.Sprintf("refused a connection from uid %d: only uid %d may connect", uid, os.Getuid())
	if err != nil {
		msg = fmt.Sprintf("refused a connection: reading its peer credentials: %v", err)
	}
	h.diag.record(slog.LevelWarn, kindPeer, msg)
	return false
}

// serveConn checks the peer, runs the handshake and serves the connection.
func (h *Server) serveConn(c *net.UnixConn) {
	if !h.peerAllowed(c) {
		c.Close()
		return
	}
	t := transport.NewBudgeted(c, h.reads)
	// This goroutine reads the connection from the hello to its end.
	defer h.readsReleased()
	defer t.ReleaseReader()
	id, ok := h.handshake(c, t)
	if !ok {
		t.Abort(nil)
		return
	}
	s := newConnSession(sessionConfig{
		transport: t,
		identity:  id,
		base:      h.base,
		resolve:   h.resolve,
		authorize: h.authorize,
		attacher:  h.attacher,
		inline: func(op protocol.Operation) bool {
			_, ok := h.hostTable[op.Name]
			return ok
		},
		begin:       h.begin,
		trustCaller: h.cfg.TrustCaller,
		diagnostic: func(kind, msg string) {
			h.diag.record(slog.LevelWarn, kind, msg)
		},
		reads:  h.reads,
		logger: h.logger,
	})
	if !h.addSession(s) {
		s.tearDown(errors.New("host stopped"))
		<-s.writer.Done()
		return
	}
	s.run()
	h.removeSession(s)
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
func (h *Server) readsReleased() {
	peak, held := h.reads.Peak(), h.reads.Held()
	if peak-held < trimAfter || held > peak/2 || !h.trimming.CompareAndSwap(false, true) {
		return
	}
	// The connection's goroutine is one of h.wg's, so the wait group is
	// not yet waited for.
	h.wg.Go(h.trim)
}

func (h *Server) trim() {
	defer h.trimming.Store(false)
	t := time.NewTimer(trimDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-h.base.Done():
		return
	}
	h.reads.ResetPeak()
	// The first collection moves pooled buffers aside, the second drops
	// them; FreeOSMemory's collection is the second.
	runtime.GC()
	debug.FreeOSMemory()
}

func (h *Server) handshake(c *net.UnixConn, t *transport.Conn) (Identity, bool) {
	c.SetReadDeadline(time.Now().Add(h.cfg.HandshakeTimeout))
	line, err := t.Read()
	if err != nil {
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			h.diag.record(slog.LevelWarn, kindHandshake, fmt.Sprintf("handshake refused: no hello within %v", h.cfg.HandshakeTimeout))
		case errors.Is(err, transport.ErrOverBudget):
			h.diag.record(slog.LevelWarn, kindReadBudget, fmt.Sprintf("handshake refused: %v", readBudgetError(err, h.reads)))
		case errors.Is(err, transport.ErrTooLarge):
			h.diag.record(slog.LevelWarn, kindHandshake, fmt.Sprintf("handshake refused: %v", err))
		default:
			h.logger.Debug("handshake not completed", "err", err)
		}
		return Identity{}, false
	}
	frame, err := protocol.DecodeClientFrame(line)
	if err != nil || frame.Hello == nil {
		if err == nil {
			err = errors.New("the first frame must be a hello")
		}
		h.diag.record(slog.LevelWarn, kindHandshake, fmt.Sprintf("handshake refused: %v", err))
		return Identity{}, false
	}
	hello := frame.Hello
	if reason := incompatibility(hello, h.cfg.CompositionID); reason != "" {
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
	if err := t.SetMessageTimeout(h.cfg.MessageTimeout); err != nil {
		h.diag.record(slog.LevelError, kindConnection, fmt.Sprintf("connection failed: %v", err))
		return Identity{}, false
	}
	id := Identity{
		ConnectionID:     "c" + fmt.Sprint(h.nextConn.Add(1)),
		ClientInstanceID: hello.ClientInstanceID,
		Surface:          hello.Surface,
		Principal:        protocol.LocalOwner,
	}
	msg, _ := json.Marshal(protocol.Accepted{
		Kind: protocol.KindAccepted, HostEpoch: h.epoch, ConnectionID: id.ConnectionID,
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

// addSession registers s unless the host is closing its connections: stop
// closes the sessions registered when it comes to them, so one whose
// handshake ends after that is refused rather than left open with nobody
// to close it. One that ends during the drain before then is served, and
// closed with the others.
func (h *Server) addSession(s *connSession) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return false
	}
	h.sessions[s] = struct{}{}
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	return true
}

func (h *Server) removeSession(s *connSession) {
	h.mu.Lock()
	delete(h.sessions, s)
	h.mu.Unlock()
	h.checkIdle()
}

// CheckIdle tells the host that something its composition reports through
// Busy may have ended, so it can arm its idle timer.
func (h *Server) CheckIdle() { h.checkIdle() }

// checkIdle arms the idle timer when nothing needs the host.
func (h *Server) checkIdle() {
	if h.cfg.IdleGrace <= 0 || !h.isIdle() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.idle != nil {
		return
	}
	// Whatever changed since is looked at again when the timer fires.
	h.idle = time.AfterFunc(h.cfg.IdleGrace, func() {
		h.mu.Lock()
		h.idle = nil
		h.mu.Unlock()
		if h.isIdle() {
			h.logger.Info("retiring after idle grace", "grace", h.cfg.IdleGrace)
			go h.stop(nil)
		}
	})
}

// isIdle reports whether nothing needs the host: no connection, no
// residency, and a composition that is not busy. The composition is asked
// without h.mu held: it may take locks of its own, under which it calls
// into the host.
func (h *Server) isIdle() bool {
	h.mu.Lock()
	quiet := h.quietLocked()
	comp := h.comp
	h.mu.Unlock()
	if !quiet {
		return false
	}
	b, ok := comp.(Busy)
	return !ok || !b.Busy()
}

// quietLocked reports whether the host is ready with no connection and no
// residency.
func (h *Server) quietLocked() bool {
	return h.state == protocol.StateReady && len(h.sessions) == 0 && h.residencies.Load() == 0
}

// Shutdown drains the host and waits until it has stopped or ctx ends.
func (h *Server) Shutdown(ctx context.Context) error {
	go h.stop(nil)
	select {
	case <-h.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stop drains and stops the host once: state draining, no new connections,
// in-flight operations finish (or are cancelled after DrainTimeout),
// connections close after flushing, the composition closes, and the
// registration, socket and home lock are released.
func (h *Server) stop(cause error) { h.end(cause, false) }

// HandOff makes the host let go of its home for the host replacing it:
// it stops accepting, closes its subscriptions as host_replaced, hands
// over (rather than stops) what the composition runs, closes its
// connections and exits. It returns at once; Done is closed once the
// host has let go.
func (h *Server) HandOff() { go h.end(nil, true) }

// end stops the host, draining or handing off.
func (h *Server) end(cause error, handOff bool) {
	h.stopOnce.Do(func() {
		h.mu.Lock()
		h.err = cause
		if h.idle != nil {
			h.idle.Stop()
			h.idle = nil
		}
		comp := h.comp
		h.mu.Unlock()
		// Stop accepting before the host says it is draining, so no
		// connection arrives after it does.
		close(h.draining)
		h.ln.Close()
		h.setState(protocol.StateDraining)
		if ho, ok := comp.(HandOff); ok && handOff {
			h.logger.Info("handing the home to the host replacing this one")
			ho.BeginHandOff()
		} else if comp != nil {
			comp.BeginDrain()
		}

		h.awaitOperations()

		h.mu.Lock()
		h.closing = true
		sessions := make([]*connSession, 0, len(h.sessions))
		for s := range h.sessions {
			sessions = append(sessions, s)
		}
		h.mu.Unlock()
		var closing sync.WaitGroup
		for _, s := range sessions {
			closing.Go(func() { s.closeAfterFlush(time.Second) })
		}
		closing.Wait()
		h.cancel(errors.New("host stopped"))
		h.wg.Wait()

		h.mu.Lock()
		comp = h.comp
		h.mu.Unlock()
		if comp != nil {
			if err := comp.Close(context.Background()); err != nil {
				h.logger.Warn("closing composition", "err", err)
			}
		}
		h.diag.flush(true)
		if h.cfg.OnStopped != nil {
			h.cfg.OnStopped()
		}
		h.logger.Info("host stopped")
		close(h.done)
	})
}

// awaitOperations waits for in-flight operations to settle, cancelling
// them once DrainTimeout has passed.
func (h *Server) awaitOperations() {
	deadline := time.Now().Add(h.cfg.DrainTimeout)
	for h.activeOps.Load() > 0 {
		if time.Now().After(deadline) {
			h.cancel(errors.New("host drain timed out"))
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closeAfterFlush ends a connection once its queued frames are written, or
// after grace.
func (s *connSession) closeAfterFlush(grace time.Duration) {
	s.writer.CloseAfterFlush()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-s.writer.Done():
	case <-t.C:
	}
	s.tearDown(errors.New("host stopped"))
}
