// Package entry is the way into the sandbox: the re-exec of agentd that
// puts the walls up on itself (no_new_privs, no capability, the network
// filter, the Landlock ruleset its parent built) and executes the
// command. It imports nothing of agentd and little of the standard
// library, so that in a binary that links it, its init runs early and the
// re-exec starts the command before most of the binary's packages are
// initialised.
package entry

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Command is the first argument of the re-exec: any binary that links
// this package is the re-exec when started with it.
const Command = "sandbox-exec"

// init makes this process the sandbox's re-exec when it was started as
// one (its first argument is Command): it puts the walls up and executes
// the command, or exits with status 126 saying why it could not. It is an
// init so that it runs before the rest of agentd's packages are
// initialised, and in every binary that can start sandboxed commands
// (agentd, and the test and bench binaries that act as agentd): none of
// them needs to remember a call.
func init() {
	if len(os.Args) > 1 && os.Args[1] == Command {
		err := run(os.Args[2:])
		fmt.Fprintf(os.Stderr, "agentd sandbox: %v\n", err)
		os.Exit(126) // as a shell reports a command it cannot run
	}
}

// spec is what the re-exec was asked to do.
type spec struct {
	rulesetFD    int
	rulesetFlags uint
	networkOff   bool
	argv         []string
}

func parse(args []string) (spec, error) {
	var s spec
	fs := flag.NewFlagSet(Command, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&s.rulesetFD, "ruleset-fd", -1, "the Landlock ruleset to enforce")
	fs.UintVar(&s.rulesetFlags, "ruleset-flags", 0, "the flags to enforce it with")
	fs.BoolVar(&s.networkOff, "network-off", false, "no TCP or UDP sockets")
	if err := fs.Parse(args); err != nil {
		return spec{}, err
	}
	s.argv = fs.Args()
	switch {
	case s.rulesetFD < 0:
		return spec{}, errors.New("no --ruleset-fd")
	case len(s.argv) == 0:
		return spec{}, errors.New("no command to run after --")
	}
	return s, nil
}

// run applies the walls of args to this thread and executes the command;
// it returns only when it failed.
func run(args []string) error {
	s, err := parse(args)
	if err != nil {
		return err
	}
	// Every step below changes this thread alone, and the command runs
	// on it: it is never given back to the Go runtime.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	if s.networkOff {
		if err := denyNetworkSockets(); err != nil {
			return err
		}
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(s.rulesetFD), uintptr(s.rulesetFlags), 0); e != 0 {
		return fmt.Errorf("enforcing the Landlock ruleset: %w", e)
	}
	unix.Close(s.rulesetFD) // the command has no use for it
	err = syscall.Exec(s.argv[0], s.argv, os.Environ())
	return fmt.Errorf("executing %s: %w", s.argv[0], err)
}

// dropCapabilities empties every capability set of this thread: the
// bounding set (so that executing a program as root gives none back), the
// ambient, inheritable, permitted and effective ones. Without
// CAP_SETPCAP the bounding set cannot change, and nothing is held that a
// program could gain back under no_new_privs.
func dropCapabilities() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("reading capabilities: %w", err)
	}
	if data[0].Effective&(1<<unix.CAP_SETPCAP) != 0 {
		for c := 0; ; c++ {
			err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
			if errors.Is(err, unix.EINVAL) {
				break // past the last capability
			}
			if err != nil {
				return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
			}
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	data = [2]unix.CapUserData{}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("dropping capabilities: %w", err)
	}
	return nil
}
