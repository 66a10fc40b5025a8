package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/agentd-dev/agentd/internal/redact"
	"github.com/agentd-dev/agentd/internal/transport"
	"github.com/agentd-dev/agentd/protocol"
)

// Admission is an admitted operation's hold on the host's accounting.
type Admission interface {
	// AcquireResidency marks the operation as keeping the host resident.
	AcquireResidency() (release func())
	// Finish settles the operation; called exactly once.
	Finish()
}

// Attachment is a composition's per-connection state, closed once when the
// connection ends; the connection waits for Close before it is gone.
type Attachment interface {
	Close(ctx context.Context) error
}

// ConnectionAttacher is implemented by compositions that keep per-connection
// state (subscriptions, controllers). AttachConnection is called once per
// connection, at its first request after the composition is ready.
type ConnectionAttacher interface {
	AttachConnection(id Identity, out *OutboundWriter) Attachment
}

// sessionConfig is what a connection session needs from its host. Tests
// build one directly to drive a session over a real socket.
type sessionConfig struct {
	transport *transport.Conn
	identity  Identity
	// base is the context handlers run under: cancelled when the host stops.
	base context.Context
	// resolve returns the handler for op at dispatch time, or the error to
	// answer with (host_not_ready, draining, operation_unavailable).
	resolve func(op protocol.Operation) (Handler, *protocol.Error)
	// authorize decides whether a call's caller may run its operation
	// (see Authorizer).
	authorize func(ctx context.Context, call *Call) error
	// attacher returns the composition's attacher once it is ready, or nil.
	attacher func() ConnectionAttacher
	// begin admits an operation into the host's accounting.
	begin func(ctx context.Context, call *Call) (Admission, error)
	// inline reports operations whose handlers never block, served on
	// the reader goroutine; nil serves every operation on its own.
	inline func(op protocol.Operation) bool
	// trustCaller accepts a request's caller: the peer is a host that
	// forwards operations for its clients.
	trustCaller bool
	diagnostic  func(kind, msg string)
	// reads is the budget the transport's reader reserves from, named in
	// the diagnostic of a connection that would pass it; nil when none.
	reads      *transport.Budget
	onTeardown func()
	logger     *slog.Logger
}

type slot int

const (
	domainSlot slot = iota
	statusSlot
)

// connSession serves one accepted connection after its handshake: it reads
// requests, admits them against the per-connection limits, runs each in its
// own goroutine, and writes responses through the connection's one
// OutboundWriter. It tears down exactly once.
type connSession struct {
	cfg    sessionConfig
	writer *OutboundWriter

	ctx         context.Context // cancelled with a cause at teardown
	cancel      context.CancelCauseFunc
	inputClosed chan struct{} // closed at clean read EOF

	ops      sync.WaitGroup // one per dispatched request
	pool     sync.WaitGroup // the goroutines serving requests
	tasks    chan func()    // hands a request to an idle pool goroutine
	teardown sync.Once
	torn     chan struct{} // closed at teardown

	lastSerial chan struct{} // reader goroutine only: tail of the serial lane

	// Lock order: attachMu before mu.
	attachMu sync.Mutex
	attached bool // guarded by attachMu

	mu         sync.Mutex
	inflight   map[string]struct{} // guarded by mu: active request ids
	domain     int                 // guarded by mu: domain requests in flight
	statusBusy bool                // guarded by mu: the reserved status slot
	attachment Attachment          // guarded by mu: set once
}

func newConnSession(cfg sessionConfig) *connSession {
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	if cfg.diagnostic == nil {
		cfg.diagnostic = func(string, string) {}
	}
	if cfg.onTeardown == nil {
		cfg.onTeardown = func() {}
	}
	if cfg.authorize == nil {
		cfg.authorize = func(_ context.Context, call *Call) error { return AuthorizeOwner(call) }
	}
	s := &connSession{
		cfg:         cfg,
		inputClosed: make(chan struct{}),
		torn:        make(chan struct{}),
		inflight:    make(map[string]struct{}),
		tasks:       make(chan func()),
	}
	s.ctx, s.cancel = context.WithCancelCause(cfg.base)
	s.writer = NewOutboundWriter(cfg.transport, s.writerFailed)
	return s
}

// run serves the connection until it ends and every goroutine it started
// has settled, its attachment included.
func (s *connSession) run() {
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case <-s.cfg.transport.Closed():
			s.tearDown(s.cfg.transport.Cause())
		case <-s.torn:
		}
	}()

	clean := s.readLoop()
	if clean {
		close(s.inputClosed)
		s.ops.Wait()
		s.writer.CloseAfterFlush()
		select {
		case <-s.writer.Done():
		case <-s.torn:
		}
		s.tearDown(nil)
	}
	s.ops.Wait()
	close(s.tasks)
	s.pool.Wait()
	<-s.writer.Done()
	<-watchDone

	s.mu.Lock()
	att := s.attachment
	s.mu.Unlock()
	if att != nil {
		if err := att.Close(context.WithoutCancel(s.ctx)); err != nil {
			s.cfg.logger.Warn("closing connection attachment", "connection", s.cfg.identity.ConnectionID, "err", err)
		}
	}
}

// tearDown closes the connection once: cancels handlers, aborts the
// transport, rejects queued frames.
func (s *connSession) tearDown(cause error) {
	s.teardown.Do(func() {
		if cause == nil {
			cause = errConnectionClosed
		}
		s.cancel(cause)
		close(s.torn)
		s.writer.Close()
		s.cfg.transport.Abort(cause)
		s.cfg.onTeardown()
	})
}

var errConnectionClosed = errors.New("connection closed")

// violation records a protocol violation and closes this connection only.
func (s *connSession) violation(format string, args ...any) {
	msg := fmt.Sprintf("connection %s closed: protocol violation: %s", s.cfg.identity.ConnectionID, fmt.Sprintf(format, args...))
	s.cfg.diagnostic(kindViolation, msg)
	s.tearDown(errors.New(msg))
}

// closeWith records why this connection is closed, as a diagnostic of
// kind, and closes it.
func (s *connSession) closeWith(kind string, err error) {
	msg := fmt.Sprintf("connection %s closed: %v", s.cfg.identity.ConnectionID, err)
	s.cfg.diagnostic(kind, msg)
	s.tearDown(errors.New(msg))
}

// readBudgetError says what of budget a connection refused with err was
// refused.
func readBudgetError(err error, budget *transport.Budget) error {
	if budget == nil {
		return err
	}
	return fmt.Errorf("%w (%d of the host's %d bytes for partly read messages held)", err, budget.Held(), budget.Limit())
}

func (s *connSession) writerFailed(err error) {
	var qerr *QueueError
	if errors.As(err, &qerr) {
		s.cfg.diagnostic(kindSlowClient, fmt.Sprintf("connection %s closed: client is not reading: %v", s.cfg.identity.ConnectionID, err))
	}
	s.tearDown(err)
}

// readLoop reads and dispatches requests. It reports whether the client
// ended its input cleanly (read EOF) rather than the connection failing.
func (s *connSession) readLoop() (clean bool) {
	defer s.cfg.transport.ReleaseReader()
	for {
		line, err := s.cfg.transport.Read()
		if err != nil {
			switch {
			case errors.Is(err, io.EOF) && s.ctx.Err() == nil:
				return true
			case errors.Is(err, io.EOF):
				// The host stopped while the client was leaving.
				s.tearDown(context.Cause(s.ctx))
			case errors.Is(err, transport.ErrTooLarge):
				s.violation("%v", err)
			case errors.Is(err, transport.ErrMessageTimeout):
				s.closeWith(kindStalled, err)
			case errors.Is(err, transport.ErrOverBudget):
				s.closeWith(kindReadBudget, readBudgetError(err, s.cfg.reads))
			default:
				s.tearDown(err)
			}
			return false
		}
		frame, err := protocol.DecodeClientFrame(line)
		if err != nil {
			s.violation("%v", err)
			return false
		}
		if frame.Hello != nil {
			s.violation("a second hello")
			return false
		}
		if !s.dispatch(frame.Request) {
			return false
		}
	}
}

// dispatch admits req against the connection's limits and starts it.
func (s *connSession) dispatch(req *protocol.Request) bool {
	op, ok := protocol.Lookup(req.Operation)
	if !ok {
		s.respond(req.RequestID, req.Operation, nil,
			protocol.Errorf(protocol.CodeInvalidRequest, "unknown operation %q", req.Operation))
		return true
	}
	// Decoding here, on the reader's already grown stack, spares each
	// request's goroutine a stack copy; a bad input is answered at once.
	input := op.NewInput()
	if err := protocol.DecodeInput(req.Input, input); err != nil {
		s.respond(req.RequestID, req.Operation, nil, &protocol.Error{Code: protocol.CodeInvalidRequest, Message: err.Error()})
		return true
	}
	caller := s.cfg.identity.caller()
	if req.Caller != nil {
		if !s.cfg.trustCaller {
			s.violation(`field "caller": only a host forwarding to a worker may name one`)
			return false
		}
		caller = *req.Caller
	}
	s.mu.Lock()
	if _, dup := s.inflight[req.RequestID]; dup {
		s.mu.Unlock()
		s.violation("request id %q is already active", req.RequestID)
		return false
	}
	sl := domainSlot
	switch {
	case !op.Domain() && !s.statusBusy:
		sl = statusSlot
		s.statusBusy = true
	case s.domain >= protocol.MaxInFlightDomainRequests:
		s.mu.Unlock()
		s.violation("more than %d domain requests in flight", protocol.MaxInFlightDomainRequests)
		return false
	default:
		s.domain++
	}
	s.inflight[req.RequestID] = struct{}{}
	s.mu.Unlock()

	call := &Call{
		Operation:   op,
		RequestID:   req.RequestID,
		Input:       req.Input,
		Identity:    s.cfg.identity,
		Caller:      caller,
		InputClosed: s.inputClosed,
		input:       input,
	}
	var prev, done chan struct{}
	if op.Serial {
		prev, done = s.lastSerial, make(chan struct{})
		s.lastSerial = done
	}
	s.ops.Add(1)
	if s.cfg.inline != nil && s.cfg.inline(op) {
		// Quick and never blocking: answered on the reader, no hand-over.
		s.serve(call, sl, prev, done)
		return true
	}
	s.spawn(func() { s.serve(call, sl, prev, done) })
	return true
}

// spawn runs f on an idle goroutine of the connection, or a new one. The
// goroutines stay until the connection ends, so their stacks, once grown,
// serve later requests without growing again.
func (s *connSession) spawn(f func()) {
	select {
	case s.tasks <- f:
	default:
		s.pool.Go(func() {
			f()
			for f := range s.tasks {
				f()
			}
		})
	}
}

// attach returns what the composition attached to this connection,
// attaching the connection's identity the first time it is asked once the
// composition is ready.
func (s *connSession) attach() Attachment {
	s.attachMu.Lock()
	defer s.attachMu.Unlock()
	if !s.attached && s.cfg.attacher != nil {
		if a := s.cfg.attacher(); a != nil {
			s.attached = true
			att := a.AttachConnection(s.cfg.identity, s.writer)
			s.mu.Lock()
			s.attachment = att
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attachment
}

func (s *connSession) release(requestID string, sl slot) {
	s.mu.Lock()
	delete(s.inflight, requestID)
	if sl == statusSlot {
		s.statusBusy = false
	} else {
		s.domain--
	}
	s.mu.Unlock()
}

// serve admits, runs and answers one call.
func (s *connSession) serve(call *Call, sl slot, prev, done chan struct{}) {
	defer s.ops.Done()
	if done != nil {
		defer close(done)
	}
	if prev != nil {
		select {
		case <-prev:
		case <-s.torn:
		}
	}
	adm, err := s.cfg.begin(s.ctx, call)
	if err != nil {
		s.release(call.RequestID, sl)
		if s.ctx.Err() == nil {
			s.cfg.diagnostic(kindConnection, redact.String(fmt.Sprintf("connection session failed: %s: %v", s.cfg.identity.ConnectionID, err)))
			s.tearDown(err)
		}
		return
	}
	defer adm.Finish()
	call.op = adm
	if s.ctx.Err() != nil {
		// Torn down while admission was pending: the handler never runs.
		s.release(call.RequestID, sl)
		return
	}
	call.attachment = s.attach()
	result, perr := s.invoke(call)
	s.release(call.RequestID, sl)
	s.respond(call.RequestID, call.Operation.Name, result, perr)
}

// invoke resolves and runs call's handler, encoding its result.
func (s *connSession) invoke(call *Call) (result []byte, perr *protocol.Error) {
	h, perr := s.cfg.resolve(call.Operation)
	if perr != nil {
		return nil, perr
	}
	defer func() {
		if r := recover(); r != nil {
			s.cfg.diagnostic(kindOperation, redact.String(fmt.Sprintf("%s handler panicked: %v", call.Operation.Name, r)))
			result, perr = nil, protocol.Errorf(protocol.CodeInternalFailure, "%s failed", call.Operation.Name)
		}
	}()
	v, err := s.runChecked(h, call)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) && pe.Code.Valid() {
			return nil, pe
		}
		s.cfg.diagnostic(kindOperation, redact.String(fmt.Sprintf("%s failed: %v", call.Operation.Name, err)))
		return nil, protocol.Errorf(protocol.CodeInternalFailure, "%s failed", call.Operation.Name)
	}
	if raw, ok := v.(json.RawMessage); ok {
		return raw, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		s.cfg.diagnostic(kindOperation, fmt.Sprintf("%s result not encodable: %v", call.Operation.Name, err))
		return nil, protocol.Errorf(protocol.CodeInternalFailure, "%s failed", call.Operation.Name)
	}
	return b, nil
}

// runChecked checks that call's caller may run its operation, then runs
// h: every operation passes the one check, whatever its handler.
func (s *connSession) runChecked(h Handler, call *Call) (any, error) {
	if err := s.cfg.authorize(s.ctx, call); err != nil {
		return nil, err
	}
	return h(s.ctx, call)
}

// respond queues a response; a closed writer means the connection is
// already going away and the response has no one to reach.
func (s *connSession) respond(requestID, operation string, result []byte, perr *protocol.Error) {
	msg := encodeResponse(requestID, operation, result, perr)
	if len(msg) > protocol.MaxMessageBytes {
		msg = encodeResponse(requestID, operation, nil,
			protocol.Errorf(protocol.CodeInternalFailure, "%s result exceeds %d bytes", operation, protocol.MaxMessageBytes))
	}
	s.writer.Respond(msg)
}

// encodeResponse writes a response frame without re-encoding its result.
func encodeResponse(requestID, operation string, result []byte, perr *protocol.Error) []byte {
	b := make([]byte, 0, 64+len(requestID)+len(operation)+len(result))
	b = append(b, `{"requestId":`...)
	b = appendString(b, requestID)
	b = append(b, `,"operation":`...)
	b = appendString(b, operation)
	if perr != nil {
		e, _ := json.Marshal(perr)
		b = append(b, `,"ok":false,"error":`...)
		b = append(b, e...)
	} else {
		b = append(b, `,"ok":true,"result":`...)
		b = append(b, result...)
	}
	return append(b, '}')
}

func appendString(b []byte, s string) []byte {
	simple := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			simple = false
			break
		}
	}
	if simple {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	q, _ := json.Marshal(s)
	return append(b, q...)
}
