package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/host"
	"github.com/agentd-dev/agentd/internal/redact"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// composition is a test composition serving the handlers of its table.
type composition struct{ table server.Table }

func (c composition) Handlers() server.Table          { return c.table }
func (c composition) BeginDrain()                     {}
func (c composition) Close(ctx context.Context) error { return nil }

func compose(table server.Table) server.ComposeFunc {
	return func(context.Context, *server.Server) (server.Composition, error) { return composition{table}, nil }
}

func snapshot(in *protocol.TurnRef) protocol.TurnSnapshot {
	return protocol.TurnSnapshot{SessionID: in.SessionID, TurnID: in.TurnID, RunID: "run-" + in.TurnID, Status: "running"}
}

// turnQuery registers a turn.query handler calling fn.
func turnQuery(t server.Table, fn func(ctx context.Context, call *server.Call, in *protocol.TurnRef) error) server.Table {
	server.Handle(t, protocol.OpTurnQuery, func(ctx context.Context, call *server.Call, in *protocol.TurnRef) (protocol.TurnSnapshot, error) {
		if err := fn(ctx, call, in); err != nil {
			return protocol.TurnSnapshot{}, err
		}
		return snapshot(in), nil
	})
	return t
}

func waitCh(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(agentdtest.Timeout):
		t.Fatalf("timed out waiting: %s", what)
	}
}

func query(ctx context.Context, c *client.Conn, turn string) (protocol.TurnSnapshot, error) {
	var out protocol.TurnSnapshot
	out, err := client.Call(ctx, c, protocol.OpTurnQuery, protocol.TurnRef{SessionID: "session", TurnID: turn})
	return out, err
}

func TestConcurrentResponsesCorrelatedInReverseCompletionOrder(t *testing.T) {
	const n = 16
	var entered sync.WaitGroup
	entered.Add(n)
	release := make([]chan struct{}, n)
	for i := range release {
		release[i] = make(chan struct{})
	}
	table := turnQuery(server.Table{}, func(ctx context.Context, _ *server.Call, in *protocol.TurnRef) error {
		var i int
		fmt.Sscanf(in.TurnID, "turn-%d", &i)
		entered.Done()
		<-release[i]
		return nil
	})
	h := agentdtest.NewHost(t, agentdtest.Options{Compose: compose(table)})
	c := h.Connect(t)
	ctx := agentdtest.Context(t)
	results := make([]chan protocol.TurnSnapshot, n)
	for i := range n {
		results[i] = make(chan protocol.TurnSnapshot, 1)
		go func() {
			r, err := query(ctx, c, fmt.Sprintf("turn-%d", i))
			if err != nil {
				t.Error(err)
			}
			results[i] <- r
		}()
	}
	allEntered := make(chan struct{})
	go func() { entered.Wait(); close(allEntered) }()
	waitCh(t, allEntered, "all handlers admitted")
	for i := n - 1; i >= 0; i-- {
		close(release[i])
		r := <-results[i]
		if r.TurnID != fmt.Sprintf("turn-%d", i) || r.RunID != fmt.Sprintf("run-turn-%d", i) {
			t.Fatalf("request %d got %+v", i, r)
		}
	}
}

func TestClientLeavesAcknowledgementHeadroomUnderBurst(t *testing.T) {
	const burst = 96
	limit := protocol.ClientInFlightDomainRequests
	var mu sync.Mutex
	active, maxActive, entered := 0, 0, 0
	firstWave := make(chan struct{})
	release := make(chan struct{})
	table := turnQuery(server.Table{}, func(ctx context.Context, _ *server.Call, in *protocol.TurnRef) error {
		mu.Lock()
		active++
		entered++
		maxActive = max(maxActive, active)
		if entered == limit {
			close(firstWave)
		}
		mu.Unlock()
		<-release
		mu.Lock()
		active--
		mu.Unlock()
		return nil
	})
	h := agentdtest.NewHost(t, agentdtest.Options{Compose: compose(table)})
	c := h.Connect(t)
	ctx := agentdtest.Context(t)
	var wg sync.WaitGroup
	for i := range burst {
		wg.Go(func() {
			if _, err := query(ctx, c, fmt.Sprintf("burst-%d", i)); err != nil {
				t.Error(err)
			}
		})
	}
	waitCh(t, firstWave, "first wave admitted")
	// host.status travels after every frame the client has written, through
	// the reserved slot: the host holds exactly the client's window.
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ActiveOperations != limit+1 {
		t.Fatalf("host holds %d operations with the window full, want %d plus the status", st.ActiveOperations-1, limit)
	}
	close(release)
	wg.Wait()
	if maxActive != limit {
		t.Fatalf("max concurrent handlers = %d, want %d", maxActive, limit)
	}
	if st, err := c.Status(ctx); err != nil || st.State != protocol.StateReady {
		t.Fatalf("status after burst: %+v %v", st, err)
	}
}

func TestAdmittedOperationSettlesWithoutLeakAfterDisconnect(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	settled := make(chan struct{})
	table := turnQuery(server.Table{}, func(ctx context.Context, call *server.Call, in *protocol.TurnRef) error {
		done := call.AcquireResidency()
		defer close(settled)
		defer done()
		close(entered)
		<-release
		return nil
	})
	h := agentdtest.NewHost(t, agentdtest.Options{Compose: compose(table)})
	c := h.Connect(t)
	failed := make(chan error, 1)
	go func() {
		_, err := query(agentdtest.Context(t), c, "disconnect")
		failed <- err
	}()
	waitCh(t, entered, "handler admitted")
	c.Close()
	close(release)
	waitCh(t, settled, "handler settled after disconnect")
	if err := <-failed; err == nil {
		t.Fatal("request on a closed connection succeeded")
	}
	observer := h.Connect(t)
	agentdtest.WaitStatus(t, observer, func(s protocol.HostStatus) bool {
		return s.Connections == 1 && s.ActiveOperations == 1 && s.ActiveResidencies == 0
	})
}

func TestAdmittedCommandReportsUnknownOutcomeWhenConnectionCloses(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	table := server.Table{}
	server.Handle(table, protocol.OpTurnStart, func(ctx context.Context, call *server.Call, in *protocol.TurnStartInput) (protocol.TurnStartResult, error) {
		close(entered)
		<-release
		return protocol.TurnStartResult{Kind: "started"}, nil
	})
	h := agentdtest.NewHost(t, agentdtest.Options{Compose: compose(table)})
	c := h.Connect(t)
	errc := make(chan error, 1)
	go func() {
		_, err := client.Call(agentdtest.Context(t), c, protocol.OpTurnStart, protocol.TurnStartInput{
			SessionID: "session", TurnID: "interrupted-command", Content: protocol.Content{Text: "start"},
		})
		errc <- err
	}()
	waitCh(t, entered, "command admitted")
	c.Close()
	var ie *client.InterruptedError
	if err := <-errc; !errors.As(err, &ie) {
		t.Fatalf("error %v, want *client.InterruptedError", err)
	}
	if ie.Mode != protocol.Command || !ie.Dispatched || ie.Reason != client.ReasonConnectionLost || ie.Retryable {
		t.Fatalf("interruption %+v", ie)
	}
}

// raw is a hand-driven protocol connection.
type raw struct {
	t  *testing.T
	nc net.Conn
	r  *json.Decoder
}

func dialRaw(t *testing.T, endpoint string) *raw {
	t.Helper()
	nc, err := net.Dial("unix", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &raw{t: t, nc: nc, r: json.NewDecoder(nc)}
}

func handshake(t *testing.T, endpoint string) *raw {
	t.Helper()
	r := dialRaw(t, endpoint)
	r.send(protocol.Hello{Kind: protocol.KindHello, ClientInstanceID: "raw", ProtocolMin: 1, ProtocolMax: 1,
		CompatibilityEpoch: protocol.CompatibilityEpoch, CompositionID: protocol.CompositionInteractive})
	var acc protocol.Accepted
	r.read(&acc)
	if acc.Kind != protocol.KindAccepted {
		t.Fatalf("handshake: %+v", acc)
	}
	return r
}

func (r *raw) send(v any) {
	r.t.Helper()
	b, _ := json.Marshal(v)
	r.sendLine(b)
}

func (r *raw) sendLine(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(append(b, '\n')); err != nil {
		r.t.Fatal(err)
	}
}

func (r *raw) read(v any) {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(agentdtest.Timeout))
	if err := r.r.Decode(v); err != nil {
		r.t.Fatalf("read: %v", err)
	}
}

func (r *raw) response() protocol.Response {
	r.t.Helper()
	var resp protocol.Response
	r.read(&resp)
	return resp
}

// closed waits until the host closes the connection.
func (r *raw) closed() {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(agentdtest.Timeout))
	for {
		var v json.RawMessage
		if err := r.r.Decode(&v); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				r.t.Fatal("the host did not close the connection")
			}
			return
		}
	}
}

func req(id, op string, input any) map[string]any {
	return map[string]any{"requestId": id, "operation": op, "input": input}
}

func turnReq(id, turn string) map[string]any {
	return req(id, string(protocol.OpTurnQuery), map[string]any{"sessionId": "session", "turnId": turn})
}

func TestDuplicateActiveRequestIDTearsDownOnlyOffender(t *testing.T) {
	entered := make(chan struct{}, 2)
	release := make(chan struct{})
	var calls atomic.Int32
	table := turnQuery(server.Table{}, func(context.Context, *server.Call, *protocol.TurnRef) error {
		calls.Add(1)
		entered <- struct{}{}
		<-release
		return nil
	})
	h := agentdtest.NewHost(t, agentdtest.Options{Compose: compose(table)})
	sibling := h.Connect(t)
	r := handshake(t, h.Endpoint())
	r.send(turnReq("duplicate-request", "first"))
	waitCh(t, entered, "first request admitted")
	r.send(turnReq("duplicate-request", "second"))
	r.closed()
	close(release)
	if calls.Load() != 1 {
		t.Fatalf("handler calls = %d, want 1", calls.Load())
	}
	st := agentdtest.WaitStatus(t, sibling, func(s protocol.HostStatus) bool {
		return s.Connections == 1 && s.ActiveOperations == 1 && s.ActiveResidencies == 0
	})
	if st.State != protocol.StateReady {
		t.Fatalf("state %q", st.State)
	}
}

func TestStatusReservedAtDomainLimitAndOverflowRejected(t *testing.T) {
	release := make(chan struct{})
	table := turnQuery(server.Table{}, func(context.Context, *server.Call, *protocol.TurnRef) error {
		<-release
		return nil
	})
	h := agentdtest.NewHost(t, agentdtest.Options{Compose: compose(table)})
	observer := h.Connect(t)
	r := handshake(t, h.Endpoint())
	var burst []byte
	for i := range protocol.MaxInFlightDomainRequests {
		b, _ := json.Marshal(turnReq(fmt.Sprintf("overflow-%d", i), fmt.Sprintf("turn-%d", i)))
		burst = append(append(burst, b...), '\n')
	}
	r.nc.Write(burst)
	agentdtest.WaitStatus(t, observer, func(s protocol.HostStatus) bool {
		return s.Connections == 2 && s.ActiveOperations == 65 && s.ActiveResidencies == 0
	})
	r.send(req("overflow-status", string(protocol.OpHostStatus), map[string]any{}))
	if resp := r.response(); resp.RequestID != "overflow-status" || !resp.OK {
		t.Fatalf("status at the limit: %+v", resp)
	}
	r.send(turnReq("overflow-64", "turn-64"))
	r.closed()
	close(release)
	st := agentdtest.WaitStatus(t, observer, func(s protocol.HostStatus) bool {
		return s.Connections == 1 && s.ActiveOperations == 1 && s.ActiveResidencies == 0
	})
	if st.State != protocol.StateReady {
		t.Fatalf("state %q", st.State)
	}
}

func TestConnectionBeforeCompositionResolvesReadyHandlersWithoutReconnecting(t *testing.T) {
	table := turnQuery(server.Table{}, func(context.Context, *server.Call, *protocol.TurnRef) error { return nil })
	h, release := newHostComposing(t, table)
	reg, err := home.ReadRegistration(protocol.RegistrationPath(h.RuntimeDir, h.HostID))
	if err != nil {
		t.Fatal(err)
	}
	if reg.State != protocol.StateRecovering {
		t.Fatalf("registration state %q, want recovering", reg.State)
	}
	r := handshake(t, reg.Endpoint)
	r.send(turnReq("before-ready", "turn"))
	if resp := r.response(); resp.OK || resp.Error.Code != protocol.CodeHostNotReady {
		t.Fatalf("before ready: %+v", resp)
	}
	close(release)
	waitCh(t, h.Ready(), "host ready")
	r.send(turnReq("after-ready", "turn"))
	resp := r.response()
	var snap protocol.TurnSnapshot
	json.Unmarshal(resp.Result, &snap)
	if !resp.OK || snap.RunID != "run-turn" {
		t.Fatalf("after ready: %+v", resp)
	}
}

func TestUnimplementedOperationsAnswerUnavailable(t *testing.T) {
	h := agentdtest.NewHost(t, agentdtest.Options{})
	c := h.Connect(t)
	_, err := client.Call(agentdtest.Context(t), c, protocol.OpSessionList, protocol.SessionListInput{})
	if !errors.Is(err, client.ErrOperationUnavailable) {
		t.Fatalf("session.list: %v", err)
	}
	if _, err := c.Status(agentdtest.Context(t)); err != nil {
		t.Fatalf("connection not kept: %v", err)
	}
}

func TestDiagnosticsAreRedacted(t *testing.T) {
	table := turnQuery(server.Table{}, func(context.Context, *server.Call, *protocol.TurnRef) error {
		return errors.New("provider said: invalid api_key=sk-planted-secret-0001")
	})
	var logs agentdtest.LockedBuffer
	logger := slog.New(redact.NewHandler(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	h := agentdtest.NewHost(t, agentdtest.Options{Compose: compose(table), Logger: logger})
	c := h.Connect(t)
	ctx := agentdtest.Context(t)
	_, err := query(ctx, c, "t")
	if !errors.Is(err, client.ErrInternalFailure) || strings.Contains(err.Error(), "sk-planted") {
		t.Fatalf("error %v", err)
	}
	d, err := client.Call(ctx, c, protocol.OpHostDiagnosticsQuery, protocol.DiagnosticsQueryInput{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(d)
	if !strings.Contains(string(b), "provider said") || strings.Contains(string(b), "sk-planted-secret") {
		t.Fatalf("diagnostics %s", b)
	}
	if out := logs.String(); !strings.Contains(out, "provider said") || strings.Contains(out, "sk-planted-secret") {
		t.Fatalf("log %s", out)
	}
}

func TestSecondHostOnSameHomeIsRefusedNamingPID(t *testing.T) {
	h := agentdtest.NewHost(t, agentdtest.Options{})
	_, err := host.Open(host.Config{Home: h.Home, RuntimeDir: h.RuntimeDir, HostID: "second"})
	var held *home.HeldError
	if !errors.As(err, &held) || !strings.Contains(err.Error(), fmt.Sprint(os.Getpid())) {
		t.Fatalf("second host: %v", err)
	}
}

func TestHostStartingAfterADeadOneOfItsIDReplacesWhatItLeft(t *testing.T) {
	dir := filepath.Join(agentdtest.ShortDir(t), "run")
	if _, err := home.PrepareRuntimeDir(dir); err != nil {
		t.Fatal(err)
	}
	// The dead host's socket, nobody listening on it.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: protocol.SocketPath(dir, "test"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	// Its registration, and a registration write a crash cut off.
	dead := protocol.Registration{SchemaVersion: 1, HostID: "test", PID: 1 << 22, Endpoint: protocol.SocketPath(dir, "test"), State: protocol.StateReady, HostEpoch: "dead"}
	if err := home.WriteRegistration(dir, dead); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".test.json123456"), []byte(`{"hostId":`), 0o600); err != nil {
		t.Fatal(err)
	}

	h := agentdtest.NewHost(t, agentdtest.Options{RuntimeDir: dir})
	reg, err := home.ReadRegistration(protocol.RegistrationPath(dir, "test"))
	if err != nil || reg.PID != os.Getpid() || reg.HostEpoch != h.Epoch() {
		t.Fatalf("registration %+v, %v; want the new host's", reg, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"test.json", "test.sock"}; !slices.Equal(names, want) {
		t.Errorf("runtime directory holds %v; want %v", names, want)
	}
	if _, err := h.Connect(t).Status(agentdtest.Context(t)); err != nil {
		t.Fatalf("the new host does not answer: %v", err)
	}
}

// host.upgrade.prepare: a host still recovering answers host_not_ready,
// one whose composition cannot hand over operation_unavailable; neither
// lets go of its home.
func TestUpgradePrepareNeedsAReadyHostThatCanHandOver(t *testing.T) {
	h, release := newHostComposing(t, server.Table{})
	ctx := agentdtest.Context(t)
	c, err := client.Dial(ctx, protocol.SocketPath(h.RuntimeDir, h.HostID), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := client.Call(ctx, c, protocol.OpHostUpgradePrepare, protocol.UpgradePrepareInput{}); !errors.Is(err, client.ErrHostNotReady) {
		t.Fatalf("upgrade.prepare while recovering: %v", err)
	}
	close(release)
	waitCh(t, h.Ready(), "host ready")
	if _, err := client.Call(ctx, c, protocol.OpHostUpgradePrepare, protocol.UpgradePrepareInput{}); !errors.Is(err, client.ErrOperationUnavailable) {
		t.Fatalf("upgrade.prepare without a hand-off: %v", err)
	}
	if st, err := c.Status(ctx); err != nil || st.State != protocol.StateReady {
		t.Fatalf("after the refusals: %+v, %v", st, err)
	}
}

// newHostComposing starts a host whose composition, of table, waits until
// release is closed, and returns once the host has entered it.
func newHostComposing(t *testing.T, table server.Table) (h *agentdtest.Host, release chan struct{}) {
	t.Helper()
	composing := make(chan struct{})
	release = make(chan struct{})
	h = agentdtest.NewHost(t, agentdtest.Options{NoWait: true, Compose: func(ctx context.Context, _ *server.Server) (server.Composition, error) {
		close(composing)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return composition{table}, nil
	}})
	waitCh(t, composing, "host entered composition")
	return h, release
}
