// Command handoffbench measures host replacement (`agentd upgrade`): what
// the hand-off costs the sessions running through it, and how long the
// new host takes to adopt the workers.
//
//   - load: sessions with live workers, some mid-turn (a command printing
//     numbered lines), some with a PTY printing numbered lines, each
//     followed by a client (client.FollowSession; the PTYs watched too,
//     client.Conn.WatchPTY), then `agentd upgrade`. It reports the workers
//     killed (by their registrations' pids), the PTY lines missing from
//     the output logs on disk, whether each PTY watcher saw its screen,
//     then every line after it, once reconnected, the transcript records
//     the followers missed or got twice and the transcripts' sequences on
//     disk, each client's resume time (stream lost → reopened), and the
//     upgrade's wall time.
//   - adopt: sessions each with an idle live worker, then `agentd
//     upgrade`: the new host's "workers adopted" log line (how many, how
//     long) and the upgrade's wall time.
//
// Everything under test runs as real processes: this binary runs agentd's
// command line when asked to (the hosts, the workers and the `agentd
// upgrade` command), in fresh temporary homes and runtime directories,
// with the offline model.
//
// Run it from the module root:
//
//	go run ./bench/handoffbench                # both parts, well under two minutes
//	go run ./bench/handoffbench -skip adopt    # parts to skip: load, adopt
//	go run ./bench/handoffbench -sessions 40 -idle 200
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/agentd-dev/agentd/bench/internal/asagentd"
	"github.com/agentd-dev/agentd/bench/internal/harness"
	"github.com/agentd-dev/agentd/bench/internal/procstat"
	"github.com/agentd-dev/agentd/bench/internal/table"
	"github.com/agentd-dev/agentd/client"
)

// config is a run's shape.
type config struct {
	sessions, turns, ptys int // the load part's sessions, those mid-turn, those with a PTY
	turnLines, ptyLines   int // lines each turn's command and each PTY print
	idle                  int // the adopt part's idle workers
	skip                  map[string]bool
}

// bench is one run.
type bench struct {
	cfg   config    // constant
	base  string    // constant: the run's temporary directory
	out   io.Writer // constant
	began time.Time // constant

	mu     sync.Mutex
	places []*place // guarded by mu: every part's place, stopped at the end
}

func main() {
	asagentd.Main()
	cfg := config{skip: map[string]bool{}}
	var skip string
	flag.IntVar(&cfg.sessions, "sessions", 20, "load: sessions with a live worker and a follower")
	flag.IntVar(&cfg.turns, "turns", 5, "load: sessions mid-turn as the host is replaced")
	flag.IntVar(&cfg.ptys, "ptys", 3, "load: sessions with a PTY printing as the host is replaced")
	flag.IntVar(&cfg.turnLines, "turn-lines", 200, "load: lines each turn's command prints, one every 10 ms")
	flag.IntVar(&cfg.ptyLines, "pty-lines", 500, "load: lines each PTY prints, one every 5 ms")
	flag.IntVar(&cfg.idle, "idle", 100, "adopt: sessions with an idle live worker")
	flag.StringVar(&skip, "skip", "", "parts to skip, comma-separated: load, adopt")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "handoffbench: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	for part := range strings.SplitSeq(skip, ",") {
		switch part = strings.TrimSpace(part); part {
		case "":
		case "load", "adopt":
			cfg.skip[part] = true
		default:
			fmt.Fprintf(os.Stderr, "handoffbench: -skip %q: want load or adopt\n", part)
			os.Exit(2)
		}
	}
	if cfg.turns+cfg.ptys > cfg.sessions || cfg.turns < 0 || cfg.ptys < 0 || cfg.ptyLines < 1 || cfg.turnLines < 1 || cfg.idle < 1 {
		fmt.Fprintln(os.Stderr, "handoffbench: want -turns plus -ptys at most -sessions, and at least a line and an idle worker")
		os.Exit(2)
	}
	// Short: socket paths stay under 108 bytes.
	base, err := os.MkdirTemp("", "hob")
	if err != nil {
		fmt.Fprintf(os.Stderr, "handoffbench: %v\n", err)
		os.Exit(1)
	}
	b := &bench{cfg: cfg, base: base, out: os.Stdout, began: time.Now()}
	harness.Run("handoffbench", b.run, b.close)
}

// run runs the parts not skipped and prints the table.
func (b *bench) run(ctx context.Context) error {
	fmt.Fprintf(b.out, "handoffbench: %s/%s, %d CPUs, %s, load average %s\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), loadAverage())
	var rows []row
	var failed error
	if !b.cfg.skip["load"] {
		r, err := b.load(ctx)
		if err != nil {
			failed = fmt.Errorf("load: %w", err)
		} else {
			rows = append(rows, loadRows(b.cfg, r)...)
		}
	}
	if !b.cfg.skip["adopt"] && failed == nil {
		r, err := b.adoptIdle(ctx)
		if err != nil {
			failed = fmt.Errorf("adopt: %w", err)
		} else {
			rows = append(rows, adoptRows(b.cfg, r)...)
		}
	}
	fmt.Fprintf(b.out, "\nhandoffbench: %s, load average %s\n", time.Since(b.began).Round(100*time.Millisecond), loadAverage())
	table.Print(b.out, rows, 2)
	if failed != nil {
		return failed
	}
	for _, r := range rows {
		if r.Verdict == "FAIL" {
			return fmt.Errorf("%s: %s, goal %s", r.Metric, r.Agentd, r.Goal)
		}
	}
	return nil
}

// say prints a line of progress, with the time since the run began.
func (b *bench) say(format string, args ...any) {
	fmt.Fprintf(b.out, "%6.1fs  %s", time.Since(b.began).Seconds(), fmt.Sprintf(format, args...))
}

// row is one line of the table: agentd's figure, and its goal. There is no
// anchor: a replacement is measured against what it should keep.
type row table.Row

func info(metric, value string) row {
	return row{metric, value, "-", nan, "-", "info"}
}

func goal(metric, value, want string, ok bool) row {
	return row{metric, value, "-", nan, want, table.Verdict(ok)}
}

var nan = table.Ratio(0, 0)

func loadRows(cfg config, r loadResult) []row {
	p50, worst := procstat.Percentile(r.resumes, 50), procstat.Percentile(r.resumes, 100)
	return []row{
		goal(fmt.Sprintf("load: workers killed by the upgrade (of %d live)", r.workers), fmt.Sprint(r.killed), "0", r.killed == 0 && r.workers == cfg.sessions),
		goal("  turns running at the upgrade, completed after", fmt.Sprintf("%d, %d of %d", r.turnsRunning, r.turnsCompleted, r.turns), fmt.Sprintf("%d, %d", r.turns, r.turns), r.turnsRunning == r.turns && r.turnsCompleted == r.turns),
		goal(fmt.Sprintf("  PTY lines missing from the logs (%d × %d)", r.ptys, cfg.ptyLines), fmt.Sprintf("%d (%d out of order)", r.ptyMissing, r.ptyOrder), "0", r.ptyMissing == 0 && r.ptyOrder == 0 && r.ptysRunning == r.ptys),
		goal("  PTY watchers: screen, then every line after", fmt.Sprintf("%d of %d", r.ptyContinued, r.ptys), fmt.Sprint(r.ptys), r.ptyContinued == r.ptys),
		info("  PTY watcher: stream lost → screen, max", dur(procstat.Percentile(r.toScreen, 100))),
		goal(fmt.Sprintf("  records missed / repeated by %d followers", r.clients), fmt.Sprintf("%d / %d", r.recMissing, r.recRepeat), "0 / 0", r.recMissing == 0 && r.recRepeat == 0),
		goal("  transcript lines on disk not 1..n", fmt.Sprintf("%d of %d", r.badLines, r.records), "0", r.badLines == 0),
		goal("  clients resumed", fmt.Sprintf("%d of %d", r.resumed, r.clients), fmt.Sprint(r.clients), r.resumed == r.clients),
		info("  client resume, lost → reopened, p50", dur(p50)),
		goal("  client resume, lost → reopened, max", dur(worst), "≤ 2s", len(r.resumes) > 0 && worst <= 2*time.Second),
		info("    new host ready → client reopened, p50", dur(procstat.Percentile(r.afterReady, 50))),
		info("    new host ready → client reopened, max", dur(procstat.Percentile(r.afterReady, 100))),
		info("  `agentd upgrade` wall time", dur(r.handoff.took)),
		info("  no host ready: old draining → new ready", dur(r.handoff.window())),
		info(fmt.Sprintf("    of which adopting %d of %d workers", r.handoff.adopted, r.handoff.registered), dur(r.handoff.adoptTook)),
	}
}

func adoptRows(cfg config, r adoptResult) []row {
	return []row{
		goal(fmt.Sprintf("adopt: workers adopted (of %d idle)", r.workers), fmt.Sprint(r.handoff.adopted), fmt.Sprint(cfg.idle), r.handoff.adopted == cfg.idle && r.workers == cfg.idle),
		goal("  adoption took (the new host's log)", dur(r.handoff.adoptTook), "< 1s", r.handoff.adoptTook < time.Second),
		info("  no host ready: old draining → new ready", dur(r.handoff.window())),
		info("  `agentd upgrade` wall time", dur(r.handoff.took)),
		goal("  workers killed by the upgrade", fmt.Sprint(r.killed), "0", r.killed == 0),
	}
}

// dur formats d in ms below 10s, else in s.
func dur(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// loadAverage returns the machine's load averages over 1, 5 and 15 minutes.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ")
}

// newPlace makes a part's place, which close stops.
func (b *bench) newPlace(name string) (*place, error) {
	p, err := newPlace(b.base, name)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.places = append(b.places, p)
	return p, nil
}

// startPlace makes a fresh place for a part and starts its host: the
// connection returned is to it.
func (b *bench) startPlace(ctx context.Context, name string) (*place, *client.Conn, error) {
	p, err := b.newPlace(name)
	if err != nil {
		return nil, nil, err
	}
	c, err := p.dial(ctx)
	if err != nil {
		p.stop()
		return nil, nil, fmt.Errorf("starting the host: %w", err)
	}
	return p, c, nil
}

// close stops every process of the run and removes its directory.
func (b *bench) close() {
	b.mu.Lock()
	places := b.places
	b.mu.Unlock()
	for _, p := range places {
		p.stop()
	}
	os.RemoveAll(b.base)
}
