package entry

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
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
		return fmt.Errorf("network off is not supported on %s", runtime.GOARCH)
	}
	const (
		ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
		deny = unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)
		// Offsets in struct seccomp_data.
		nrOff   = 0
		archOff = 4
		arg0Off = 16 // the low half of args[0] on a little-endian machine
		x32Bit  = 0x40000000
	)
	filter := []unix.SockFilter{
		{Code: ld, K: archOff},
		{Code: jeq, K: arch, Jt: 1},
		{Code: ret, K: deny},
		{Code: ld, K: nrOff},
		{Code: jge, K: x32Bit, Jt: 0, Jf: 1},
		{Code: ret, K: deny},
		{Code: jeq, K: unix.SYS_IO_URING_SETUP, Jf: 1},
		{Code: ret, K: deny},
		{Code: jeq, K: unix.SYS_SOCKET, Jf: 4},
		{Code: ld, K: arg0Off},
		{Code: jeq, K: unix.AF_INET, Jt: 1},
		{Code: jeq, K: unix.AF_INET6, Jf: 1},
		{Code: ret, K: deny},
		{Code: ret, K: unix.SECCOMP_RET_ALLOW},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("installing the network filter: %w", err)
	}
	runtime.KeepAlive(filter)
	return nil
}

// auditArch is the seccomp architecture of each GOARCH the filter knows.
var auditArch = map[string]uint32{
	"amd64": unix.AUDIT_ARCH_X86_64,
	"arm64": unix.AUDIT_ARCH_AARCH64,
}
