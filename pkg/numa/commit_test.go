package numa

import (
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestCommitMakesEveryPageResident: Commit on one thread and on several, of
// buffers that start and end inside pages and cross huge page boundaries,
// as bytes and as float32s, faults in exactly their pages and leaves them
// zero.
func TestCommitMakesEveryPageResident(t *testing.T) {
	page := unix.Getpagesize()
	for _, procs := range []int{1, 4} {
		m, err := unix.Mmap(-1, 0, 3*commitChunk+8*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			t.Fatal(err)
		}
		// Base pages, so that a touch faults in its page alone wherever
		// transparent huge pages are "always".
		if err := unix.Madvise(m, unix.MADV_NOHUGEPAGE); err != nil {
			t.Fatal(err)
		}
		// Bytes 100 to 50 into page 5 (pages 0-5, of which the stride from
		// 100 misses page 5), and float32s from the middle of page 9 across
		// the huge page boundaries to three pages before the end.
		bytes := m[100 : 5*page+50]
		from := 9*page + page/2
		floats := unsafe.Slice((*float32)(unsafe.Pointer(&m[from])), (len(m)-3*page-from)/4)
		prev := runtime.GOMAXPROCS(procs)
		Commit(bytes)
		Commit(floats, floats[:0])
		runtime.GOMAXPROCS(prev)

		vec := make([]byte, len(m)/page)
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
			t.Fatalf("mincore: %v", e)
		}
		for p, v := range vec {
			want := p <= 5 || (p >= 9 && p < len(vec)-3)
			if got := v&1 == 1; got != want {
				t.Errorf("GOMAXPROCS %d: page %d resident %v, want %v", procs, p, got, want)
			}
		}
		for i, b := range m {
			if b != 0 {
				t.Fatalf("GOMAXPROCS %d: byte %d is %d after Commit, want 0", procs, i, b)
			}
		}
		if err := unix.Munmap(m); err != nil {
			t.Fatal(err)
		}
	}
}
