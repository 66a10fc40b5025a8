// Package place makes the homes a bench runs agentd in: a home, a runtime
// directory and a working directory, with agentd's processes run as the
// bench's own binary (asagentd) on the offline model playing a script,
// and no provider key.
package place

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentd-dev/agentd/bench/internal/asagentd"
	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/protocol"
)

// Place is a home of agentd's processes.
type Place struct {
	Home, RunDir, Work string
	// Agentd is the command that runs agentd; Env is what its processes
	// get besides this process's environment.
	Agentd []string
	Env    []string
}

// New makes the place name in base, its model playing script (the
// offline model's script file).
func New(base, name, script string) (*Place, error) {
	self, asAgentd, err := asagentd.Command()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(base, name)
	p := &Place{Home: filepath.Join(dir, "h"), RunDir: filepath.Join(dir, "r"), Work: filepath.Join(dir, "w"), Agentd: self}
	for _, d := range []string{p.Home, p.RunDir, p.Work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	path := filepath.Join(dir, "script.json")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		return nil, err
	}
	p.Env = []string{asAgentd, "ANTHROPIC_API_KEY=", "OPENAI_API_KEY=", "AGENTD_FAUX_SCRIPT=" + path,
		protocol.EnvHome + "=" + p.Home, protocol.EnvRuntimeDir + "=" + p.RunDir}
	return p, nil
}

// Command is `agentd args…` in the place's working directory.
func (p *Place) Command(args ...string) *exec.Cmd {
	cmd := exec.Command(p.Agentd[0], slices.Concat(p.Agentd[1:], args)...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Dir = p.Work
	return cmd
}

// Dial connects to the place's host, starting one when none runs.
func (p *Place) Dial(ctx context.Context) (*client.Conn, error) {
	act := activation.Options{Home: p.Home, RuntimeDir: p.RunDir, Command: append(slices.Clone(p.Agentd), "host"), IdleGrace: time.Hour, Env: p.Env}
	c, _, _, err := activation.Open(ctx, activation.OpenOptions{Activation: act, Options: client.Options{Surface: protocol.SurfaceSDK}})
	return c, err
}

// Stop shuts the place's host down.
func (p *Place) Stop() { p.Command("shutdown", "--force").Run() }
