package worker

import (
	"cmp"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/agentd-dev/agentd/internal/sandbox"
	"github.com/agentd-dev/agentd/protocol"
)

// newSandbox returns the sandbox of the session's commands (nil in mode
// full) and a function that releases it and removes its private tmp. The commands may
// never read the home, the directory of the worker's socket or the
// runtime directory.
func newSandbox(cfg Config, logger *slog.Logger) (*sandbox.Policy, func(), error) {
	h := cfg.Session
	mode := cmp.Or(h.Sandbox, protocol.SandboxWorkspace)
	if mode == protocol.SandboxFull {
		logger.Warn("the session's commands run without a sandbox (sandbox full)")
		return nil, func() {}, nil
	}
	if err := sandbox.Check(); err != nil {
		logger.Error("the session's commands are refused", "err", err)
	}
	tmp, err := os.MkdirTemp("", "agentd-tmp-")
	if err != nil {
		return nil, nil, err
	}
	hidden := []string{cfg.Home, filepath.Dir(cfg.SocketPath)}
	if dir, err := protocol.DefaultRuntimeDir(); err == nil {
		hidden = append(hidden, dir)
	}
	pol := &sandbox.Policy{
		Mode: mode, NetworkOff: h.Network == protocol.NetworkOff,
		Workspace: []string{h.Cwd}, Tmp: tmp, Hidden: hidden,
	}
	return pol, func() { pol.Close(); os.RemoveAll(tmp) }, nil
}
