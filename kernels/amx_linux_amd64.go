package kernels

import "golang.org/x/sys/unix"

// requestAMX asks Linux (5.16 and later) for the AMX tile data state, which
// a process must hold before its first tile instruction (arch_prctl
// ARCH_REQ_XCOMP_PERM; the grant covers all its threads). It fails where
// the kernel or the hypervisor does not enable AMX.
func requestAMX() bool {
	const reqXcompPerm, xtileData = 0x1023, 18
	_, _, errno := unix.Syscall(unix.SYS_ARCH_PRCTL, reqXcompPerm, xtileData, 0)
	return errno == 0
}
