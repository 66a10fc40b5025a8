package client_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// listenRegistered listens as host reg.HostID in runtime directory dir
// and registers it there, ready, as reg says: its endpoint, pid and
// schema filled in.
func listenRegistered(t *testing.T, dir string, reg protocol.Registration) (*net.UnixListener, protocol.Registration) {
	t.Helper()
	if err := home.PrepareRuntimeDir(dir); err != nil {
		t.Fatal(err)
	}
	ln, err := home.Listen(dir, reg.HostID)
	if err != nil {
		t.Fatal(err)
	}
	reg.SchemaVersion, reg.PID, reg.State = 1, os.Getpid(), protocol.StateReady
	reg.Endpoint = protocol.SocketPath(dir, reg.HostID)
	if err := home.WriteRegistration(dir, reg); err != nil {
		t.Fatal(err)
	}
	return ln, reg
}

// staleHost registers a host that answers every hello with incompatible
// and, on its first, points the registration at the real host as a
// replacement would.
func staleHost(t *testing.T, dir, hostID string, replacement protocol.Registration) {
	t.Helper()
	ln, _ := listenRegistered(t, dir, protocol.Registration{HostID: hostID, ProtocolMin: 0, ProtocolMax: 0, Version: "old"})
	served := make(chan struct{})
	go func() {
		defer close(served)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r := bufio.NewReader(c)
			if _, err := r.ReadBytes('\n'); err == nil {
				replacement.HostID = hostID
				home.WriteRegistration(dir, replacement)
				b, _ := json.Marshal(protocol.Incompatible{Kind: protocol.KindIncompatible, Reason: "stale host", HostProtocolMin: 0, HostProtocolMax: 0})
				c.Write(append(b, '\n'))
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-served })
}

func TestOpenRechecksAnAutoDiscoveredHostAfterAVersionMismatch(t *testing.T) {
	real := agentdtest.NewHost(t, agentdtest.Options{})
	dir := agentdtest.ShortDir(t)
	replacement, err := home.ReadRegistration(protocol.RegistrationPath(real.RuntimeDir, real.HostID))
	if err != nil {
		t.Fatal(err)
	}
	staleHost(t, dir, "shared", replacement)
	c, info, started, err := client.Open(agentdtest.Context(t), client.OpenOptions{
		NoStart:    true,
		Activation: client.ActivationOptions{Home: real.Home, RuntimeDir: dir, HostID: "shared"},
	})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer c.Close()
	if started || info.Endpoint != real.Endpoint() || c.Accepted().HostEpoch != real.Epoch() {
		t.Fatalf("opened %+v (started %v), want the replacement host", info, started)
	}
}

// TestOpenDialsAReadyHostOnce shows that opening a registered, ready host
// costs it one connection: the handshake, with no liveness probe before it.
func TestOpenDialsAReadyHostOnce(t *testing.T) {
	dir := agentdtest.ShortDir(t)
	ln, reg := listenRegistered(t, dir, protocol.Registration{HostID: "h", ProtocolMin: protocol.ProtocolVersion, ProtocolMax: protocol.ProtocolVersion})
	accepts := make(chan int, 1)
	go func() {
		n := 0
		defer func() { accepts <- n }()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n++
			r := bufio.NewReader(c)
			if _, err := r.ReadBytes('\n'); err == nil {
				b, _ := json.Marshal(protocol.Accepted{Kind: protocol.KindAccepted, HostEpoch: "e1", ConnectionID: "c1", Protocol: protocol.ProtocolVersion})
				c.Write(append(b, '\n'))
			}
			defer c.Close()
		}
	}()
	c, info, started, err := client.Open(agentdtest.Context(t), client.OpenOptions{
		NoStart:    true,
		Activation: client.ActivationOptions{Home: dir, RuntimeDir: dir, HostID: "h"},
	})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	c.Close()
	ln.Close()
	if n := <-accepts; n != 1 || started || info.Endpoint != reg.Endpoint {
		t.Fatalf("open of %+v (started %v) made %d connections, want 1", info, started, n)
	}
}

func TestOpenFailsClearlyWhenTheHostStaysIncompatible(t *testing.T) {
	dir := agentdtest.ShortDir(t)
	stale := protocol.Registration{SchemaVersion: 1, PID: os.Getpid(), Endpoint: protocol.SocketPath(dir, "shared"), State: protocol.StateReady}
	staleHost(t, dir, "shared", stale)
	_, _, _, err := client.Open(agentdtest.Context(t), client.OpenOptions{
		NoStart:    true,
		Activation: client.ActivationOptions{Home: dir, RuntimeDir: dir, HostID: "shared"},
	})
	var inc *client.IncompatibleError
	if !errors.As(err, &inc) || inc.Reason != "stale host" {
		t.Fatalf("open: %v, want an IncompatibleError", err)
	}
}

func TestRemoteErrorsMatchTheirSentinels(t *testing.T) {
	h := agentdtest.NewHost(t, agentdtest.Options{})
	c := h.Connect(t)
	_, err := client.Call(agentdtest.Context(t), c, protocol.OpHostDiagnosticsQuery, protocol.DiagnosticsQueryInput{Limit: -1})
	var re *client.RemoteError
	if !errors.Is(err, client.ErrInvalidRequest) || !errors.As(err, &re) || re.Code != protocol.CodeInvalidRequest {
		t.Fatalf("error %v", err)
	}
	if errors.Is(err, client.ErrNotFound) {
		t.Fatal("an invalid_request error matched ErrNotFound")
	}
}

func TestQueryCutOffByItsDeadlineIsRetryable(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	table := server.Table{}
	server.Handle(table, protocol.OpTurnQuery, func(ctx context.Context, _ *server.Call, in *protocol.TurnRef) (protocol.TurnSnapshot, error) {
		close(entered)
		<-release
		return protocol.TurnSnapshot{}, nil
	})
	h := agentdtest.NewHost(t, agentdtest.Options{Compose: func(context.Context, *server.Server) (server.Composition, error) {
		return testComposition{table}, nil
	}})
	c := h.Connect(t)
	ctx, cancel := context.WithCancel(agentdtest.Context(t))
	errc := make(chan error, 1)
	go func() {
		_, err := client.Call(ctx, c, protocol.OpTurnQuery, protocol.TurnRef{SessionID: "s", TurnID: "t"})
		errc <- err
	}()
	<-entered
	cancel()
	var ie *client.InterruptedError
	if err := <-errc; !errors.As(err, &ie) || ie.Reason != client.ReasonTimeout || !ie.Dispatched || !ie.Retryable || ie.Mode != protocol.Query {
		t.Fatalf("error %v", err)
	}
	close(release)
	// The connection stays usable, and the late answer frees its slot.
	agentdtest.WaitStatus(t, c, func(s protocol.HostStatus) bool { return s.ActiveOperations == 1 })
}

func TestRequestsAfterTheHostDrainsReportHostDraining(t *testing.T) {
	h := agentdtest.NewHost(t, agentdtest.Options{})
	c := h.Connect(t)
	ctx := agentdtest.Context(t)
	if _, err := client.Call(ctx, c, protocol.OpHostShutdown, protocol.ShutdownInput{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(agentdtest.Timeout):
		t.Fatal("connection not closed by the draining host")
	}
	var ie *client.InterruptedError
	if _, err := c.Status(ctx); !errors.As(err, &ie) || ie.Reason != client.ReasonHostDraining || ie.Dispatched {
		t.Fatalf("status after drain: %v", err)
	}
}

func TestDialRefusesAPeerThatIsNotAHost(t *testing.T) {
	dir := agentdtest.ShortDir(t)
	ln, err := net.Listen("unix", dir+"/x.sock")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("SSH-2.0-OpenSSH\n"))
			c.Close()
		}
	}()
	if _, err := client.Dial(agentdtest.Context(t), dir+"/x.sock", client.Options{}); err == nil {
		t.Fatal("dial accepted a peer that is not a host")
	}
}

type testComposition struct{ table server.Table }

func (c testComposition) Handlers() server.Table    { return c.table }
func (testComposition) BeginDrain()                 {}
func (testComposition) Close(context.Context) error { return nil }

func TestOpenWaitsForAFreeSlotOfAHostAtItsConnectionLimit(t *testing.T) {
	dir := agentdtest.ShortDir(t)
	ln, _ := listenRegistered(t, dir, protocol.Registration{HostID: "h", ProtocolMin: protocol.ProtocolVersion, ProtocolMax: protocol.ProtocolVersion})
	srv, err := server.New(server.Config{HostID: "h", MaxConnections: 1})
	if err != nil {
		t.Fatal(err)
	}
	agentdtest.Serve(t, srv, ln)
	ctx := agentdtest.Context(t)
	first, err := client.Dial(ctx, ln.Addr().String(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()

	type opened struct {
		c   *client.Conn
		err error
	}
	done := make(chan opened, 1)
	go func() {
		c, _, _, err := client.Open(ctx, client.OpenOptions{
			NoStart:    true,
			Activation: client.ActivationOptions{Home: dir, RuntimeDir: dir, HostID: "h"},
		})
		done <- opened{c, err}
	}()
	// Once the host has refused Open a connection, the slot is freed.
	for refused := false; !refused; {
		d, err := client.Call(ctx, first, protocol.OpHostDiagnosticsQuery, protocol.DiagnosticsQueryInput{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range d.Diagnostics {
			refused = refused || strings.Contains(e.Message, "the host serves its maximum of 1 connections")
		}
		select {
		case o := <-done:
			t.Fatalf("Open returned while the host was full: %v", o.err)
		case <-ctx.Done():
			t.Fatal("the host never refused Open")
		case <-time.After(time.Millisecond):
		}
	}
	first.Close()
	o := <-done
	if o.err != nil {
		t.Fatalf("Open once a slot was free: %v", o.err)
	}
	o.c.Close()
}

// handOffComposition closes its one subscription as host_replaced when
// its host hands off, as the session service does.
type handOffComposition struct {
	testComposition
	out chan *server.OutboundWriter
}

func (c handOffComposition) AttachConnection(_ server.Identity, out *server.OutboundWriter) server.Attachment {
	c.out <- out
	return c
}

func (c handOffComposition) BeginHandOff() {
	out := <-c.out
	b, _ := json.Marshal(protocol.SubscriptionClosedFrame{
		Pushed: protocol.Pushed{Kind: protocol.KindSubscriptionClosed, HostEpoch: "e", SubscriptionID: "sub", Sequence: 1},
		Reason: protocol.ClosedHostReplaced,
	})
	out.Enqueue(server.Fence, b)
}

func TestRequestsAfterTheHostHandsOffReportHostReplaced(t *testing.T) {
	table := server.Table{}
	server.Handle(table, protocol.OpSessionTodoQuery, func(context.Context, *server.Call, *protocol.SessionRef) (protocol.TodoQueryResult, error) {
		return protocol.TodoQueryResult{}, nil
	})
	comp := handOffComposition{testComposition{table}, make(chan *server.OutboundWriter, 1)}
	h := agentdtest.NewHost(t, agentdtest.Options{Compose: func(context.Context, *server.Server) (server.Composition, error) { return comp, nil }})
	c := h.Connect(t)
	ctx := agentdtest.Context(t)
	w := c.Watch("sub")
	defer w.Close()
	if _, err := client.Call(ctx, c, protocol.OpSessionTodoQuery, protocol.SessionRef{SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Call(ctx, c, protocol.OpHostUpgradePrepare, protocol.UpgradePrepareInput{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(agentdtest.Timeout):
		t.Fatal("connection not closed by the host handing off")
	}
	if f, err := w.Next(ctx); err != nil || f.Kind != protocol.KindSubscriptionClosed {
		t.Fatalf("the subscription's last frame: %+v, %v", f, err)
	}
	var ie *client.InterruptedError
	if _, err := c.Status(ctx); !errors.As(err, &ie) || ie.Reason != client.ReasonHostReplaced || !strings.Contains(err.Error(), "replaced") {
		t.Fatalf("status after the hand-off: %v", err)
	}
}
