package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/host"
	"github.com/agentd-dev/agentd/protocol"
)

// These benchmarks run only with -bench. They measure in one process what
// hostbench measures across processes, for quick iteration with
// -cpuprofile; their figures have no anchor, so compare them only with
// themselves before and after a change (benchstat).

var (
	statusFrame = []byte(`{"requestId":"r1a2b","operation":"host.status","input":{}}`)
	diagFrame   = []byte(`{"requestId":"r1a2b","operation":"host.diagnostics.query","input":{"limit":1}}`)
)

// BenchmarkDecodeClientFrame is the host's decode of one request line.
func BenchmarkDecodeClientFrame(b *testing.B) {
	for _, tc := range []struct {
		name  string
		frame []byte
	}{{"status", statusFrame}, {"diagnostics", diagFrame}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := protocol.DecodeClientFrame(tc.frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeInput is the handler table's strict decode of an input.
func BenchmarkDecodeInput(b *testing.B) {
	for _, tc := range []struct {
		name string
		raw  json.RawMessage
		v    func() any
	}{
		{"empty", json.RawMessage(`{}`), func() any { return new(protocol.HostStatusInput) }},
		{"limit", json.RawMessage(`{"limit":1}`), func() any { return new(protocol.DiagnosticsQueryInput) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := protocol.DecodeInput(tc.raw, tc.v()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// startInProcess starts a host in this process on a short temporary path.
func startInProcess(b *testing.B) *host.Host {
	b.Helper()
	dir, err := os.MkdirTemp("", "hb")
	if err != nil {
		b.Fatal(err)
	}
	h, err := host.Open(host.Config{
		Home: filepath.Join(dir, "h"), RuntimeDir: filepath.Join(dir, "r"), HostID: "b",
		Version: "bench", Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		os.RemoveAll(dir)
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		h.Run(ctx)
	}()
	<-h.Ready()
	b.Cleanup(func() {
		stop()
		<-stopped
		os.RemoveAll(dir)
	})
	return h
}

// BenchmarkStatusRoundTrip is one sequential host.status round trip, client
// and host in this process.
func BenchmarkStatusRoundTrip(b *testing.B) {
	h := startInProcess(b)
	ctx := context.Background()
	c, err := client.Dial(ctx, h.Endpoint(), client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Status(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPipelined is host.diagnostics.query with 63 in flight on one
// connection, client and host in this process.
func BenchmarkPipelined(b *testing.B) {
	h := startInProcess(b)
	ctx := context.Background()
	c, err := client.Dial(ctx, h.Endpoint(), client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	in := protocol.DiagnosticsQueryInput{Limit: 1}
	work := make(chan struct{})
	var wg sync.WaitGroup
	var errOnce sync.Once
	var failed error
	b.ReportAllocs()
	b.ResetTimer()
	for range protocol.ClientInFlightDomainRequests {
		wg.Go(func() {
			for range work {
				_, err := client.Call(ctx, c, protocol.OpHostDiagnosticsQuery, in)
				if err != nil {
					errOnce.Do(func() { failed = err })
				}
			}
		})
	}
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
}
