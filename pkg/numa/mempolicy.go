package numa

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Linux memory policy modes and flags (include/uapi/linux/mempolicy.h);
// golang.org/x/sys/unix has the system call numbers but not these.
const (
	mpolInterleave = 3
	mpolMFMove     = 1 << 1 // migrate pages already faulted in
	mpolFAddr      = 1 << 1 // get_mempolicy: the policy of the page at addr
	maxNodes       = 1024
)

type nodemask [maxNodes / 64]uint64

func maskOf(nodes []int) (*nodemask, error) {
	var m nodemask
	for _, n := range nodes {
		if n < 0 || n >= maxNodes {
			return nil, fmt.Errorf("numa: node %d out of range", n)
		}
		m[n/64] |= 1 << (n % 64)
	}
	return &m, nil
}

// pageRange is the whole pages inside b: mbind takes page-aligned ranges,
// and a partial page at either end is shared with other data.
func pageRange(b []byte) (addr, length uintptr) {
	if len(b) == 0 {
		return 0, 0
	}
	page := uintptr(unix.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (start + page - 1) &^ (page - 1)
	hi := (start + uintptr(len(b))) &^ (page - 1)
	if hi <= lo {
		return 0, 0
	}
	return lo, hi - lo
}

// Interleave spreads b's pages round-robin over nodes, moving the pages
// already faulted in. Pages of b that share a page with other data are left
// alone.
func Interleave(b []byte, nodes []int) error {
	if len(nodes) == 0 {
		return fmt.Errorf("numa: interleave over no node")
	}
	addr, n := pageRange(b)
	if n == 0 {
		return nil
	}
	m, err := maskOf(nodes)
	if err != nil {
		return err
	}
	_, _, e := unix.Syscall6(unix.SYS_MBIND, addr, n, mpolInterleave, uintptr(unsafe.Pointer(m)), maxNodes, mpolMFMove)
	if e != 0 {
		return fmt.Errorf("numa: mbind interleave %d bytes over nodes %v: %w", n, nodes, e)
	}
	return nil
}

// Interleaved is the nodes b's first whole page is interleaved over, nil
// when its policy is not interleave: what Interleave set, read back.
func Interleaved(b []byte) ([]int, error) {
	addr, n := pageRange(b)
	if n == 0 {
		return nil, nil
	}
	off := addr - uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	mode, nodes, err := policyAt(unsafe.Pointer(&b[off]))
	if err != nil || mode != mpolInterleave {
		return nil, err
	}
	return nodes, nil
}

// policyAt is the memory policy mode and nodes of the page holding p.
func policyAt(p unsafe.Pointer) (mode int, nodes []int, err error) {
	var m nodemask
	var mode32 int32
	_, _, e := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&mode32)), uintptr(unsafe.Pointer(&m)), maxNodes,
		uintptr(p), mpolFAddr, 0)
	if e != 0 {
		return 0, nil, e
	}
	for i := range maxNodes {
		if m[i/64]&(1<<(i%64)) != 0 {
			nodes = append(nodes, i)
		}
	}
	return int(mode32), nodes, nil
}
