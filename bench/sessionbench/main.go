// Command sessionbench measures agentd's sessions — a turn end to end, the
// memory of an idle worker, a streamed turn reaching a client, listing
// many sessions, `agentd attach` drawing its first screen, and one session
// fanned out to many subscribers with one that stalls, a slow reader on a
// tool that prints as fast as it can, a stream and a PTY over the
// WebSocket — beside anchors
// measured in the same run: the pi coding agent (`pi --mode rpc`: its time
// to ready and its idle memory), a raw unix-socket stream of the same
// frames, the host.status round trip on the same connection, `ls` of the
// sessions folder, `tmux list-sessions` and `tmux attach`, the same
// fan-out without the stalled subscriber, and the same stream and PTY over
// the unix socket.
//
// Everything under test runs as real processes: the agentd binary (built
// from ./cmd/agentd unless -agentd names one) with AGENTD_HOME and
// AGENTD_RUNTIME_DIR in fresh temporary folders, its host started by cold
// activation and its workers by the host. Machines are shared and noisy:
// every figure is printed beside its anchor, as a ratio, and the two sides
// are interleaved so that a burst of noise hits both.
//
// Run it from the module root:
//
//	go run ./bench/sessionbench            # full run, about two minutes
//	go run ./bench/sessionbench -quick     # a smaller run
//	go run ./bench/sessionbench -profile DIR   # CPU profiles of hosts, workers and the client
//	go run ./bench/sessionbench -only attach,fanout   # some parts only
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/agentd-dev/agentd/bench/internal/harness"
	"github.com/agentd-dev/agentd/bench/internal/table"
)

// config is the run's shape, set from flags.
type config struct {
	quick   bool
	agentd  string // prebuilt agentd binary; built when empty
	before  string // an earlier agentd binary whose attach and pty are timed beside agentd's; none when empty
	piBin   string // prebuilt pi; installed with npm when empty
	piDir   string // where npm installs pi
	noPi    bool
	profile string // directory for CPU profiles; none when empty
	skip    map[string]bool

	coldRuns   int // cold `agentd run "hi"` runs (fresh home each)
	warmRuns   int // warm `agentd run --session ID "hi"` runs
	newRuns    int // `agentd run "hi"` on a warm host: a new session, a cold worker
	piRuns     int // pi starts, each timed to ready
	deltas     int // text deltas of the streamed turn
	rounds     int // streaming rounds (a fresh session each)
	stamps     int // timestamped lines of the latency turn
	statusRTTs int // host.status round trips per round
	sessions   int // sessions listed by `agentd ls`
	lsRuns     int

	attachRecords int    // transcript records of the attached session
	attachRuns    int    // timed attaches, each of agentd and of tmux
	echoKeys      int    // keys typed into each of `agentd shell` and tmux
	ptyParts      string // the pieces of the pty part to run, comma-separated

	fanSubs     int           // subscriptions reading the fan-out session
	fanConns    int           // connections they are spread over
	fanStamps   int           // timestamped lines of each fan-out turn
	fanRounds   int           // rounds of each kind: without and with the stalled subscriber
	fanInterval time.Duration // between two timestamped lines
	settle      time.Duration // wait before reading an idle process's RSS
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == roleBusyScreen {
		os.Exit(runBusyScreen(os.Args[2:]))
	}
	if dir, ok := os.LookupEnv(envProfileAgentd); ok {
		os.Exit(runAsAgentd(dir, os.Args[1:]))
	}
	if len(os.Args) > 1 && os.Args[1] == roleRawStream {
		os.Exit(runRawStream(os.Args[2:]))
	}
	var cfg config
	var skip, only string
	flag.BoolVar(&cfg.quick, "quick", false, "a smaller run (about a quarter of the work)")
	flag.StringVar(&cfg.agentd, "agentd", "", "use this agentd binary instead of building ./cmd/agentd (a client build runs the agentd-host beside it)")
	flag.StringVar(&cfg.before, "before", "", "an earlier agentd `binary` whose attach and pty are timed in the same rounds as agentd's, against the same host, to compare two builds in the same minutes")
	flag.StringVar(&cfg.piBin, "pi", "", "use this pi executable instead of installing @mariozechner/pi-coding-agent with npm")
	flag.StringVar(&cfg.piDir, "pi-dir", "", "where npm installs pi (default: the user cache directory)")
	flag.BoolVar(&cfg.noPi, "no-pi", false, "do not run pi: its anchors are reported unavailable")
	flag.StringVar(&cfg.profile, "profile", "", "write CPU profiles of every agentd host and worker, and of this client, into `dir`; agentd then runs inside this binary")
	flag.StringVar(&skip, "skip", "", "comma-separated parts to skip: run,stream,ls,attach,fanout,flood,pty,web (rss comes with run)")
	flag.StringVar(&only, "only", "", "comma-separated parts to run, the others skipped: run,stream,ls,attach,fanout,flood,pty,web")
	flag.IntVar(&cfg.sessions, "sessions", 0, "sessions listed by `agentd ls` (default 10000, -quick 2000)")
	flag.IntVar(&cfg.deltas, "deltas", 0, "text deltas of the streamed turn (default 100000)")
	flag.DurationVar(&cfg.fanInterval, "fan-interval", 0, "pause between the fan-out turn's timestamp lines (default 1ms)")
	flag.StringVar(&cfg.ptyParts, "pty-parts", "relay,idle,screen,echo", "comma-separated pieces of the pty part to run: relay, idle, screen, echo")
	flag.IntVar(&cfg.echoKeys, "echo-keys", 0, "keys typed into each of `agentd shell` and tmux for the echo (default 2000, -quick 400)")
	flag.IntVar(&cfg.fanSubs, "fan-subs", 0, "subscriptions reading the fan-out session (default 100)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "sessionbench: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	cfg.fill(skip, only)

	b, err := newBench(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sessionbench: %v\n", err)
		os.Exit(1)
	}
	harness.Run("sessionbench", b.run, b.cleanup)
}

// parts are the bench's parts, in the order they run.
var parts = []string{"run", "stream", "ls", "attach", "fanout", "flood", "pty", "web"}

func (c *config) fill(skip, only string) {
	c.coldRuns, c.warmRuns, c.newRuns, c.piRuns = 15, 20, 10, 10
	c.rounds, c.stamps, c.statusRTTs = 3, 2000, 2000
	c.lsRuns = 10
	c.settle = time.Second
	c.attachRecords, c.attachRuns = 1000, 20
	c.fanConns, c.fanStamps, c.fanRounds = 10, 8000, 3
	if c.fanSubs <= 0 {
		c.fanSubs = 100
	}
	if c.fanInterval <= 0 {
		c.fanInterval = time.Millisecond
	}
	// The turn lasts about 8 s at 1ms: the stalled subscriber's eviction
	// (5 s after its socket fills) falls inside it.
	c.fanStamps = int(8 * time.Second / c.fanInterval)
	sessions, echoKeys := 10000, 2000
	if c.quick {
		c.coldRuns, c.warmRuns, c.newRuns, c.piRuns = 5, 6, 3, 3
		c.rounds, c.stamps, c.statusRTTs = 1, 500, 500
		c.lsRuns = 5
		sessions = 2000
		c.attachRuns = 6
		echoKeys = 400
		c.fanRounds = 1
	}
	if c.echoKeys <= 0 {
		c.echoKeys = echoKeys
	}
	if c.sessions <= 0 {
		c.sessions = sessions
	}
	if c.deltas <= 0 {
		c.deltas = 100000
	}
	c.skip = map[string]bool{}
	for s := range strings.SplitSeq(skip, ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.skip[s] = true
		}
	}
	if only != "" {
		run := map[string]bool{}
		for s := range strings.SplitSeq(only, ",") {
			run[strings.TrimSpace(s)] = true
		}
		for _, p := range parts {
			if !run[p] {
				c.skip[p] = true
			}
		}
	}
}

// bench holds one run's directories and results.
type bench struct {
	cfg    config
	base   string // short temporary directory: socket paths stay under 108 bytes
	work   string // the sessions' working directory
	agentd string // the agentd binary (this binary with -profile)
	floor  string // a Go program that only prints: the start every Go client pays
	self   string // this binary
	pi     piSide
	res    results
}

func newBench(cfg config) (*bench, error) {
	base, err := os.MkdirTemp("", "sb")
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	b := &bench{cfg: cfg, base: base, work: filepath.Join(base, "work"), self: self}
	if err := os.MkdirAll(b.work, 0o755); err != nil {
		return nil, err
	}
	if cfg.profile != "" {
		if b.cfg.profile, err = filepath.Abs(cfg.profile); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(b.cfg.profile, 0o755); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// cleanup stops every agentd process still registered under the run's
// directory, and pi, then removes the directory.
func (b *bench) cleanup() {
	reapAll()
	stopTmuxAll()
	b.pi.stopAll()
	os.RemoveAll(b.base)
}

func (b *bench) run(ctx context.Context) error {
	start := time.Now()
	if err := b.buildAgentd(ctx); err != nil {
		return err
	}
	fmt.Printf("sessionbench: %s/%s, %d CPUs, GOMAXPROCS %d, %s, load average %s\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), loadAverage())
	if b.cfg.profile != "" {
		fmt.Printf("agentd under test: this binary running agentd's command line, with CPU profiles into %s (-profile)\n", b.cfg.profile)
	} else {
		fmt.Println("agentd under test: the agentd binary; hosts by cold activation, workers by their host, each its own process")
	}
	if !b.cfg.skip["attach"] || !b.cfg.skip["pty"] {
		if err := b.buildFloor(ctx); err != nil {
			return err
		}
	}
	if !b.cfg.skip["run"] {
		b.preparePi(ctx)
		fmt.Println()
	}

	fns := map[string]func(context.Context) error{
		"run": b.runPart, "stream": b.streamPart, "ls": b.lsPart, "attach": b.attachPart, "fanout": b.fanoutPart, "flood": b.floodPart, "pty": b.ptyPart, "web": b.webPart,
	}
	for _, name := range parts {
		p := struct {
			name string
			fn   func(context.Context) error
		}{name, fns[name]}
		if b.cfg.skip[p.name] {
			continue
		}
		t0 := time.Now()
		if err := p.fn(ctx); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		fmt.Printf("  (%s part: %s)\n\n", p.name, time.Since(t0).Round(100*time.Millisecond))
	}
	b.printResults(os.Stdout)
	fmt.Printf("\ntotal run time %s (pi's install, when it ran, included); load average at the end %s\n", time.Since(start).Round(100*time.Millisecond), loadAverage())
	if b.cfg.profile != "" {
		fmt.Printf("\nprofiles in %s: host-<pid>.cpu.pprof, worker-<pid>.cpu.pprof, client.cpu.pprof\n", b.cfg.profile)
		fmt.Printf("  go tool pprof -top %s/worker-*.cpu.pprof\n", b.cfg.profile)
	}
	return nil
}

// buildAgentd builds ./cmd/agentd into the run's directory unless -agentd
// names a binary. With -profile, agentd is this binary instead.
func (b *bench) buildAgentd(ctx context.Context) error {
	if b.cfg.profile != "" {
		b.agentd = b.self
		return nil
	}
	if b.cfg.agentd != "" {
		abs, err := filepath.Abs(b.cfg.agentd)
		if err != nil {
			return err
		}
		b.agentd = abs
		return nil
	}
	b.agentd = filepath.Join(b.base, "agentd")
	t0 := time.Now()
	// Built as the README installs it for the quickest start: static
	// (CGO_ENABLED=0), the client build as agentd and the whole program
	// beside it as agentd-host, which runs the hosts and workers.
	for _, build := range [][]string{
		{"-o", filepath.Join(b.base, "agentd-host")},
		{"-tags", "agentd_client", "-o", b.agentd},
	} {
		args := append(append([]string{"build"}, build...), agentdPackage)
		out, err := command(ctx, append(os.Environ(), "CGO_ENABLED=0"), "go", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("building agentd (run from inside the module, or pass -agentd): %v\n%s", err, out)
		}
	}
	fmt.Printf("built agentd (the client build) and agentd-host (the whole program) in %s\n", time.Since(t0).Round(10*time.Millisecond))
	return nil
}

// buildFloor builds a Go program that prints one line and exits, as the
// agentd binary is built. Its start is the least any Go client can take,
// beside agentd's own start and tmux's attach.
func (b *bench) buildFloor(ctx context.Context) error {
	dir := filepath.Join(b.base, "floor")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	src := "package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(\"floor\\n\") }\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module floor\n\ngo 1.26\n"), 0o644); err != nil {
		return err
	}
	b.floor = filepath.Join(b.base, "floor-bin")
	build := command(ctx, append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off"), "go", "build", "-o", b.floor, ".")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the floor program: %v\n%s", err, out)
	}
	return nil
}

// starts are timed process starts: `agentd version`, and the floor
// program beside it, with the minor page faults of each run. Where a page
// fault is dear (a paravirtualised guest), a start costs about its faults.
type starts struct {
	version, floor             []time.Duration
	versionFaults, floorFaults []float64
}

// time times `agentd version` and the floor program once each: a process's
// start alone, for what the rest of an attach costs.
func (s *starts) time(ctx context.Context, b *bench, env []string) {
	run := func(cmd *exec.Cmd, times *[]time.Duration, faults *[]float64) {
		d, _, err := timeRun(cmd)
		if err != nil {
			return
		}
		*times = append(*times, d)
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			*faults = append(*faults, float64(ru.Minflt))
		}
	}
	run(command(ctx, env, b.agentd, "version"), &s.version, &s.versionFaults)
	run(command(ctx, env, b.floor), &s.floor, &s.floorFaults)
}

// rows are the informational rows of the two process starts, beside the
// anchor's attach.
func (s *starts) rows(anchor summary) []row {
	var rows []row
	add := func(label string, times []time.Duration, faults []float64) {
		if len(times) == 0 {
			return
		}
		t := summarize(times)
		rows = append(rows, row{label, fmt.Sprintf("%s, %.0f faults", dur(t.p50), medianOr(faults)), dur(anchor.p50) + " tmux attach", table.Ratio(t.p50, anchor.p50), "-", "info"})
	}
	add("  `agentd version` (a process start, no host), p50", s.version, s.versionFaults)
	add("  a Go program that only prints (any Go client's start), p50", s.floor, s.floorFaults)
	return rows
}

// loadAverage returns the 1, 5 and 15 minute load averages: on a shared
// machine, how much else was running.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

const agentdPackage = "github.com/agentd-dev/agentd/cmd/agentd"
