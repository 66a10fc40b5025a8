// Package agentdtest starts real agentd hosts on real sockets in a test's
// temporary directory and hands back real clients. It is for tests only.
package agentdtest

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/host"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// Timeout is the generous deadline tests give any single event.
const Timeout = poll.Timeout

// Options configure a test host.
type Options struct {
	// RuntimeDir shares a runtime directory between hosts; a new one when empty.
	RuntimeDir string
	// Home is the host's home; a new one when empty.
	Home      string
	HostID    string
	IdleGrace time.Duration
	Compose   server.ComposeFunc
	// HandshakeTimeout bounds the wait for a hello (the host's default when 0).
	HandshakeTimeout time.Duration
	// NoWait returns before the host is ready.
	NoWait bool
	Logger *slog.Logger
}

// Host is a running test host.
type Host struct {
	*host.Host
	Home       string
	RuntimeDir string
	HostID     string

	stop    context.CancelCauseFunc // ends the host's Run
	stopped chan struct{}           // closed once Run has returned
	err     error                   // what Run returned, once stopped is closed
}

// errTestEnded is the cause a test host is stopped with when its test ends.
var errTestEnded = errors.New("the test ended")

// Done is closed once the host has stopped and let go of its home.
func (h *Host) Done() <-chan struct{} { return h.stopped }

// Err returns why the host stopped, once it has: nil when it stopped as
// asked (see host.ErrStopped).
func (h *Host) Err() error {
	<-h.stopped
	if errors.Is(h.err, host.ErrStopped) {
		return nil
	}
	return h.err
}

// Shutdown drains the host and waits until it has stopped or ctx ends.
func (h *Host) Shutdown(ctx context.Context) error {
	h.stop(errors.New("shut down by the test"))
	select {
	case <-h.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ShortDir returns a fresh directory with a short path, so socket paths
// stay under the unix limit.
func ShortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "ad")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// NewHost starts a host on a fresh home and waits until it is ready. It is
// shut down when the test ends.
func NewHost(t testing.TB, opts Options) *Host {
	t.Helper()
	base := ShortDir(t)
	if opts.RuntimeDir == "" {
		opts.RuntimeDir = filepath.Join(base, "run")
	}
	if opts.HostID == "" {
		opts.HostID = "test"
	}
	home := opts.Home
	if home == "" {
		home = filepath.Join(base, "home")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	hh, err := host.Open(host.Config{
		Home: home, RuntimeDir: opts.RuntimeDir, HostID: opts.HostID,
		Version: "test", IdleGrace: opts.IdleGrace, Compose: opts.Compose,
		Logger: logger, DrainTimeout: 5 * time.Second, HandshakeTimeout: opts.HandshakeTimeout,
	})
	if err != nil {
		t.Fatalf("starting host: %v", err)
	}
	ctx, stop := context.WithCancelCause(context.Background())
	h := &Host{Host: hh, Home: home, RuntimeDir: opts.RuntimeDir, HostID: opts.HostID, stop: stop, stopped: make(chan struct{})}
	go func() {
		defer close(h.stopped)
		h.err = hh.Run(ctx)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		h.stop(errTestEnded)
		select {
		case <-h.stopped:
		case <-ctx.Done():
			buf := make([]byte, 1<<20)
			t.Errorf("host shutdown: %v; goroutines:\n%s", ctx.Err(), buf[:runtime.Stack(buf, true)])
		}
	})
	if !opts.NoWait {
		select {
		case <-h.Ready():
		case <-h.Done():
			t.Fatalf("host stopped before ready: %v", h.Err())
		case <-time.After(Timeout):
			t.Fatal("host not ready")
		}
	}
	return h
}

// Connect returns a connected client, closed when the test ends.
func (h *Host) Connect(t testing.TB) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	c, err := client.Dial(ctx, h.Endpoint(), client.Options{ClientInstanceID: "test-client"})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Context returns a context bounded by Timeout, cancelled when the test ends.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

// WaitStatus polls host.status on c until ok accepts it.
func WaitStatus(t testing.TB, c *client.Conn, ok func(protocol.HostStatus) bool) protocol.HostStatus {
	t.Helper()
	ctx := Context(t)
	var last protocol.HostStatus
	for {
		st, err := c.Status(ctx)
		if err != nil {
			t.Fatalf("status: %v (last %+v)", err, last)
		}
		if ok(st) {
			return st
		}
		last = st
		select {
		case <-ctx.Done():
			t.Fatalf("status never matched; last %+v", last)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// LockedBuffer is a bytes.Buffer safe for concurrent writers: a log a
// test reads while what it tests writes to it.
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Serve runs srv on ln until the test ends, or until the stop it returns
// is called: stop drains the server, waits until it has stopped, and
// returns what Run returned. The test fails when the server does not stop
// within Timeout.
func Serve(t testing.TB, srv *server.Server, ln net.Listener) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	stopped := make(chan struct{})
	var err error
	go func() {
		defer close(stopped)
		err = srv.Run(ctx, ln)
	}()
	stop = func() error {
		cancel(errTestEnded)
		select {
		case <-stopped:
			return err
		case <-time.After(Timeout):
			t.Errorf("the server did not stop within %v", Timeout)
			return errors.New("the server did not stop")
		}
	}
	t.Cleanup(func() { stop() })
	return stop
}
