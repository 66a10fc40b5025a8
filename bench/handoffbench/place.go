package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentd-dev/agentd/bench/internal/asagentd"
	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// workerGrace keeps idle workers alive through a part: a worker that
// stopped on its own would count as one the hand-off lost.
const workerGrace = 10 * time.Minute

// place is one part's home and runtime directory, and the agentd
// processes run in them.
type place struct {
	home, runDir, work string   // constant
	agentd             []string // constant: the agentd command
	env                []string // constant: extra environment of every agentd process

	mu   sync.Mutex
	pids map[int]bool // guarded by mu: hosts and workers seen, stopped at the end
}

// newPlace makes a fresh home, runtime directory and working directory
// under base/name.
func newPlace(base, name string) (*place, error) {
	self, asAgentd, err := asagentd.Command()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(base, name)
	p := &place{
		home: filepath.Join(dir, "h"), runDir: filepath.Join(dir, "r"), work: filepath.Join(dir, "w"),
		agentd: self, pids: map[int]bool{},
		// No model key reaches a host: the offline model answers.
		env: []string{asAgentd, "ANTHROPIC_API_KEY=", "OPENAI_API_KEY=", "AGENTD_WORKER_IDLE_GRACE=" + workerGrace.String()},
	}
	for _, d := range []string{p.home, p.runDir, p.work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// activation places the host of the place's home, as every client of the
// bench finds or starts it.
func (p *place) activation() activation.Options {
	return activation.Options{
		Home: p.home, RuntimeDir: p.runDir,
		Command:   append(slices.Clone(p.agentd), "host", "--log-file", p.hostLog()),
		IdleGrace: time.Hour, Env: p.env,
	}
}

// dial connects to the home's host, starting one when none runs.
func (p *place) dial(ctx context.Context) (*client.Conn, error) {
	c, _, _, err := activation.Open(ctx, activation.OpenOptions{Activation: p.activation(), Options: client.Options{Surface: protocol.SurfaceSDK}})
	return c, err
}

func (p *place) hostLog() string { return filepath.Join(p.home, activation.LogFileName) }

// run runs an agentd command in the place and returns its output and how
// long it took, from start to exit.
func (p *place) run(ctx context.Context, args ...string) (string, time.Duration, error) {
	cmd := exec.CommandContext(ctx, p.agentd[0], slices.Concat(p.agentd[1:], args)...)
	cmd.Env = append(os.Environ(), protocol.EnvHome+"="+p.home, protocol.EnvRuntimeDir+"="+p.runDir)
	cmd.Env = append(cmd.Env, p.env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	err := cmd.Run()
	took := time.Since(began)
	if err != nil {
		return out.String(), took, fmt.Errorf("agentd %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out.Bytes()))
	}
	return out.String(), took, nil
}

// hostPID returns the pid of the host registered for the home, 0 when
// none is.
func (p *place) hostPID() int {
	id, err := protocol.DefaultHostID(p.home)
	if err != nil {
		return 0
	}
	var reg protocol.Registration
	if readJSON(protocol.RegistrationPath(p.runDir, id), &reg) != nil {
		return 0
	}
	p.track(reg.PID)
	return reg.PID
}

// workers returns the workers registered in the home, by session.
func (p *place) workers() map[string]home.WorkerRegistration {
	paths, _ := filepath.Glob(filepath.Join(home.WorkerRegistryDir(p.home), "*.json"))
	regs := make(map[string]home.WorkerRegistration, len(paths))
	for _, path := range paths {
		var reg home.WorkerRegistration
		if readJSON(path, &reg) == nil && reg.PID > 0 {
			regs[reg.SessionID] = reg
			p.track(reg.PID)
		}
	}
	return regs
}

// liveWorkers counts the workers registered whose process runs.
func (p *place) liveWorkers() int {
	n := 0
	for _, reg := range p.workers() {
		if proc.RunningSince(reg.PID, reg.ProcessStart) {
			n++
		}
	}
	return n
}

// killed counts the workers of before that no longer run, or no longer
// serve their session.
func (p *place) killed(before map[string]home.WorkerRegistration) int {
	after := p.workers()
	n := 0
	for id, reg := range before {
		if !proc.RunningSince(reg.PID, reg.ProcessStart) || after[id].PID != reg.PID {
			n++
		}
	}
	return n
}

func (p *place) track(pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pids[pid] = true
}

// handoff is one replacement of the host, as `agentd upgrade` and the
// hosts' log tell it.
type handoff struct {
	took                time.Duration // `agentd upgrade`, start to exit
	adopted, registered int           // workers, of those registered, the new host adopted
	adoptTook           time.Duration // how long the new host took to adopt them
	draining, ready     time.Time     // the old host begins to drain; the new one is ready
}

// window is how long the home had no ready host.
func (h handoff) window() time.Duration { return h.ready.Sub(h.draining) }

// upgrade runs `agentd upgrade`, and reads what the old and new hosts
// logged of the hand-off.
func (p *place) upgrade(ctx context.Context) (handoff, error) {
	var h handoff
	old := p.hostPID()
	out, took, err := p.run(ctx, "upgrade")
	h.took = took
	if err != nil {
		return h, err
	}
	pid := p.hostPID()
	if pid == old || pid == 0 || !strings.Contains(out, "replaced") {
		return h, fmt.Errorf("agentd upgrade: host %d, then %d: %s", old, pid, strings.TrimSpace(out))
	}
	var adopted, draining, ready map[string]string
	logged := func() bool {
		adopted = p.logEntry(pid, "workers adopted", "", "")
		draining = p.logEntry(old, "server state", "state", protocol.StateDraining)
		ready = p.logEntry(pid, "server state", "state", protocol.StateReady)
		return adopted != nil && draining != nil && ready != nil
	}
	if err := waitFor(ctx, settleTimeout, "the hosts' log of the hand-off", logged); err != nil {
		return h, err
	}
	h.adopted, _ = strconv.Atoi(adopted["adopted"])
	h.registered, _ = strconv.Atoi(adopted["registered"])
	if h.adoptTook, err = time.ParseDuration(adopted["took"]); err != nil {
		return h, fmt.Errorf("the new host's log: %w", err)
	}
	if h.draining, err = time.Parse(time.RFC3339Nano, draining["time"]); err != nil {
		return h, fmt.Errorf("the old host's log: %w", err)
	}
	if h.ready, err = time.Parse(time.RFC3339Nano, ready["time"]); err != nil {
		return h, fmt.Errorf("the new host's log: %w", err)
	}
	return h, nil
}

// logField matches a key=value field of a host's log line.
var logField = regexp.MustCompile(`(\w+)=(\S+)`)

// logEntry returns the fields of the first line host pid logged with
// message msg (and field key equal to value, when key is not empty), or
// nil.
func (p *place) logEntry(pid int, msg, key, value string) map[string]string {
	f, err := os.Open(p.hostLog())
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "msg="+strconv.Quote(msg)+" ") {
			continue
		}
		fields := map[string]string{}
		for _, m := range logField.FindAllStringSubmatch(line, -1) {
			fields[m[1]] = m[2]
		}
		if fields["pid"] == strconv.Itoa(pid) && (key == "" || fields[key] == value) {
			return fields
		}
	}
	return nil
}

// stop shuts the host down with its workers (`agentd shutdown --force`),
// then kills, by pid, any host or worker of the place still running, and
// reaps the hosts this process started.
func (p *place) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p.workers()
	if p.hostPID() != 0 {
		p.run(ctx, "shutdown", "--force")
	}
	p.mu.Lock()
	pids := slices.Collect(maps.Keys(p.pids))
	p.mu.Unlock()
	for _, pid := range pids {
		if asagentd.Placed(pid, p.runDir) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, pid := range pids {
		for proc.Running(pid) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
	}
	activation.Discover(ctx, p.runDir)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// waitFor polls cond until it holds, failing after timeout with what.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		}
	}
	return nil
}
