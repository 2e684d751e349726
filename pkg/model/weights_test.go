package model

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDropPages drops only the pages wholly inside the slice. On an
// anonymous private mapping a dropped page reads back as zeros, which shows
// exactly which pages went.
func TestDropPages(t *testing.T) {
	page := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 4*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Skipf("mmap: %v", err)
	}
	defer unix.Munmap(mem)
	for _, tc := range []struct {
		name    string
		lo, hi  int
		dropped []bool // per page
	}{
		{"unaligned ends", 100, 3*page + 50, []bool{false, true, true, false}},
		{"aligned", page, 3 * page, []bool{false, true, true, false}},
		{"within one page", 10, page - 10, []bool{false, false, false, false}},
		{"straddling two pages", page / 2, page + page/2, []bool{false, false, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range mem {
				mem[i] = 0xa5
			}
			dropPages(mem[tc.lo:tc.hi])
			for p, want := range tc.dropped {
				if got := mem[p*page] == 0 && mem[(p+1)*page-1] == 0; got != want {
					t.Errorf("page %d dropped = %v, want %v", p, got, want)
				}
			}
		})
	}
}
