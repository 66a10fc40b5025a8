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

// Admission is an admitted operation's hold on the server's accounting.
type Admission interface {
	// AcquireResidency marks the operation as keeping the server resident.
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

// connectionConfig is what a connection needs from its server. Tests
// build one directly to drive a connection over a real socket.
type connectionConfig struct {
	transport *transport.Conn
	identity  Identity
	// base is the context handlers run under: cancelled when the server stops.
	base context.Context
	// resolve returns the handler for op at dispatch time, or the error to
	// answer with (host_not_ready, draining, operation_unavailable).
	resolve func(op protocol.Operation) (Handler, *protocol.Error)
	// authorize decides whether a call's caller may run its operation
	// (see Authorizer).
	authorize func(ctx context.Context, call *Call) error
	// confirm, when set, decides once the handler has succeeded whether
	// the caller may still have its result (see Confirmer).
	confirm func(call *Call) error
	// attacher returns the composition's attacher once it is ready, or nil.
	attacher func() ConnectionAttacher
	// begin admits an operation into the server's accounting.
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
	// files holds the descriptors passed on the connection; nil when the
	// server takes none.
	files *filesConn
}

type slot int

const (
	domainSlot slot = iota
	statusSlot
)

// connection serves one accepted connection after its handshake: it reads
// requests, admits them against the per-connection limits, runs each in its
// own goroutine, and writes responses through the connection's one
// OutboundWriter. It tears down exactly once.
type connection struct {
	cfg    connectionConfig
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

func newConnection(cfg connectionConfig) *connection {
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
	c := &connection{
		cfg:         cfg,
		inputClosed: make(chan struct{}),
		torn:        make(chan struct{}),
		inflight:    make(map[string]struct{}),
		tasks:       make(chan func()),
	}
	c.ctx, c.cancel = context.WithCancelCause(cfg.base)
	c.writer = NewOutboundWriter(cfg.transport, c.writerFailed)
	return c
}

// run serves the connection until it ends and every goroutine it started
// has settled, its attachment included.
func (c *connection) run() {
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case <-c.cfg.transport.Closed():
			c.tearDown(c.cfg.transport.Cause())
		case <-c.torn:
		}
	}()

	clean := c.readLoop()
	if clean {
		close(c.inputClosed)
		c.ops.Wait()
		c.writer.CloseAfterFlush()
		select {
		case <-c.writer.Done():
		case <-c.torn:
		}
		c.tearDown(nil)
	}
	c.ops.Wait()
	close(c.tasks)
	c.pool.Wait()
	<-c.writer.Done()
	<-watchDone

	c.mu.Lock()
	att := c.attachment
	c.mu.Unlock()
	if att != nil {
		if err := att.Close(context.WithoutCancel(c.ctx)); err != nil {
			c.cfg.logger.Warn("closing connection attachment", "connection", c.cfg.identity.ConnectionID, "err", err)
		}
	}
}

// tearDown closes the connection once: cancels handlers, aborts the
// transport, rejects queued frames.
func (c *connection) tearDown(cause error) {
	c.teardown.Do(func() {
		if cause == nil {
			cause = errConnectionClosed
		}
		c.cancel(cause)
		close(c.torn)
		c.writer.Close()
		c.cfg.transport.Abort(cause)
		c.cfg.onTeardown()
	})
}

var errConnectionClosed = errors.New("connection closed")

// violation records a protocol violation and closes this connection only.
func (c *connection) violation(format string, args ...any) {
	msg := fmt.Sprintf("connection %s closed: protocol violation: %s", c.cfg.identity.ConnectionID, fmt.Sprintf(format, args...))
	c.cfg.diagnostic(kindViolation, msg)
	c.tearDown(errors.New(msg))
}

// closeWith records why this connection is closed, as a diagnostic of
// kind, and closes it.
func (c *connection) closeWith(kind string, err error) {
	msg := fmt.Sprintf("connection %s closed: %v", c.cfg.identity.ConnectionID, err)
	c.cfg.diagnostic(kind, msg)
	c.tearDown(errors.New(msg))
}

// readBudgetError says what of budget a connection refused with err was
// refused.
func readBudgetError(err error, budget *transport.Budget) error {
	if budget == nil {
		return err
	}
	return fmt.Errorf("%w (%d of the host's %d bytes for partly read messages held)", err, budget.Held(), budget.Limit())
}

func (c *connection) writerFailed(err error) {
	var qerr *QueueError
	if errors.As(err, &qerr) {
		c.cfg.diagnostic(kindSlowClient, fmt.Sprintf("connection %s closed: client is not reading: %v", c.cfg.identity.ConnectionID, err))
	}
	c.tearDown(err)
}

// readLoop reads and dispatches requests. It reports whether the client
// ended its input cleanly (read EOF) rather than the connection failing.
func (c *connection) readLoop() (clean bool) {
	defer c.cfg.transport.ReleaseReader()
	for {
		line, err := c.cfg.transport.Read()
		if err != nil {
			switch {
			case errors.Is(err, io.EOF) && c.ctx.Err() == nil:
				return true
			case errors.Is(err, io.EOF):
				// The host stopped while the client was leaving.
				c.tearDown(context.Cause(c.ctx))
			case errors.Is(err, transport.ErrTooLarge):
				c.violation("%v", err)
			case errors.Is(err, transport.ErrMessageTimeout):
				c.closeWith(kindStalled, err)
			case errors.Is(err, transport.ErrOverBudget):
				c.closeWith(kindReadBudget, readBudgetError(err, c.cfg.reads))
			default:
				c.tearDown(err)
			}
			return false
		}
		frame, err := protocol.DecodeClientFrame(line)
		if err != nil {
			c.violation("%v", err)
			return false
		}
		if frame.Hello != nil {
			c.violation("a second hello")
			return false
		}
		if !c.dispatch(frame.Request) {
			return false
		}
	}
}

// dispatch admits req against the connection's limits and starts it.
func (c *connection) dispatch(req *protocol.Request) bool {
	op, ok := protocol.Lookup(req.Operation)
	if !ok {
		c.respond(req.RequestID, req.Operation, nil,
			protocol.Errorf(protocol.CodeInvalidRequest, "unknown operation %q", req.Operation), nil)
		return true
	}
	// Decoding here, on the reader's already grown stack, spares each
	// request's goroutine a stack copy; a bad input is answered at once.
	input := op.NewInput()
	if err := protocol.DecodeInput(req.Input, input); err != nil {
		c.respond(req.RequestID, req.Operation, nil, &protocol.Error{Code: protocol.CodeInvalidRequest, Message: err.Error()}, nil)
		return true
	}
	caller := c.cfg.identity.caller()
	if req.Caller != nil {
		if !c.cfg.trustCaller {
			c.violation(`field "caller": only a host forwarding to a worker may name one`)
			return false
		}
		caller = *req.Caller
	}
	c.mu.Lock()
	if _, dup := c.inflight[req.RequestID]; dup {
		c.mu.Unlock()
		c.violation("request id %q is already active", req.RequestID)
		return false
	}
	sl := domainSlot
	switch {
	case !op.Domain() && !c.statusBusy:
		sl = statusSlot
		c.statusBusy = true
	case c.domain >= protocol.MaxInFlightDomainRequests:
		c.mu.Unlock()
		c.violation("more than %d domain requests in flight", protocol.MaxInFlightDomainRequests)
		return false
	default:
		c.domain++
	}
	c.inflight[req.RequestID] = struct{}{}
	c.mu.Unlock()

	call := &Call{
		Operation:   op,
		RequestID:   req.RequestID,
		Input:       req.Input,
		Identity:    c.cfg.identity,
		Caller:      caller,
		InputClosed: c.inputClosed,
		input:       input,
		files:       c.cfg.files,
	}
	var prev, done chan struct{}
	if op.Serial {
		prev, done = c.lastSerial, make(chan struct{})
		c.lastSerial = done
	}
	c.ops.Add(1)
	if c.cfg.inline != nil && c.cfg.inline(op) {
		// Quick and never blocking: answered on the reader, no hand-over.
		c.serve(call, sl, prev, done)
		return true
	}
	c.spawn(func() { c.serve(call, sl, prev, done) })
	return true
}

// spawn runs f on an idle goroutine of the connection, or a new one. The
// goroutines stay until the connection ends, so their stacks, once grown,
// serve later requests without growing again.
func (c *connection) spawn(f func()) {
	select {
	case c.tasks <- f:
	default:
		c.pool.Go(func() {
			f()
			for f := range c.tasks {
				f()
			}
		})
	}
}

// attach returns what the composition attached to this connection,
// attaching the connection's identity the first time it is asked once the
// composition is ready.
func (c *connection) attach() Attachment {
	c.attachMu.Lock()
	defer c.attachMu.Unlock()
	if !c.attached && c.cfg.attacher != nil {
		if a := c.cfg.attacher(); a != nil {
			c.attached = true
			att := a.AttachConnection(c.cfg.identity, c.writer)
			c.mu.Lock()
			c.attachment = att
			c.mu.Unlock()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attachment
}

func (c *connection) release(requestID string, sl slot) {
	c.mu.Lock()
	delete(c.inflight, requestID)
	if sl == statusSlot {
		c.statusBusy = false
	} else {
		c.domain--
	}
	c.mu.Unlock()
}

// serve admits, runs and answers one call.
func (c *connection) serve(call *Call, sl slot, prev, done chan struct{}) {
	defer c.ops.Done()
	if done != nil {
		defer close(done)
	}
	if prev != nil {
		select {
		case <-prev:
		case <-c.torn:
		}
	}
	adm, err := c.cfg.begin(c.ctx, call)
	if err != nil {
		c.release(call.RequestID, sl)
		if c.ctx.Err() == nil {
			c.cfg.diagnostic(kindConnection, redact.String(fmt.Sprintf("connection failed: %s: %v", c.cfg.identity.ConnectionID, err)))
			c.tearDown(err)
		}
		return
	}
	defer adm.Finish()
	call.op = adm
	if c.ctx.Err() != nil {
		// Torn down while admission was pending: the handler never runs.
		c.release(call.RequestID, sl)
		return
	}
	call.attachment = c.attach()
	result, perr := c.invoke(call)
	c.release(call.RequestID, sl)
	var then func()
	if perr == nil {
		then = call.afterResponse
	}
	c.respond(call.RequestID, call.Operation.Name, result, perr, then)
}

// invoke resolves and runs call's handler, encoding its result.
func (c *connection) invoke(call *Call) (result []byte, perr *protocol.Error) {
	h, perr := c.cfg.resolve(call.Operation)
	if perr != nil {
		return nil, perr
	}
	defer func() {
		if r := recover(); r != nil {
			c.cfg.diagnostic(kindOperation, redact.String(fmt.Sprintf("%s handler panicked: %v", call.Operation.Name, r)))
			result, perr = nil, protocol.Errorf(protocol.CodeInternalFailure, "%s failed", call.Operation.Name)
		}
	}()
	v, err := c.runChecked(h, call)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) && pe.Code.Valid() {
			return nil, pe
		}
		c.cfg.diagnostic(kindOperation, redact.String(fmt.Sprintf("%s failed: %v", call.Operation.Name, err)))
		return nil, protocol.Errorf(protocol.CodeInternalFailure, "%s failed", call.Operation.Name)
	}
	if raw, ok := v.(json.RawMessage); ok {
		return raw, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		c.cfg.diagnostic(kindOperation, fmt.Sprintf("%s result not encodable: %v", call.Operation.Name, err))
		return nil, protocol.Errorf(protocol.CodeInternalFailure, "%s failed", call.Operation.Name)
	}
	return b, nil
}

// runChecked checks that call's caller may run its operation, then runs
// h: every operation passes the one check, whatever its handler.
func (c *connection) runChecked(h Handler, call *Call) (any, error) {
	if err := c.cfg.authorize(c.ctx, call); err != nil {
		return nil, err
	}
	v, err := h(c.ctx, call)
	if err == nil && c.cfg.confirm != nil {
		if err := c.cfg.confirm(call); err != nil {
			return nil, err
		}
	}
	return v, err
}

// respond queues a response, with then called once it has been flushed;
// a closed writer means the connection is already going away and the
// response has no one to reach.
func (c *connection) respond(requestID, operation string, result []byte, perr *protocol.Error, then func()) {
	msg := encodeResponse(requestID, operation, result, perr)
	if len(msg) > protocol.MaxMessageBytes {
		msg = encodeResponse(requestID, operation, nil,
			protocol.Errorf(protocol.CodeInternalFailure, "%s result exceeds %d bytes", operation, protocol.MaxMessageBytes))
		then = nil
	}
	c.writer.Respond(msg, then)
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
