package sessions_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/protocol"
)

// workerConn is a connection straight to a session's worker, read by
// hand, as a client that holds a ticket opens one.
type workerConn struct {
	t      *testing.T
	nc     net.Conn
	r      *bufio.Reader
	asked  int
	queued []string // pushed frames read while a response was awaited
}

func dialWorker(t *testing.T, ticket protocol.ControllerDirectResult) *workerConn {
	t.Helper()
	nc, err := net.Dial("unix", ticket.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	w := &workerConn{t: t, nc: nc, r: bufio.NewReaderSize(nc, protocol.MaxMessageBytes+1)}
	hello := fmt.Sprintf(`{"kind":"hello","clientInstanceId":"direct","protocolMin":1,"protocolMax":1,"compatibilityEpoch":1,"compositionId":%q,"surface":"cli"}`, ticket.CompositionID)
	if _, err := nc.Write([]byte(hello + "\n")); err != nil {
		t.Fatal(err)
	}
	if line := w.read(); !strings.Contains(line, `"kind":"accepted"`) {
		t.Fatalf("the worker's handshake: %s", line)
	}
	return w
}

func (w *workerConn) read() string {
	w.t.Helper()
	w.nc.SetReadDeadline(time.Now().Add(agentdtest.Timeout))
	line, err := w.r.ReadString('\n')
	if err != nil {
		w.t.Fatalf("reading the worker: %v", err)
	}
	return strings.TrimSuffix(line, "\n")
}

// call runs operation on the worker and returns its result, or its error.
func (w *workerConn) call(operation string, input any) (json.RawMessage, *protocol.Error) {
	w.t.Helper()
	w.asked++
	id := fmt.Sprintf("d%d", w.asked)
	in, _ := json.Marshal(input)
	if _, err := fmt.Fprintf(w.nc, "{\"requestId\":%q,\"operation\":%q,\"input\":%s}\n", id, operation, in); err != nil {
		w.t.Fatal(err)
	}
	for {
		line := w.read()
		hf, err := protocol.DecodeHostFrame([]byte(line))
		switch {
		case err != nil:
			w.t.Fatalf("a frame of the worker: %v: %s", err, line)
		case hf.Response == nil:
			w.queued = append(w.queued, line)
		case hf.Response.RequestID != id:
			w.t.Fatalf("%s: answered %s", operation, line)
		case !hf.Response.OK:
			return nil, hf.Response.Error
		default:
			return hf.Response.Result, nil
		}
	}
}

// until reads the worker's frames until the PTY's output shows want, and
// returns the frames read.
func (w *workerConn) until(want string) []string {
	w.t.Helper()
	var frames []string
	var text strings.Builder
	for !strings.Contains(text.String(), want) {
		var line string
		if len(w.queued) > 0 {
			line, w.queued = w.queued[0], w.queued[1:]
		} else {
			line = w.read()
		}
		frames = append(frames, line)
		var d protocol.RuntimeResourcePtyDataFrame
		if json.Unmarshal([]byte(line), &d) == nil && d.Kind == protocol.KindRuntimeResourcePtyData {
			text.WriteString(d.Data)
		}
		if strings.Contains(line, protocol.KindSubscriptionClosed) {
			w.t.Fatalf("the worker's subscription closed waiting for %q: %s", want, line)
		}
	}
	return frames
}

// closed reads the worker's frames until its subscription's closed frame
// and returns its reason, with the PTY updates read before it.
func (w *workerConn) closed() (string, []protocol.Resource) {
	w.t.Helper()
	var updates []protocol.Resource
	for {
		var line string
		if len(w.queued) > 0 {
			line, w.queued = w.queued[0], w.queued[1:]
		} else {
			line = w.read()
		}
		hf, err := protocol.DecodeHostFrame([]byte(line))
		if err != nil {
			w.t.Fatalf("a frame of the worker: %v", err)
		}
		switch hf.Pushed.Kind {
		case protocol.KindSubscriptionClosed:
			var c protocol.SubscriptionClosedFrame
			json.Unmarshal([]byte(line), &c)
			return c.Reason, updates
		case protocol.KindRuntimeResourceUpdate:
			var u protocol.RuntimeResourceUpdateFrame
			var r protocol.Resource
			json.Unmarshal([]byte(line), &u)
			json.Unmarshal(u.Resource, &r)
			updates = append(updates, r)
		}
	}
}

// direct takes control of PTY ref of session id on c, asks the host for
// a ticket to the worker, and opens the worker's connection with it.
func direct(t *testing.T, c *client.Conn, id, ref string) (protocol.ControllerAcquireResult, *workerConn, protocol.DirectOpenResult) {
	t.Helper()
	ctx := agentdtest.Context(t)
	ctl, err := client.Call(ctx, c, protocol.OpRuntimeResourceControllerAcquire, protocol.ResourceRef{SessionID: id, Ref: ref})
	if err != nil {
		t.Fatal(err)
	}
	ticket, err := client.Call(ctx, c, protocol.OpRuntimeResourceControllerDirect, protocol.ControllerRef{SessionID: id, Ref: ref, ControllerID: ctl.ControllerID})
	if err != nil {
		t.Fatal(err)
	}
	w := dialWorker(t, ticket)
	raw, perr := w.call(string(protocol.OpRuntimeResourceDirectOpen), protocol.DirectOpenInput{Ticket: ticket.Ticket})
	if perr != nil {
		t.Fatalf("opening the worker's connection: %+v", perr)
	}
	var open protocol.DirectOpenResult
	if err := json.Unmarshal(raw, &open); err != nil {
		t.Fatal(err)
	}
	return ctl, w, open
}

func controlOn(w *workerConn, id, ref, ctl string, seq uint64, data string) *protocol.Error {
	w.t.Helper()
	_, err := w.call(string(protocol.OpRuntimeResourceControllerControl), protocol.ControlInput{SessionID: id, Ref: ref, ControllerID: ctl, Sequence: seq, Data: data})
	return err
}

// A PTY's controller asks the host for a ticket and types into the PTY,
// and reads it, on a connection to its worker: the endpoint is the
// worker's own socket, the stream starts with the screen, and the output
// reaches the host's watchers as well. The controller keeps one fence
// and one count of sequences whichever way a call goes (seed 004): a
// retry through the host of a call made on the worker is answered again
// and not applied twice, other input under its sequence and a sequence
// out of order conflict, and another client still cannot take the PTY.
func TestAPTYsControllerTypesOnItsWorkerWithTheSameFenceAndSequences(t *testing.T) {
	h, a, work := newHost(t, time.Hour)
	ctx := agentdtest.Context(t)
	s, pty := sessionWithPTY(t, a, work, "stty -echo; echo ready; cat")
	watch := watchPTY(t, h.Endpoint(), s.SessionID, pty.Ref)
	watch.until("ready")

	ctl, w, open := direct(t, a, s.SessionID, pty.Ref)
	reg, err := home.ReadWorkerRegistration(home.WorkerRegistrationPath(h.Home, s.SessionID))
	if err != nil {
		t.Fatal(err)
	}
	if w.nc.RemoteAddr().String() != reg.Endpoint {
		t.Fatalf("the ticket's endpoint is %s, the worker listens at %s", w.nc.RemoteAddr(), reg.Endpoint)
	}
	if open.SessionID != s.SessionID || open.Ref != pty.Ref || open.ControllerID != ctl.ControllerID {
		t.Fatalf("opened %+v for controller %s", open, ctl.ControllerID)
	}
	first := w.until("ready")
	var d protocol.RuntimeResourcePtyDataFrame
	if json.Unmarshal([]byte(first[0]), &d) != nil || !d.Screen {
		t.Fatalf("the worker's first frame is not the PTY's screen: %s", first[0])
	}

	if err := controlOn(w, s.SessionID, pty.Ref, ctl.ControllerID, 1, "one\n"); err != nil {
		t.Fatal(err)
	}
	w.until("one")
	watch.until("one")

	control := func(seq uint64, data string) error {
		_, err := client.Call(ctx, a, protocol.OpRuntimeResourceControllerControl, protocol.ControlInput{
			SessionID: s.SessionID, Ref: pty.Ref, ControllerID: ctl.ControllerID, Sequence: seq, Data: data,
		})
		return err
	}
	if err := control(1, "one\n"); err != nil {
		t.Fatalf("a retry through the host of the worker's call: %v", err)
	}
	wantCode(t, control(1, "uno\n"), protocol.CodeOperationConflict)
	wantCode(t, control(3, "three\n"), protocol.CodeOperationConflict)
	if err := control(2, "two\n"); err != nil {
		t.Fatal(err)
	}
	if err := controlOn(w, s.SessionID, pty.Ref, ctl.ControllerID, 2, "two\n"); err != nil {
		t.Fatalf("a retry on the worker of the host's call: %+v", err)
	}
	if err := controlOn(w, s.SessionID, pty.Ref, ctl.ControllerID, 4, "four\n"); err == nil || err.Code != protocol.CodeOperationConflict {
		t.Fatalf("a sequence out of order on the worker: %+v", err)
	}
	if err := controlOn(w, s.SessionID, pty.Ref, ctl.ControllerID, 3, "three\n"); err != nil {
		t.Fatal(err)
	}
	w.until("three")
	watch.until("three")
	if got := watch.text.String(); strings.Count(got, "one") != 1 || strings.Count(got, "two") != 1 || strings.Contains(got, "uno") || strings.Contains(got, "four") {
		t.Fatalf("the PTY printed %q: a call was applied twice, or one out of order", got)
	}

	// The fence is the controller's: another client cannot take the PTY,
	// nor type with the controller's id on its own connection to the
	// worker.
	b := h.Connect(t)
	_, err = client.Call(ctx, b, protocol.OpRuntimeResourceControllerAcquire, protocol.ResourceRef{SessionID: s.SessionID, Ref: pty.Ref})
	wantCode(t, err, protocol.CodeOperationConflict)
	_, err = client.Call(ctx, b, protocol.OpRuntimeResourceControllerDirect, protocol.ControllerRef{SessionID: s.SessionID, Ref: pty.Ref, ControllerID: ctl.ControllerID})
	wantCode(t, err, protocol.CodeOperationConflict)
	other := dialWorker(t, protocol.ControllerDirectResult{Endpoint: reg.Endpoint, CompositionID: "agentd.worker"})
	if err := controlOn(other, s.SessionID, pty.Ref, ctl.ControllerID, 4, "not yours\n"); err == nil || err.Code != protocol.CodeOperationConflict {
		t.Fatalf("a control call with the controller's id on another connection to the worker: %+v", err)
	}
	// The connection carries this PTY's controller and no other.
	if err := controlOn(w, s.SessionID, "pty-9", ctl.ControllerID, 4, "x"); err == nil || err.Code != protocol.CodeOperationConflict {
		t.Fatalf("a control call of another PTY on the worker's connection: %+v", err)
	}
	if err := control(4, "end\n"); err != nil {
		t.Fatal(err)
	}
	watch.until("end")
	if strings.Contains(watch.text.String(), "not yours") {
		t.Fatal("a connection that does not hold the control wrote to the PTY")
	}
}

// A ticket opens one connection, once, within its lifetime; an unknown
// one opens none. Only the owner's connections of the host's socket get
// one, and only for a controller they hold.
func TestATicketToTheWorkerOpensOneConnectionForItsController(t *testing.T) {
	_, a, work := newHost(t, time.Hour)
	ctx := agentdtest.Context(t)
	s, pty := sessionWithPTY(t, a, work, "cat")
	ctl, err := client.Call(ctx, a, protocol.OpRuntimeResourceControllerAcquire, protocol.ResourceRef{SessionID: s.SessionID, Ref: pty.Ref})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Call(ctx, a, protocol.OpRuntimeResourceControllerDirect, protocol.ControllerRef{SessionID: s.SessionID, Ref: pty.Ref, ControllerID: "ctl-99"})
	wantCode(t, err, protocol.CodeOperationConflict)
	ticket, err := client.Call(ctx, a, protocol.OpRuntimeResourceControllerDirect, protocol.ControllerRef{SessionID: s.SessionID, Ref: pty.Ref, ControllerID: ctl.ControllerID})
	if err != nil {
		t.Fatal(err)
	}
	if len(ticket.Ticket) != 64 {
		t.Fatalf("a ticket of %d hex digits, want 256 bits", len(ticket.Ticket))
	}
	_, err = client.Call(ctx, a, protocol.OpRuntimeResourceDirectOpen, protocol.DirectOpenInput{Ticket: ticket.Ticket})
	wantCode(t, err, protocol.CodeOperationUnavailable)

	w := dialWorker(t, ticket)
	forged := ticket
	forged.Ticket = strings.Repeat("0", 64)
	if _, err := w.call(string(protocol.OpRuntimeResourceDirectOpen), protocol.DirectOpenInput{Ticket: forged.Ticket}); err == nil || err.Code != protocol.CodeUnauthorized {
		t.Fatalf("an unknown ticket: %+v", err)
	}
	if _, err := w.call(string(protocol.OpRuntimeResourceDirectOpen), protocol.DirectOpenInput{Ticket: ticket.Ticket}); err != nil {
		t.Fatal(err)
	}
	again := dialWorker(t, ticket)
	if _, err := again.call(string(protocol.OpRuntimeResourceDirectOpen), protocol.DirectOpenInput{Ticket: ticket.Ticket}); err == nil || err.Code != protocol.CodeUnauthorized {
		t.Fatalf("a ticket used twice: %+v", err)
	}
	if err := controlOn(again, s.SessionID, pty.Ref, ctl.ControllerID, 1, "x"); err == nil || err.Code != protocol.CodeOperationConflict {
		t.Fatalf("a control call on a connection the ticket did not open: %+v", err)
	}
}

// The guests' and the web's connections keep going through the host: a
// guest with control of a PTY gets no ticket, nor does the owner over the
// WebSocket.
func TestOnlyTheOwnersSocketGetsATicketToTheWorker(t *testing.T) {
	w := newWebHost(t, nil)
	ctx := agentdtest.Context(t)
	s, pty := sessionWithPTY(t, w.owner, w.work, "cat")
	g := w.share(t, s.SessionID, protocol.GrantControl)
	guest := w.guestConn(t, g.Token)
	ctl, err := client.Call(ctx, guest, protocol.OpRuntimeResourceControllerAcquire, protocol.ResourceRef{SessionID: s.SessionID, Ref: pty.Ref})
	if err != nil {
		t.Fatalf("the guest's acquire: %v", err)
	}
	_, err = client.Call(ctx, guest, protocol.OpRuntimeResourceControllerDirect, protocol.ControllerRef{SessionID: s.SessionID, Ref: pty.Ref, ControllerID: ctl.ControllerID})
	wantCode(t, err, protocol.CodeUnauthorized)
	if _, err := client.Call(ctx, guest, protocol.OpRuntimeResourceControllerRelease, protocol.ControllerRef{SessionID: s.SessionID, Ref: pty.Ref, ControllerID: ctl.ControllerID}); err != nil {
		t.Fatal(err)
	}

	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, w.web.URL+"login", nil)
	req.Header.Set("Authorization", "Bearer "+w.web.OwnerToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(resp.Cookies()) != 1 {
		t.Fatalf("the owner's login answered %d", resp.StatusCode)
	}
	owner, err := client.Dial(ctx, w.web.WebSocketURL, client.Options{Surface: protocol.SurfaceWeb, Dial: func(ctx context.Context) (net.Conn, error) {
		nc, _, err := dialWeb(ctx, w.web.WebSocketURL, http.Header{"Cookie": {resp.Cookies()[0].String()}})
		return nc, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	if p := owner.Accepted().Principal; p.Kind != protocol.PrincipalLocalOwner {
		t.Fatalf("the web owner's connection acts for %+v", p)
	}
	ctl, err = client.Call(ctx, owner, protocol.OpRuntimeResourceControllerAcquire, protocol.ResourceRef{SessionID: s.SessionID, Ref: pty.Ref})
	if err != nil {
		t.Fatalf("the web owner's acquire: %v", err)
	}
	_, err = client.Call(ctx, owner, protocol.OpRuntimeResourceControllerDirect, protocol.ControllerRef{SessionID: s.SessionID, Ref: pty.Ref, ControllerID: ctl.ControllerID})
	wantCode(t, err, protocol.CodeUnauthorized)
}

// The worker's connection lives no longer than the control it carries:
// however the control ends, what waited is written (the PTY's end first,
// when that is how it ended), its subscription closes with
// access_revoked, and its calls are no longer the controller's.
func TestTheWorkersConnectionEndsWithTheControl(t *testing.T) {
	ends := []struct {
		name string
		end  func(t *testing.T, h *agentdtest.Host, c *client.Conn, id, ref, ctl string)
		// exited is set where the PTY's end comes before the close.
		exited bool
	}{
		{"released through the host", func(t *testing.T, _ *agentdtest.Host, c *client.Conn, id, ref, ctl string) {
			if _, err := client.Call(agentdtest.Context(t), c, protocol.OpRuntimeResourceControllerRelease, protocol.ControllerRef{SessionID: id, Ref: ref, ControllerID: ctl}); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"the controller's host connection closed", func(t *testing.T, _ *agentdtest.Host, c *client.Conn, _, _, _ string) {
			c.Close()
		}, false},
		{"the PTY stopped", func(t *testing.T, _ *agentdtest.Host, c *client.Conn, id, ref, _ string) {
			if _, err := client.Call(agentdtest.Context(t), c, protocol.OpRuntimeResourceStop, protocol.ResourceRef{SessionID: id, Ref: ref}); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"the PTY exited", func(t *testing.T, _ *agentdtest.Host, c *client.Conn, id, ref, ctl string) {
			// End of input through the host: cat ends, and the PTY's shell.
			if _, err := client.Call(agentdtest.Context(t), c, protocol.OpRuntimeResourceControllerControl, protocol.ControlInput{
				SessionID: id, Ref: ref, ControllerID: ctl, Sequence: 2, Data: "\x04",
			}); err != nil {
				t.Fatal(err)
			}
		}, true},
	}
	for _, tt := range ends {
		t.Run(tt.name, func(t *testing.T) {
			h, a, work := newHost(t, time.Hour)
			s, pty := sessionWithPTY(t, a, work, "stty -echo; echo ready; cat")
			ctl, w, _ := direct(t, a, s.SessionID, pty.Ref)
			w.until("ready")
			if err := controlOn(w, s.SessionID, pty.Ref, ctl.ControllerID, 1, "before\n"); err != nil {
				t.Fatal(err)
			}
			w.until("before")
			tt.end(t, h, a, s.SessionID, pty.Ref, ctl.ControllerID)
			reason, updates := w.closed()
			if reason != protocol.ClosedAccessRevoked {
				t.Fatalf("the worker's subscription closed with %q, want %s", reason, protocol.ClosedAccessRevoked)
			}
			if tt.exited && !exitedIn(updates, pty.Ref) {
				t.Fatalf("the PTY's end did not come before the close: %+v", updates)
			}
			if err := controlOn(w, s.SessionID, pty.Ref, ctl.ControllerID, 3, "after\n"); err == nil {
				t.Fatal("a control call on the worker's connection was applied after the control ended")
			}
		})
	}

	// Archived, or its host shut down: the session's worker stops, and
	// its connections with it.
	stops := []struct {
		name string
		stop func(t *testing.T, h *agentdtest.Host, c *client.Conn, id string)
	}{
		{"the session archived", func(t *testing.T, _ *agentdtest.Host, c *client.Conn, id string) {
			if _, err := client.Call(agentdtest.Context(t), c, protocol.OpSessionArchive, protocol.SessionRef{SessionID: id}); err != nil {
				t.Fatal(err)
			}
		}},
		{"the host shut down", func(t *testing.T, h *agentdtest.Host, _ *client.Conn, _ string) {
			if err := h.Shutdown(agentdtest.Context(t)); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range stops {
		t.Run(tt.name, func(t *testing.T) {
			h, a, work := newHost(t, time.Hour)
			s, pty := sessionWithPTY(t, a, work, "stty -echo; echo ready; cat")
			_, w, _ := direct(t, a, s.SessionID, pty.Ref)
			w.until("ready")
			tt.stop(t, h, a, s.SessionID)
			w.nc.SetReadDeadline(time.Now().Add(agentdtest.Timeout))
			for {
				if _, err := w.r.ReadString('\n'); err != nil {
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						t.Fatalf("the worker's connection is still open after %s", tt.name)
					}
					break
				}
			}
		})
	}
}

// A client that reads the worker's connection slower than its PTY
// prints loses that connection, as a slow subscriber of the host loses
// its subscription; the PTY is not held back for it, and its control goes
// on through the host.
func TestASlowReaderOfTheWorkersConnectionLosesItAndHoldsNothingBack(t *testing.T) {
	h, a, work := newHost(t, time.Hour)
	done := filepath.Join(work, "flood-done")
	s, pty := sessionWithPTY(t, a, work, "stty -echo; read go; head -c 8000000 /dev/zero | tr '\\0' x; touch "+done+"; cat")
	ctl, w, _ := direct(t, a, s.SessionID, pty.Ref)
	// The worker's connection is not read while the PTY floods, and the
	// flood ends all the same.
	if err := controlOn(w, s.SessionID, pty.Ref, ctl.ControllerID, 1, "go\n"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the PTY's flood ends with its controller's connection to the worker unread", func() bool {
		_, err := os.Stat(done)
		return err == nil
	})
	// Read at last, the connection ends: its subscription closed as a slow
	// consumer's, or the connection closed once its outbound queue filled.
	w.nc.SetReadDeadline(time.Now().Add(agentdtest.Timeout))
	ended := ""
	for ended == "" {
		line, err := w.r.ReadString('\n')
		switch {
		case err != nil:
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the slow reader's connection to the worker went on")
			}
			ended = "closed"
		case strings.Contains(line, protocol.KindSubscriptionClosed):
			var c protocol.SubscriptionClosedFrame
			json.Unmarshal([]byte(line), &c)
			if c.Reason != protocol.ClosedSlowConsumer {
				t.Fatalf("the slow reader's subscription closed with %q, want %s", c.Reason, protocol.ClosedSlowConsumer)
			}
			ended = c.Reason
		}
	}
	if ended != "closed" {
		if err := controlOn(w, s.SessionID, pty.Ref, ctl.ControllerID, 2, "not through the worker\n"); err == nil {
			t.Fatal("the slow reader's connection still carries the control")
		}
	}
	// The control is still the client's, through the host.
	watch := watchPTY(t, h.Endpoint(), s.SessionID, pty.Ref)
	if _, err := client.Call(agentdtest.Context(t), a, protocol.OpRuntimeResourceControllerControl, protocol.ControlInput{
		SessionID: s.SessionID, Ref: pty.Ref, ControllerID: ctl.ControllerID, Sequence: 2, Data: "still mine\n",
	}); err != nil {
		t.Fatal(err)
	}
	watch.until("still mine")
}
