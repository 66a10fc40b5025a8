package entry

import (
	"errors"
	"runtime"
	"syscall"
	"unsafe"
)

// denyNetworkSockets installs a seccomp filter on this thread that makes
// socket(2) fail with EACCES for the Internet families (AF_INET,
// AF_INET6), and io_uring_setup(2) too (an io_uring can open sockets
// without socket(2)). Unix sockets and the rest are untouched. A system
// call of another architecture than this binary's (a 32-bit program, or
// x32) fails the same way, so it cannot slip past.
func denyNetworkSockets() error {
	arch, ok := auditArch[runtime.GOARCH]
	if !ok {
		return errors.New("network off is not supported on " + runtime.GOARCH)
	}
	const (
		ld   = syscall.BPF_LD | syscall.BPF_W | syscall.BPF_ABS
		jeq  = syscall.BPF_JMP | syscall.BPF_JEQ | syscall.BPF_K
		jge  = syscall.BPF_JMP | syscall.BPF_JGE | syscall.BPF_K
		ret  = syscall.BPF_RET | syscall.BPF_K
		deny = seccompRetErrno | uint32(syscall.EACCES)
		// Offsets in struct seccomp_data.
		nrOff   = 0
		archOff = 4
		arg0Off = 16 // the low half of args[0] on a little-endian machine
		x32Bit  = 0x40000000
	)
	filter := []syscall.SockFilter{
		{Code: ld, K: archOff},
		{Code: jeq, K: arch, Jt: 1},
		{Code: ret, K: deny},
		{Code: ld, K: nrOff},
		{Code: jge, K: x32Bit, Jt: 0, Jf: 1},
		{Code: ret, K: deny},
		{Code: jeq, K: sysIOUringSetup, Jf: 1},
		{Code: ret, K: deny},
		{Code: jeq, K: syscall.SYS_SOCKET, Jf: 4},
		{Code: ld, K: arg0Off},
		{Code: jeq, K: syscall.AF_INET, Jt: 1},
		{Code: jeq, K: syscall.AF_INET6, Jf: 1},
		{Code: ret, K: deny},
		{Code: ret, K: seccompRetAllow},
	}
	prog := syscall.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetSeccomp, seccompModeFilter, uintptr(unsafe.Pointer(&prog)), 0, 0, 0); e != 0 {
		return errors.New("installing the network filter: " + e.Error())
	}
	runtime.KeepAlive(filter)
	return nil
}

// auditArch is the seccomp architecture (linux/audit.h) of each GOARCH the
// filter knows.
var auditArch = map[string]uint32{
	"amd64": 0xc000003e, // AUDIT_ARCH_X86_64
	"arm64": 0xc00000b7, // AUDIT_ARCH_AARCH64
}
