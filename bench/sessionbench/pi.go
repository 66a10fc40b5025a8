package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// piPackage is the anchor: the pi coding agent, run as `pi --mode rpc`.
const piPackage = "@mariozechner/pi-coding-agent"

// piReadyID is the id of the first rpc command sent to pi; its response
// marks pi ready.
const piReadyID = "sessionbench-ready"

// piSide is the anchor's executable, or why it is unavailable.
type piSide struct {
	bin     string
	version string
	// unavailable, when set, says why pi's figures are missing.
	unavailable string

	mu   sync.Mutex
	live map[*exec.Cmd]bool // guarded by mu: pi processes still running
}

// preparePi finds or installs pi and runs it once, untimed, so that both
// sides start with warm file caches. A failure leaves pi unavailable, said
// in the output, and the run goes on.
func (b *bench) preparePi(ctx context.Context) {
	p := &b.pi
	switch {
	case b.cfg.noPi:
		p.unavailable = "not run (-no-pi)"
	case b.cfg.piBin != "":
		p.bin = b.cfg.piBin
	default:
		bin, version, err := installPi(ctx, b.cfg.piDir)
		if err != nil {
			p.unavailable = "could not be installed: " + err.Error()
		}
		p.bin, p.version = bin, version
	}
	if p.unavailable != "" {
		fmt.Printf("pi: %s; its anchors are reported unavailable\n", p.unavailable)
		return
	}
	if _, _, err := b.piReady(ctx, false); err != nil {
		p.unavailable = "does not run: " + err.Error()
		fmt.Printf("pi: %s; its anchors are reported unavailable\n", p.unavailable)
		return
	}
	v := p.version
	if v == "" {
		v = "version unknown"
	}
	fmt.Printf("anchor: pi %s (%s), `pi --mode rpc`, ready when it answers its first rpc command (get_state)\n", v, piPackage)
}

// installPi installs pi with npm into dir (default: a folder in the user
// cache directory) unless it is there already, and returns its executable
// and version.
func installPi(ctx context.Context, dir string) (bin, version string, err error) {
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", "", err
		}
		dir = filepath.Join(cache, "agentd-sessionbench", "pi")
	}
	bin = filepath.Join(dir, "node_modules", ".bin", "pi")
	pkgJSON := filepath.Join(dir, "node_modules", filepath.FromSlash(piPackage), "package.json")
	if _, err := os.Stat(bin); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			return "", "", errors.New("npm not found (Node.js 20 or later is needed)")
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", "", err
		}
		fmt.Printf("pi: installing %s with npm into %s (once; later runs reuse it)\n", piPackage, dir)
		ictx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		t0 := time.Now()
		cmd := exec.CommandContext(ictx, npm, "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", dir, piPackage)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("npm install %s: %v: %s", piPackage, err, lastLines(out, 5))
		}
		fmt.Printf("pi: installed in %s\n", time.Since(t0).Round(100*time.Millisecond))
	}
	if raw, err := os.ReadFile(pkgJSON); err == nil {
		var pkg struct {
			Version string `json:"version"`
		}
		if json.Unmarshal(raw, &pkg) == nil {
			version = pkg.Version
		}
	}
	return bin, version, nil
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// piReady starts `pi --mode rpc` in a fresh home and session folder, sends
// it a get_state command at once (it waits in the pipe until pi reads it),
// and returns the time from start until the response arrives. With rss, it
// then waits the settle time and returns pi's resident memory (its process
// and any children). pi needs no model and no key for this: nothing is
// prompted. Startup network operations are turned off (PI_OFFLINE=1), as
// agentd makes none.
func (b *bench) piReady(ctx context.Context, rss bool) (time.Duration, memory, error) {
	home, err := os.MkdirTemp(b.base, "p")
	if err != nil {
		return 0, memory{}, err
	}
	defer os.RemoveAll(home)
	env := cleanEnv()
	env = append(env, "HOME="+home, "PI_CODING_AGENT_DIR="+filepath.Join(home, "agent"), "PI_OFFLINE=1", "PI_TELEMETRY=0")
	cmd := exec.Command(b.pi.bin, "--mode", "rpc", "--session-dir", filepath.Join(home, "sessions"))
	cmd.Env, cmd.Dir = env, b.work
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, memory{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, memory{}, err
	}
	stderr, err := os.Create(filepath.Join(home, "stderr"))
	if err != nil {
		return 0, memory{}, err
	}
	defer stderr.Close()
	cmd.Stderr = stderr // an *os.File: handed over directly, no copying goroutine
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, memory{}, err
	}
	b.pi.track(cmd, true)
	defer func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		b.pi.track(cmd, false)
	}()
	if _, err := fmt.Fprintf(stdin, `{"id":%q,"type":"get_state"}`+"\n", piReadyID); err != nil {
		return 0, memory{}, err
	}

	ready := make(chan error, 1)
	var readyAt time.Time
	go func() {
		r := bufio.NewReaderSize(stdout, 64<<10)
		signalled := false
		for {
			line, err := r.ReadBytes('\n')
			if !signalled && bytes.Contains(line, []byte(`"id":"`+piReadyID+`"`)) {
				readyAt = time.Now()
				signalled = true
				var resp struct {
					Success bool   `json:"success"`
					Error   string `json:"error"`
				}
				json.Unmarshal(line, &resp)
				if resp.Success {
					ready <- nil
				} else {
					ready <- fmt.Errorf("get_state failed: %s", resp.Error)
				}
			}
			if err != nil {
				if !signalled {
					if err == io.EOF {
						text, _ := os.ReadFile(stderr.Name())
						err = fmt.Errorf("pi exited before it was ready: %s", lastLines(text, 3))
					}
					ready <- err
				}
				return
			}
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			return 0, memory{}, err
		}
	case <-time.After(60 * time.Second):
		return 0, memory{}, errors.New("not ready after 60s")
	case <-ctx.Done():
		return 0, memory{}, ctx.Err()
	}
	d := readyAt.Sub(t0)
	var mem memory
	if rss {
		time.Sleep(b.cfg.settle)
		mem = treeMemory(cmd.Process.Pid)
	}
	return d, mem, nil
}

func (p *piSide) track(cmd *exec.Cmd, live bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live == nil {
		p.live = map[*exec.Cmd]bool{}
	}
	if live {
		p.live[cmd] = true
	} else {
		delete(p.live, cmd)
	}
}

// stopAll kills, by process group, any pi this run started that still runs.
func (p *piSide) stopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for cmd := range p.live {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
