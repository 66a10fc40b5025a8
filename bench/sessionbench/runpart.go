package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/protocol"
)

// runResults are the figures of the run part.
type runResults struct {
	cold, warm, newSession summary
	piReady                summary
	piRSS                  int64  // median over the pi runs
	piMem                  memory // the pi run with the median RSS
	workerRSS              int64  // the warm session's worker after its turns
	workerMem              memory
	oneTurnRSS             int64 // median of the workers of the new sessions (one turn each)
	hostRSS                int64 // the warm host, idle
	warmTurns              int
	workerReplaced         bool // the warm session's worker changed during the warm runs
}

// runPart times `agentd run "hi"` with the faux model cold (no host, no
// worker: a fresh home each run) beside pi's time to ready, then warm (the
// host running and the session's worker alive) and with a warm host but a
// new session (a cold worker); then it reads the idle worker's and host's
// memory beside pi's.
func (b *bench) runPart(ctx context.Context) error {
	r := &b.res.run
	piOK := func() bool { return b.pi.unavailable == "" }
	with := fmt.Sprintf(", interleaved with %d pi starts", b.cfg.piRuns)
	if !piOK() {
		with = " (pi unavailable)"
	}
	fmt.Printf("run: %d cold `agentd run \"hi\"` (a fresh home each; its host shut down after each, untimed)%s\n", b.cfg.coldRuns, with)
	_, out, err := b.coldRun(ctx, "cw") // untimed: warms the file cache, checks the reply
	if err != nil {
		return err
	}
	if !strings.Contains(string(out), `You said: "hi"`) {
		return fmt.Errorf("agentd run \"hi\" did not answer with the faux model; it printed: %s", lastLines(out, 3))
	}
	var cold, piReady []time.Duration
	var piRSS []int64
	var piMem []memory
	for i := range max(b.cfg.coldRuns, b.cfg.piRuns) {
		if i < b.cfg.coldRuns {
			d, _, err := b.coldRun(ctx, fmt.Sprintf("c%d", i))
			if err != nil {
				return err
			}
			cold = append(cold, d)
		}
		if i < b.cfg.piRuns && piOK() {
			d, rss, err := b.piReady(ctx, true)
			if err != nil {
				b.pi.unavailable = "failed during the run: " + err.Error()
				fmt.Printf("  pi: %s; its anchors are reported unavailable\n", b.pi.unavailable)
				continue
			}
			piReady, piRSS, piMem = append(piReady, d), append(piRSS, rss.rss), append(piMem, rss)
		}
	}
	r.cold = summarize(cold)
	fmt.Printf("  cold agentd run  p50 %s p90 %s (n=%d)\n", dur(r.cold.p50), dur(r.cold.p90), r.cold.n)
	if piOK() && len(piReady) > 0 {
		r.piReady, r.piRSS = summarize(piReady), medianInt(piRSS)
		for _, m := range piMem {
			if r.piMem.rss == 0 || abs(m.rss-r.piRSS) < abs(r.piMem.rss-r.piRSS) {
				r.piMem = m
			}
		}
		fmt.Printf("  pi ready         p50 %s p90 %s (n=%d), idle RSS %s (%s)\n", dur(r.piReady.p50), dur(r.piReady.p90), r.piReady.n, mib(r.piRSS), r.piMem.split())
	}

	// Warm: one host that keeps its workers.
	home, runDir, err := newPlace(filepath.Join(b.base, "w"))
	if err != nil {
		return err
	}
	defer b.shutdown(ctx, home, runDir)
	env := b.agentdEnv(home, runDir, activation.EnvIdleGrace+"=10m", "AGENTD_WORKER_IDLE_GRACE=10m")
	run := func(args ...string) (time.Duration, error) {
		cmd := command(ctx, env, b.agentd, append([]string{"run"}, args...)...)
		cmd.Dir = b.work
		d, _, err := timeRun(cmd)
		return d, err
	}
	if _, err := run("hi"); err != nil {
		return err
	}
	sessionID, err := b.onlySession(ctx, env)
	if err != nil {
		return err
	}
	pid0 := workerPID(home, sessionID)
	fmt.Printf("run: %d warm `agentd run --session %s \"hi\"` (host running, worker pid %d alive), interleaved with %d `agentd run \"hi\"` on the warm host (a new session: a cold worker)\n",
		b.cfg.warmRuns, sessionID, pid0, b.cfg.newRuns)
	var warm, fresh []time.Duration
	for i := range max(b.cfg.warmRuns, b.cfg.newRuns) {
		if i < b.cfg.warmRuns {
			d, err := run("--session", sessionID, "hi")
			if err != nil {
				return err
			}
			warm = append(warm, d)
		}
		if i < b.cfg.newRuns {
			d, err := run("hi")
			if err != nil {
				return err
			}
			fresh = append(fresh, d)
		}
	}
	r.warm, r.newSession, r.warmTurns = summarize(warm), summarize(fresh), 1+len(warm)
	pid := workerPID(home, sessionID)
	r.workerReplaced = pid != pid0
	fmt.Printf("  warm agentd run  p50 %s p90 %s (n=%d)\n", dur(r.warm.p50), dur(r.warm.p90), r.warm.n)
	fmt.Printf("  new session      p50 %s p90 %s (n=%d)\n", dur(r.newSession.p50), dur(r.newSession.p90), r.newSession.n)
	if r.workerReplaced {
		fmt.Printf("  note: the session's worker changed during the warm runs (pid %d, then %d): those runs were not all warm\n", pid0, pid)
	}

	// Idle memory, after a settle.
	time.Sleep(b.cfg.settle)
	r.workerMem = memoryOf(pid)
	r.workerRSS = r.workerMem.rss
	hosts, workers := pids(home, runDir)
	if len(hosts) > 0 {
		r.hostRSS = rssBytes(hosts[0])
	}
	var others []int64
	for _, w := range workers {
		if w != pid {
			if m := rssBytes(w); m > 0 {
				others = append(others, m)
			}
		}
	}
	r.oneTurnRSS = medianInt(others)
	fmt.Printf("  idle RSS: worker after %d turns %s (%s), workers after one turn %s (median of %d), host %s\n",
		r.warmTurns, mib(r.workerRSS), r.workerMem.split(), mib(r.oneTurnRSS), len(others), mib(r.hostRSS))
	return nil
}

// coldRun times `agentd run "hi"` in a fresh home under base/name: the CLI
// starts the host, the host the worker. The host is then shut down and the
// folder removed, untimed. It returns the command's time and output.
func (b *bench) coldRun(ctx context.Context, name string) (time.Duration, []byte, error) {
	dir := filepath.Join(b.base, name)
	home, runDir, err := newPlace(dir)
	if err != nil {
		return 0, nil, err
	}
	defer os.RemoveAll(dir)
	defer b.shutdown(ctx, home, runDir)
	cmd := command(ctx, b.agentdEnv(home, runDir), b.agentd, "run", "hi")
	cmd.Dir = b.work
	d, out, err := timeRun(cmd)
	if err != nil {
		return 0, out, fmt.Errorf("cold run: %w", err)
	}
	return d, out, nil
}

// onlySession returns the id of the one session `agentd ls --json` lists.
func (b *bench) onlySession(ctx context.Context, env []string) (string, error) {
	out, err := command(ctx, env, b.agentd, "ls", "--json").Output()
	if err != nil {
		return "", fmt.Errorf("agentd ls --json: %w", err)
	}
	var rows []protocol.Session
	if err := json.Unmarshal(out, &rows); err != nil || len(rows) != 1 {
		return "", fmt.Errorf("agentd ls --json: want one session, got %s", lastLines(out, 3))
	}
	return rows[0].SessionID, nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// workerPID returns the pid the worker of sessionID registered in home, or 0.
func workerPID(home, sessionID string) int {
	raw, err := os.ReadFile(filepath.Join(home, "workers", sessionID+".json"))
	if err != nil {
		return 0
	}
	var r struct {
		PID int `json:"pid"`
	}
	json.Unmarshal(raw, &r)
	return r.PID
}
