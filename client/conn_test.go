package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

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
