package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentd-dev/agentd/bench/internal/procstat"
	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// rssBytes returns VmRSS of pid from /proc/<pid>/status, or 0.
func rssBytes(pid int) int64 { return statusBytes(pid, "VmRSS") }

// pssBytes returns the proportional set size of pid (/proc/<pid>/smaps_rollup):
// its private pages plus its share of the pages it shares with other
// processes — what one more such process costs the machine.
func pssBytes(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("Pss:")); ok {
			if f := bytes.Fields(v); len(f) >= 1 {
				kb, _ := strconv.ParseInt(string(f[0]), 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// memory is a process's resident memory, split into private (anonymous)
// pages and pages of mapped files (its executable, shared libraries).
type memory struct{ rss, anon, file, pss int64 }

func memoryOf(pid int) memory {
	return memory{statusBytes(pid, "VmRSS"), statusBytes(pid, "RssAnon"), statusBytes(pid, "RssFile"), pssBytes(pid)}
}

func (m memory) add(o memory) memory {
	return memory{m.rss + o.rss, m.anon + o.anon, m.file + o.file, m.pss + o.pss}
}

// split formats m as "anon X + file Y".
func (m memory) split() string {
	return fmt.Sprintf("anon %s + file %s", mib(m.anon), mib(m.file))
}

// treeMemory returns the memory of pid and of all its descendants.
func treeMemory(pid int) memory {
	total := memoryOf(pid)
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for f := range strings.FieldsSeq(string(b)) {
			if child, err := strconv.Atoi(f); err == nil {
				total = total.add(treeMemory(child))
			}
		}
	}
	return total
}

// summary is a sample's size and quantiles.
type summary struct {
	n                  int
	p50, p90, p99, max time.Duration
}

func summarize(d []time.Duration) summary {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return summary{}
	}
	return summary{n: len(s), p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99), max: s[len(s)-1]}
}

func medianInt(v []int64) int64 {
	f := make([]float64, len(v))
	for i, x := range v {
		f[i] = float64(x)
	}
	return int64(median(f))
}

// dur formats d in µs below 1ms, in ms below 10s, else in s.
func dur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// agentdEnv is the environment of an agentd process placed in home and
// runDir: this process's, without any AGENTD_* setting, model key or tmux
// variable of the caller (so the faux model is the default and nothing
// leaks in), plus extra.
func (b *bench) agentdEnv(home, runDir string, extra ...string) []string {
	env := cleanEnv()
	env = append(env, protocol.EnvHome+"="+home, protocol.EnvRuntimeDir+"="+runDir)
	if b.cfg.profile != "" {
		env = append(env, envProfileAgentd+"="+b.cfg.profile)
	}
	return append(env, extra...)
}

// openHost starts an agentd host for home (without model keys, with extra
// in its environment, logging to home's host.log) and connects to it.
func (b *bench) openHost(ctx context.Context, home, runDir string, extra ...string) (*client.Conn, client.HostInfo, error) {
	env := append([]string{"ANTHROPIC_API_KEY=", "OPENAI_API_KEY="}, extra...)
	if b.cfg.profile != "" {
		env = append(env, envProfileAgentd+"="+b.cfg.profile)
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, info, _, err := activation.Open(octx, activation.OpenOptions{Activation: activation.Options{
		Home: home, RuntimeDir: runDir,
		Command:   []string{b.agentd, "host", "--log-file", filepath.Join(home, "host.log")},
		IdleGrace: 10 * time.Minute, Env: env,
	}})
	if err != nil {
		return nil, client.HostInfo{}, fmt.Errorf("starting the host: %w", err)
	}
	return c, info, nil
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AGENTD_") || strings.HasPrefix(k, "ANTHROPIC_") || strings.HasPrefix(k, "OPENAI_") || k == "TMUX" || k == envProfileAgentd {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// command is exec.CommandContext with env as the whole environment, in
// dir when not empty.
func command(ctx context.Context, env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	return cmd
}

// timeRun runs cmd to completion and returns how long it took, from start
// to exit, and its output. The output goes to a file handed to the process
// directly, so that no copying goroutine of this process takes part in
// the timing.
func timeRun(cmd *exec.Cmd) (time.Duration, []byte, error) {
	out, err := os.CreateTemp("", "sbout")
	if err != nil {
		return 0, nil, err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	t0 := time.Now()
	err = cmd.Run()
	d := time.Since(t0)
	text, _ := os.ReadFile(out.Name())
	if err != nil {
		args := append([]string{filepath.Base(cmd.Args[0])}, cmd.Args[1:]...)
		return d, text, fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(text))
	}
	return d, text, nil
}

// places records every home and runtime directory of the run, so that
// cleanup can find the processes started in them.
var places struct {
	mu   sync.Mutex
	dirs [][2]string // home, runtime directory
}

// newPlace makes dir/h and dir/r, the home and runtime directory of one
// host, and remembers them.
func newPlace(dir string) (home, runDir string, err error) {
	home, runDir = filepath.Join(dir, "h"), filepath.Join(dir, "r")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", "", err
	}
	places.mu.Lock()
	places.dirs = append(places.dirs, [2]string{home, runDir})
	places.mu.Unlock()
	return home, runDir, nil
}

// pids returns the pids of the hosts registered in runDir and of the
// workers registered in home.
func pids(home, runDir string) (hosts, workers []int) {
	ents, _ := os.ReadDir(runDir)
	for _, e := range ents {
		if protocol.HostIDOfRegistration(e.Name()) == "" {
			continue
		}
		var r protocol.Registration
		if raw, err := os.ReadFile(filepath.Join(runDir, e.Name())); err == nil && json.Unmarshal(raw, &r) == nil && r.PID > 0 {
			hosts = append(hosts, r.PID)
		}
	}
	regs, _ := filepath.Glob(filepath.Join(home, "workers", "*.json"))
	for _, p := range regs {
		var r struct {
			PID int `json:"pid"`
		}
		if raw, err := os.ReadFile(p); err == nil && json.Unmarshal(raw, &r) == nil && r.PID > 0 {
			workers = append(workers, r.PID)
		}
	}
	return hosts, workers
}

// reap kills, by pid, every host and worker of home and runDir still alive
// after its shutdown: only processes this run started are registered there.
func reap(home, runDir string) int {
	hosts, workers := pids(home, runDir)
	n := 0
	for _, pid := range append(hosts, workers...) {
		if proc.Running(pid) && (strings.Contains(cmdline(pid), home) || isHostOf(pid, runDir)) {
			syscall.Kill(pid, syscall.SIGKILL)
			n++
		}
	}
	return n
}

// isHostOf reports whether pid's environment places it in runDir.
func isHostOf(pid int, runDir string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	return err == nil && bytes.Contains(b, []byte(protocol.EnvRuntimeDir+"="+runDir+"\x00"))
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
}

// reapAll reaps every place of the run.
func reapAll() {
	places.mu.Lock()
	dirs := slices.Clone(places.dirs)
	places.mu.Unlock()
	for _, d := range dirs {
		reap(d[0], d[1])
	}
}

// shutdown drains the host of home with `agentd shutdown`, then reaps what
// outlived it.
func (b *bench) shutdown(ctx context.Context, home, runDir string) {
	sctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	if out, err := command(sctx, b.agentdEnv(home, runDir), b.agentd, "shutdown", "--force").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "sessionbench: agentd shutdown: %v: %s\n", err, bytes.TrimSpace(out))
	}
	// Workers are stopped by their host as it drains; give a straggler a
	// moment before it is killed.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, workers := pids(home, runDir)
		live := 0
		for _, p := range workers {
			if proc.Running(p) {
				live++
			}
		}
		if live == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := reap(home, runDir); n > 0 {
		fmt.Fprintf(os.Stderr, "sessionbench: %d agentd process(es) outlived their host's shutdown; killed\n", n)
	}
}

// The measurements shared with the other benchmarks.
var (
	statusBytes = procstat.StatusBytes
	procCPU     = procstat.CPU
	procFaults  = procstat.Faults
	selfCPU     = procstat.SelfCPU
	percentile  = procstat.Percentile
	median      = procstat.Median
	mib         = procstat.MiB
)
