package server_test

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// startServer starts a server of cfg on a real socket and returns it, its
// endpoint and what stops it; it is stopped when the test ends at the
// latest.
func startServer(t *testing.T, cfg server.Config) (*server.Server, string, func() error) {
	t.Helper()
	endpoint := filepath.Join(agentdtest.ShortDir(t), "h1.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: endpoint, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.HostID = "h1"
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := agentdtest.Serve(t, srv, ln)
	<-srv.Ready()
	return srv, endpoint, stop
}

// refusedHandshake sends a first frame that is not a hello and waits until
// the host closes the connection.
func refusedHandshake(t *testing.T, endpoint string) {
	t.Helper()
	nc, err := net.Dial("unix", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write([]byte("{\"requestId\":\"r1\",\"operation\":\"host.status\"}\n")); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(agentdtest.Timeout))
	if _, err := io.Copy(io.Discard, nc); err != nil {
		t.Fatalf("the host did not close the connection: %v", err)
	}
}

var suppressedLine = regexp.MustCompile(`handshake refused: (\d+) more like this suppressed`)

func TestRepeatedDiagnosticsAreCountedNotWrittenOneByOne(t *testing.T) {
	var logs agentdtest.LockedBuffer
	_, endpoint, stop := startServer(t, server.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	const n = 300
	for range n {
		refusedHandshake(t, endpoint)
	}
	c, err := client.Dial(agentdtest.Context(t), endpoint, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var d protocol.DiagnosticsQueryResult
	d, err = client.Call(agentdtest.Context(t), c, protocol.OpHostDiagnosticsQuery, protocol.DiagnosticsQueryInput{})
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, e := range d.Diagnostics {
		if strings.HasPrefix(e.Message, "handshake refused: ") && !suppressedLine.MatchString(e.Message) {
			kept++
		}
	}
	if kept+int(d.Suppressed) != n || kept >= n/2 {
		t.Fatalf("%d handshakes refused: %d diagnostics kept, %d suppressed; want them counted, not kept one by one", n, kept, d.Suppressed)
	}

	// Once the host stops, the log holds the ones written and one line
	// for each run of suppressed ones, which together count them all.
	if err := stop(); !errors.Is(err, server.ErrStopped) {
		t.Fatal(err)
	}
	logged, summarised := 0, 0
	for line := range strings.Lines(logs.String()) {
		if m := suppressedLine.FindStringSubmatch(line); m != nil {
			k, _ := strconv.Atoi(m[1])
			summarised += k
		} else if strings.Contains(line, "handshake refused: ") {
			logged++
		}
	}
	if logged != kept || summarised != int(d.Suppressed) {
		t.Errorf("log: %d handshakes refused written, %d summarised; want %d and %d\n%s", logged, summarised, kept, d.Suppressed, logs.String())
	}
}

func TestConnectionPastTheLimitIsRefusedAndItsSlotReused(t *testing.T) {
	const max = 4
	_, endpoint, _ := startServer(t, server.Config{MaxConnections: max})
	ctx := agentdtest.Context(t)
	var conns []*client.Conn
	// One connection still in its handshake counts.
	pending, err := net.Dial("unix", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer pending.Close()
	for range max - 1 {
		c, err := client.Dial(ctx, endpoint, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}

	_, err = client.Dial(ctx, endpoint, client.Options{})
	var refused *client.RefusedError
	if !errors.As(err, &refused) || refused.MaxConnections != max {
		t.Fatalf("connection %d: %v; want it refused", max+1, err)
	}
	if want := "the host serves its maximum of 4 connections"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	// Raw: the refusal comes unasked, before any hello.
	nc, err := net.Dial("unix", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(agentdtest.Timeout))
	line, err := io.ReadAll(nc)
	nc.Close()
	var frame protocol.Refused
	if err != nil || json.Unmarshal(line, &frame) != nil || frame.Kind != protocol.KindRefused || frame.MaxConnections != max {
		t.Fatalf("raw connection past the limit got %q, %v; want a refused frame", line, err)
	}

	for _, c := range conns {
		if _, err := c.Status(ctx); err != nil {
			t.Fatalf("a connection within the limit: %v", err)
		}
	}

	// A slot freed is served again.
	pending.Close()
	for {
		c, err := client.Dial(ctx, endpoint, client.Options{})
		if err == nil {
			defer c.Close()
			if _, err := c.Status(ctx); err != nil {
				t.Fatal(err)
			}
			break
		}
		if !errors.As(err, &refused) {
			t.Fatal(err)
		}
		// The host has not yet seen the freed connection close.
		select {
		case <-ctx.Done():
			t.Fatal("the freed slot was never served")
		case <-time.After(time.Millisecond):
		}
	}
}
