package server_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// rawConn is a connection that has said hello and speaks the framing by
// hand, so that it can stop in the middle of a message.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func dialRaw(t *testing.T, endpoint string) *rawConn {
	t.Helper()
	nc, err := net.Dial("unix", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
	hello, _ := json.Marshal(protocol.Hello{
		Kind: protocol.KindHello, ClientInstanceID: "raw",
		ProtocolMin: protocol.ProtocolVersion, ProtocolMax: protocol.ProtocolVersion,
		CompatibilityEpoch: protocol.CompatibilityEpoch, CompositionID: protocol.CompositionInteractive,
	})
	c.write(append(hello, '\n'))
	if line := c.line(); !strings.Contains(line, `"kind":"accepted"`) {
		t.Fatalf("hello answered %q", line)
	}
	return c
}

func (c *rawConn) write(b []byte) error {
	c.nc.SetWriteDeadline(time.Now().Add(agentdtest.Timeout))
	_, err := c.nc.Write(b)
	return err
}

// line reads the next frame, failing the test at the end of the stream.
func (c *rawConn) line() string {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(agentdtest.Timeout))
	line, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("reading a frame: %v", err)
	}
	return line
}

// closed waits until the host closes the connection.
func (c *rawConn) closed() {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(agentdtest.Timeout))
	if _, err := io.Copy(io.Discard, c.r); err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		c.t.Fatalf("the host did not close the connection: %v", err)
	}
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

// padded returns the head of a host.status request whose input carries
// n bytes of padding, and its tail; together with a newline they are one
// message, answered invalid_request (the input has an unknown field).
func padded(id string, n int) (head, tail []byte) {
	head = fmt.Appendf(nil, `{"requestId":%q,"operation":"host.status","input":{"pad":"%s`, id, strings.Repeat("x", n))
	return head, []byte("\"}}\n")
}

func diagnosticsWith(t *testing.T, c *client.Conn, substr string) []string {
	t.Helper()
	d, err := client.Call(agentdtest.Context(t), c, protocol.OpHostDiagnosticsQuery, protocol.DiagnosticsQueryInput{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range d.Diagnostics {
		if strings.Contains(e.Message, substr) {
			out = append(out, e.Message)
		}
	}
	return out
}

// waitHeld waits until what the server holds for partly read messages
// is ok.
func waitHeld(t *testing.T, srv *server.Server, ok func(int64) bool, what string) {
	t.Helper()
	ctx := agentdtest.Context(t)
	for !ok(srv.ReadBytesHeld()) {
		select {
		case <-ctx.Done():
			t.Fatalf("the server holds %d bytes for partly read messages; want %s", srv.ReadBytesHeld(), what)
		case <-time.After(time.Millisecond):
		}
	}
}

func TestAConnectionStalledMidMessageIsClosedWhileIdleAndBusySiblingsAreServed(t *testing.T) {
	srv, endpoint, _ := startServer(t, server.Config{MessageTimeout: time.Second})
	ctx := agentdtest.Context(t)
	sibling, err := client.Dial(ctx, endpoint, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sibling.Close()
	// Idle from before the stall until after it: longer than the timeout,
	// after a message long enough to be read in pieces, whose timeout
	// the host set and has passed.
	idle := dialRaw(t, endpoint)
	head, tail := padded("r0", 100<<10)
	if err := idle.write(append(head, tail...)); err != nil {
		t.Fatal(err)
	}
	if line := idle.line(); !strings.Contains(line, `"code":"invalid_request"`) {
		t.Fatalf("a long message answered %.200q", line)
	}

	stalled := dialRaw(t, endpoint)
	if err := stalled.write(head); err != nil {
		t.Fatal(err)
	}
	stalled.closed()

	if _, err := sibling.Status(ctx); err != nil {
		t.Fatalf("a sibling connection: %v", err)
	}
	if err := idle.write([]byte(`{"requestId":"r1","operation":"host.status"}` + "\n")); err != nil {
		t.Fatalf("an idle connection: %v", err)
	}
	if line := idle.line(); !strings.Contains(line, `"ok":true`) {
		t.Fatalf("an idle connection's host.status: %q", line)
	}
	if d := diagnosticsWith(t, sibling, "did not arrive whole in time"); len(d) != 1 {
		t.Errorf("diagnostics of the stalled message: %q; want one", d)
	}
	if held := srv.ReadBytesHeld(); held != 0 {
		t.Errorf("%d bytes held for partly read messages once the stalled connection is closed", held)
	}
}

func TestConnectionsPastTheReadBudgetAreClosedAndTheBudgetComesBack(t *testing.T) {
	// The hog's 600 KB grow its buffer to 896 KiB, holding 512 KiB
	// besides for the move; what is left of the budget then is less than
	// any victim's 300 KB needs (a 512 KiB buffer beside a 256 KiB one).
	const budget = 1536 << 10
	const hogBuffer = 896 << 10
	srv, endpoint, _ := startServer(t, server.Config{MaxReadBytes: budget})
	ctx := agentdtest.Context(t)
	sibling, err := client.Dial(ctx, endpoint, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sibling.Close()

	hog := dialRaw(t, endpoint)
	hogHead, hogTail := padded("r1", 600_000)
	if err := hog.write(hogHead); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, srv, func(n int64) bool { return n == hogBuffer }, "the hog's 896 KiB")

	const victims = 6
	for i := range victims {
		v := dialRaw(t, endpoint)
		head, _ := padded("r1", 300_000)
		v.write(head) // the host may close it before it is all written
		v.closed()
		if held := srv.ReadBytesHeld(); held > budget {
			t.Fatalf("victim %d: %d bytes held, past the budget of %d", i, held, budget)
		}
		if _, err := sibling.Status(ctx); err != nil {
			t.Fatalf("victim %d closed: a sibling connection: %v", i, err)
		}
	}
	// A hello is read within the same budget.
	nc, err := net.Dial("unix", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	early := &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
	t.Cleanup(func() { nc.Close() })
	early.write(fmt.Appendf(nil, `{"kind":"hello","clientInstanceId":"%s`, strings.Repeat("x", 300_000)))
	early.closed()
	if d := diagnosticsWith(t, sibling, "memory budget for reading"); len(d) != victims+1 {
		t.Errorf("diagnostics of connections past the budget: %d; want %d:\n%s", len(d), victims+1, strings.Join(d, "\n"))
	} else if !strings.HasPrefix(d[victims], "handshake refused: ") {
		t.Errorf("diagnostic of a hello past the budget: %q", d[victims])
	}

	// The hog, within the budget, is served: its message is answered,
	// and once it reads on, it has let its large buffer go.
	if err := hog.write(hogTail); err != nil {
		t.Fatal(err)
	}
	if line := hog.line(); !strings.Contains(line, `"code":"invalid_request"`) {
		t.Fatalf("the hog's message answered %.200q", line)
	}
	if err := hog.write([]byte(`{"requestId":"r2","operation":"host.status"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if line := hog.line(); !strings.Contains(line, `"ok":true`) {
		t.Fatalf("the hog's host.status: %q", line)
	}
	if held := srv.ReadBytesHeld(); held != 0 {
		t.Errorf("%d bytes held once the large message is read", held)
	}

	// A connection that closes mid-message gives its bytes back too.
	hog.write(hogHead)
	waitHeld(t, srv, func(n int64) bool { return n >= int64(len(hogHead)) }, "the hog's 600 KB again")
	hog.nc.Close()
	waitHeld(t, srv, func(n int64) bool { return n == 0 }, "none once the hog has closed")
}
