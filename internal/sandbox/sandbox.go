// Package sandbox runs the agent's commands walled in: Landlock limits
// what they read and write, a seccomp filter and Landlock's network rules
// keep them off the network when the session says so, and they run with
// no_new_privs and no capability, root included. The walls go up in a
// small re-exec of agentd itself (package entry), which then executes the
// command: restrictions carry across exec, and the process that starts
// commands stays unrestricted. Command runs one through a re-exec started
// for it; StartPiped, for a shell run, hands it to a spare re-exec
// started ahead, whose walls are already up; StartAll, for commands that
// start together (a session's MCP servers), starts them all from one
// re-exec.
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
	"strconv"
	"strings"
	"sync"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/internal/sandbox/entry"
	"github.com/agentd-dev/agentd/protocol"
)

// ExecCommand is the first argument of the sandbox's re-exec: any binary
// that imports this package is the re-exec when started with it (see
// package entry).
const ExecCommand = entry.Command

// ErrUnavailable is returned when a sandboxed mode is asked for on a
// kernel without Landlock.
var ErrUnavailable = errors.New("this kernel has no Landlock, so commands cannot be sandboxed; " +
	"a session with --sandbox full runs them without a sandbox")

// Policy says how a session's commands run. The zero Policy, and a nil
// one, run them as they are, without a sandbox. Its fields are set before
// its first Command and not changed after; Close releases it.
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
	// Executable is the agentd binary the re-exec runs; empty: this
	// program's own, as proc.SelfExecutable names it (still there once
	// its file is replaced or removed).
	Executable string

	mu           sync.Mutex
	rs           *ruleset       // guarded by mu: the ruleset last built; nil before the first command
	spare        *spare         // guarded by mu: the re-exec started ahead for the next shell run
	replenishing bool           // guarded by mu: a spare is being started
	closed       bool           // guarded by mu
	wg           sync.WaitGroup // the goroutines starting spares
}

// Sandboxed reports whether p walls its commands in.
func (p *Policy) Sandboxed() bool {
	return p != nil && p.Mode != "" && p.Mode != protocol.SandboxFull
}

// Command returns the command that runs name with args under p, with env
// as its environment (TMPDIR set to the private tmp when sandboxed), and
// a function to call once it has started, or failed to: it lets go of
// what the start needed. Unsandboxed, the command is
// exec.Command(name, args...). The caller sets its directory, files and
// process attributes as for any command, but ExtraFiles. A shell run
// starts sooner with StartPiped.
//
// The Landlock ruleset is built by the first command and kept for the
// next, built anew when a directory it lists entry by entry (one on the
// way to a hidden path) has changed: the re-exec only enforces it.
func (p *Policy) Command(env []string, name string, args ...string) (cmd *exec.Cmd, started func(), err error) {
	if !p.Sandboxed() {
		cmd = exec.Command(name, args...)
		cmd.Env = env
		return cmd, func() {}, nil
	}
	if err := p.check(); err != nil {
		return nil, nil, err
	}
	exe, err := p.executable()
	if err != nil {
		return nil, nil, err
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, nil, err
	}
	rs, file, err := p.rulesetFile()
	if err != nil {
		return nil, nil, err
	}
	cmd = exec.Command(exe, append(append(p.execArgs(rs), "--", path), args...)...)
	cmd.Args[0] = "agentd" // ps shows what it is, not a test binary's long path
	cmd.ExtraFiles = []*os.File{file}
	cmd.Env = p.environ(env)
	return cmd, func() { file.Close() }, nil
}

// check reports why p cannot sandbox a command, if it cannot.
func (p *Policy) check() error {
	if err := Check(); err != nil {
		return err
	}
	if p.Tmp == "" {
		return errors.New("sandbox: no private tmp directory")
	}
	return nil
}

// executable returns the agentd binary the re-exec runs.
func (p *Policy) executable() (string, error) {
	if p.Executable != "" {
		return p.Executable, nil
	}
	exe, err := proc.SelfExecutable()
	if err != nil {
		return "", fmt.Errorf("sandbox: finding agentd's executable: %w", err)
	}
	return exe, nil
}

// execArgs returns the re-exec's arguments before the command: the
// ruleset, as descriptor 3, and the network.
func (p *Policy) execArgs(rs *ruleset) []string {
	argv := []string{ExecCommand, "--ruleset-fd", "3", "--ruleset-flags", strconv.FormatUint(uint64(rs.flags), 10)}
	if p.NetworkOff {
		argv = append(argv, "--network-off")
	}
	return argv
}

// environ returns env (nil: this process's) with TMPDIR the private tmp.
func (p *Policy) environ(env []string) []string {
	if env == nil {
		env = os.Environ()
	}
	return append(slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "TMPDIR=") }),
		"TMPDIR="+p.Tmp)
}

// Close ends p's spare and releases its ruleset. Commands started keep
// their walls.
func (p *Policy) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	s := p.spare
	p.spare = nil
	p.mu.Unlock()
	p.wg.Wait()
	if s != nil {
		s.discard()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rs != nil {
		p.rs.file.Close()
		p.rs = nil
	}
}

// dup returns a copy of f, closed on exec.
func dup(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
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
