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
	"strings"
	"syscall"
	"time"

	"github.com/agentd-dev/agentd/protocol"
)

// cliResult is one command's timings over its runs.
type cliResult struct {
	runs     int
	p50, p90 time.Duration
}

func summarize(d []time.Duration) cliResult {
	s := slices.Clone(d)
	slices.Sort(s)
	return cliResult{runs: len(s), p50: percentile(s, 50), p90: percentile(s, 90)}
}

// cliPart times `agentd status` cold (no host: the CLI starts one) and warm
// (host running) beside tmux, the runs of each kind interleaved.
func (b *bench) cliPart(ctx context.Context) error {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		fmt.Println("cli: tmux not found; the tmux anchors are skipped (apt-get install -y tmux)")
		tmux = ""
	}
	b.res.tmux = tmux != ""
	tmuxEnv := []string{"TMUX="}
	tmuxSock := filepath.Join(b.base, "t.sock")
	tmuxAt := func(sock string, args ...string) *exec.Cmd {
		return command(ctx, tmuxEnv, tmux, append([]string{"-S", sock, "-f", "/dev/null"}, args...)...)
	}
	tmuxCmd := func(args ...string) *exec.Cmd { return tmuxAt(tmuxSock, args...) }

	// Cold: a fresh home and runtime directory each time; the host the
	// CLI starts is shut down after each run, untimed.
	fmt.Printf("cli: %d cold `agentd status` runs (fresh home each), interleaved with tmux cold starts\n", b.cfg.coldRuns)
	var cold, hostStart, tmuxCold []time.Duration
	for i := range b.cfg.coldRuns {
		dir := filepath.Join(b.base, fmt.Sprintf("c%d", i))
		env := append(placement(filepath.Join(dir, "h"), filepath.Join(dir, "r"), ""), "AGENTD_IDLE_GRACE=2m")
		d, err := timeRun(command(ctx, env, b.agentd, "status"))
		if err != nil {
			return fmt.Errorf("cold agentd status: %w", err)
		}
		cold = append(cold, d)
		if out, err := command(ctx, env, b.agentd, "shutdown", "--force").CombinedOutput(); err != nil {
			return fmt.Errorf("agentd shutdown: %v: %s", err, out)
		}
		b.reapHosts(filepath.Join(dir, "r"))
		os.RemoveAll(dir)
		d, err = b.timeHostStart(ctx, dir)
		if err != nil {
			return err
		}
		hostStart = append(hostStart, d)
		os.RemoveAll(dir)
		if tmux != "" {
			// A fresh socket each time: a server being killed may still
			// hold the last one.
			sock := filepath.Join(b.base, fmt.Sprintf("t%d.sock", i))
			d, err := timeRun(tmuxAt(sock, "new-session", "-d"))
			if err != nil {
				return fmt.Errorf("tmux new-session: %w", err)
			}
			tmuxCold = append(tmuxCold, d)
			tmuxAt(sock, "kill-server").Run()
		}
	}
	b.res.cold, b.res.hostStart = summarize(cold), summarize(hostStart)
	if tmux != "" {
		b.res.tmuxCold = summarize(tmuxCold)
	}

	// Warm: one host, started by an untimed first status.
	dir := filepath.Join(b.base, "w")
	env := append(placement(filepath.Join(dir, "h"), filepath.Join(dir, "r"), ""), "AGENTD_IDLE_GRACE=2m")
	if out, err := command(ctx, env, b.agentd, "status").CombinedOutput(); err != nil {
		return fmt.Errorf("agentd status: %v: %s", err, out)
	}
	defer func() {
		command(ctx, env, b.agentd, "shutdown", "--force").Run()
		b.reapHosts(filepath.Join(dir, "r"))
	}()
	if tmux != "" {
		if out, err := tmuxCmd("new-session", "-d").CombinedOutput(); err != nil {
			return fmt.Errorf("tmux new-session: %v: %s", err, out)
		}
		defer tmuxCmd("kill-server").Run()
	}
	fmt.Printf("cli: %d warm `agentd status` runs, interleaved with `tmux list-sessions`, `agentd version` and the plain go build's status\n", b.cfg.warmRuns)
	var warm, cgo, list, version []time.Duration
	for i := range b.cfg.warmRuns {
		steps := []func() error{
			func() error {
				d, err := timeRun(command(ctx, env, b.agentd, "status"))
				warm = append(warm, d)
				return err
			},
			func() error {
				d, err := timeRun(command(ctx, env, b.agentd, "version"))
				version = append(version, d)
				return err
			},
		}
		if b.agentdCgo != "" {
			steps = append(steps, func() error {
				d, err := timeRun(command(ctx, env, b.agentdCgo, "status"))
				cgo = append(cgo, d)
				return err
			})
		}
		if tmux != "" {
			steps = append(steps, func() error {
				d, err := timeRun(tmuxCmd("list-sessions"))
				list = append(list, d)
				return err
			})
		}
		for j := range steps {
			if err := steps[(i+j)%len(steps)](); err != nil {
				return fmt.Errorf("warm run: %w", err)
			}
		}
	}
	b.res.warm, b.res.version = summarize(warm), summarize(version)
	if len(cgo) > 0 {
		b.res.warmCgo = summarize(cgo)
	}
	if tmux != "" {
		b.res.tmuxList = summarize(list)
	}
	fmt.Printf("  cold agentd status  p50 %s p90 %s\n", ms(b.res.cold.p50), ms(b.res.cold.p90))
	fmt.Printf("  agentd host → ready p50 %s p90 %s\n", ms(b.res.hostStart.p50), ms(b.res.hostStart.p90))
	fmt.Printf("  warm agentd status  p50 %s p90 %s\n", ms(b.res.warm.p50), ms(b.res.warm.p90))
	fmt.Printf("  agentd version      p50 %s p90 %s\n", ms(b.res.version.p50), ms(b.res.version.p90))
	if len(cgo) > 0 {
		fmt.Printf("  warm status, plain p50 %s p90 %s\n", ms(b.res.warmCgo.p50), ms(b.res.warmCgo.p90))
	}
	if tmux != "" {
		fmt.Printf("  tmux list-sessions  p50 %s p90 %s\n", ms(b.res.tmuxList.p50), ms(b.res.tmuxList.p90))
		fmt.Printf("  tmux new-session -d p50 %s p90 %s\n", ms(b.res.tmuxCold.p50), ms(b.res.tmuxCold.p90))
	}
	return nil
}

// timeHostStart runs `agentd host` on a fresh home under dir and returns
// how long it took from start until its registration said ready, watched
// every 100µs; then it stops the host.
func (b *bench) timeHostStart(ctx context.Context, dir string) (time.Duration, error) {
	home, runDir := filepath.Join(dir, "h"), filepath.Join(dir, "r")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return 0, err
	}
	cmd := command(ctx, placement(home, runDir, "s"), b.agentd, "host", "--log-file", filepath.Join(home, "host.log"))
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	reg := protocol.RegistrationPath(runDir, "s")
	for {
		var r protocol.Registration
		if raw, err := os.ReadFile(reg); err == nil && json.Unmarshal(raw, &r) == nil && r.State == protocol.StateReady {
			return time.Since(t0), nil
		}
		if time.Since(t0) > 30*time.Second {
			return 0, fmt.Errorf("agentd host not ready after 30s")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// timeRun runs cmd to completion and returns how long it took, from start
// to exit. Its output goes to a file, handed to the process directly, so
// that no copying goroutine of this process takes part in the timing.
func timeRun(cmd *exec.Cmd) (time.Duration, error) {
	out, err := os.CreateTemp("", "hbout")
	if err != nil {
		return 0, err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	t0 := time.Now()
	err = cmd.Run()
	d := time.Since(t0)
	if err != nil {
		text, _ := os.ReadFile(out.Name())
		return d, fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, bytes.TrimSpace(text))
	}
	return d, nil
}

// reapHosts stops, by pid, any host still registered in runDir after its
// shutdown: only hosts this run's CLI started live there.
func (b *bench) reapHosts(runDir string) {
	ents, _ := os.ReadDir(runDir)
	for _, e := range ents {
		if protocol.HostIDOfRegistration(e.Name()) == "" {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(runDir, e.Name()))
		if err != nil {
			continue
		}
		var r protocol.Registration
		if json.Unmarshal(raw, &r) != nil || r.PID <= 0 {
			continue
		}
		if syscall.Kill(r.PID, 0) == nil {
			fmt.Fprintf(os.Stderr, "hostbench: host pid %d outlived its shutdown; killing it\n", r.PID)
			syscall.Kill(r.PID, syscall.SIGKILL)
		}
	}
}
