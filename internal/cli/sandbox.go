package cli

import (
	"cmp"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/agentd-dev/agentd/internal/sandbox"
	"github.com/agentd-dev/agentd/protocol"
)

// sandboxFlags are a new session's --sandbox and --network.
type sandboxFlags struct{ mode, network string }

func (f *sandboxFlags) add(fl *pflag.FlagSet) {
	fl.StringVar(&f.mode, "sandbox", "", "what a new session's commands may touch: read-only, workspace (the default: writes only in the session's directory and a private tmp) or full (no sandbox)")
	fl.StringVar(&f.network, "network", "", "whether a new session's sandboxed commands may open TCP and UDP sockets: on (the default) or off")
}

// check refuses flags that are wrong, and a sandboxed mode on a kernel
// that cannot sandbox: its commands would all be refused.
func (f sandboxFlags) check() error {
	if err := protocol.ValidSandbox("--sandbox", f.mode, "--network", f.network); err != nil {
		return usageError{err}
	}
	if f.mode != protocol.SandboxFull {
		if err := sandbox.Check(); err != nil {
			return fmt.Errorf("--sandbox %s: %w", cmp.Or(f.mode, protocol.SandboxWorkspace), err)
		}
	}
	return nil
}

func (f sandboxFlags) set() bool { return f.mode != "" || f.network != "" }

// sandboxLabel says in a few words how a session's commands run.
func sandboxLabel(s protocol.Session) string {
	switch {
	case s.Sandbox == "":
		return "-" // a host from before sandboxes
	case s.Sandbox == protocol.SandboxFull:
		return "none (full)"
	case s.Network == protocol.NetworkOff:
		return s.Sandbox + ", no network"
	}
	return s.Sandbox
}

// warnUnsandboxed says loudly, on w, that a session runs its commands
// without a sandbox.
func warnUnsandboxed(w io.Writer, pal palette, s protocol.Session) {
	if s.Sandbox == protocol.SandboxFull {
		fmt.Fprintln(w, pal.paint(styles().bad, fmt.Sprintf("session %s runs the agent's commands WITHOUT A SANDBOX (--sandbox full): they can read and write all that you can", s.SessionID)))
	}
}

// sandboxStatus says whether this machine can sandbox the agent's
// commands, as `agentd status` shows it. The host and its workers run on
// this kernel too.
func sandboxStatus(pal palette) string {
	abi := sandbox.ABI()
	if abi < 1 {
		return pal.paint(styles().bad, "unavailable: this kernel has no Landlock; sessions must use --sandbox full, and their commands run without one")
	}
	return fmt.Sprintf("Landlock ABI %d: read-only, workspace and full available", abi)
}
