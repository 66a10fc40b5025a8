package activation_test

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
	"github.com/agentd-dev/agentd/internal/activation"
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
	if _, err := home.PrepareRuntimeDir(dir); err != nil {
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
	c, info, started, err := activation.Open(agentdtest.Context(t), activation.OpenOptions{
		NoStart:    true,
		Activation: activation.Options{Home: real.Home, RuntimeDir: dir, HostID: "shared"},
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
	c, info, started, err := activation.Open(agentdtest.Context(t), activation.OpenOptions{
		NoStart:    true,
		Activation: activation.Options{Home: dir, RuntimeDir: dir, HostID: "h"},
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
	_, _, _, err := activation.Open(agentdtest.Context(t), activation.OpenOptions{
		NoStart:    true,
		Activation: activation.Options{Home: dir, RuntimeDir: dir, HostID: "shared"},
	})
	var inc *client.IncompatibleError
	if !errors.As(err, &inc) || inc.Reason != "stale host" {
		t.Fatalf("open: %v, want an IncompatibleError", err)
	}
}

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
		c, _, _, err := activation.Open(ctx, activation.OpenOptions{
			NoStart:    true,
			Activation: activation.Options{Home: dir, RuntimeDir: dir, HostID: "h"},
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

type testComposition struct{ table server.Table }

func (c testComposition) Handlers() server.Table    { return c.table }
func (testComposition) BeginDrain()                 {}
func (testComposition) Close(context.Context) error { return nil }
