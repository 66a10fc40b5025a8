// Package client is the public Go client of agentd: it finds hosts in a
// runtime directory, running ones only (it starts none), speaks
// the protocol over a host's unix socket, correlates responses, bounds
// requests in flight, and delivers host-pushed frames to watchers.
//
// An operation is named by its typed value in the protocol's table and run
// with Call, so its input and result are checked when the caller compiles:
//
//	s, err := client.Call(ctx, c, protocol.OpSessionGet, protocol.SessionRef{SessionID: id})
//
// It imports only the standard library and the protocol package; every
// other agentd client (the CLI, the terminal UI, the web bridge, editors)
// is built on it.
//
// API maturity: experimental. Names may change until the protocol's first
// stable release.
package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentd-dev/agentd/protocol"
)

// Options configure a connection.
type Options struct {
	// ClientInstanceID names this client instance; random when empty.
	ClientInstanceID string
	// Surface names the kind of client (protocol.SurfaceCLI, …); "sdk"
	// when empty.
	Surface string
	// Dial, when set, opens the connection instead of the unix socket at
	// the endpoint: a WebSocket to the host's web listener, say, as a
	// net.Conn carrying its text messages. The endpoint then only names
	// the host in errors.
	Dial func(ctx context.Context) (net.Conn, error)
	// Pipeline, when set, is called by Dial with the connection as soon
	// as its hello is written, before the host has answered it: requests
	// it starts (on goroutines of its own) go out behind the hello rather
	// than a round trip later. They fail with the handshake's error when
	// the host does not accept the connection; Accepted is set only once
	// Dial returns. A caller that dials again after a failed handshake
	// (activation does) calls Pipeline again, with the new connection.
	Pipeline func(*Conn)
}

// Interruption reasons.
const (
	ReasonConnectionLost = "connection_lost"
	ReasonTimeout        = "timeout"
	ReasonHostDraining   = "host_draining"
	ReasonHostReplaced   = "host_replaced"
)

// InterruptedError is returned for a request that was cut off before its
// response arrived.
type InterruptedError struct {
	Operation string
	RequestID string
	// Mode is the operation's mode: a query is always safe to retry.
	Mode protocol.Mode
	// Dispatched reports whether the request reached the connection's
	// socket, some of it at least: a dispatched command's outcome is
	// unknown. A request whose write failed before any of it was sent
	// was not dispatched.
	Dispatched bool
	// Reason is ReasonConnectionLost, ReasonTimeout, ReasonHostDraining or
	// ReasonHostReplaced (a newer host took the home over: dial again).
	Reason string
	// Retryable reports whether retrying cannot run the operation twice.
	Retryable bool
	Err       error
}

func (e *InterruptedError) Error() string {
	why := "the connection to the host was lost"
	switch e.Reason {
	case ReasonTimeout:
		why = "no answer came in time"
	case ReasonHostDraining:
		why = "the host is shutting down"
	case ReasonHostReplaced:
		why = "the host was replaced by a newer one"
	}
	outcome := "before the request was sent"
	if e.Dispatched {
		outcome = "before the host answered"
		if e.Mode == protocol.Command {
			outcome += ", so whether it took effect is unknown"
		}
	}
	return fmt.Sprintf("%s %s: %v", why, outcome, e.Err)
}

func (e *InterruptedError) Unwrap() error { return e.Err }

// Sentinels for the protocol's error codes: errors.Is(err, client.ErrNotFound).
var (
	ErrInvalidRequest       = errors.New("invalid request")
	ErrNotFound             = errors.New("not found")
	ErrSessionArchived      = errors.New("session archived")
	ErrSessionAmbiguous     = errors.New("session ambiguous")
	ErrOperationConflict    = errors.New("operation conflict")
	ErrOperationUnavailable = errors.New("operation unavailable")
	ErrHostNotReady         = errors.New("host not ready")
	ErrUnauthorized         = errors.New("unauthorized")
	ErrDraining             = errors.New("host draining")
	ErrInternalFailure      = errors.New("internal failure")
)

var sentinels = map[protocol.Code]error{
	protocol.CodeInvalidRequest:       ErrInvalidRequest,
	protocol.CodeNotFound:             ErrNotFound,
	protocol.CodeSessionArchived:      ErrSessionArchived,
	protocol.CodeSessionAmbiguous:     ErrSessionAmbiguous,
	protocol.CodeOperationConflict:    ErrOperationConflict,
	protocol.CodeOperationUnavailable: ErrOperationUnavailable,
	protocol.CodeHostNotReady:         ErrHostNotReady,
	protocol.CodeUnauthorized:         ErrUnauthorized,
	protocol.CodeDraining:             ErrDraining,
	protocol.CodeInternalFailure:      ErrInternalFailure,
}

// RemoteError is a failed response. errors.Is matches it against the
// sentinel of its code.
type RemoteError struct {
	Operation string
	Code      protocol.Code
	Message   string
}

// Error returns the host's message, which is written for a person; the
// operation's name stays in Operation, for programs and logs.
func (e *RemoteError) Error() string { return e.Message }

// Is reports whether target is the sentinel of e's code.
func (e *RemoteError) Is(target error) bool { return sentinels[e.Code] == target }

// IncompatibleError is returned by Dial when the host refuses the client's
// protocol or compatibility epoch.
type IncompatibleError struct {
	Endpoint string
	protocol.Incompatible
}

func (e *IncompatibleError) Error() string {
	return fmt.Sprintf("host at %s is incompatible: %s", e.Endpoint, e.Reason)
}

// RefusedError is returned by Dial when the host serves its maximum of
// connections already. A later Dial may find a slot freed.
type RefusedError struct {
	Endpoint string
	protocol.Refused
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("host at %s refused the connection: the host serves its maximum of %d connections", e.Endpoint, e.MaxConnections)
}

// ErrClosed is returned for requests on a closed connection.
var ErrClosed = errors.New("connection closed")

type pending struct {
	op     protocol.Operation
	domain bool
	done   chan protocol.Response // buffered 1
	// answered, if set, is called with the response by the reader before
	// it reads the frame after it.
	answered func(protocol.Response)
}

// Conn is a connection to a host. It is safe for concurrent use.
type Conn struct {
	// Its lifecycle (done, err, fail, Close) and its request slots are
	// repeated in the host's own connection to its workers on purpose:
	// this package imports the protocol package alone, so that a program
	// built on it depends on the contract and nothing of the host.

	nc       net.Conn
	endpoint string
	accepted protocol.Accepted // constant after Dial

	domain chan struct{} // semaphore: ClientInFlightDomainRequests
	status chan struct{} // semaphore: the reserved status slot
	nextID atomic.Uint64

	wmu     sync.Mutex // serializes writes
	w       *bufio.Writer
	queued  int64        // guarded by wmu: the bytes of requests handed to w
	writers atomic.Int32 // requests writing or waiting to write
	// sent counts the bytes that reached the socket; broken is set once
	// a write to it failed, after which w sends nothing more, so sent is
	// final. Together they tell whether a request was dispatched.
	sent   atomic.Int64
	broken atomic.Bool
	// handshaking is set while Dial reads the host's answer to the hello:
	// a request pipelined behind it that fails leaves the socket open, so
	// that the answer (a refusal, say) is read all the same.
	handshaking atomic.Bool

	mu       sync.Mutex
	pending  map[string]*pending // guarded by mu
	watchers map[string]*Watcher // guarded by mu
	err      error               // guarded by mu: why the connection ended
	draining bool                // guarded by mu: the host said it is draining
	replaced bool                // guarded by mu: the host said it hands over to a newer one

	done chan struct{} // closed when the reader has stopped
}

// dialTimeout bounds Dial when its context has no deadline.
const dialTimeout = 10 * time.Second

// Dial connects to the host listening at endpoint and runs the handshake.
// A host too busy to take the connection at once (its queue of connections
// full) is tried again until ctx ends; without a deadline on ctx, Dial
// gives up after 10s.
func Dial(ctx context.Context, endpoint string, opts Options) (*Conn, error) {
	return dial(ctx, endpoint, opts, protocol.CompositionInteractive)
}

// dial is Dial naming composition in the hello.
func dial(ctx context.Context, endpoint string, opts Options, composition string) (*Conn, error) {
	if opts.ClientInstanceID == "" {
		opts.ClientInstanceID = randomID()
	}
	if opts.Surface == "" {
		opts.Surface = protocol.SurfaceSDK
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dialTimeout)
		defer cancel()
	}
	dial := opts.Dial
	if dial == nil {
		dial = func(ctx context.Context) (net.Conn, error) { return dialUnix(ctx, endpoint) }
	}
	nc, err := dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting to agentd host at %s: %w", endpoint, err)
	}
	deadline, _ := ctx.Deadline()
	nc.SetDeadline(deadline)
	hello, _ := json.Marshal(protocol.Hello{
		Kind: protocol.KindHello, ClientInstanceID: opts.ClientInstanceID,
		ProtocolMin: protocol.ProtocolVersion, ProtocolMax: protocol.ProtocolVersion,
		CompatibilityEpoch: protocol.CompatibilityEpoch,
		CompositionID:      composition, Surface: opts.Surface,
	})
	c := &Conn{
		nc:       nc,
		endpoint: endpoint,
		domain:   make(chan struct{}, protocol.ClientInFlightDomainRequests),
		status:   make(chan struct{}, 1),
		pending:  make(map[string]*pending),
		watchers: make(map[string]*Watcher),
		done:     make(chan struct{}),
	}
	c.w = bufio.NewWriterSize(sentCounter{c}, 32<<10)
	r := protocol.NewLineReader(nc)
	// A host that refuses the connection answers before reading the hello
	// and closes, so the hello may fail to go; its answer is read all the
	// same. The hello goes first, under the writers' lock, so that no
	// pipelined request can precede it.
	c.handshaking.Store(true)
	c.wmu.Lock()
	hello = append(hello, '\n')
	c.queued = int64(len(hello))
	_, werr := c.w.Write(hello)
	if werr == nil {
		werr = c.w.Flush()
	}
	c.wmu.Unlock()
	if opts.Pipeline != nil && werr == nil {
		opts.Pipeline(c)
	}
	accepted, err := handshakeAnswer(r, endpoint)
	c.handshaking.Store(false)
	if werr != nil && (err == nil || !isAnswer(err)) {
		err = fmt.Errorf("handshake with %s: %w", endpoint, werr)
	}
	if ferr := c.Err(); err == nil && ferr != nil {
		// A pipelined request's write failed: the connection broke.
		err = fmt.Errorf("handshake with %s: %w", endpoint, ferr)
	}
	if err != nil {
		// Requests pipelined behind the hello fail with its answer.
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		c.end(err)
		return nil, err
	}
	c.accepted = accepted
	nc.SetDeadline(time.Time{})
	go c.readLoop(r)
	return c, nil
}

// handshakeAnswer reads the host's answer to the hello from r: the
// connection accepted, or why not (*IncompatibleError, *RefusedError,
// another error for a connection that ended or a frame of the wrong
// kind).
func handshakeAnswer(r *protocol.LineReader, endpoint string) (protocol.Accepted, error) {
	var accepted protocol.Accepted
	line, err := r.Next()
	if err != nil {
		return accepted, fmt.Errorf("handshake with %s: %w", endpoint, err)
	}
	var head struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return accepted, fmt.Errorf("handshake with %s: %w", endpoint, err)
	}
	switch head.Kind {
	case protocol.KindAccepted:
	case protocol.KindIncompatible:
		ie := &IncompatibleError{Endpoint: endpoint}
		json.Unmarshal(line, &ie.Incompatible)
		return accepted, ie
	case protocol.KindRefused:
		re := &RefusedError{Endpoint: endpoint}
		json.Unmarshal(line, &re.Refused)
		return accepted, re
	default:
		return accepted, fmt.Errorf("handshake with %s: unexpected frame %q", endpoint, head.Kind)
	}
	if err := json.Unmarshal(line, &accepted); err != nil {
		return accepted, fmt.Errorf("handshake with %s: %w", endpoint, err)
	}
	return accepted, nil
}

// isAnswer reports whether err is the host's own answer to a hello.
func isAnswer(err error) bool {
	var (
		inc *IncompatibleError
		ref *RefusedError
	)
	return errors.As(err, &inc) || errors.As(err, &ref)
}

func randomID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Accepted returns the host's answer to the handshake, once Dial has
// returned.
func (c *Conn) Accepted() protocol.Accepted { return c.accepted }

// Endpoint returns the socket the connection is on.
func (c *Conn) Endpoint() string { return c.endpoint }

// Done is closed once the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended, or nil while it is open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection; requests in flight fail with *InterruptedError.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	<-c.done
	return nil
}

func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	// Set before handshaking is read: Dial, once it has cleared
	// handshaking, finds the error and ends the connection itself.
	if !c.handshaking.Load() {
		c.nc.Close()
	}
}

// Call runs operation o with in and returns its result. o names the
// operation with its input and result types (protocol.OpSessionGet, say),
// so a call of the wrong shape does not compile. A failed response is a
// *RemoteError; a request cut off is an *InterruptedError.
func Call[In, Out any](ctx context.Context, c *Conn, o protocol.Op[In, Out], in In) (Out, error) {
	return call(ctx, c, o, in, nil, nil)
}

// call is Call with answered, if set, called with the response by the
// connection's reader before it reads the next frame, and files, if set,
// passed beside the request's first byte (SCM_RIGHTS).
func call[In, Out any](ctx context.Context, c *Conn, o protocol.Op[In, Out], in In, answered func(protocol.Response), files []*os.File) (Out, error) {
	var out Out
	op, ok := protocol.Lookup(string(o))
	if !ok {
		return out, fmt.Errorf("operation %q is not in the protocol's table", string(o))
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return out, fmt.Errorf("%s: encoding input: %w", op.Name, err)
	}
	resp, err := c.roundTrip(ctx, op, raw, answered, files)
	if err != nil {
		return out, err
	}
	if !resp.OK {
		return out, &RemoteError{Operation: op.Name, Code: resp.Error.Code, Message: resp.Error.Message}
	}
	if err := json.Unmarshal(resp.Result, &out); err != nil {
		return out, fmt.Errorf("%s: decoding result: %w", op.Name, err)
	}
	return out, nil
}

// Status runs host.status through its reserved slot.
func (c *Conn) Status(ctx context.Context) (protocol.HostStatus, error) {
	return Call(ctx, c, protocol.OpHostStatus, protocol.HostStatusInput{})
}

func (c *Conn) interrupted(op protocol.Operation, id string, dispatched bool, reason string, err error) *InterruptedError {
	return &InterruptedError{
		Operation: op.Name, RequestID: id, Mode: op.Mode, Dispatched: dispatched,
		Reason: reason, Retryable: op.Mode == protocol.Query || !dispatched, Err: err,
	}
}

// roundTrip sends a request and waits for its response. files, when
// set, are passed beside the request's first byte (SCM_RIGHTS).
func (c *Conn) roundTrip(ctx context.Context, op protocol.Operation, input []byte, answered func(protocol.Response), files []*os.File) (protocol.Response, error) {
	sem := c.domain
	if !op.Domain() {
		sem = c.status
	}
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return protocol.Response{}, c.interrupted(op, "", false, ReasonTimeout, ctx.Err())
	case <-c.done:
		return protocol.Response{}, c.interrupted(op, "", false, c.lostReason(), c.Err())
	}
	id := "r" + strconv.FormatUint(c.nextID.Add(1), 36)
	p := &pending{op: op, domain: op.Domain(), done: make(chan protocol.Response, 1), answered: answered}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		<-sem
		return protocol.Response{}, c.interrupted(op, id, false, c.lostReason(), err)
	}
	c.pending[id] = p
	c.mu.Unlock()

	frame := make([]byte, 0, 48+len(id)+len(op.Name)+len(input))
	frame = append(frame, `{"requestId":"`...)
	frame = append(frame, id...)
	frame = append(frame, `","operation":"`...)
	frame = append(frame, op.Name...)
	frame = append(frame, `","input":`...)
	frame = append(frame, input...)
	frame = append(frame, "}\n"...)
	if len(frame)-1 > protocol.MaxMessageBytes {
		c.forget(id)
		return protocol.Response{}, fmt.Errorf("%s: request of %d bytes exceeds the %d byte limit", op.Name, len(frame)-1, protocol.MaxMessageBytes)
	}
	// The last of several concurrent writers flushes for them all.
	c.writers.Add(1)
	c.wmu.Lock()
	at := c.queued // where the frame starts in what the connection sends
	c.queued += int64(len(frame))
	var err error
	if files != nil {
		err = c.writeWithFiles(frame, files)
		c.writers.Add(-1)
	} else {
		_, err = c.w.Write(frame)
		if c.writers.Add(-1) == 0 && err == nil {
			err = c.w.Flush()
		}
	}
	if err != nil {
		c.broken.Store(true)
	}
	c.wmu.Unlock()
	if err != nil {
		c.fail(err)
		c.forget(id)
		return protocol.Response{}, c.interrupted(op, id, c.dispatched(at), c.lostReason(), err)
	}

	select {
	case resp := <-p.done:
		return resp, nil
	case <-ctx.Done():
		// The entry stays pending: its slot is the host's until the
		// response arrives or the connection ends.
		return protocol.Response{}, c.interrupted(op, id, c.dispatched(at), ReasonTimeout, ctx.Err())
	case <-c.done:
		select {
		case resp := <-p.done:
			return resp, nil
		default:
		}
		return protocol.Response{}, c.interrupted(op, id, c.dispatched(at), c.lostReason(), c.Err())
	}
}

// writeWithFiles writes frame with files passed beside its first byte,
// after what the buffer holds. Called with wmu held.
func (c *Conn) writeWithFiles(frame []byte, files []*os.File) error {
	uc, ok := c.nc.(*net.UnixConn)
	if !ok {
		return errors.New("descriptors are passed on a Unix socket only")
	}
	if err := c.w.Flush(); err != nil {
		return err
	}
	fds := make([]int, len(files))
	for i, f := range files {
		rc, err := f.SyscallConn()
		if err != nil {
			return err
		}
		// The descriptor as it is, its blocking mode untouched (Fd
		// would change it).
		rc.Control(func(fd uintptr) { fds[i] = int(fd) })
	}
	n, _, err := uc.WriteMsgUnix(frame, syscall.UnixRights(fds...), nil)
	c.sent.Add(int64(n))
	if err == nil && n < len(frame) {
		_, err = sentCounter{c}.Write(frame[n:])
	}
	// Sent: the files are the peer's too from here on.
	for _, f := range files {
		runtime.KeepAlive(f)
	}
	return err
}

// dispatched reports whether a request whose frame starts at byte at of
// what the connection sends may have reached the host: unless writing
// failed before any of its bytes reached the socket, it may have, or may
// still (another request's flush carries it).
func (c *Conn) dispatched(at int64) bool {
	if !c.broken.Load() {
		return true
	}
	return c.sent.Load() > at
}

// sentCounter is the socket as the connection's buffered writer sees it:
// it counts the bytes that reached it.
type sentCounter struct{ c *Conn }

func (s sentCounter) Write(b []byte) (int, error) {
	n, err := s.c.nc.Write(b)
	s.c.sent.Add(int64(n))
	return n, err
}

// forget drops a pending request that was never answered and frees its slot.
func (c *Conn) forget(id string) {
	c.mu.Lock()
	p, ok := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ok {
		c.releaseSlot(p)
	}
}

func (c *Conn) releaseSlot(p *pending) {
	if p.domain {
		<-c.domain
	} else {
		<-c.status
	}
}

func (c *Conn) lostReason() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.replaced: // a host handing over drains too
		return ReasonHostReplaced
	case c.draining:
		return ReasonHostDraining
	}
	return ReasonConnectionLost
}

func (c *Conn) readLoop(r *protocol.LineReader) {
	var err error
	for {
		var line []byte
		line, err = r.Next()
		if errors.Is(err, protocol.ErrMessageTooLarge) {
			err = fmt.Errorf("host sent an invalid frame: %w", err)
		}
		if err != nil {
			break
		}
		var f protocol.HostFrame
		f, err = protocol.DecodeHostFrame(line)
		if err != nil {
			err = fmt.Errorf("host sent an invalid frame: %w", err)
			break
		}
		if f.Response != nil {
			c.deliver(*f.Response)
			continue
		}
		c.push(f.Pushed, bytes.Clone(line))
	}
	// A line cut off by the end of the stream is the host going away
	// mid-frame, not a frame.
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		err = ErrClosed
	}
	c.end(err)
}

// end ends the connection for err, unless it ended already for another
// reason: the socket closed, requests in flight and watchers told, Done
// closed. Only the reader calls it, or Dial before there is one.
func (c *Conn) end(err error) {
	defer close(c.done)
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	cause := c.err
	pend := c.pending
	c.pending = map[string]*pending{}
	watchers := c.watchers
	c.watchers = map[string]*Watcher{}
	c.mu.Unlock()
	c.nc.Close()
	for _, p := range pend {
		c.releaseSlot(p)
	}
	for _, w := range watchers {
		w.end(cause)
	}
}

func (c *Conn) deliver(resp protocol.Response) {
	if !resp.OK && resp.Error != nil && resp.Error.Code == protocol.CodeDraining ||
		resp.OK && resp.Operation == string(protocol.OpHostShutdown) {
		c.mu.Lock()
		c.draining = true
		c.mu.Unlock()
	}
	c.mu.Lock()
	p, ok := c.pending[resp.RequestID]
	delete(c.pending, resp.RequestID)
	c.mu.Unlock()
	if !ok {
		return
	}
	if p.answered != nil {
		p.answered(resp)
	}
	c.releaseSlot(p)
	p.done <- resp
}
