package client_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/protocol"
)

// holdUntil listens in front of endpoint: of each connection it reads
// lines lines, the hello among them, before it passes anything on to
// endpoint, then relays both ways. A client that waited for the host's
// answer to its hello before sending more would wait for ever.
func holdUntil(t *testing.T, endpoint string, lines int) string {
	t.Helper()
	sock := agentdtest.ShortDir(t) + "/front.sock"
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var relays sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		relays.Wait()
	})
	relays.Go(func() {
		for {
			front, err := ln.Accept()
			if err != nil {
				return
			}
			relays.Go(func() {
				defer front.Close()
				r := bufio.NewReader(front)
				var held []byte
				for range lines {
					line, err := r.ReadBytes('\n')
					if err != nil {
						return
					}
					held = append(held, line...)
				}
				back, err := net.Dial("unix", endpoint)
				if err != nil {
					return
				}
				defer back.Close()
				if _, err := back.Write(held); err != nil {
					return
				}
				var both sync.WaitGroup
				both.Go(func() {
					io.Copy(back, r)
					back.(*net.UnixConn).CloseWrite()
				})
				io.Copy(front, back)
				front.Close()
				both.Wait()
			})
		}
	})
	return sock
}

func TestRequestsPipelinedBehindTheHelloGoOutBeforeItsAnswer(t *testing.T) {
	h := agentdtest.NewHost(t, agentdtest.Options{})
	ctx := agentdtest.Context(t)
	// The hello and the two requests are all the host's front passes on
	// until it has read them.
	front := holdUntil(t, h.Endpoint(), 3)
	var calls sync.WaitGroup
	var status protocol.HostStatus
	var diags protocol.DiagnosticsQueryResult
	var statusErr, diagsErr error
	c, err := client.Dial(ctx, front, client.Options{Pipeline: func(c *client.Conn) {
		calls.Go(func() { status, statusErr = c.Status(ctx) })
		calls.Go(func() {
			diags, diagsErr = client.Call(ctx, c, protocol.OpHostDiagnosticsQuery, protocol.DiagnosticsQueryInput{})
		})
	}})
	if err != nil {
		calls.Wait()
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	calls.Wait()
	if statusErr != nil || diagsErr != nil {
		t.Fatalf("pipelined requests: host.status %v, host.diagnostics.query %v", statusErr, diagsErr)
	}
	if status.HostID != h.HostID || diags.Diagnostics == nil {
		t.Fatalf("pipelined answers: status %+v, diagnostics %+v", status, diags)
	}
	if c.Accepted().ConnectionID == "" {
		t.Fatal("the connection's handshake answer is not kept")
	}
	// The connection goes on as any other.
	if _, err := c.Status(ctx); err != nil {
		t.Fatalf("host.status after the pipelined ones: %v", err)
	}
}

func TestRequestsPipelinedBehindARefusedHelloFailWithItsAnswer(t *testing.T) {
	sock := agentdtest.ShortDir(t) + "/x.sock"
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var peer sync.WaitGroup
	defer peer.Wait()
	peer.Go(func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		// The hello and the request are read before the answer, so that
		// the request is surely pipelined.
		r := bufio.NewReader(nc)
		for range 2 {
			if _, err := r.ReadBytes('\n'); err != nil {
				return
			}
		}
		b, _ := json.Marshal(protocol.Incompatible{Kind: protocol.KindIncompatible, Reason: "stale host", HostProtocolMin: 0, HostProtocolMax: 0})
		nc.Write(append(b, '\n'))
	})
	ctx := agentdtest.Context(t)
	var call sync.WaitGroup
	var callErr error
	_, err = client.Dial(ctx, sock, client.Options{Pipeline: func(c *client.Conn) {
		call.Go(func() { _, callErr = c.Status(ctx) })
	}})
	call.Wait()
	var inc *client.IncompatibleError
	if !errors.As(err, &inc) || inc.Reason != "stale host" {
		t.Fatalf("dial: %v, want the host's incompatible answer", err)
	}
	var ie *client.InterruptedError
	if !errors.As(callErr, &ie) || !errors.As(callErr, &inc) {
		t.Fatalf("the pipelined request: %v, want it interrupted by the incompatible answer", callErr)
	}
}

func TestARefusalIsReadWhenARequestPipelinedBehindTheHelloFindsTheSocketClosed(t *testing.T) {
	sock := agentdtest.ShortDir(t) + "/x.sock"
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed := make(chan struct{})
	var peer sync.WaitGroup
	defer peer.Wait()
	peer.Go(func() {
		defer close(closed)
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		// As a host at its maximum of connections: the refusal, before
		// reading anything, then the end.
		b, _ := json.Marshal(protocol.Refused{Kind: protocol.KindRefused, MaxConnections: 1})
		nc.Write(append(b, '\n'))
		nc.Close()
	})
	ctx := agentdtest.Context(t)
	var call sync.WaitGroup
	_, err = client.Dial(ctx, sock, client.Options{Pipeline: func(c *client.Conn) {
		<-closed
		// Its write fails on the closed socket before the answer is read.
		call.Go(func() { c.Status(ctx) })
		call.Wait()
	}})
	var ref *client.RefusedError
	if !errors.As(err, &ref) || ref.MaxConnections != 1 {
		t.Fatalf("dial: %v, want the host's refusal", err)
	}
}
