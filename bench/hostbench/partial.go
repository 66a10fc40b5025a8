package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd-dev/agentd/protocol"
)

// The partial part's shape: connections that each say hello and then
// send most of a large request without its newline, and hold it.
const (
	partialConns   = 1000
	partialBytes   = 780_000
	partialWriters = 16 // connections written to at once
	// partialReturn is how long after the connections close the host's
	// memory is looked at again.
	partialReturn = 5 * time.Second
)

// partialResult is what the partial part measured, each RSS of the host
// but anchorConnRSS.
type partialResult struct {
	idle          int64 // the host just started
	conns         int64 // holding partialConns idle connections
	anchorIdle    int64 // the raw echo server, idle
	anchorConns   int64 // the raw echo server holding as many idle connections
	held          int64 // the host with each connection's partial request sent
	closedByHost  int   // connections the host closed while they sent
	after         int64 // partialReturn after the connections closed
	backWithin    time.Duration
	backWithinSet bool
}

// partialPart measures the host's memory while many connections hold
// half-sent large requests, and once they close, beside the host idle;
// the memory an idle connection holds is measured beside the raw echo
// server's (a 64 KiB read and a 64 KiB write buffer a connection).
func (b *bench) partialPart(ctx context.Context) error {
	home, runDir := filepath.Join(b.base, "ph"), filepath.Join(b.base, "pr")
	hp, endpoint, err := b.startAgentdHost(ctx, home, runDir, "p")
	if err != nil {
		return err
	}
	defer hp.stop()
	rawSock := filepath.Join(b.base, "pe.sock")
	rp, err := b.startRole(ctx, "raw echo server", roleRawEcho, "-sock", rawSock)
	if err != nil {
		return err
	}
	defer rp.stop()
	r := &b.res.partial
	time.Sleep(b.cfg.settle)
	r.idle, r.anchorIdle = rssBytes(hp.pid), rssBytes(rp.pid)

	fmt.Printf("partial: %d connections to the host and to the raw echo server, each answered once, then idle\n", partialConns)
	conns := make([]*partialConn, 0, partialConns)
	defer func() {
		for _, c := range conns {
			c.nc.Close()
		}
	}()
	anchors := make([]net.Conn, 0, partialConns)
	defer func() {
		for _, c := range anchors {
			c.Close()
		}
	}()
	for range partialConns {
		c, err := dialPartial(ctx, endpoint)
		if err != nil {
			return fmt.Errorf("connection %d: %w", len(conns), err)
		}
		conns = append(conns, c)
		a, err := dialEchoOnce(ctx, rawSock)
		if err != nil {
			return fmt.Errorf("echo connection %d: %w", len(anchors), err)
		}
		anchors = append(anchors, a)
	}
	time.Sleep(b.cfg.settle)
	r.conns, r.anchorConns = rssBytes(hp.pid), rssBytes(rp.pid)
	fmt.Printf("  host RSS idle %s, with the connections %s (%.1f KiB a connection); raw echo %s, %s (%.1f KiB a connection)\n",
		mib(r.idle), mib(r.conns), perConnKiB(r.conns, r.idle), mib(r.anchorIdle), mib(r.anchorConns), perConnKiB(r.anchorConns, r.anchorIdle))

	// Each connection reads until the host closes it.
	var readers sync.WaitGroup
	var closed atomic.Int32
	for _, c := range conns {
		readers.Go(func() {
			if c.waitClosed() {
				closed.Add(1)
			}
		})
	}
	head := fmt.Appendf(nil, `{"requestId":"r2","operation":"host.status","input":{"pad":"%s`, strings.Repeat("x", partialBytes))
	head = head[:partialBytes]
	next := make(chan *partialConn)
	var writers sync.WaitGroup
	for range partialWriters {
		writers.Go(func() {
			for c := range next {
				c.nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
				c.nc.Write(head) // fails once the host has closed it
			}
		})
	}
	for _, c := range conns {
		next <- c
	}
	close(next)
	writers.Wait()
	time.Sleep(b.cfg.settle)
	r.held = rssBytes(hp.pid)
	r.closedByHost = int(closed.Load())
	fmt.Printf("  each sent %d bytes of a request without its newline: host RSS %s, %s over the idle connections, %s over the idle host; %d connections closed by the host, %d holding theirs\n",
		partialBytes, mib(r.held), mib(r.held-r.conns), mib(r.held-r.idle), r.closedByHost, partialConns-r.closedByHost)

	for _, c := range conns {
		c.nc.Close()
	}
	readers.Wait()
	conns = nil
	closedAt := time.Now()
	for {
		rss := rssBytes(hp.pid)
		if !r.backWithinSet && rss-r.idle <= partialBackMargin {
			r.backWithin, r.backWithinSet = time.Since(closedAt), true
		}
		if time.Since(closedAt) >= partialReturn {
			r.after = rss
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	back := "not within " + partialReturn.String()
	if r.backWithinSet {
		back = "within " + r.backWithin.Round(50*time.Millisecond).String()
	}
	fmt.Printf("  closed: host RSS %s after %s, %s over idle (back within %s of idle %s)\n",
		mib(r.after), partialReturn, mib(r.after-r.idle), mib(partialBackMargin), back)
	return nil
}

// partialBackMargin is how close to its idle RSS the host must come for
// its memory to count as given back.
const partialBackMargin = 8 << 20

func perConnKiB(with, without int64) float64 {
	return float64(with-without) / partialConns / 1024
}

// partialConn is a raw protocol connection to the host, past its
// handshake.
type partialConn struct {
	nc net.Conn
	r  *bufio.Reader
}

func dialPartial(ctx context.Context, endpoint string) (*partialConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", endpoint)
	if err != nil {
		return nil, err
	}
	c := &partialConn{nc: nc, r: bufio.NewReaderSize(nc, 512)}
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	hello, _ := json.Marshal(protocol.Hello{
		Kind: protocol.KindHello, ClientInstanceID: "partial",
		ProtocolMin: protocol.ProtocolVersion, ProtocolMax: protocol.ProtocolVersion,
		CompatibilityEpoch: protocol.CompatibilityEpoch, CompositionID: protocol.CompositionInteractive,
		Surface: protocol.SurfaceSDK,
	})
	for _, line := range []string{string(hello), `{"requestId":"r1","operation":"host.status","input":{}}`} {
		if _, err := nc.Write([]byte(line + "\n")); err != nil {
			nc.Close()
			return nil, err
		}
		if _, err := c.r.ReadSlice('\n'); err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			nc.Close()
			return nil, err
		}
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = c.r.ReadSlice('\n')
		}
	}
	nc.SetDeadline(time.Time{})
	return c, nil
}

// waitClosed reads until the connection ends and reports whether the
// host ended it (rather than this side closing it).
func (c *partialConn) waitClosed() bool {
	_, err := io.Copy(io.Discard, c.r)
	return !errors.Is(err, net.ErrClosed)
}

// dialEchoOnce connects to an echo server and has one line echoed.
func dialEchoOnce(ctx context.Context, sock string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	line := []byte(`{"requestId":"r1","operation":"host.status","input":{}}` + "\n")
	if _, err := nc.Write(line); err == nil {
		_, err = io.ReadFull(nc, make([]byte, len(line)))
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	nc.SetDeadline(time.Time{})
	return nc, nil
}
