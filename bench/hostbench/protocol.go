package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

// Targets of the protocol measurements.
const (
	tAgentd   = "agentd"
	tJSONEcho = "jsonecho"
	tRawEcho  = "rawecho"
)

// protocolParts measures latency, pipelined throughput and idle memory of
// the host beside the echo servers.
func (b *bench) protocolParts(ctx context.Context) error {
	if b.cfg.skip["latency"] && b.cfg.skip["pipeline"] && b.cfg.skip["rss"] {
		return nil
	}
	if b.cfg.profile != "" {
		f, err := os.Create(b.profilePath("client"))
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}

	home, runDir := filepath.Join(b.base, "h"), filepath.Join(b.base, "r")
	hp, endpoint, err := b.startAgentdHost(ctx, home, runDir, "b")
	if err != nil {
		return err
	}
	time.Sleep(b.cfg.settle)
	b.res.rssAgentd = rssBytes(hp.pid)
	anon, file := rssSplit(hp.pid)
	var binSize int64
	if fi, err := os.Stat(b.agentd); err == nil && b.cfg.profile == "" {
		binSize = fi.Size()
	}

	statusBytes, diagBytes, err := probeSizes(ctx, endpoint)
	if err != nil {
		return fmt.Errorf("probing the host: %w", err)
	}
	fmt.Printf("agentd frames: host.status response %d bytes, host.diagnostics.query response %d bytes\n", statusBytes, diagBytes)

	rawSock, jsonSock := filepath.Join(b.base, "e1.sock"), filepath.Join(b.base, "e2.sock")
	rp, err := b.startRole(ctx, "raw echo server", roleRawEcho, "-sock", rawSock)
	if err != nil {
		return err
	}
	jargs := []string{"-sock", jsonSock, "-status-bytes", fmt.Sprint(statusBytes)}
	if b.cfg.profile != "" {
		jargs = append(jargs, "-cpuprofile", b.profilePath("jsonecho"))
	}
	jp, err := b.startRole(ctx, "JSON echo server", roleJSONEcho, jargs...)
	if err != nil {
		return err
	}
	time.Sleep(b.cfg.settle)
	b.res.rssJSON = rssBytes(jp.pid)
	b.res.rssRaw = rssBytes(rp.pid)
	fmt.Printf("idle RSS: agentd host %s (anonymous %s, file-backed %s; binary %s), JSON echo server %s, raw echo server %s\n",
		mib(b.res.rssAgentd), mib(anon), mib(file), mib(binSize), mib(b.res.rssJSON), mib(b.res.rssRaw))
	if js, err := probeEchoSize(ctx, jsonSock); err == nil {
		fmt.Printf("JSON echo frames: host.status response %d bytes (raw echo lines %d bytes)\n", js, statusBytes)
	}

	servers := map[string]int{tAgentd: hp.pid, tJSONEcho: jp.pid, tRawEcho: rp.pid}
	if !b.cfg.skip["latency"] {
		if err := b.latency(ctx, endpoint, jsonSock, rawSock, statusBytes, servers); err != nil {
			return err
		}
	}
	if !b.cfg.skip["pipeline"] {
		for _, conns := range []int{1, 16} {
			if err := b.pipeline(ctx, endpoint, jsonSock, conns, servers); err != nil {
				return err
			}
		}
		b.res.rssAgentdLoaded = rssBytes(hp.pid)
	}
	for _, p := range []*proc{hp, jp, rp} {
		p.stop()
	}
	return nil
}

// probeSizes speaks the protocol by hand to learn the size of agentd's
// response frames, as the anchors must match them.
func probeSizes(ctx context.Context, endpoint string) (status, diag int, err error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", endpoint)
	if err != nil {
		return 0, 0, err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	hello, _ := json.Marshal(protocol.Hello{
		Kind: protocol.KindHello, ClientInstanceID: "probe",
		ProtocolMin: protocol.ProtocolVersion, ProtocolMax: protocol.ProtocolVersion,
		CompatibilityEpoch: protocol.CompatibilityEpoch, CompositionID: protocol.CompositionInteractive,
		Surface: protocol.SurfaceSDK,
	})
	r := bufio.NewReader(nc)
	ask := func(line string) (int, error) {
		if _, err := nc.Write([]byte(line + "\n")); err != nil {
			return 0, err
		}
		got, err := r.ReadBytes('\n')
		return len(got) - 1, err
	}
	if _, err := ask(string(hello)); err != nil {
		return 0, 0, err
	}
	if status, err = ask(`{"requestId":"` + sizingRequestID + `","operation":"host.status","input":{}}`); err != nil {
		return 0, 0, err
	}
	diag, err = ask(`{"requestId":"` + sizingRequestID + `","operation":"host.diagnostics.query","input":{"limit":1}}`)
	return status, diag, err
}

func probeEchoSize(ctx context.Context, sock string) (int, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write([]byte(`{"requestId":"` + sizingRequestID + `","operation":"host.status","input":{}}` + "\n")); err != nil {
		return 0, err
	}
	got, err := bufio.NewReader(nc).ReadBytes('\n')
	return len(got) - 1, err
}

// cpuMeter accumulates the CPU time a server process and this process spend
// over the measured stretches.
type cpuMeter struct {
	server, client            time.Duration
	serverReads, serverWrites int64 // read and write system calls
	requests                  int64
}

func (m *cpuMeter) measure(pid int, requests func() (int64, error)) error {
	s0, c0 := procCPU(pid), selfCPU()
	r0, w0 := procIO(pid)
	n, err := requests()
	m.server += procCPU(pid) - s0
	m.client += selfCPU() - c0
	r1, w1 := procIO(pid)
	m.serverReads += r1 - r0
	m.serverWrites += w1 - w0
	m.requests += n
	return err
}

// syscalls returns the server's read and write system calls per 100
// requests.
func (m *cpuMeter) syscalls() (reads, writes float64) {
	if m.requests == 0 {
		return 0, 0
	}
	return float64(m.serverReads) * 100 / float64(m.requests), float64(m.serverWrites) * 100 / float64(m.requests)
}

func (m *cpuMeter) perRequest() (server, client time.Duration) {
	if m.requests == 0 {
		return 0, 0
	}
	return m.server / time.Duration(m.requests), m.client / time.Duration(m.requests)
}

// latency times sequential host.status round trips on one connection per
// target, interleaving the targets in rounds.
func (b *bench) latency(ctx context.Context, endpoint, jsonSock, rawSock string, statusBytes int, servers map[string]int) error {
	type target struct {
		name string
		do   func() error
		lat  []time.Duration
		cpu  cpuMeter
	}
	var (
		ac  *client.Conn
		ec  *echoConn
		rc  *rawConn
		err error
	)
	labelled(ctx, tAgentd, func(ctx context.Context) {
		ac, err = client.Dial(ctx, endpoint, client.Options{Surface: protocol.SurfaceSDK})
	})
	if err != nil {
		return err
	}
	defer ac.Close()
	labelled(ctx, tJSONEcho, func(ctx context.Context) { ec, err = dialEcho(ctx, jsonSock) })
	if err != nil {
		return err
	}
	defer ec.Close()
	if rc, err = dialRaw(ctx, rawSock, statusBytes); err != nil {
		return err
	}
	defer rc.Close()

	targets := []*target{
		{name: tAgentd, do: func() error { _, err := ac.Status(ctx); return err }},
		{name: tJSONEcho, do: func() error {
			var st protocol.HostStatus
			return ec.Request(string(protocol.OpHostStatus), nil, &st)
		}},
		{name: tRawEcho, do: rc.roundTrip},
	}
	n, rounds := b.cfg.latencyN, b.cfg.latencyRounds
	per := n / rounds
	fmt.Printf("latency: %d sequential host.status per target on one connection, %d interleaved rounds, after %d warm-up requests\n", per*rounds, rounds, b.cfg.warmup)
	for _, t := range targets {
		t.lat = make([]time.Duration, 0, per*rounds)
		var err error
		labelled(ctx, t.name, func(context.Context) {
			for range b.cfg.warmup {
				if err = t.do(); err != nil {
					return
				}
			}
		})
		if err != nil {
			return fmt.Errorf("%s warm-up: %w", t.name, err)
		}
	}
	for r := range rounds {
		for i := range targets {
			t := targets[(i+r)%len(targets)]
			var err error
			labelled(ctx, t.name, func(context.Context) {
				err = t.cpu.measure(servers[t.name], func() (int64, error) {
					for range per {
						t0 := time.Now()
						if err := t.do(); err != nil {
							return 0, err
						}
						t.lat = append(t.lat, time.Since(t0))
					}
					return int64(per), nil
				})
			})
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
		}
	}
	for _, t := range targets {
		slices.Sort(t.lat)
		q := quantiles{p50: percentile(t.lat, 50), p90: percentile(t.lat, 90), p99: percentile(t.lat, 99), p999: percentile(t.lat, 99.9)}
		sc, cc := t.cpu.perRequest()
		fmt.Printf("  %-8s p50 %8s  p90 %8s  p99 %8s  p99.9 %8s   CPU/request: server %s, client %s\n",
			t.name, us(q.p50), us(q.p90), us(q.p99), us(q.p999), us(sc), us(cc))
		b.res.latency[t.name] = latencyResult{q: q, serverCPU: sc, clientCPU: cc}
	}
	return nil
}

// pipeline drives conns connections with 64 requests in flight on each:
// on agentd 63 host.diagnostics.query (the client's domain limit) plus one
// host.status in its reserved slot; on the JSON echo server the same mix.
func (b *bench) pipeline(ctx context.Context, endpoint, jsonSock string, conns int, servers map[string]int) error {
	const depth = 64
	type target struct {
		name  string
		do    func(conn, worker int) error
		rates []float64
		cpu   cpuMeter
	}
	var (
		acs []*client.Conn
		ecs []*echoConn
	)
	defer func() {
		for _, c := range acs {
			c.Close()
		}
		for _, c := range ecs {
			c.Close()
		}
	}()
	for range conns {
		var err error
		var ac *client.Conn
		var ec *echoConn
		labelled(ctx, tAgentd, func(ctx context.Context) {
			ac, err = client.Dial(ctx, endpoint, client.Options{Surface: protocol.SurfaceSDK})
		})
		if err != nil {
			return err
		}
		acs = append(acs, ac)
		labelled(ctx, tJSONEcho, func(ctx context.Context) { ec, err = dialEcho(ctx, jsonSock) })
		if err != nil {
			return err
		}
		ecs = append(ecs, ec)
	}
	in := protocol.DiagnosticsQueryInput{Limit: 1}
	targets := []*target{
		{name: tAgentd, do: func(conn, worker int) error {
			if worker == 0 {
				_, err := acs[conn].Status(ctx)
				return err
			}
			_, err := client.Call(ctx, acs[conn], protocol.OpHostDiagnosticsQuery, in)
			return err
		}},
		{name: tJSONEcho, do: func(conn, worker int) error {
			if worker == 0 {
				var st protocol.HostStatus
				return ecs[conn].Request(string(protocol.OpHostStatus), nil, &st)
			}
			var res protocol.DiagnosticsQueryResult
			return ecs[conn].Request(string(protocol.OpHostDiagnosticsQuery), in, &res)
		}},
	}
	fmt.Printf("pipelined: %d connection(s) × %d in flight, %d interleaved rounds of %s per target\n", conns, depth, b.cfg.tputRounds, b.cfg.tputRound)
	for _, t := range targets {
		var err error
		labelled(ctx, t.name, func(context.Context) {
			_, _, err = drive(conns, depth, b.cfg.tputRound/3, t.do)
		})
		if err != nil {
			return fmt.Errorf("%s warm-up: %w", t.name, err)
		}
	}
	for r := range b.cfg.tputRounds {
		for i := range targets {
			t := targets[(i+r)%len(targets)]
			var err error
			labelled(ctx, t.name, func(context.Context) {
				err = t.cpu.measure(servers[t.name], func() (int64, error) {
					n, elapsed, err := drive(conns, depth, b.cfg.tputRound, t.do)
					t.rates = append(t.rates, float64(n)/elapsed.Seconds())
					return n, err
				})
			})
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
		}
	}
	res := pipelineResult{conns: conns}
	for _, t := range targets {
		sc, cc := t.cpu.perRequest()
		med := median(t.rates)
		fmt.Printf("  %-8s %9.0f req/s (rounds:", t.name, med)
		for _, r := range t.rates {
			fmt.Printf(" %.0f", r)
		}
		rd, wr := t.cpu.syscalls()
		fmt.Printf(")   CPU/request: server %s, client %s; server syscalls per 100 requests: %.0f reads, %.0f writes\n", us(sc), us(cc), rd, wr)
		if t.name == tAgentd {
			res.agentd, res.agentdServerCPU, res.agentdClientCPU = med, sc, cc
		} else {
			res.json, res.jsonServerCPU, res.jsonClientCPU = med, sc, cc
		}
	}
	// Rounds are interleaved, so round i of each target saw about the same
	// load: the ratio is the median of the per-round ratios.
	var ratios []float64
	fmt.Printf("  per-round ratio agentd/jsonecho:")
	for i := range targets[0].rates {
		q := targets[0].rates[i] / targets[1].rates[i]
		ratios = append(ratios, q)
		fmt.Printf(" %.2f", q)
	}
	res.ratio = median(ratios)
	fmt.Printf(" (median %.2f)\n", res.ratio)
	b.res.pipelines = append(b.res.pipelines, res)
	return nil
}

// drive runs depth workers on each of conns connections, each issuing
// requests back to back, for d. It returns the requests completed and the
// time until the last worker stopped.
func drive(conns, depth int, d time.Duration, do func(conn, worker int) error) (int64, time.Duration, error) {
	var (
		stop  atomic.Bool
		total atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	start := time.Now()
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	for c := range conns {
		for w := range depth {
			wg.Go(func() {
				var n int64
				for !stop.Load() {
					if err := do(c, w); err != nil {
						once.Do(func() { first = err })
						stop.Store(true)
						break
					}
					n++
				}
				total.Add(n)
			})
		}
	}
	wg.Wait()
	return total.Load(), time.Since(start), first
}

// labelled runs fn with the pprof label target=name, so a client profile
// can be split by target.
func labelled(ctx context.Context, name string, fn func(context.Context)) {
	pprof.Do(ctx, pprof.Labels("target", name), fn)
}
