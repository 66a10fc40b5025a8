// Command soak runs agentd under faults and checks that no session loses
// or repeats anything: sessions run turns in a loop through the Go client
// while, at random moments, a worker or the host is killed with SIGKILL.
// After each fault, once every session has run a turn to completion
// again, and at the end, it reads every session's transcript from disk
// and checks it: each line valid JSON, sequences from 1 without a gap or
// a repeat, every record a client received still there, every turn whose
// start a client saw acknowledged recorded, every turn ended (completed,
// or failed or interrupted when a fault hit it) exactly once.
//
// Everything under test runs as real processes: this binary runs
// agentd's command line when asked to (the host, started by the
// sessions' clients through cold activation, and its workers), in a
// fresh temporary home and runtime directory, with the offline model.
//
// Run it from the module root:
//
//	go run ./bench/soak                          # 4 sessions for 2 minutes
//	go run ./bench/soak -duration 10m -sessions 8 -seed 42
//	go run ./bench/soak -agentd BIN              # soak a prebuilt agentd
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/agentd-dev/agentd/bench/internal/asagentd"
	"github.com/agentd-dev/agentd/bench/internal/harness"
)

func main() {
	asagentd.Main()
	cfg := Config{Out: os.Stdout}
	flag.DurationVar(&cfg.Duration, "duration", 2*time.Minute, "inject faults for this long")
	flag.IntVar(&cfg.MinFaults, "min-faults", 0, "inject at least this many faults, however long it takes")
	flag.IntVar(&cfg.Sessions, "sessions", 4, "sessions running turns at once")
	flag.Int64Var(&cfg.Seed, "seed", 0, "seed of the faults' moments, kinds and targets (default: from the clock)")
	flag.IntVar(&cfg.Lines, "lines", 100, "numbered lines each turn's command writes, one every 10ms")
	flag.DurationVar(&cfg.MaxGap, "max-gap", 3*time.Second, "longest wait before a fault once the sessions run again")
	flag.StringVar(&cfg.Agentd, "agentd", "", "soak this agentd binary instead of this program's own agentd")
	flag.BoolVar(&cfg.Handoff, "handoff", true, "also kill the host in the middle of a hand-off (`agentd host --replace`)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "soak: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if cfg.Seed == 0 {
		cfg.Seed = time.Now().UnixNano()
	}
	s, err := New(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		os.Exit(1)
	}
	harness.Run("soak", s.Run, s.Close)
}
