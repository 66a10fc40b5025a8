package sandbox

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// init makes this process the sandbox's re-exec when it was started as
// one (its first argument is ExecCommand): it puts the walls up and
// executes the command, or exits with status 126 saying why it could
// not. It is an init so that it runs before the rest of agentd's packages
// are initialised, and in every binary that can start sandboxed commands
// (agentd, and the test and bench binaries that act as agentd): none of
// them needs to remember a call.
func init() {
	if len(os.Args) > 1 && os.Args[1] == ExecCommand {
		err := run(os.Args[2:])
		fmt.Fprintf(os.Stderr, "agentd sandbox: %v\n", err)
		os.Exit(126) // as a shell reports a command it cannot run
	}
}

// spec is what the re-exec was asked to do.
type spec struct {
	write, hide []string
	networkOff  bool
	argv        []string
}

type list []string

func (l *list) String() string     { return fmt.Sprint(*l) }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func parse(args []string) (spec, error) {
	var s spec
	fs := flag.NewFlagSet(ExecCommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var((*list)(&s.write), "write", "a directory the command may write beneath")
	fs.Var((*list)(&s.hide), "hide", "a path the command may not read")
	fs.BoolVar(&s.networkOff, "network-off", false, "no TCP or UDP sockets")
	if err := fs.Parse(args); err != nil {
		return spec{}, err
	}
	s.argv = fs.Args()
	if len(s.argv) == 0 {
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
	if err := Check(); err != nil {
		return err
	}
	rules, err := s.rules()
	if err != nil {
		return err
	}
	cfg := landlock.Config{HandledAccessFS: landlock.V11.HandledAccessFS, Scoped: ll.ScopeSignal}
	if s.networkOff {
		cfg.HandledAccessNet = landlock.V11.HandledAccessNet // no rule: no port allowed
	}
	fd, flags, err := cfg.BestEffort().NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("building the Landlock ruleset: %w", err)
	}
	if fd < 0 {
		return ErrUnavailable
	}
	defer unix.Close(fd)
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
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("enforcing the Landlock ruleset: %w", err)
	}
	err = syscall.Exec(s.argv[0], s.argv, os.Environ())
	return fmt.Errorf("executing %s: %w", s.argv[0], err)
}

// devices are the device files every command may read and write: where
// output is thrown away, zeros and randomness, the terminal.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx"}

// rules returns the Landlock rules of s: read beneath everything but the
// hidden paths, write beneath the writable directories (but the hidden
// paths), the devices, and the terminals.
func (s spec) rules() ([]landlock.Rule, error) {
	var hidden []string
	for _, h := range s.hide {
		p, err := cleanAbs(h)
		if err != nil {
			return nil, err
		}
		hidden = append(hidden, p)
	}
	readable, err := cover("/", hidden)
	if err != nil {
		return nil, fmt.Errorf("listing what the command may read: %w", err)
	}
	var writable []string
	for _, w := range s.write {
		p, err := cleanAbs(w)
		if err != nil {
			return nil, err
		}
		sub, err := cover(p, hidden)
		if err != nil {
			return nil, fmt.Errorf("listing what the command may write: %w", err)
		}
		writable = append(writable, sub...)
	}
	var dirs, files []string
	for _, p := range readable {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			dirs = append(dirs, p)
		} else if err == nil {
			files = append(files, p)
		}
	}
	// An entry may vanish between its listing and its rule (a file of
	// another process's in /tmp): what is gone needs no rule.
	rules := []landlock.Rule{
		landlock.RODirs(dirs...).IgnoreIfMissing(),
		landlock.ROFiles(files...).IgnoreIfMissing(),
		landlock.RWFiles(devices...).WithIoctlDev().IgnoreIfMissing(),
		landlock.RWFiles("/dev/pts").WithIoctlDev().IgnoreIfMissing(),
	}
	for _, p := range writable {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			rules = append(rules, landlock.RWDirs(p).WithRefer().WithResolveUnix().IgnoreIfMissing())
		} else if err == nil {
			rules = append(rules, landlock.RWFiles(p).WithResolveUnix().IgnoreIfMissing())
		}
	}
	return rules, nil
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
