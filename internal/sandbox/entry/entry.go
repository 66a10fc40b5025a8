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
// --ruleset-fd N --ruleset-flags N [--network-off] (-- ARGV... | --spare N).
// A spare reads its command from descriptor N once its walls are up: the
// directory, the number of arguments, the arguments and the environment,
// each ended by a NUL byte, until the end of the pipe.
type spec struct {
	rulesetFD    int
	rulesetFlags uint32
	networkOff   bool
	spareFD      int
	argv         []string
}

func parse(args []string) (spec, error) {
	s := spec{rulesetFD: -1, spareFD: -1}
	for len(args) > 0 {
		arg := args[0]
		args = args[1:]
		switch arg {
		case "--":
			s.argv = args
			args = nil
		case "--network-off":
			s.networkOff = true
		case "--ruleset-fd", "--ruleset-flags", "--spare":
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
	case (len(s.argv) == 0) == (s.spareFD < 0):
		return spec{}, errors.New("want a command after --, or --spare")
	}
	return s, nil
}

// readCommand reads a spare's command from fd: its directory, argv and
// environment.
func readCommand(fd int) (dir string, argv, env []string, err error) {
	var msg []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := syscall.Read(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return "", nil, nil, errors.New("reading the command: " + err.Error())
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
			return "", nil, nil, errors.New("a command field lacks its end")
		}
		fields = append(fields, string(msg[:i]))
		msg = msg[i+1:]
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
