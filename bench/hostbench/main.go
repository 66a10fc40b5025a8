// Command hostbench measures the agentd host's protocol beside anchors
// measured in the same run: host.status latency beside a raw line echo
// server and a JSON echo server, pipelined throughput beside the JSON echo
// server driven the same way, the idle host's memory, the host's memory
// while many connections hold half-sent large requests, and the CLI's
// cold and warm `agentd status` beside `tmux list-sessions`.
//
// The host under test is the real binary (built from ./cmd/agentd unless
// -agentd names one), run as its own process; the echo servers are this
// binary re-executed in a server role, so that no client shares a Go
// scheduler with the server it measures. Machines are shared and noisy:
// every figure is printed beside its anchor, as a ratio, and the figures
// are interleaved in rounds so that a burst of noise hits both sides.
//
// Run it from the module root:
//
//	go run ./bench/hostbench            # full run, a few minutes at most
//	go run ./bench/hostbench -quick     # a smaller run
//	go run ./bench/hostbench -profile /tmp/prof   # CPU profiles of host, echo server and client
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/agentd-dev/agentd/bench/internal/harness"
)

// config is the run's shape, set from flags.
type config struct {
	quick  bool
	agentd string // prebuilt agentd binary; built when empty
	// agentdCgo is a prebuilt build with cgo (a plain go build), used
	// with agentd.
	agentdCgo string
	profile   string // directory for CPU profiles; none when empty

	latencyN      int           // sequential requests per target
	latencyRounds int           // interleaved rounds the requests are split into
	warmup        int           // requests before measuring, per target
	tputRound     time.Duration // one throughput round
	tputRounds    int           // interleaved throughput rounds per target
	coldRuns      int           // cold `agentd status` runs
	warmRuns      int           // warm `agentd status` runs
	settle        time.Duration // wait before reading an idle process's RSS
	skip          map[string]bool
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == roleFlag {
		os.Exit(runRole(os.Args[2:]))
	}
	var cfg config
	var skip string
	flag.BoolVar(&cfg.quick, "quick", false, "a smaller run (about a quarter of the work)")
	flag.StringVar(&cfg.agentd, "agentd", "", "use this agentd binary instead of building ./cmd/agentd")
	flag.StringVar(&cfg.agentdCgo, "agentd-cgo", "", "with -agentd: the same program built with cgo (a plain go build), timed beside it in the CLI part")
	flag.StringVar(&cfg.profile, "profile", "", "write CPU profiles of the host, the JSON echo server and this client into `dir`; the host then runs host.Open and Run inside this binary")
	flag.IntVar(&cfg.latencyN, "n", 0, "sequential host.status requests per target (default 100000, -quick 20000)")
	flag.StringVar(&skip, "skip", "", "comma-separated parts to skip: latency,pipeline,rss,partial,cli")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "hostbench: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	cfg.fill(skip)

	b, err := newBench(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hostbench: %v\n", err)
		os.Exit(1)
	}
	harness.Run("hostbench", b.run, b.cleanup)
}

func (c *config) fill(skip string) {
	c.latencyRounds, c.warmup = 50, 5000
	c.tputRound, c.tputRounds = 2*time.Second, 5
	c.coldRuns, c.warmRuns = 40, 50
	c.settle = 500 * time.Millisecond
	n := 100000
	if c.quick {
		n = 20000
		c.latencyRounds, c.warmup = 20, 2000
		c.tputRound, c.tputRounds = 500*time.Millisecond, 2
		c.coldRuns, c.warmRuns = 8, 12
	}
	if c.latencyN <= 0 {
		c.latencyN = n
	}
	c.skip = map[string]bool{}
	for _, s := range splitComma(skip) {
		c.skip[s] = true
	}
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// bench holds one run's processes, directories and results.
type bench struct {
	cfg    config
	base   string // short temporary directory: socket paths stay under 108 bytes
	agentd string // the agentd binary
	// agentdCgo is the same program built with cgo; empty
	// when -agentd names a binary.
	agentdCgo string
	self      string // this binary, for server roles
	procs     []*proc
	res       results
}

func newBench(cfg config) (*bench, error) {
	base, err := os.MkdirTemp("", "hb")
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	b := &bench{cfg: cfg, base: base, self: self, res: results{latency: map[string]latencyResult{}}}
	if cfg.profile != "" {
		if err := os.MkdirAll(cfg.profile, 0o755); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (b *bench) cleanup() {
	for _, p := range b.procs {
		p.stop()
	}
	b.procs = nil
	os.RemoveAll(b.base)
}

func (b *bench) run(ctx context.Context) error {
	start := time.Now()
	if err := b.buildAgentd(ctx); err != nil {
		return err
	}
	fmt.Printf("hostbench: %s/%s, %d CPUs, GOMAXPROCS %d, %s\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())
	if b.cfg.profile != "" {
		fmt.Println("host under test: host.Open and Run inside this binary, as its own process (-profile)")
	} else {
		fmt.Println("host under test: the agentd binary, `agentd host`, as its own process")
	}
	fmt.Println("anchors: raw line echo and JSON echo servers, each this binary as its own process")
	fmt.Println()

	if err := b.protocolParts(ctx); err != nil {
		return err
	}
	if !b.cfg.skip["partial"] {
		if err := b.partialPart(ctx); err != nil {
			return err
		}
	}
	if !b.cfg.skip["cli"] {
		if err := b.cliPart(ctx); err != nil {
			return err
		}
	}
	fmt.Println()
	b.res.print(os.Stdout)
	fmt.Printf("\ntotal run time %s\n", time.Since(start).Round(100*time.Millisecond))
	if b.cfg.profile != "" {
		fmt.Printf("\nprofiles in %s: host.cpu.pprof, jsonecho.cpu.pprof, client.cpu.pprof (labels target=agentd|jsonecho|rawecho)\n", b.cfg.profile)
		fmt.Printf("  go tool pprof -top %s\n", filepath.Join(b.cfg.profile, "host.cpu.pprof"))
		fmt.Printf("  go tool pprof -top -tagfocus target=agentd %s\n", filepath.Join(b.cfg.profile, "client.cpu.pprof"))
	}
	return nil
}

// buildAgentd builds ./cmd/agentd into the run's directory unless -agentd
// names a binary.
func (b *bench) buildAgentd(ctx context.Context) error {
	if b.cfg.agentd != "" {
		abs, err := filepath.Abs(b.cfg.agentd)
		if err != nil {
			return err
		}
		b.agentd = abs
		if b.cfg.agentdCgo != "" {
			if b.agentdCgo, err = filepath.Abs(b.cfg.agentdCgo); err != nil {
				return err
			}
		}
		return nil
	}
	// agentd is measured as it is installed: CGO_ENABLED=0, a static
	// binary. A plain go build links libc for the net package's resolver;
	// it is timed beside, in the CLI part.
	b.agentd = filepath.Join(b.base, "agentd")
	t0 := time.Now()
	out, err := command(ctx, []string{"CGO_ENABLED=0"}, "go", "build", "-o", b.agentd, agentdPackage).CombinedOutput()
	if err != nil {
		return fmt.Errorf("building agentd (run from inside the module, or pass -agentd): %v\n%s", err, out)
	}
	b.agentdCgo = filepath.Join(b.base, "agentd-cgo")
	out, err = command(ctx, nil, "go", "build", "-o", b.agentdCgo, agentdPackage).CombinedOutput()
	if err != nil {
		return fmt.Errorf("building agentd with a plain go build: %v\n%s", err, out)
	}
	fmt.Printf("built agentd (CGO_ENABLED=0, and a plain go build) in %s\n", time.Since(t0).Round(10*time.Millisecond))
	return nil
}

const agentdPackage = "github.com/agentd-dev/agentd/cmd/agentd"
