// Package entry is the way into the sandbox: the re-exec of agentd that
// puts the walls up on itself (no_new_privs, no capability, the network
// filter, the Landlock ruleset its parent built) and executes the
// command. It imports nothing of agentd and only the standard library's
// first-initialised packages (not fmt, flag or golang.org/x/sys), so that
// in a binary that links it, its init runs before most of the binary's
// packages are initialised: the re-exec costs little more than a Go
// program's start.
package entry

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"
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
		os.Stderr.WriteString("agentd sandbox: " + err.Error() + "\n")
		os.Exit(126) // as a shell reports a command it cannot run
	}
}

// spec is what the re-exec was asked to do:
// --ruleset-fd N --ruleset-flags N [--network-off] (-- ARGV... | --spare N | --launch N).
// A spare reads its command from descriptor N once its walls are up: the
// directory, the number of arguments, the arguments and the environment,
// each ended by a NUL byte, until the end of the pipe.
//
// A launcher reads its commands from descriptor N first, to the end of
// the pipe (the end says its ruleset is complete), then puts its walls up
// and starts each command as a child of its own parent (CLONE_PARENT),
// in a process group of its own, and writes a line for each to its
// output: "pid N", or "err WHY". Each command is its three standard
// descriptors (inherited by the launcher), its directory, the number of
// its arguments, the arguments, the number of its environment's entries
// and the entries, each ended by a NUL byte.
type spec struct {
	rulesetFD    int
	rulesetFlags uint32
	networkOff   bool
	spareFD      int
	launchFD     int
	argv         []string
}

func parse(args []string) (spec, error) {
	s := spec{rulesetFD: -1, spareFD: -1, launchFD: -1}
	for len(args) > 0 {
		arg := args[0]
		args = args[1:]
		switch arg {
		case "--":
			s.argv = args
			args = nil
		case "--network-off":
			s.networkOff = true
		case "--ruleset-fd", "--ruleset-flags", "--spare", "--launch":
			if len(args) == 0 {
				return spec{}, errors.New(arg + " needs a value")
			}
			n, err := strconv.ParseUint(args[0], 10, 31)
			if err != nil {
				return spec{}, errors.New(arg + " " + args[0] + ": not a number")
			}
			args = args[1:]
			switch arg {
			case "--ruleset-fd":
				s.rulesetFD = int(n)
			case "--spare":
				s.spareFD = int(n)
			case "--launch":
				s.launchFD = int(n)
			default:
				s.rulesetFlags = uint32(n)
			}
		default:
			return spec{}, errors.New("unknown argument " + strconv.Quote(arg))
		}
	}
	switch {
	case s.rulesetFD < 0:
		return spec{}, errors.New("no --ruleset-fd")
	case btoi(len(s.argv) > 0)+btoi(s.spareFD >= 0)+btoi(s.launchFD >= 0) != 1:
		return spec{}, errors.New("want a command after --, or --spare, or --launch")
	}
	return s, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// readFields reads fd to its end and returns its NUL-ended fields.
func readFields(fd int) ([]string, error) {
	var msg []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := syscall.Read(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, errors.New("reading the command: " + err.Error())
		}
		if n == 0 {
			break
		}
		msg = append(msg, buf[:n]...)
	}
	syscall.Close(fd)
	var fields []string
	for len(msg) > 0 {
		i := 0
		for i < len(msg) && msg[i] != 0 {
			i++
		}
		if i == len(msg) {
			return nil, errors.New("a command field lacks its end")
		}
		fields = append(fields, string(msg[:i]))
		msg = msg[i+1:]
	}
	return fields, nil
}

// readCommand reads a spare's command from fd: its directory, argv and
// environment.
func readCommand(fd int) (dir string, argv, env []string, err error) {
	fields, err := readFields(fd)
	if err != nil {
		return "", nil, nil, err
	}
	if len(fields) < 2 {
		return "", nil, nil, errors.New("no command came")
	}
	n, err := strconv.Atoi(fields[1])
	if err != nil || n < 1 || n > len(fields)-2 {
		return "", nil, nil, errors.New("a command of a bad length came")
	}
	return fields[0], fields[2 : 2+n], fields[2+n:], nil
}

// launch is one command of a launcher.
type launch struct {
	files [3]int // its stdin, stdout and stderr, as the launcher holds them
	dir   string
	argv  []string
	env   []string
}

// parseLaunches reads a launcher's commands from its fields.
func parseLaunches(fields []string) ([]launch, error) {
	var out []launch
	count := func(what string, max int) (int, error) {
		if len(fields) == 0 {
			return 0, errors.New("a command lacks its " + what)
		}
		n, err := strconv.Atoi(fields[0])
		if err != nil || n < 0 || n > max {
			return 0, errors.New("a command has a bad " + what + ": " + strconv.Quote(fields[0]))
		}
		fields = fields[1:]
		return n, nil
	}
	for len(fields) > 0 {
		var l launch
		for i := range l.files {
			n, err := count("standard descriptors", 1<<20)
			if err != nil {
				return nil, err
			}
			if n < 3 {
				return nil, errors.New("a command's standard descriptor " + strconv.Itoa(n) + " is the launcher's own")
			}
			l.files[i] = n
		}
		if len(fields) == 0 {
			return nil, errors.New("a command lacks its directory")
		}
		l.dir, fields = fields[0], fields[1:]
		n, err := count("number of arguments", len(fields)-1)
		if err != nil {
			return nil, err
		}
		if n < 1 {
			return nil, errors.New("a command has no program")
		}
		l.argv, fields = fields[:n], fields[n:]
		if n, err = count("number of environment entries", len(fields)-1); err != nil {
			return nil, err
		}
		l.env, fields = fields[:n], fields[n:]
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, errors.New("no command came")
	}
	return out, nil
}

// startAll starts each command as a child of the launcher's parent, on
// this thread, whose walls it inherits, and writes how each went to the
// launcher's output.
//
// A command is looked at first (it is a program: an ELF file or a script
// with #!), so that its start rarely fails: a start that fails after the
// clone leaves the child, which the parent does not know of, unreaped
// until the parent exits.
func startAll(launches []launch) {
	for _, l := range launches {
		for _, fd := range l.files {
			syscall.CloseOnExec(fd) // no command holds another's pipes
		}
	}
	for _, l := range launches {
		line := ""
		if err := runnable(l.argv[0]); err != nil {
			line = "err " + err.Error()
		} else {
			pid, err := syscall.ForkExec(l.argv[0], l.argv, &syscall.ProcAttr{
				Dir: l.dir, Env: l.env, Files: []uintptr{uintptr(l.files[0]), uintptr(l.files[1]), uintptr(l.files[2])},
				Sys: &syscall.SysProcAttr{Setpgid: true, Cloneflags: syscall.CLONE_PARENT},
			})
			if err != nil {
				line = "err executing " + l.argv[0] + ": " + err.Error()
			} else {
				line = "pid " + strconv.Itoa(pid)
			}
		}
		b := []byte(line)
		for i, c := range b {
			if c == '\n' {
				b[i] = ' ' // one line a command
			}
		}
		os.Stdout.Write(append(b, '\n'))
	}
}

// runnable reports why path cannot be executed, as far as reading it
// tells: it is not there, may not be read here, or is not a program.
func runnable(path string) error {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return errors.New("opening " + path + ": " + err.Error())
	}
	defer syscall.Close(fd)
	var head [4]byte
	n, _ := syscall.Read(fd, head[:])
	if n >= 2 && head[0] == '#' && head[1] == '!' || n == 4 && string(head[:]) == "\x7fELF" {
		return nil
	}
	return errors.New(path + " is neither an ELF program nor a script starting with #!")
}

// System call numbers and constants of linux/prctl.h, capability.h,
// seccomp.h and landlock.h that package syscall lacks. The Landlock and
// io_uring calls have one number on every architecture.
const (
	sysLandlockRestrictSelf = 446
	sysIOUringSetup         = 425

	prSetSeccomp         = 22
	prCapbsetDrop        = 24
	prSetNoNewPrivs      = 38
	prCapAmbient         = 47
	prCapAmbientClearAll = 4

	capSetpcap        = 8
	capabilityV3      = 0x20080522
	seccompModeFilter = 2
	seccompRetErrno   = 0x00050000
	seccompRetAllow   = 0x7fff0000
)

func prctl(option, arg2 uintptr) error {
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, option, arg2, 0, 0, 0, 0); e != 0 {
		return e
	}
	return nil
}

// run applies the walls of args to this thread and executes the command;
// it returns only when it failed.
func run(args []string) error {
	s, err := parse(args)
	if err != nil {
		return err
	}
	var launches []launch
	if s.launchFD >= 0 {
		// The end of the commands says the ruleset is complete: it is
		// enforced only then.
		fields, err := readFields(s.launchFD)
		if err != nil {
			return err
		}
		if launches, err = parseLaunches(fields); err != nil {
			return err
		}
	}
	// Every step below changes this thread alone, and the command runs
	// on it: it is never given back to the Go runtime.
	runtime.LockOSThread()
	if err := prctl(prSetNoNewPrivs, 1); err != nil {
		return errors.New("setting no_new_privs: " + err.Error())
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	if s.networkOff {
		if err := denyNetworkSockets(); err != nil {
			return err
		}
	}
	if _, _, e := syscall.RawSyscall(sysLandlockRestrictSelf, uintptr(s.rulesetFD), uintptr(s.rulesetFlags), 0); e != 0 {
		return errors.New("enforcing the Landlock ruleset: " + e.Error())
	}
	syscall.Close(s.rulesetFD) // the command has no use for it
	if launches != nil {
		startAll(launches)
		os.Exit(0)
	}
	env := os.Environ()
	if s.spareFD >= 0 {
		var dir string
		if dir, s.argv, env, err = readCommand(s.spareFD); err != nil {
			return err
		}
		if err := syscall.Chdir(dir); err != nil {
			return errors.New("entering " + dir + ": " + err.Error())
		}
	}
	err = syscall.Exec(s.argv[0], s.argv, env)
	return errors.New("executing " + s.argv[0] + ": " + err.Error())
}

// capHeader and capData are linux/capability.h's, version 3: two data
// structs of 32 capabilities each.
type capHeader struct {
	version uint32
	pid     int32
}

type capData struct{ effective, permitted, inheritable uint32 }

// dropCapabilities empties every capability set of this thread: the
// bounding set (so that executing a program as root gives none back), the
// ambient, inheritable, permitted and effective ones. Without
// CAP_SETPCAP the bounding set cannot change, and nothing is held that a
// program could gain back under no_new_privs.
func dropCapabilities() error {
	hdr := capHeader{version: capabilityV3}
	var data [2]capData
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return errors.New("reading capabilities: " + e.Error())
	}
	if data[0].effective&(1<<capSetpcap) != 0 {
		for c := uintptr(0); ; c++ {
			err := prctl(prCapbsetDrop, c)
			if err == syscall.EINVAL {
				break // past the last capability
			}
			if err != nil {
				return errors.New("dropping capability " + strconv.Itoa(int(c)) + " from the bounding set: " + err.Error())
			}
		}
	}
	if err := prctl(prCapAmbient, prCapAmbientClearAll); err != nil && err != syscall.EINVAL {
		return errors.New("clearing ambient capabilities: " + err.Error())
	}
	data = [2]capData{}
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return errors.New("dropping capabilities: " + e.Error())
	}
	return nil
}
