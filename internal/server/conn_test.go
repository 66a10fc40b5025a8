package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/transport"
	"github.com/agentd-dev/agentd/protocol"
)

const timeout = 30 * time.Second

// pair returns two framed ends of a real loopback TCP connection (TCP so a
// test can reset it).
func pair(t *testing.T) (cli, srv *transport.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		t.Fatal("accept failed")
	}
	cli, srv = transport.New(c), transport.New(s)
	t.Cleanup(func() { cli.Abort(nil); srv.Abort(nil) })
	return cli, srv
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(timeout):
		t.Fatalf("timed out waiting: %s", what)
	}
}

func send(t *testing.T, c *transport.Conn, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFrame(b); err != nil {
		t.Fatalf("write: %v", err)
	}
}

func request(id, op string, input any) map[string]any {
	return map[string]any{"requestId": id, "operation": op, "input": input}
}

func turnQuery(id, turn string) map[string]any {
	return request(id, string(protocol.OpTurnQuery), map[string]any{"sessionId": "session", "turnId": turn})
}

// readResponse reads the next frame from c and decodes it as a response.
func readResponse(t *testing.T, c *transport.Conn) protocol.Response {
	t.Helper()
	c.NetConn().SetReadDeadline(time.Now().Add(timeout))
	line, err := c.Read()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	f, err := protocol.DecodeHostFrame(line)
	if err != nil || f.Response == nil {
		t.Fatalf("not a response: %s (%v)", line, err)
	}
	return *f.Response
}

// readClosed reads until the connection ends and reports whether it did.
func readClosed(t *testing.T, c *transport.Conn) {
	t.Helper()
	c.NetConn().SetReadDeadline(time.Now().Add(timeout))
	for {
		if _, err := c.Read(); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("connection was not closed")
			}
			return
		}
	}
}

// fakeAdmission counts finishes.
type fakeAdmission struct{ finished *atomic.Int32 }

func (a fakeAdmission) AcquireResidency() func() { return func() {} }
func (a fakeAdmission) Finish()                  { a.finished.Add(1) }

type fixture struct {
	srv         *transport.Conn
	s           *connection
	finished    atomic.Int32
	teardowns   atomic.Int32
	tornDown    chan struct{}
	diagMu      sync.Mutex
	diagnostics []string
	runDone     chan struct{}
}

func (f *fixture) diags() []string {
	f.diagMu.Lock()
	defer f.diagMu.Unlock()
	return append([]string(nil), f.diagnostics...)
}

// startSession runs a real connection session over srv with table as its
// composition's handlers (the host.* ones answer a fixed status); each of
// opts may change its configuration first.
func startSession(t *testing.T, srv *transport.Conn, table Table, begin func(ctx context.Context, call *Call) (Admission, error), attacher func() ConnectionAttacher, opts ...func(*connectionConfig)) *fixture {
	t.Helper()
	f := &fixture{srv: srv, tornDown: make(chan struct{}), runDone: make(chan struct{})}
	if begin == nil {
		begin = func(context.Context, *Call) (Admission, error) { return fakeAdmission{&f.finished}, nil }
	}
	status := Table{}
	Handle(status, protocol.OpHostStatus, func(context.Context, *Call, *protocol.HostStatusInput) (protocol.HostStatus, error) {
		return protocol.HostStatus{State: protocol.StateReady}, nil
	})
	cfg := connectionConfig{
		transport: srv,
		identity:  Identity{ConnectionID: "test-connection", ClientInstanceID: "test-client", Principal: protocol.LocalOwner},
		base:      context.Background(),
		resolve: func(op protocol.Operation) (Handler, *protocol.Error) {
			if h, ok := table[op.Name]; ok {
				return h, nil
			}
			if h, ok := status[op.Name]; ok {
				return h, nil
			}
			return nil, unavailable(op.Name)
		},
		attacher: attacher,
		begin:    begin,
		diagnostic: func(_, msg string) {
			f.diagMu.Lock()
			f.diagnostics = append(f.diagnostics, msg)
			f.diagMu.Unlock()
		},
		onTeardown: func() {
			if f.teardowns.Add(1) == 1 {
				close(f.tornDown)
			}
		},
	}
	for _, opt := range opts {
		opt(&cfg)
	}
	f.s = newConnection(cfg)
	go func() {
		defer close(f.runDone)
		f.s.run()
	}()
	t.Cleanup(func() {
		srv.Abort(nil)
		wait(t, f.runDone, "session run to end")
	})
	return f
}

// gatedTurnQuery returns a turn.query handler that signals entry per turn
// and waits for release.
func gatedTurnQuery(t Table, entered func(turn string), release <-chan struct{}) {
	Handle(t, protocol.OpTurnQuery, func(ctx context.Context, call *Call, in *protocol.TurnRef) (protocol.TurnSnapshot, error) {
		if entered != nil {
			entered(in.TurnID)
		}
		select {
		case <-release:
		case <-ctx.Done():
			return protocol.TurnSnapshot{}, ctx.Err()
		}
		return protocol.TurnSnapshot{SessionID: in.SessionID, TurnID: in.TurnID, RunID: "run-" + in.TurnID, Status: "running"}, nil
	})
}

func TestTranscriptPagesAreSerializedPerConnection(t *testing.T) {
	cli, srv := pair(t)
	var active, maxActive, calls atomic.Int32
	entered := make([]chan struct{}, 3)
	release := make([]chan struct{}, 3)
	for i := range entered {
		entered[i], release[i] = make(chan struct{}), make(chan struct{})
	}
	table := Table{}
	Handle(table, protocol.OpSessionTranscriptPage, func(ctx context.Context, call *Call, in *protocol.TranscriptPageInput) (protocol.TranscriptPage, error) {
		i := calls.Add(1) - 1
		n := active.Add(1)
		for {
			m := maxActive.Load()
			if n <= m || maxActive.CompareAndSwap(m, n) {
				break
			}
		}
		close(entered[i])
		<-release[i]
		active.Add(-1)
		return protocol.TranscriptPage{SessionID: "session-1", Direction: in.Direction, Records: []json.RawMessage{}}, nil
	})
	startSession(t, srv, table, nil, nil)
	for i := range 3 {
		send(t, cli, request(fmt.Sprintf("page-%d", i), string(protocol.OpSessionTranscriptPage), map[string]any{
			"subscriptionId": "subscription-1", "direction": "older", "throughSequence": nil,
			"cursor": nil, "anchorSequence": nil, "maxBytes": 64 * 1024,
		}))
	}
	wait(t, entered[0], "first page admitted")
	for i := range 3 {
		if got := calls.Load(); got != int32(i+1) {
			t.Fatalf("page %d: %d handlers entered, want %d", i, got, i+1)
		}
		close(release[i])
		if r := readResponse(t, cli); r.RequestID != fmt.Sprintf("page-%d", i) || !r.OK {
			t.Fatalf("response %d: %+v", i, r)
		}
		if i < 2 {
			wait(t, entered[i+1], "next page admitted")
		}
	}
	if maxActive.Load() != 1 {
		t.Fatalf("max concurrent pages = %d, want 1", maxActive.Load())
	}
}

// halfClosed dispatches one turn.query, half-closes the client side and
// waits until the connection has read that EOF, so what follows happens
// while the dispatched response drains.
func halfClosed(t *testing.T) (cli *transport.Conn, f *fixture, release chan struct{}) {
	cli, srv := pair(t)
	entered := make(chan struct{})
	release = make(chan struct{})
	table := Table{}
	gatedTurnQuery(table, func(string) { close(entered) }, release)
	f = startSession(t, srv, table, nil, nil)
	send(t, cli, turnQuery("half-close", "half-close"))
	wait(t, entered, "handler dispatched")
	if err := cli.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	wait(t, f.s.inputClosed, "the connection read EOF")
	select {
	case <-f.tornDown:
		t.Fatal("the connection was torn down at a clean EOF with a response in flight")
	default:
	}
	return cli, f, release
}

func TestCleanReadEOFDrainsDispatchedResponse(t *testing.T) {
	cli, f, release := halfClosed(t)
	close(release)
	r := readResponse(t, cli)
	if !r.OK || r.Operation != string(protocol.OpTurnQuery) {
		t.Fatalf("response %+v", r)
	}
	wait(t, f.runDone, "connection closed after draining")
	if n := f.teardowns.Load(); n != 1 {
		t.Fatalf("teardowns = %d, want 1", n)
	}
	if d := f.diags(); len(d) != 0 {
		t.Fatalf("diagnostics %q, want none", d)
	}
}

func TestFatalCloseDuringEOFDrainTearsDownOnce(t *testing.T) {
	_, f, release := halfClosed(t)
	forced := errors.New("forced transport failure")
	f.srv.Abort(forced)
	wait(t, f.tornDown, "fatal close interrupted the drain")
	if cause := context.Cause(f.s.ctx); cause != forced {
		t.Fatalf("torn down by %v, want the forced transport failure", cause)
	}
	if n := f.teardowns.Load(); n != 1 {
		t.Fatalf("teardowns = %d, want 1", n)
	}
	close(release)
	wait(t, f.runDone, "connection settled after its handler completed")
	if n := f.teardowns.Load(); n != 1 {
		t.Fatalf("teardowns = %d, want 1", n)
	}
}

func TestUnexpectedAcceptedConnectionFailureIsRecordedRedacted(t *testing.T) {
	cli, srv := pair(t)
	f := startSession(t, srv, Table{}, func(context.Context, *Call) (Admission, error) {
		return nil, errors.New("api_key=sk-connection-secret123")
	}, nil)
	send(t, cli, turnQuery("failed-admission", "turn"))
	wait(t, f.tornDown, "connection torn down")
	wait(t, f.runDone, "connection settled")
	d := f.diags()
	if len(d) != 1 {
		t.Fatalf("diagnostics %q, want one", d)
	}
	if !strings.Contains(d[0], "connection failed: test-connection") || !strings.Contains(d[0], "[redacted]") || strings.Contains(d[0], "sk-connection-secret123") {
		t.Fatalf("diagnostic %q", d[0])
	}
}

func TestClosureDuringAdmissionPreservesEvidence(t *testing.T) {
	for _, closure := range []string{"reset", "eof"} {
		t.Run(closure, func(t *testing.T) {
			cli, srv := pair(t)
			admissionEntered := make(chan struct{})
			releaseAdmission := make(chan struct{})
			var handlerCalls atomic.Int32
			var sawInputClosed atomic.Bool
			table := Table{}
			Handle(table, protocol.OpTurnQuery, func(ctx context.Context, call *Call, in *protocol.TurnRef) (protocol.TurnSnapshot, error) {
				handlerCalls.Add(1)
				select {
				case <-call.InputClosed:
					sawInputClosed.Store(true)
				default:
				}
				return protocol.TurnSnapshot{SessionID: in.SessionID, TurnID: in.TurnID, RunID: "run-turn", Status: "running"}, nil
			})
			var f *fixture
			f = startSession(t, srv, table, func(ctx context.Context, call *Call) (Admission, error) {
				close(admissionEntered)
				<-releaseAdmission
				return fakeAdmission{&f.finished}, nil
			}, nil)
			send(t, cli, turnQuery("pending-request", "turn"))
			wait(t, admissionEntered, "operation entered admission")
			if closure == "reset" {
				cli.NetConn().(*net.TCPConn).SetLinger(0)
				cli.Abort(nil)
				wait(t, f.tornDown, "teardown while admission pending")
			} else {
				cli.CloseWrite()
				poll.Until(t, "host observed EOF", func() bool {
					select {
					case <-f.s.inputClosed:
						return true
					default:
						return false
					}
				})
			}
			close(releaseAdmission)
			if closure == "eof" {
				if r := readResponse(t, cli); !r.OK {
					t.Fatalf("response %+v", r)
				}
			}
			wait(t, f.runDone, "connection settled after admission")
			want := int32(1)
			if closure == "reset" {
				want = 0
			}
			if handlerCalls.Load() != want {
				t.Fatalf("handler calls = %d, want %d", handlerCalls.Load(), want)
			}
			if closure == "eof" && !sawInputClosed.Load() {
				t.Fatal("handler did not see its input closed")
			}
			if f.finished.Load() != 1 {
				t.Fatalf("finish calls = %d, want 1", f.finished.Load())
			}
		})
	}
}

type recordingAttacher struct {
	mu           sync.Mutex
	attached     []Identity
	closeCalls   int
	closeStarted chan struct{}
	releaseClose chan struct{}
}

func (a *recordingAttacher) AttachConnection(id Identity, _ *OutboundWriter) Attachment {
	a.mu.Lock()
	a.attached = append(a.attached, id)
	a.mu.Unlock()
	return a
}

func (a *recordingAttacher) Close(context.Context) error {
	a.mu.Lock()
	a.closeCalls++
	a.mu.Unlock()
	close(a.closeStarted)
	<-a.releaseClose
	return nil
}

func TestReadyCompositionAttachesClientIdentityOnce(t *testing.T) {
	cli, srv := pair(t)
	att := &recordingAttacher{closeStarted: make(chan struct{}), releaseClose: make(chan struct{})}
	var ready atomic.Bool
	f := startSession(t, srv, Table{}, nil, func() ConnectionAttacher {
		if ready.Load() {
			return att
		}
		return nil
	})
	send(t, cli, request("before-composition", string(protocol.OpHostStatus), map[string]any{}))
	readResponse(t, cli)
	if len(att.attached) != 0 {
		t.Fatal("attached before the composition was ready")
	}
	ready.Store(true)
	for _, id := range []string{"after-composition", "still-attached"} {
		send(t, cli, request(id, string(protocol.OpHostStatus), map[string]any{}))
		readResponse(t, cli)
	}
	att.mu.Lock()
	got := append([]Identity(nil), att.attached...)
	att.mu.Unlock()
	want := []Identity{{ConnectionID: "test-connection", ClientInstanceID: "test-client", Principal: protocol.LocalOwner}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("attached %+v, want %+v", got, want)
	}
	cli.Abort(nil)
	wait(t, att.closeStarted, "attachment close started")
	select {
	case <-f.runDone:
		t.Fatal("connection ended before its attachment closed")
	default:
	}
	close(att.releaseClose)
	wait(t, f.runDone, "connection ended")
	if att.closeCalls != 1 {
		t.Fatalf("close calls = %d, want 1", att.closeCalls)
	}
}

func TestInFlightStatusDoesNotConsumeFinalDomainSlot(t *testing.T) {
	cli, srv := pair(t)
	var entered sync.Map
	enteredCount := atomic.Int32{}
	allEntered := make(chan struct{})
	lastEntered := make(chan struct{})
	releaseDomains := make(chan struct{})
	statusEntered := make(chan struct{})
	releaseStatus := make(chan struct{})
	table := Table{}
	gatedTurnQuery(table, func(turn string) {
		entered.Store(turn, true)
		switch enteredCount.Add(1) {
		case 63:
			close(allEntered)
		case 64:
			close(lastEntered)
		}
	}, releaseDomains)
	Handle(table, protocol.OpHostStatus, func(ctx context.Context, call *Call, _ *protocol.HostStatusInput) (protocol.HostStatus, error) {
		close(statusEntered)
		<-releaseStatus
		return protocol.HostStatus{State: protocol.StateReady}, nil
	})
	startSession(t, srv, table, nil, nil)
	defer close(releaseDomains)
	var burst []byte
	for i := range 63 {
		b, _ := json.Marshal(turnQuery(fmt.Sprintf("status-first-%d", i), fmt.Sprintf("turn-%d", i)))
		burst = append(append(burst, b...), '\n')
	}
	cli.NetConn().Write(burst)
	wait(t, allEntered, "63 domain handlers admitted")
	send(t, cli, request("status-first-probe", string(protocol.OpHostStatus), map[string]any{}))
	wait(t, statusEntered, "status admitted")
	send(t, cli, turnQuery("status-first-63", "turn-63"))
	wait(t, lastEntered, "final domain handler admitted")
	close(releaseStatus)
	if r := readResponse(t, cli); r.RequestID != "status-first-probe" || !r.OK {
		t.Fatalf("response %+v", r)
	}
	send(t, cli, turnQuery("status-first-overflow", "turn-64"))
	readClosed(t, cli)
}
