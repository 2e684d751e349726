package gemm

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestPackedAlignment: small buffers are cache-line aligned, weights of a
// huge page or more start on a 2 MiB boundary; all are zeroed and exactly n long.
func TestPackedAlignment(t *testing.T) {
	for _, n := range []int{1, 1000, hugePage/4 - 1, hugePage / 4, 3*hugePage/4 + 5} {
		b := packed[uint32](nil, n)
		want := uintptr(64)
		if 4*n >= hugePage {
			want = hugePage
		}
		if len(b) != n || cap(b) != n {
			t.Fatalf("n = %d: len %d, cap %d", n, len(b), cap(b))
		}
		if a := uintptr(unsafe.Pointer(&b[0])); a%want != 0 {
			t.Fatalf("n = %d: buffer at %#x, not %d-byte aligned", n, a, want)
		}
		for i, v := range b {
			if v != 0 {
				t.Fatalf("n = %d: b[%d] = %d, want zeroed", n, i, v)
			}
		}
	}
}

// TestWeightsOnHugePages: where transparent huge pages are available on
// request (THP "madvise" or "always"), a packed weight's whole 2 MiB pages
// are backed by huge pages. The kernel may still fall back to base pages
// under memory fragmentation; a machine with free memory does not.
func TestWeightsOnHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !strings.Contains(string(mode), "[madvise]") && !strings.Contains(string(mode), "[always]") {
		t.Skipf("transparent huge pages not available on request: %q", mode)
	}
	const n, k = 4096, 1024 // 8 MiB of bf16 pairs (four huge pages), 6 MiB coded (three)
	w := FromBF16(make([]uint16, n*k), n, k)
	w.Code()
	mems := w.Memory()
	if len(mems) != 3 {
		t.Fatalf("a coded weight has %d buffers, want the pairs and the coded blocks and flags", len(mems))
	}
	for _, mem := range mems[:2] {
		huge := anonHugeBytes(t, uintptr(unsafe.Pointer(&mem[0])))
		if huge < len(mem) {
			t.Fatalf("the mapping holding a buffer of %d bytes has %d bytes on huge pages, want all of them", len(mem), huge)
		}
	}
}

// anonHugeBytes is the AnonHugePages of the mapping containing addr, from
// /proc/self/smaps.
func anonHugeBytes(t *testing.T, addr uintptr) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(fields[0], "-"); ok && !strings.HasSuffix(fields[0], ":") {
			a, errA := strconv.ParseUint(lo, 16, 64)
			b, errB := strconv.ParseUint(hi, 16, 64)
			if errA == nil && errB == nil {
				in = uint64(addr) >= a && uint64(addr) < b
				continue
			}
		}
		if in && fields[0] == "AnonHugePages:" && len(fields) >= 2 {
			kb, err := strconv.Atoi(fields[1])
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no mapping holds %#x", addr)
	return 0
}
