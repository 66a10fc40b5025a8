// Package sessions is the host's session service: the composition that
// fills the host's operation table with the session, turn, interaction,
// model and subscription operations. It keeps the catalog, asks the
// supervisor for one worker process per active session, forwards each session operation to
// its worker with the caller's identity, follows each worker's one event
// stream and fans it out to the subscriptions of its clients (see
// subscription.go for the delivery promise), stops idle workers,
// replaces workers that exit, adopts through the supervisor the live
// workers an earlier host left (adopt.go), and hands its own to the host
// replacing it.
//
// It knows the catalog and the worker's protocol, and nothing of how a
// worker runs an agent.
package sessions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd-dev/agentd/internal/catalog"
	"github.com/agentd-dev/agentd/internal/guest"
	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/internal/supervisor"
	"github.com/agentd-dev/agentd/internal/web"
	"github.com/agentd-dev/agentd/protocol"
)

// Models is what the service needs to know of the configured providers.
type Models interface {
	// Available lists the models of every registered provider.
	Available() []protocol.Model
	// Check reports why spec ("provider/model") cannot be chosen for a
	// session: it names no registered provider, a provider that is not
	// configured, or a model the provider does not serve. The error says
	// what to do about it.
	Check(spec string) error
	// Ready reports why spec cannot run now (its provider is not
	// configured: the error names what to set), or nil.
	Ready(spec string) error
	// Default is the host's default model.
	Default() string
	// Providers says of every registered provider whether it can be
	// called, and where its key comes from.
	Providers() []protocol.ProviderStatus
}

// Config configures the service.
type Config struct {
	Home       string
	RuntimeDir string
	HostID     string
	// WorkerCommand is the argv that starts a worker; the service appends
	// the session's flags. Default: this executable with "worker".
	WorkerCommand []string
	// WorkerIdleGrace is how long a worker with no subscriber and no
	// running turn lives on (default 30s).
	WorkerIdleGrace time.Duration
	// WorkerLog is where workers write their logs, and whatever else they
	// print (a crash's trace): the host's own log. Default: stderr.
	WorkerLog io.Writer
	// WorkerLogFormat is the workers' log format: text (default) or json.
	WorkerLogFormat string
	Models          Models
	// WorkerKeys are the providers' keys the host took from its
	// environment, by provider: each worker it starts is handed them
	// through a pipe of its own (supervisor.Config.Keys).
	WorkerKeys map[string]string
	Logger     *slog.Logger
	// BacklogBytes bounds the live output a subscription holds before
	// it skips ahead (default DefaultBacklogBytes); BacklogAge how long
	// it may take nothing while deltas wait before it is closed as a
	// slow consumer (default DefaultBacklogAge).
	BacklogBytes int
	BacklogAge   time.Duration
}

// Service is the composition.
type Service struct {
	cfg   Config                 // constant
	host  *server.Server         // constant
	sup   *supervisor.Supervisor // constant
	cat   *catalog.Catalog
	log   *slog.Logger
	wg    sync.WaitGroup // worker monitors, streams and deliveries
	table server.Table

	// ctx is the service's: derived from the one it was composed with,
	// cancelled when it closes. Requests of the service's own and the
	// start of workers derive from it; what must finish after the close
	// (a worker's stop) from context.WithoutCancel(ctx).
	ctx    context.Context
	cancel context.CancelCauseFunc
	// drain is cancelled once the host drains or hands off (drainNow):
	// what waits for a client's sake (a read of output waiting for more)
	// answers then, and holds neither up.
	drain    context.Context
	drainNow context.CancelFunc

	counters counters
	nextSub  atomic.Uint64
	mcpFiles mcpFiles // serialises changes of the sessions' own MCP servers

	// handingOff is set once the host hands its home to a newer host:
	// its workers are let go of, never stopped.
	handingOff atomic.Bool
	// detached is closed when the host, handing off, lets go of its
	// workers.
	detached chan struct{}

	// Lock order: mu before the catalog's own lock (ensureWorker asks
	// the catalog whether a session still exists under mu).
	mu      sync.Mutex
	workers map[string]*worker // guarded by mu: by session id
	// archived holds the sessions archived while this host runs, from
	// the moment their archive begins: no worker starts for them,
	// whatever a request read of the catalog before. Guarded by mu.
	archived map[string]bool
	// removing counts the removes of each session that run now: no
	// worker starts for the session meanwhile, and none after, since
	// the catalog no longer has it; a session put back in the catalog
	// under the same id later gets its workers. Guarded by mu.
	removing map[string]int
	draining bool // guarded by mu

	grants *guest.Store // constant: the guests' grants
	// guests are the connections of guests, for the revocation of a
	// grant to reach. Guarded by mu.
	guests map[*clientConn]struct{}
	web    *web.Listener // guarded by mu: the web listener, once started
	// webOff is why the listener recorded in the home does not run, when
	// it does not. Guarded by mu.
	webOff string
	// expiries end what a grant's guest holds when the grant expires, by
	// grant id; nil once the service closed. Guarded by mu.
	expiries map[string]*time.Timer
	// lists are the subscriptions to the session list. Guarded by mu.
	lists map[*listWatch]struct{}
}

// ErrClosed is the cause of the service's context once it closed.
var ErrClosed = errors.New("the session service closed")

// New opens the catalog, adopts the workers an earlier host left, and
// returns the service, whose context derives from ctx; use it as a host's
// ComposeFunc through Compose.
func New(ctx context.Context, h *server.Server, cfg Config) (*Service, error) {
	if cfg.WorkerIdleGrace <= 0 {
		cfg.WorkerIdleGrace = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.WorkerLog == nil {
		cfg.WorkerLog = os.Stderr
	}
	if cfg.BacklogBytes <= 0 {
		cfg.BacklogBytes = DefaultBacklogBytes
	}
	if cfg.BacklogAge <= 0 {
		cfg.BacklogAge = DefaultBacklogAge
	}
	if cfg.WorkerLogFormat == "" {
		cfg.WorkerLogFormat = "text"
	}
	sup, err := supervisor.New(supervisor.Config{
		Home: cfg.Home, RuntimeDir: cfg.RuntimeDir, HostID: cfg.HostID,
		Command: cfg.WorkerCommand, Log: cfg.WorkerLog, Logger: cfg.Logger, Keys: cfg.WorkerKeys,
	})
	if err != nil {
		return nil, err
	}
	var s *Service
	cat, err := catalog.Open(cfg.Home, catalog.WithOnChange(func(id string) { s.catalogChanged(id) }))
	if err != nil {
		return nil, fmt.Errorf("opening the session catalog: %w", err)
	}
	grants, err := guest.Open(cfg.Home)
	if err != nil {
		return nil, err
	}
	s = &Service{lists: map[*listWatch]struct{}{}, cfg: cfg, host: h, sup: sup, cat: cat, log: cfg.Logger, workers: map[string]*worker{}, archived: map[string]bool{}, removing: map[string]int{}, detached: make(chan struct{}), grants: grants, guests: map[*clientConn]struct{}{}, expiries: map[string]*time.Timer{}}
	s.ctx, s.cancel = context.WithCancelCause(ctx)
	s.drain, s.drainNow = context.WithCancel(s.ctx)
	s.table = s.handlers()
	for _, g := range grants.List() {
		s.expireLater(g)
	}
	rec, ok, err := web.Recorded(cfg.Home)
	if err != nil {
		s.log.Warn("the web listener's record is unreadable: the host stays off the web until asked", "err", err)
		s.webOff = err.Error()
	}
	if ok {
		s.wg.Go(func() { s.resumeWeb(rec) })
	}
	s.adoptAll()
	return s, nil
}

// Compose returns a server.ComposeFunc building the service.
func Compose(cfg Config) server.ComposeFunc {
	return func(ctx context.Context, h *server.Server) (server.Composition, error) {
		return New(ctx, h, cfg)
	}
}

// Handlers implements server.Composition.
func (s *Service) Handlers() server.Table { return s.table }

// Busy keeps the host while any worker lives.
func (s *Service) Busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.workers) > 0
}

// BeginDrain closes every subscription as host_draining and stops every
// worker: a running turn is recorded as interrupted.
func (s *Service) BeginDrain() {
	workers := s.stopStarting()
	s.endLists(protocol.ClosedHostDraining)
	var ended []*subscription
	for _, w := range workers {
		ended = append(ended, w.endSubscriptions(protocol.ClosedHostDraining)...)
	}
	awaitEnds(ended)
	var stops sync.WaitGroup
	for _, w := range workers {
		stops.Go(w.stop)
	}
	stops.Wait()
}

// stopStarting makes the host start no more workers, nor take web
// connections, and returns the workers that run.
func (s *Service) stopStarting() []*worker {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draining = true
	s.drainNow()
	if s.web != nil {
		// As the host's socket: no connection comes once the host drains.
		s.web.StopAccepting()
	}
	workers := make([]*worker, 0, len(s.workers))
	for _, w := range s.workers {
		workers = append(workers, w)
	}
	return workers
}

// Close cancels the service's context, and waits for the workers, their
// streams and deliveries to end; a host handing off lets go of its
// workers instead of stopping them.
func (s *Service) Close(ctx context.Context) error {
	if s.handingOff.Load() {
		close(s.detached)
	}
	s.cancel(ErrClosed)
	s.closeWeb()
	if !s.handingOff.Load() {
		s.BeginDrain()
	}
	s.wg.Wait()
	s.sup.Wait()
	return nil
}

// AttachConnection implements server.ConnectionAttacher: it tracks the
// subscriptions each client connection holds.
func (s *Service) AttachConnection(id server.Identity, out *server.OutboundWriter) server.Attachment {
	c := &clientConn{s: s, id: id, out: out, subs: map[string]*subscription{}, lists: map[string]*listWatch{}, turn: make(chan struct{}, 1), controllers: map[string]controllerHeld{}}
	if id.Principal.Kind == protocol.PrincipalGuest {
		s.mu.Lock()
		s.guests[c] = struct{}{}
		s.mu.Unlock()
	}
	return c
}

// ReportStatus adds the model providers to host.status.
func (s *Service) ReportStatus(st *protocol.HostStatus) {
	st.Providers = s.cfg.Models.Providers()
	if l := s.webListener(); l != nil {
		info := l.Info()
		st.Web = &info
	}
	s.mu.Lock()
	st.WebOff = s.webOff
	s.mu.Unlock()
}

// ReportDiagnostics adds the counts of the session fan-out's work to
// host.diagnostics.query.
func (s *Service) ReportDiagnostics(res *protocol.DiagnosticsQueryResult) {
	res.Fanout = s.counters.snapshot()
}

// status is the runtime status of a session the host knows of.
func (s *Service) status(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.workers[id]; ok && w.running() {
		return protocol.SessionRunning
	}
	return protocol.SessionIdle
}

// resolve finds the session a selector names, mapping catalog errors to
// protocol errors.
func (s *Service) resolve(selector string) (catalog.Header, error) {
	h, err := s.cat.Resolve(selector)
	if err != nil {
		return catalog.Header{}, catalogError(err)
	}
	if h.Damaged {
		return catalog.Header{}, protocol.Errorf(protocol.CodeInternalFailure, "session %s is damaged: %s", h.ID, h.Damage)
	}
	return h, nil
}

// resolveLive is resolve for mutations: an archived session refuses them.
func (s *Service) resolveLive(selector string) (catalog.Header, error) {
	h, err := s.resolve(selector)
	if err != nil {
		return h, err
	}
	if h.Archived {
		return h, protocol.Errorf(protocol.CodeSessionArchived, "session %s is archived", h.ID)
	}
	return h, nil
}

func catalogError(err error) error {
	var amb *catalog.AmbiguousError
	var dup *catalog.DuplicateError
	switch {
	case errors.As(err, &dup):
		return protocol.Errorf(protocol.CodeSessionAmbiguous, "%v", dup)
	case errors.As(err, &amb):
		ids := make([]string, len(amb.Candidates))
		for i, c := range amb.Candidates {
			ids[i] = fmt.Sprintf("%s (%s)", c.ID, c.Label())
		}
		return protocol.Errorf(protocol.CodeSessionAmbiguous, "session %q is ambiguous: %s", amb.Selector, strings.Join(ids, ", "))
	case errors.Is(err, catalog.ErrNotFound):
		return protocol.Errorf(protocol.CodeNotFound, "%v", err)
	case errors.Is(err, catalog.ErrArchived):
		return protocol.Errorf(protocol.CodeSessionArchived, "%v", err)
	case errors.Is(err, catalog.ErrDuplicate):
		return protocol.Errorf(protocol.CodeOperationConflict, "%v", err)
	}
	var inv *catalog.InvalidError
	if errors.As(err, &inv) || errors.Is(err, catalog.ErrInvalidModel) {
		return protocol.Errorf(protocol.CodeInvalidRequest, "%v", err)
	}
	return err
}

// forward runs op on the session's worker for caller, starting the
// worker when needed. A request the worker could not answer because it
// went away is asked again of its replacement when that is safe: a query,
// or a command never sent.
func forward[Out any](ctx context.Context, s *Service, h catalog.Header, caller *protocol.Caller, op string, in any) (Out, error) {
	for attempt := 0; ; attempt++ {
		var out Out
		w, err := s.ensureWorker(ctx, h)
		if err != nil {
			return out, err
		}
		err = w.conn.Call(ctx, caller, op, in, &out)
		if err == nil {
			w.learn(op, out)
		}
		w.release()
		var re *link.RemoteError
		if errors.As(err, &re) {
			return out, &protocol.Error{Code: re.Code, Message: re.Message}
		}
		var ie *link.InterruptedError
		if errors.As(err, &ie) {
			if attempt == 0 && askAgain(ctx, w, ie) {
				continue
			}
			if err := ctx.Err(); err != nil {
				return out, err
			}
			return out, protocol.Errorf(protocol.CodeInternalFailure, "the session's worker stopped answering: %s", w.exitCause(ctx))
		}
		return out, err
	}
}

// askAgain reports whether a request w could not answer may be asked of
// its replacement: it is safe to repeat (a query, or a command never sent)
// and w has exited, which it waits for.
func askAgain(ctx context.Context, w *worker, ie *link.InterruptedError) bool {
	return ie.Retryable && lostWith(ctx, w, ie)
}

// lostWith reports whether a request was cut off because w exited, which
// it waits for: whatever the request did in w ended with it.
func lostWith(ctx context.Context, w *worker, ie *link.InterruptedError) bool {
	if ie.Reason == link.ReasonTimeout {
		return false
	}
	select {
	case <-w.exited:
		return true
	case <-ctx.Done():
		return false
	}
}
