package numa

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ellm-dev/ellm/kernels/threads"
)

// commitChunk is the most of a buffer one worker commits at a time: a
// transparent huge page, so that no two workers fault in the same one.
const commitChunk = 2 << 20

// Commit makes every page of bufs resident and writable now, as a first
// write would (each buffer must be fresh: its pages hold zeros or nothing),
// so that memory reported at start-up is committed and the first request
// does not pay its page faults. It runs on GOMAXPROCS threads at once: a
// page's first touch is a fault that zeroes it, and in a virtual machine
// whose host backs memory lazily a far slower exit too (1.88 GB took
// 2.6–3.0 s on one thread of the AMD EPYC VM and 1.5–1.7 s on two:
// docs/performance.md, "Start-up: memory committed on every CPU"). Each
// page lands where the policy of its range (Interleave) or else the
// touching thread's node puts it.
func Commit[T any](bufs ...[]T) {
	var chunks [][]byte
	for _, buf := range bufs {
		var elem T
		b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(buf))), len(buf)*int(unsafe.Sizeof(elem)))
		for len(b) > 0 {
			// Cut at the address's huge page boundaries, not b's offsets.
			start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
			n := min(len(b), int(commitChunk-start%commitChunk))
			chunks = append(chunks, b[:n])
			b = b[n:]
		}
	}
	threads.Each(len(chunks), func(i int) { touch(chunks[i]) })
}

// touch writes a zero to a byte of each page of b (and to its last byte,
// whose page the stride misses when b starts inside a page).
func touch(b []byte) {
	page := unix.Getpagesize()
	for i := 0; i < len(b); i += page {
		b[i] = 0
	}
	if len(b) > 0 {
		b[len(b)-1] = 0
	}
}
