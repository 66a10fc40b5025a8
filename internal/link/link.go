// Package link is the host's own connection to a session's worker: it
// dials the worker's socket with the worker composition and the host
// surface (both defined here, the worker serving what the link asks
// for), runs requests for the clients the host forwards them for, and
// follows a subscription of the worker losslessly, in order.
//
// It is built on the protocol package's framing alone. It knows nothing
// of sessions, catalogs or the public client: there is no reconnection
// (a worker's connection that ends is its worker gone or handed over, and
// the host decides what follows), no activation, and nothing a client of
// the host needs. Whatever reaches a worker through it (a test, a bench)
// reaches it as its host does, and supersedes the host's connection.
package link

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd-dev/agentd/protocol"
)

// The two ends of the link name themselves in the handshake with these:
// the worker's server serves CompositionWorker, and trusts a connection
// of SurfaceHost to name the callers it forwards requests for. Neither is
// the client contract: no client of a host names them.
const (
	// CompositionWorker is what a session's worker serves to its host.
	CompositionWorker = "agentd.worker"
	// SurfaceHost is a host's connection to a session's worker: the
	// latest one to connect supersedes the earlier ones.
	SurfaceHost = "host"
)

// ErrClosed is the error of a link closed by its host, and of requests
// and streams on it; a link the worker ended fails with ErrLost.
var ErrClosed = errors.New("link to the worker closed")

// ErrLost is why a link ended when the worker's side of the connection
// went away: the worker exited, or was handed to another host.
var ErrLost = errors.New("the worker's connection ended")

// Reasons a request is interrupted.
const (
	// ReasonTimeout: the request's context ended first.
	ReasonTimeout = "timeout"
	// ReasonConnectionLost: the link ended first.
	ReasonConnectionLost = "connection_lost"
)

// InterruptedError is returned for a request cut off before its response
// arrived.
type InterruptedError struct {
	Operation string
	// Dispatched reports whether the request was written to the worker:
	// a dispatched command's outcome is unknown.
	Dispatched bool
	// Reason is ReasonTimeout or ReasonConnectionLost.
	Reason string
	// Retryable reports whether asking again cannot run the operation
	// twice: a query, or a request never sent.
	Retryable bool
	Err       error
}

func (e *InterruptedError) Error() string {
	why := "the worker's connection ended"
	if e.Reason == ReasonTimeout {
		why = "the worker did not answer in time"
	}
	when := "before the request was sent"
	if e.Dispatched {
		when = "before the worker answered"
	}
	return fmt.Sprintf("%s: %s %s: %v", e.Operation, why, when, e.Err)
}

func (e *InterruptedError) Unwrap() error { return e.Err }

// RemoteError is a failed response of the worker, with the protocol's
// code: the host passes it on to its client as it came.
type RemoteError struct {
	Operation string
	Code      protocol.Code
	Message   string
}

func (e *RemoteError) Error() string { return e.Message }

// Protocol returns the error as the wire carries it.
func (e *RemoteError) Protocol() *protocol.Error {
	return &protocol.Error{Code: e.Code, Message: e.Message}
}

// dialTimeout bounds Dial when its context has no deadline.
const dialTimeout = 10 * time.Second

// Conn is a link to one worker. It is safe for concurrent use.
type Conn struct {
	// Its lifecycle (done, err, fail, Close) and its request slots repeat
	// the public client's on purpose. The client imports the protocol
	// package alone, so that a program built on it depends on the
	// contract and nothing of the host; a multiplexer shared through
	// internal/transport could serve this side only, and one in protocol
	// would put the host's plumbing in the contract. The two sides differ
	// besides: a link forwards callers, holds its worker back while a
	// stream is full and lends its frames' buffers, and has no draining
	// or hand-off to tell a caller about.

	nc       net.Conn          // constant
	endpoint string            // constant
	instance string            // constant: the client instance it named in its hello
	accepted protocol.Accepted // constant after Dial

	// The slots of requests in flight, as the protocol allows a
	// connection: the domain requests, and one for host.status.
	domain, status chan struct{}
	nextID         atomic.Uint64

	wmu sync.Mutex // serializes writes to nc

	mu      sync.Mutex
	pending map[string]*pending // guarded by mu
	streams map[string]*Stream  // guarded by mu
	err     error               // guarded by mu: why the link ended

	closing chan struct{} // closed once the link is ending
	once    sync.Once     // closes closing
	done    chan struct{} // closed once the reader has stopped

	// buffers counts the pooled buffers the link holds: queued frames
	// and the frame each stream's reader has in hand.
	buffers atomic.Int64
}

type pending struct {
	slot chan struct{}          // the semaphore it holds a place of
	done chan protocol.Response // buffered 1
}

// Dial connects to the worker listening at endpoint as its host. Without
// a deadline on ctx it gives up after 10s.
func Dial(ctx context.Context, endpoint string) (*Conn, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dialTimeout)
		defer cancel()
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", endpoint)
	if err != nil {
		return nil, fmt.Errorf("connecting to the worker at %s: %w", endpoint, err)
	}
	id := make([]byte, 8)
	rand.Read(id)
	instance := "host-" + hex.EncodeToString(id)
	accepted, r, err := handshake(ctx, nc, instance)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("handshake with the worker at %s: %w", endpoint, err)
	}
	c := &Conn{
		nc: nc, endpoint: endpoint, instance: instance, accepted: accepted,
		domain:  make(chan struct{}, protocol.ClientInFlightDomainRequests),
		status:  make(chan struct{}, 1),
		pending: make(map[string]*pending),
		streams: make(map[string]*Stream),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	go c.readLoop(r)
	return c, nil
}

// handshake sends the host's hello, naming it the client instance, and
// reads the worker's answer.
func handshake(ctx context.Context, nc net.Conn, instance string) (protocol.Accepted, *protocol.LineReader, error) {
	deadline, _ := ctx.Deadline()
	nc.SetDeadline(deadline)
	defer nc.SetDeadline(time.Time{})
	hello, _ := json.Marshal(protocol.Hello{
		Kind: protocol.KindHello, ClientInstanceID: instance,
		ProtocolMin: protocol.ProtocolVersion, ProtocolMax: protocol.ProtocolVersion,
		CompatibilityEpoch: protocol.CompatibilityEpoch,
		CompositionID:      CompositionWorker, Surface: SurfaceHost,
	})
	if _, err := nc.Write(append(hello, '\n')); err != nil {
		return protocol.Accepted{}, nil, err
	}
	r := protocol.NewLineReader(nc)
	line, err := r.Next()
	if err != nil {
		return protocol.Accepted{}, nil, err
	}
	var accepted protocol.Accepted
	if err := json.Unmarshal(line, &accepted); err != nil {
		return protocol.Accepted{}, nil, err
	}
	if accepted.Kind != protocol.KindAccepted {
		return protocol.Accepted{}, nil, fmt.Errorf("the worker answered %s: %s", accepted.Kind, line)
	}
	return accepted, r, nil
}

// Accepted returns the worker's answer to the handshake.
func (c *Conn) Accepted() protocol.Accepted { return c.accepted }

// InstanceID returns the client instance the link named itself in its
// hello, unique to the link: the worker names the host it serves by it in
// its registration.
func (c *Conn) InstanceID() string { return c.instance }

// Endpoint returns the socket the link is on.
func (c *Conn) Endpoint() string { return c.endpoint }

// Done is closed once the link has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the link ended (ErrClosed, ErrLost or what broke it),
// or nil while it is open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the link and waits for its reader: requests in flight fail
// with *InterruptedError, streams with ErrClosed.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	<-c.done
	return nil
}

// fail ends the link with err, unless it ended already.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	c.once.Do(func() { close(c.closing) })
	c.nc.Close()
}

// Call runs o on the worker for the host itself and returns its result,
// o's types checked as the caller compiles. A failed response is a
// *RemoteError; a request cut off is an *InterruptedError.
func Call[In, Out any](ctx context.Context, c *Conn, o protocol.Op[In, Out], in In) (Out, error) {
	return CallFor(ctx, c, nil, o, in)
}

// CallFor is Call on behalf of caller, a client of the host (nil: for the
// host itself), whom the worker learns acted.
func CallFor[In, Out any](ctx context.Context, c *Conn, caller *protocol.Caller, o protocol.Op[In, Out], in In) (Out, error) {
	var out Out
	err := c.Call(ctx, caller, string(o), &in, &out)
	return out, err
}

// Call runs operation, named as the client the host forwards it for named
// it, on the worker for caller (nil: for the host itself) and decodes its
// result into result, a pointer, or nil to discard it. A failed response
// is a *RemoteError; a request cut off is an *InterruptedError.
func (c *Conn) Call(ctx context.Context, caller *protocol.Caller, operation string, input, result any) error {
	op, ok := protocol.Lookup(operation)
	if !ok {
		return fmt.Errorf("unknown operation %q", operation)
	}
	in := []byte("{}")
	if input != nil {
		var err error
		if in, err = json.Marshal(input); err != nil {
			return fmt.Errorf("%s: encoding input: %w", operation, err)
		}
	}
	resp, err := c.roundTrip(ctx, op, in, caller)
	if err != nil {
		return err
	}
	if !resp.OK {
		return &RemoteError{Operation: operation, Code: resp.Error.Code, Message: resp.Error.Message}
	}
	if result == nil {
		return nil
	}
	if raw, ok := result.(*json.RawMessage); ok && len(resp.Result) > 0 {
		// Passed on as it came (a transcript's page, to the host's
		// client): a copy of its own, and valid JSON, as its frame was
		// decoded whole; decoding it again would scan it twice more.
		*raw = resp.Result
		return nil
	}
	if err := json.Unmarshal(resp.Result, result); err != nil {
		return fmt.Errorf("%s: decoding result: %w", operation, err)
	}
	return nil
}

// Status runs host.status on the worker, through its own slot.
func (c *Conn) Status(ctx context.Context) (protocol.HostStatus, error) {
	return Call(ctx, c, protocol.OpHostStatus, protocol.HostStatusInput{})
}

func (c *Conn) interrupted(op protocol.Operation, dispatched bool, reason string, err error) *InterruptedError {
	return &InterruptedError{
		Operation: op.Name, Dispatched: dispatched, Reason: reason,
		Retryable: op.Mode == protocol.Query || !dispatched, Err: err,
	}
}

func (c *Conn) roundTrip(ctx context.Context, op protocol.Operation, input []byte, caller *protocol.Caller) (protocol.Response, error) {
	slot := c.domain
	if !op.Domain() {
		slot = c.status
	}
	select {
	case slot <- struct{}{}:
	case <-ctx.Done():
		return protocol.Response{}, c.interrupted(op, false, ReasonTimeout, ctx.Err())
	case <-c.closing:
		return protocol.Response{}, c.interrupted(op, false, ReasonConnectionLost, c.Err())
	}
	id := "r" + strconv.FormatUint(c.nextID.Add(1), 36)
	frame, err := encodeRequest(id, op.Name, input, caller)
	if err != nil {
		<-slot
		return protocol.Response{}, err
	}
	p := &pending{slot: slot, done: make(chan protocol.Response, 1)}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		<-slot
		return protocol.Response{}, c.interrupted(op, false, ReasonConnectionLost, err)
	}
	c.pending[id] = p
	c.mu.Unlock()

	c.wmu.Lock()
	n, err := c.nc.Write(frame)
	c.wmu.Unlock()
	if err != nil {
		c.fail(fmt.Errorf("writing to the worker: %w", err))
		c.forget(id)
		// A request none of whose bytes reached the socket was not sent:
		// the worker never saw it, whatever it is.
		return protocol.Response{}, c.interrupted(op, n > 0, ReasonConnectionLost, err)
	}
	select {
	case resp := <-p.done:
		return resp, nil
	case <-ctx.Done():
		// The slot stays taken until the response comes or the link
		// ends: the worker still counts the request as in flight.
		return protocol.Response{}, c.interrupted(op, true, ReasonTimeout, ctx.Err())
	case <-c.done:
		select {
		case resp := <-p.done:
			return resp, nil
		default:
		}
		return protocol.Response{}, c.interrupted(op, true, ReasonConnectionLost, c.Err())
	}
}

// encodeRequest is the request frame, its line ending included.
func encodeRequest(id, operation string, input []byte, caller *protocol.Caller) ([]byte, error) {
	var who []byte
	if caller != nil {
		var err error
		if who, err = json.Marshal(caller); err != nil {
			return nil, fmt.Errorf("%s: encoding caller: %w", operation, err)
		}
	}
	frame := make([]byte, 0, 64+len(id)+len(operation)+len(input)+len(who))
	frame = append(frame, `{"requestId":`...)
	frame = protocol.AppendJSONString(frame, id)
	frame = append(frame, `,"operation":`...)
	frame = protocol.AppendJSONString(frame, operation)
	frame = append(frame, `,"input":`...)
	frame = append(frame, input...)
	if who != nil {
		frame = append(frame, `,"caller":`...)
		frame = append(frame, who...)
	}
	frame = append(frame, "}\n"...)
	if len(frame)-1 > protocol.MaxMessageBytes {
		return nil, fmt.Errorf("%s: request of %d bytes exceeds the %d byte limit", operation, len(frame)-1, protocol.MaxMessageBytes)
	}
	return frame, nil
}

// forget drops a request that will not be answered and frees its slot.
func (c *Conn) forget(id string) {
	c.mu.Lock()
	p, ok := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ok {
		<-p.slot
	}
}

// readLoop reads the worker's frames until the link ends: responses go to
// their requests, pushed frames to their streams.
func (c *Conn) readLoop(r *protocol.LineReader) {
	defer close(c.done)
	var err error
	for {
		var line []byte
		if line, err = r.Next(); err != nil {
			break
		}
		var f protocol.HostFrame
		if f, err = protocol.DecodeHostFrame(line); err != nil {
			err = fmt.Errorf("the worker sent an invalid frame: %w", err)
			break
		}
		if f.Response != nil {
			c.deliver(*f.Response)
			continue
		}
		c.push(f.Pushed, line)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = ErrLost // a line cut off is the worker gone mid-frame
	}
	c.fail(err)
	c.mu.Lock()
	cause := c.err
	pend, streams := c.pending, c.streams
	c.pending, c.streams = map[string]*pending{}, map[string]*Stream{}
	c.mu.Unlock()
	for _, p := range pend {
		<-p.slot
	}
	for _, s := range streams {
		s.end(cause)
	}
}

func (c *Conn) deliver(resp protocol.Response) {
	c.mu.Lock()
	p, ok := c.pending[resp.RequestID]
	delete(c.pending, resp.RequestID)
	c.mu.Unlock()
	if ok {
		<-p.slot
		p.done <- resp
	}
}
