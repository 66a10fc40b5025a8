package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/host"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// diagnosticsMention waits until a diagnostic contains want.
func diagnosticsMention(t *testing.T, c *client.Conn, want string) {
	t.Helper()
	ctx := agentdtest.Context(t)
	for {
		d, err := client.Call(ctx, c, protocol.OpHostDiagnosticsQuery, protocol.DiagnosticsQueryInput{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range d.Diagnostics {
			if strings.Contains(e.Message, want) {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no diagnostic mentions %q: %+v", want, d.Diagnostics)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func TestProtocolViolationsCloseOnlyTheOffendingConnection(t *testing.T) {
	h := agentdtest.NewHost(t, agentdtest.Options{})
	sibling := h.Connect(t)
	cases := []struct {
		name string
		line []byte
		diag string
	}{
		{"message over 768 KiB", append(append([]byte(`{"requestId":"big","operation":"host.status","input":{"pad":"`), bytes.Repeat([]byte("x"), protocol.MaxMessageBytes)...), `"}}`...), "exceeds"},
		{"line that is not JSON", []byte(`this is not json`), "protocol violation"},
		{"JSON that is not an object", []byte(`["host.status"]`), "not a JSON object"},
		{"unknown frame kind", []byte(`{"kind":"teleport"}`), `unknown frame kind "teleport"`},
		{"request without requestId", []byte(`{"operation":"host.status","input":{}}`), `"requestId"`},
		{"unknown top-level field", []byte(`{"requestId":"r","operation":"host.status","input":{},"extra":1}`), `"extra"`},
		{"second hello", []byte(`{"kind":"hello","clientInstanceId":"x","protocolMin":1,"protocolMax":1,"compatibilityEpoch":1,"compositionId":"agentd.interactive"}`), "second hello"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := handshake(t, h.Endpoint())
			r.sendLine(c.line)
			r.closed()
			diagnosticsMention(t, sibling, c.diag)
			if st, err := sibling.Status(agentdtest.Context(t)); err != nil || st.State != protocol.StateReady {
				t.Fatalf("sibling: %+v %v", st, err)
			}
		})
	}
}

func TestRecoverableBadRequestsKeepTheConnection(t *testing.T) {
	table := turnQuery(server.Table{}, func(context.Context, *server.Call, *protocol.TurnRef) error { return nil })
	h := agentdtest.NewHost(t, agentdtest.Options{Compose: compose(table)})
	r := handshake(t, h.Endpoint())
	cases := []struct {
		name  string
		frame map[string]any
		says  string
	}{
		{"unknown operation", req("u", "turn.teleport", map[string]any{}), `unknown operation "turn.teleport"`},
		{"input of the wrong type", req("w", string(protocol.OpTurnQuery), map[string]any{"sessionId": "s", "turnId": 7}), `"input.turnId"`},
		{"input missing a field", req("m", string(protocol.OpTurnQuery), map[string]any{"sessionId": "s"}), `"input.turnId": is required`},
		{"input with an unknown field", req("x", string(protocol.OpTurnQuery), map[string]any{"sessionId": "s", "turnId": "t", "colour": "red"}), `"input.colour"`},
		{"input that is not an object", req("n", string(protocol.OpTurnQuery), "s/t"), `"input"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r.send(c.frame)
			resp := r.response()
			if resp.OK || resp.Error.Code != protocol.CodeInvalidRequest || !strings.Contains(resp.Error.Message, c.says) {
				t.Fatalf("response %+v, want invalid_request saying %s", resp, c.says)
			}
		})
	}
	r.send(turnReq("still-here", "t"))
	if resp := r.response(); !resp.OK {
		t.Fatalf("connection not kept: %+v", resp)
	}
}

func TestClientThatNeverSendsHelloIsClosedAfterHandshakeDeadline(t *testing.T) {
	h := agentdtest.NewHost(t, agentdtest.Options{HandshakeTimeout: 200 * time.Millisecond})
	r := dialRaw(t, h.Endpoint())
	r.closed()
	observer := h.Connect(t)
	agentdtest.WaitStatus(t, observer, func(s protocol.HostStatus) bool { return s.Connections == 1 })
}

func TestIncompatibleHelloIsAnsweredAndClosed(t *testing.T) {
	h := agentdtest.NewHost(t, agentdtest.Options{})
	for name, hello := range map[string]protocol.Hello{
		"protocol":    {ProtocolMin: 2, ProtocolMax: 3, CompatibilityEpoch: protocol.CompatibilityEpoch, CompositionID: protocol.CompositionInteractive},
		"epoch":       {ProtocolMin: 1, ProtocolMax: 1, CompatibilityEpoch: 99, CompositionID: protocol.CompositionInteractive},
		"composition": {ProtocolMin: 1, ProtocolMax: 1, CompatibilityEpoch: protocol.CompatibilityEpoch, CompositionID: "other"},
	} {
		t.Run(name, func(t *testing.T) {
			hello.Kind, hello.ClientInstanceID = protocol.KindHello, "old"
			r := dialRaw(t, h.Endpoint())
			r.send(hello)
			var inc protocol.Incompatible
			r.read(&inc)
			if inc.Kind != protocol.KindIncompatible || inc.Reason == "" || inc.HostProtocolMin != 1 || inc.HostProtocolMax != 1 {
				t.Fatalf("answer %+v", inc)
			}
			r.closed()
		})
	}
}

func TestClientThatStopsReadingIsClosedAtItsOutboundBound(t *testing.T) {
	big := strings.Repeat("x", 600<<10)
	table := server.Table{}
	server.Handle(table, protocol.OpSessionTodoQuery, func(context.Context, *server.Call, *protocol.SessionRef) (protocol.TodoQueryResult, error) {
		return protocol.TodoQueryResult{Items: []protocol.TodoItem{{Text: big, Status: "pending"}}}, nil
	})
	h := agentdtest.NewHost(t, agentdtest.Options{Compose: compose(table)})
	sibling := h.Connect(t)
	ctx := agentdtest.Context(t)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	before := heap()

	r := handshake(t, h.Endpoint())
	// Ask for far more than the 2 MiB bound (within the in-flight limit),
	// never reading an answer.
	sent := 0
	for i := range protocol.MaxInFlightDomainRequests / 2 {
		b, _ := json.Marshal(req(fmt.Sprint("todo-", i), string(protocol.OpSessionTodoQuery), map[string]any{"sessionId": "s"}))
		r.nc.SetWriteDeadline(time.Now().Add(agentdtest.Timeout))
		if _, err := r.nc.Write(append(b, '\n')); err != nil {
			break // the host closed it
		}
		sent++
		if i%8 == 7 {
			// The sibling is served while the other connection stalls.
			if _, err := sibling.Status(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	diagnosticsMention(t, sibling, "client is not reading")
	agentdtest.WaitStatus(t, sibling, func(s protocol.HostStatus) bool { return s.Connections == 1 && s.ActiveOperations == 1 })
	if after := heap(); after > before+16<<20 {
		t.Fatalf("heap grew from %d to %d bytes after %d unread requests", before, after, sent)
	}
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

func TestThousandConnectionsOpenedAndDroppedAtOnce(t *testing.T) {
	h := agentdtest.NewHost(t, agentdtest.Options{})
	observer := h.Connect(t)
	// A status answered means the observer's connection has all its goroutines.
	agentdtest.WaitStatus(t, observer, func(s protocol.HostStatus) bool { return s.Connections == 1 })
	fds := openFDs(t)
	goroutines := runtime.NumGoroutine()
	const n = 1000
	conns := make([]net.Conn, 0, n)
	hello, _ := json.Marshal(protocol.Hello{Kind: protocol.KindHello, ClientInstanceID: "crowd", ProtocolMin: 1, ProtocolMax: 1,
		CompatibilityEpoch: protocol.CompatibilityEpoch, CompositionID: protocol.CompositionInteractive})
	status, _ := json.Marshal(req("s", string(protocol.OpHostStatus), map[string]any{}))
	for i := range n {
		c, err := net.Dial("unix", h.Endpoint())
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		switch i % 3 {
		case 0: // dropped before the handshake
		case 1:
			c.Write(append(hello, '\n'))
		case 2:
			c.Write(append(append(append(hello, '\n'), status...), '\n'))
		}
		conns = append(conns, c)
	}
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() { c.Close() })
	}
	wg.Wait()
	st := agentdtest.WaitStatus(t, observer, func(s protocol.HostStatus) bool { return s.Connections == 1 && s.ActiveOperations == 1 })
	if st.State != protocol.StateReady {
		t.Fatalf("state %q", st.State)
	}
	poll.Until(t, "descriptors released", func() bool { return openFDs(t) <= fds })
	deadline := time.Now().Add(agentdtest.Timeout)
	for runtime.NumGoroutine() > goroutines {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, had %d:\n%s", runtime.NumGoroutine(), goroutines, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestDrainAnswersNewDomainRequestsDrainingAndFinishesInFlightOnes(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	table := turnQuery(server.Table{}, func(ctx context.Context, _ *server.Call, in *protocol.TurnRef) error {
		if in.TurnID == "in-flight" {
			close(entered)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	h := agentdtest.NewHost(t, agentdtest.Options{Compose: compose(table)})
	c := h.Connect(t)
	observer := h.Connect(t)
	ctx := agentdtest.Context(t)
	inFlight := make(chan error, 1)
	go func() {
		_, err := query(ctx, c, "in-flight")
		inFlight <- err
	}()
	waitCh(t, entered, "in-flight request admitted")
	stopped := make(chan error, 1)
	go func() { stopped <- h.Shutdown(ctx) }()
	agentdtest.WaitStatus(t, observer, func(s protocol.HostStatus) bool { return s.State == protocol.StateDraining })
	if _, err := query(ctx, observer, "late"); !errors.Is(err, client.ErrDraining) {
		t.Fatalf("new request while draining: %v", err)
	}
	if c, err := net.Dial("unix", h.Endpoint()); err == nil {
		c.Close()
		t.Fatal("a draining host accepted a new connection")
	}
	close(release)
	if err := <-inFlight; err != nil {
		t.Fatalf("in-flight request: %v", err)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{h.Endpoint(), protocol.RegistrationPath(h.RuntimeDir, h.HostID)} {
		if _, err := os.Lstat(path); err == nil {
			t.Errorf("%s left behind", path)
		}
	}
}

// TestDrainClosesAConnectionWhoseHandshakeEndsLate: a connection the host
// accepted before it began to drain, whose hello comes only after the host
// has closed the connections it was serving, is closed too, and the host
// stops rather than wait for it.
func TestDrainClosesAConnectionWhoseHandshakeEndsLate(t *testing.T) {
	h := agentdtest.NewHost(t, agentdtest.Options{})
	early := handshake(t, h.Endpoint())
	late := dialRaw(t, h.Endpoint())
	// The accept loop takes late while early's status is answered; should
	// it not have, the listener's close resets late, which ends the same.
	early.send(req("s", string(protocol.OpHostStatus), map[string]any{}))
	early.response()
	stopped := make(chan error, 1)
	go func() { stopped <- h.Shutdown(agentdtest.Context(t)) }()
	early.closed()
	hello, _ := json.Marshal(protocol.Hello{Kind: protocol.KindHello, ClientInstanceID: "late", ProtocolMin: 1, ProtocolMax: 1,
		CompatibilityEpoch: protocol.CompatibilityEpoch, CompositionID: protocol.CompositionInteractive})
	late.nc.Write(append(hello, '\n'))
	late.closed()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}

func TestDrainCancelsOperationsPastTheDrainTimeout(t *testing.T) {
	table := turnQuery(server.Table{}, func(ctx context.Context, _ *server.Call, in *protocol.TurnRef) error {
		<-ctx.Done()
		return ctx.Err()
	})
	base := agentdtest.ShortDir(t)
	h, err := host.Open(host.Config{Home: base + "/home", RuntimeDir: base + "/run", HostID: "t",
		DrainTimeout: 50 * time.Millisecond, Compose: compose(table)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, drain := context.WithCancel(context.Background())
	defer drain()
	stopped := make(chan error, 1)
	go func() { stopped <- h.Run(ctx) }()
	waitCh(t, h.Ready(), "ready")
	c, err := client.Dial(agentdtest.Context(t), h.Endpoint(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() { _, err := query(agentdtest.Context(t), c, "stuck"); done <- err }()
	agentdtest.WaitStatus(t, c, func(s protocol.HostStatus) bool { return s.ActiveOperations == 2 })
	drain()
	select {
	case err := <-stopped:
		if !errors.Is(err, host.ErrStopped) {
			t.Fatalf("the host stopped with %v", err)
		}
	case <-time.After(agentdtest.Timeout):
		t.Fatal("the host did not stop")
	}
	if err := <-done; err == nil {
		t.Fatal("a stuck operation survived the drain")
	}
}

// A drain lets an operation in flight finish rather than cancelling it,
// and ends once it has, long before the drain's deadline.
func TestDrainEndsWhenTheLastOperationDoes(t *testing.T) {
	release := make(chan struct{})
	table := turnQuery(server.Table{}, func(ctx context.Context, _ *server.Call, in *protocol.TurnRef) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	base := agentdtest.ShortDir(t)
	// A drain deadline past the test's wait: only the operation's end can
	// end the drain in time.
	h, err := host.Open(host.Config{Home: base + "/home", RuntimeDir: base + "/run", HostID: "t",
		DrainTimeout: 2 * agentdtest.Timeout, Compose: compose(table)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, drain := context.WithCancel(context.Background())
	defer drain()
	stopped := make(chan error, 1)
	go func() { stopped <- h.Run(ctx) }()
	waitCh(t, h.Ready(), "ready")
	c, err := client.Dial(agentdtest.Context(t), h.Endpoint(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() { _, err := query(agentdtest.Context(t), c, "held"); done <- err }()
	agentdtest.WaitStatus(t, c, func(s protocol.HostStatus) bool { return s.ActiveOperations == 2 })
	drain()
	waitCh(t, h.Draining(), "draining")
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the operation in flight when the drain began failed: %v", err)
	}
	select {
	case err := <-stopped:
		if !errors.Is(err, host.ErrStopped) {
			t.Fatalf("the host stopped with %v", err)
		}
	case <-time.After(agentdtest.Timeout):
		t.Fatal("the drain did not end with the last operation")
	}
}
