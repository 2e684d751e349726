package gemm

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// bumpArena hands out the bytes of mem in order, aligned as Arena asks,
// and nil once they run out.
type bumpArena struct {
	mem  []byte
	used int
}

func newBumpArena(n int) *bumpArena {
	return &bumpArena{mem: unsafe.Slice((*byte)(unsafe.Pointer(&aligned[uint32](n/4, hugePage)[0])), n)}
}

func (a *bumpArena) Alloc(n int) []byte {
	align := 64
	if n >= hugePage {
		align = hugePage
	}
	off := (a.used + align - 1) / align * align
	if off+n > len(a.mem) {
		return nil
	}
	a.used = off + n
	return a.mem[off : off+n : off+n]
}

// holds reports whether b lies in a's memory.
func (a *bumpArena) holds(b []byte) bool {
	lo, p := uintptr(unsafe.Pointer(&a.mem[0])), uintptr(unsafe.Pointer(&b[0]))
	return p >= lo && p+uintptr(len(b)) <= lo+uintptr(len(a.mem))
}

// TestPackerArena: weights packed into an arena (every kind, their coded
// copy and screen included) lie in it and give the products, coded
// products and screen intervals of weights packed on the heap, bit for
// bit, on every path; an arena without room leaves the packing on the heap.
func TestPackerArena(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	pool := threads.New(2, false)
	defer pool.Close()
	const n, k = 600, 1024 // pairs of 1.2 MiB, a coded copy and a screen beside them
	raw := codedWeights(rng, n, k)
	wf := make([]float32, n*k)
	for i, v := range raw {
		wf[i] = bf16ToF32(v)
	}
	for _, size := range []int{16 << 20, 4 << 10} {
		a := newBumpArena(size)
		pk := Packer{Arena: a}
		heap := map[string]*Weight{"bf16": FromBF16(raw, n, k), "int8": QuantizeInt8(raw, n, k), "f32": FromF32(wf, n, k)}
		in := map[string]*Weight{"bf16": pk.BF16Parts([][]uint16{raw}, k), "int8": pk.Int8Parts([][]uint16{raw}, k), "f32": pk.F32(wf, n, k)}
		heap["bf16"].Code()
		in["bf16"].Code()
		hs, as := heap["bf16"].Screen(), in["bf16"].Screen()
		roomy := size > 4<<10
		for name, w := range in { // the large buffers: the small ones stay on the heap
			big := [][]byte{w.panelMemory()}
			if w.coded != nil {
				big = append(big, asBytes(w.coded.blocks))
			}
			for _, b := range big {
				if a.holds(b) != roomy {
					t.Fatalf("arena of %d bytes: a %d-byte buffer of %s in the arena %v, want %v", size, len(b), name, a.holds(b), roomy)
				}
			}
		}
		if b := as.Memory()[0]; a.holds(b) != roomy {
			t.Fatalf("arena of %d bytes: the screen in the arena %v, want %v", size, a.holds(b), roomy)
		}
		forEachPath(t, func(t *testing.T, p kernels.Path) {
			for name, w := range in {
				for _, m := range []int{1, 5} {
					c := NewContext(pool, m, k)
					x := newProblem(rng, m, 1, k).x
					want, got := make([]float32, m*n), make([]float32, m*n)
					c.MatMul(want, x, m, heap[name])
					c.MatMul(got, x, m, w)
					assertBits(t, name, got, want, n)
				}
			}
		})
		split := make([]float32, 2*k)
		hs.Split(split, newProblem(rng, 1, 1, k).x, false)
		y0, y1 := make([]float32, 2*n), make([]float32, 2*n)
		c := NewContext(pool, 2, k)
		c.MatMul(y0, split, 2, hs.Weight())
		c.MatMul(y1, split, 2, as.Weight())
		assertBits(t, "screen", y1, y0, n)
		lo0, hi0, lo1, hi1 := slices.Clone(y0[:n]), slices.Clone(y0[n:]), slices.Clone(y1[:n]), slices.Clone(y1[n:])
		hs.Interval(lo0, hi0, split, 0, n)
		as.Interval(lo1, hi1, split, 0, n)
		if !slices.EqualFunc(lo0, lo1, sameBits) || !slices.EqualFunc(hi0, hi1, sameBits) {
			t.Fatal("the arena's screen gives other intervals")
		}
	}
}
