package gemm

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Memory is the packed weight's buffers as bytes (the panels the kernels
// stream, and their coded copy if any), for placing their pages
// (pkg/numa); the small per-channel scales are left out.
func (w *Weight) Memory() [][]byte {
	b := [][]byte{w.panelMemory()}
	if w.coded != nil {
		b = append(b, asBytes(w.coded.blocks), w.coded.flags)
	}
	return b
}

// panelMemory is the packed panels as bytes.
func (w *Weight) panelMemory() []byte {
	switch {
	case len(w.pairs) > 0:
		return asBytes(w.pairs)
	case len(w.f32) > 0:
		return asBytes(w.f32)
	case len(w.quads) > 0:
		return asBytes(w.quads)
	}
	return nil
}

// hugePage is the size of a transparent huge page on amd64 and arm64 (4 KiB
// base pages).
const hugePage = 2 << 20

// Arena is memory a load packs weights into instead of the Go heap: a
// file's shared mapping (pkg/model's weights image), so that the packing's
// writes are the file's and the weights are not written twice. Alloc
// returns n zeroed bytes, 64-byte aligned and, from a huge page up, 2 MiB
// aligned, or nil when the arena has no room left (the packing then takes
// the heap).
type Arena interface {
	Alloc(n int) []byte
}

// Packer packs weights into its Arena (nil: the Go heap). A weight's later
// buffers (its coded copy, its screen) come from the arena it was packed in.
type Packer struct{ Arena Arena }

// packed allocates a packed weight's buffer of n elements in arena a, or
// where it has no room: zeroed, 64-byte aligned, and from a huge page up
// aligned to 2 MiB and advised to be backed by transparent huge pages
// (MADV_HUGEPAGE, which the common THP setting "madvise" requires) before
// the packing first writes it, so that its page faults map huge pages. A
// decode step streams every weight once: on 4 KiB pages that is a TLB miss
// per 4 KiB, and in a virtual machine each miss walks the guest's and the
// host's page tables. The kernels/ceiling read buffer the decode is
// compared with is advised the same way. Aligning the start puts all of a
// Qwen3 projection (a multiple of 2 MiB) on huge pages; the padding before
// it is never touched. The advice is a hint: where THP is off the weights
// stay on base pages and nothing else changes.
func packed[T uint32 | float32](a Arena, n int) []T {
	const size = 4 // bytes of a T
	if a != nil {
		if b := a.Alloc(n * size); b != nil {
			return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
		}
	}
	if n*size < hugePage {
		return aligned[T](n, 64)
	}
	b := aligned[T](n, hugePage)
	_ = unix.Madvise(wholeHugePages(unsafe.Pointer(&b[0]), n*size), unix.MADV_HUGEPAGE)
	return b
}

// settle collapses what of a packed buffer is still on base pages into huge
// pages, once it is written (MADV_COLLAPSE, Linux 6.1 and later; a no-op
// error before). The Go heap hands out memory it already used, and zeroed,
// on base pages: MADV_HUGEPAGE covers only pages not yet touched. The
// buffers of a weight packed for an arena are left as they are: in the
// arena's own huge-page advised mapping, or (past its room, which its bound
// leaves for a wrong bound only) on the heap, not collapsed.
func settle(a Arena, b []byte) {
	if a == nil && len(b) >= hugePage {
		_ = unix.Madvise(wholeHugePages(unsafe.Pointer(&b[0]), len(b)), unix.MADV_COLLAPSE)
	}
}

// wholeHugePages is the huge pages starting at p (2 MiB aligned) within n bytes.
func wholeHugePages(p unsafe.Pointer, n int) []byte {
	return unsafe.Slice((*byte)(p), n&^(hugePage-1))
}
