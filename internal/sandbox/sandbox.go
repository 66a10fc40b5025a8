// Package sandbox runs the agent's commands walled in: Landlock limits
// what they read and write, a seccomp filter and Landlock's network rules
// keep them off the network when the session says so, and they run with
// no_new_privs and no capability, root included. The walls go up in a
// small re-exec of agentd itself (Command), which then executes the
// command: restrictions carry across exec, and the process that starts
// commands stays unrestricted.
//
// It knows the modes and where the walls stand, nothing of sessions,
// workers or the host: its caller says which directories are writable
// and which paths the command must never read.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/agentd-dev/agentd/protocol"
)

// ExecCommand is the first argument of the sandbox's re-exec: any binary
// that imports this package is the re-exec when started with it.
const ExecCommand = "sandbox-exec"

// ErrUnavailable is returned when a sandboxed mode is asked for on a
// kernel without Landlock.
var ErrUnavailable = errors.New("this kernel has no Landlock, so commands cannot be sandboxed; " +
	"a session with --sandbox full runs them without a sandbox")

// Policy says how a session's commands run. The zero Policy, and a nil
// one, run them as they are, without a sandbox.
type Policy struct {
	// Mode is protocol.SandboxReadOnly, protocol.SandboxWorkspace or
	// protocol.SandboxFull; empty is full.
	Mode string
	// NetworkOff keeps commands from opening TCP and UDP sockets; unix
	// sockets still work. Only a sandboxed mode has it.
	NetworkOff bool
	// Workspace lists the directories a command of workspace mode may
	// write beneath: the session's directory and its extra ones.
	Workspace []string
	// Tmp is the command's private temporary directory, writable in
	// every sandboxed mode and given as TMPDIR. Required in a sandboxed
	// mode.
	Tmp string
	// Hidden lists what a sandboxed command may neither read nor write:
	// agentd's home, its runtime directory, the credentials file.
	Hidden []string
	// Executable is the agentd binary the re-exec runs; empty:
	// os.Executable.
	Executable string
}

// Sandboxed reports whether p walls its commands in.
func (p *Policy) Sandboxed() bool {
	return p != nil && p.Mode != "" && p.Mode != protocol.SandboxFull
}

// Command returns the command that runs name with args under p, with env
// as its environment (TMPDIR set to the private tmp when sandboxed).
// Unsandboxed, it is exec.Command(name, args...). The caller sets its
// directory, files and process attributes as for any command.
func (p *Policy) Command(env []string, name string, args ...string) (*exec.Cmd, error) {
	if !p.Sandboxed() {
		cmd := exec.Command(name, args...)
		cmd.Env = env
		return cmd, nil
	}
	if err := Check(); err != nil {
		return nil, err
	}
	if p.Tmp == "" {
		return nil, errors.New("sandbox: no private tmp directory")
	}
	exe := p.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("sandbox: finding agentd's executable: %w", err)
		}
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, err
	}
	argv := append([]string{ExecCommand}, p.flags()...)
	argv = append(append(argv, "--", path), args...)
	cmd := exec.Command(exe, argv...)
	cmd.Args[0] = "agentd" // ps shows what it is, not a test binary's long path
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "TMPDIR=") }),
		"TMPDIR="+p.Tmp)
	return cmd, nil
}

// flags returns the re-exec's options for p.
func (p *Policy) flags() []string {
	var f []string
	write := []string{p.Tmp}
	if p.Mode == protocol.SandboxWorkspace {
		write = append(write, p.Workspace...)
	}
	for _, d := range write {
		f = append(f, "--write", d)
	}
	for _, h := range p.Hidden {
		f = append(f, "--hide", h)
	}
	if p.NetworkOff {
		f = append(f, "--network-off")
	}
	return f
}

// ABI returns the Landlock ABI version of the kernel; 0 without
// Landlock.
func ABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// Check returns ErrUnavailable when the kernel cannot sandbox commands.
func Check() error {
	if ABI() < 1 {
		return ErrUnavailable
	}
	return nil
}

// Describe says in a few words what a sandboxed command may do under
// mode and network, for people: what `agentd ls` and attach show.
func Describe(mode, network string) string {
	if mode == protocol.SandboxFull {
		return "full (no sandbox)"
	}
	if network == protocol.NetworkOff {
		return mode + ", network off"
	}
	return mode
}

// cleanAbs returns p absolute and clean, with its symbolic links resolved
// as far as it exists.
func cleanAbs(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real, nil
	}
	return abs, nil
}
