//go:build amd64 && !purego

package attn

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ops"
)

// The tile kernels' exponential is kernels/ops' EXP512 macro (exp_amd64.h,
// written by kernels/internal/asmgen): it must stay bit-identical to ops.Exp32.
func TestExpMatchesOps(t *testing.T) {
	if !kernels.CPU().Supports(kernels.AVX512) {
		t.Skip("no AVX-512")
	}
	r := rand.New(rand.NewPCG(1, 1))
	src := make([]float32, 1<<14)
	for i := range src {
		src[i] = float32(r.Float64()*200 - 100)
	}
	copy(src, []float32{0, -87, -87.0001, 88, 88.5, float32(math.Inf(-1)), float32(math.Inf(1)), -0.5, 1e-30})
	dst := make([]float32, len(src))
	expAVX512(&dst[0], &src[0], len(src))
	for i, x := range src {
		if want := ops.Exp32(x); math.Float32bits(dst[i]) != math.Float32bits(want) {
			t.Fatalf("exp(%v) = %v, ops.Exp32 %v", x, dst[i], want)
		}
	}
}

// The group kernels of each SIMD path must give each query exactly the bits
// of the path's single-query kernel.
func TestGroupKernelsMatchTile(t *testing.T) {
	if !kernels.CPU().Supports(kernels.AVX2) {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(2, 2))
	rnd := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	for _, p := range []kernels.Path{kernels.AVX512, kernels.AVX2} {
		if !kernels.CPU().Supports(p) {
			t.Logf("%v: not on this CPU", p)
			continue
		}
		for _, hd := range []int{16, 64, 80, 128, 144} {
			var ks kernelSet
			simdKernels(&ks, p, hd)
			for _, n := range []int{1, 3, 5, 8, 9, 16, 17, 63, 64} {
				k, v := rnd(Tile*hd), rnd(Tile*hd)
				var start [groupQueries]query
				for i := range start {
					ml := []float32{float32(r.NormFloat64()), float32(r.Float64() * 10)}
					if i == 0 {
						ml[0], ml[1] = float32(math.Inf(-1)), 0 // a first tile
					}
					start[i] = query{ml: ml, acc: rnd(hd), q: rnd(hd)}
				}
				clone := func() (w scratch) {
					w.s = make([]float32, groupQueries*Tile)
					for i, q := range start {
						w.pend[i] = query{ml: slices.Clone(q.ml), acc: slices.Clone(q.acc), q: q.q}
					}
					return w
				}
				want := clone()
				for _, q := range want.pend {
					ks.tile(q.ml, q.acc, q.q, k, v, want.s[:Tile], n, 0.125)
				}
				cases := []struct {
					name  string
					np, i int
				}{{"four", 4, 0}, {"pair", 2, 0}, {"pair after two", 4, 2}}
				for _, c := range cases {
					got := clone()
					got.np = c.np
					took := ks.group(&got, c.i, k, v, n, hd, 0.125)
					if wantTook := got.np - c.i; took != wantTook {
						t.Fatalf("%v %s: group took %d queries, want %d", p, c.name, took, wantTook)
					}
					for i := c.i; i < c.i+took; i++ {
						if !bitsEqual(got.pend[i].ml, want.pend[i].ml) || !bitsEqual(got.pend[i].acc, want.pend[i].acc) {
							t.Fatalf("%v hd %d n %d %s: query %d differs from the single kernel", p, hd, n, c.name, i)
						}
					}
				}
			}
		}
	}
}

// The int8 dequantizers of every SIMD path against dequantGo, bit for bit,
// in both layouts (chunk-major K tile, V rows), on random values with the
// extremes ±127 and zero, for row counts that end a tile early: nothing
// outside the layout's cells is written (the rest of dst is a NaN guard).
func TestDequantMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, p := range kernels.Available() {
		if p < kernels.AVX2 {
			continue
		}
		for _, hd := range []int{16, 48, 128, 256} {
			ks := bindKernels(p, hd)
			for _, rows := range []int{1, 5, 16, 63, Tile} {
				src, scale := dequantInputs(r, hd, rows)
				want := make([]float32, rows*hd)
				dequantGo(want, src, scale, rows, hd)

				const guard = 64
				nan := float32(math.NaN())
				buf := make([]float32, Tile*hd+guard)
				for i := range buf {
					buf[i] = nan
				}
				k := ks.dequantK(buf[:Tile*hd], src[:rows*hd], scale[:rows], rows, hd)
				for tr := range Tile {
					for d := range hd {
						got := k[(d/16*Tile+tr)*16+d%16]
						switch {
						case tr >= rows && !math.IsNaN(float64(got)):
							t.Fatalf("%v hd %d rows %d: K row %d (past the end) written", p, hd, rows, tr)
						case tr < rows && math.Float32bits(got) != math.Float32bits(want[tr*hd+d]):
							t.Fatalf("%v hd %d rows %d: K[%d][%d] = %v, Go %v", p, hd, rows, tr, d, got, want[tr*hd+d])
						}
					}
				}
				for i := range buf {
					buf[i] = nan
				}
				v := ks.dequantV(buf[:Tile*hd], src[:rows*hd], scale[:rows], rows, hd)
				if !bitsEqual(v, want) {
					t.Fatalf("%v hd %d rows %d: V differs from Go", p, hd, rows)
				}
				for i := rows * hd; i < len(buf); i++ {
					if !math.IsNaN(float64(buf[i])) {
						t.Fatalf("%v hd %d rows %d: V element %d past the end written", p, hd, rows, i)
					}
				}
			}
		}
	}
}

// The in-place decode kernels (bf16 and int8 cache rows read directly) give
// each query the bits of the group kernels on the widened (dequantized)
// tile, which is what prefill runs: decode == prefill rests on it. The
// AVX-512 kernels read rows up to n rounded up to 8 and must refuse a slice
// that ends sooner; the AVX2 ones read bf16 rows up to n exactly, and leave
// an int8 cache to the dequantized tile.
func TestDirectKernelsMatchWidened(t *testing.T) {
	if !kernels.CPU().Supports(kernels.AVX2) {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(4, 4))
	for _, p := range []kernels.Path{kernels.AVX512, kernels.AVX2} {
		if !kernels.CPU().Supports(p) {
			t.Logf("%v: not on this CPU", p)
			continue
		}
		directKernelsMatchWidened(t, r, p)
	}
}

func directKernelsMatchWidened(t *testing.T, r *rand.Rand, p kernels.Path) {
	for _, dt := range []DType{BF16, Int8} {
		for _, hd := range []int{16, 48, 64, 128, 144} {
			ks := bindKernels(p, hd)
			// two tiles of one (slot, head), the second the cache's last
			c := NewCache(1, 1, 2*Tile, hd, dt)
			k, v := make([]float32, 2*Tile*hd), make([]float32, 2*Tile*hd)
			for i := range k {
				k[i], v[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			c.StoreRun(0, 0, 2*Tile, k, v)
			for _, n := range []int{1, 3, 8, 9, 17, 63, 64} {
				for _, np := range []int{2, 4} {
					var start [groupQueries]query
					for i := range start {
						ml, q := randomState(r, i, hd, 1)
						start[i] = query{ml: ml, acc: make([]float32, hd), q: q}
					}
					clone := func() (w scratch) {
						w.s = make([]float32, groupQueries*Tile)
						w.np = np
						for i, q := range start {
							w.pend[i] = query{ml: slices.Clone(q.ml), acc: slices.Clone(q.acc), q: q.q}
						}
						return w
					}
					for _, tile0 := range []int{0, Tile} {
						o := tile0 * hd
						want := clone()
						kt, vt := make([]float32, Tile*hd), make([]float32, Tile*hd)
						var kw, vw []float32
						if dt == BF16 {
							kw = ks.widenK(kt, c.K16[o:o+n*hd], nil, n, hd)
							vw = ks.widenV(vt, c.V16[o:o+n*hd], nil, n, hd)
						} else {
							kw = ks.dequantK(kt, c.K8[o:o+n*hd], c.KS[tile0:tile0+n], n, hd)
							vw = ks.dequantV(vt, c.V8[o:o+n*hd], c.VS[tile0:tile0+n], n, hd)
						}
						if took := ks.group(&want, 0, kw, vw, n, hd, 0.125); took != np {
							t.Fatalf("%v: the group kernels took %d of %d queries", p, took, np)
						}
						// a view ending at the tile's last row
						short := *c
						short.K16, short.V16 = short.K16[:min(len(short.K16), o+n*hd)], short.V16[:min(len(short.V16), o+n*hd)]
						short.K8, short.V8 = short.K8[:min(len(short.K8), o+n*hd)], short.V8[:min(len(short.V8), o+n*hd)]
						short.KS, short.VS = short.KS[:min(len(short.KS), tile0+n)], short.VS[:min(len(short.VS), tile0+n)]
						for _, view := range []*Cache{c, &short} {
							got := clone()
							ran := ks.direct(&got, view, o, n, 0.125)
							switch {
							case p == kernels.AVX2 && dt == Int8:
								if ran {
									t.Fatalf("%v: an in-place kernel ran on an int8 cache", p)
								}
								continue
							case p == kernels.AVX512 && view == &short && n%8 != 0:
								// the kernels would read past the view: the caller must widen
								if ran {
									t.Fatalf("%v %v hd %d n %d: in place over a slice %d rows short", p, dt, hd, n, 8-n%8)
								}
								continue
							case !ran:
								t.Fatalf("%v %v hd %d n %d: no in-place kernel ran", p, dt, hd, n)
							}
							for i := range np {
								if !bitsEqual(got.pend[i].ml, want.pend[i].ml) || !bitsEqual(got.pend[i].acc, want.pend[i].acc) {
									t.Fatalf("%v %v hd %d n %d, %d queries, tile %d: query %d differs from the widened tile", p, dt, hd, n, np, tile0, i)
								}
							}
						}
					}
				}
			}
		}
	}
}

// The VDPBF16PS kernels give each query the bits of tileBF16Go (ModeBF16's
// definition), reading V in place (decode) or from the pair-interleaved
// tile (prefill): 1 to 4 pending queries (a lone one paired with a stand-in),
// every tile length, head sizes 16 to 256 (odd multiples of 16 too), first
// and later tiles, a tile ending the cache's slice (where the Go kernel
// must run), and special
// values (a huge key, a NaN value, queries that underflow bf16; scores
// that are NaN, an infinite key against a query whose parts differ in
// sign, have no defined bits: VMAXPS and Go's max treat NaN apart).
func TestDotKernelsMatchGo(t *testing.T) {
	if !kernels.CPU().Supports(kernels.AVX512BF16) {
		t.Skip("no AVX512_BF16")
	}
	r := rand.New(rand.NewPCG(5, 5))
	o := ops.For(kernels.Generic)
	for _, hd := range []int{16, 32, 48, 64, 128, 256} {
		ks := bindKernels(kernels.AVX512BF16, hd)
		c := NewCache(1, 1, 2*Tile, hd, BF16)
		k, v := make([]float32, 2*Tile*hd), make([]float32, 2*Tile*hd)
		for i := range k {
			k[i], v[i] = float32(r.NormFloat64()*2), float32(r.NormFloat64())
		}
		if hd == 128 {
			k[5*hd+3], v[7*hd+1] = 1e30, float32(math.NaN()) // a huge score; a NaN value
		}
		c.StoreRun(0, 0, 2*Tile, k, v)
		for n := 1; n <= Tile; n++ {
			for np := 1; np <= groupQueries; np++ {
				var start [groupQueries]query
				for i := range start {
					ml, q := randomState(r, i, hd, 3)
					q[1] = 1e-39 // bf16 rounds it to a denormal: VDPBF16PS reads zero
					qb := make([]uint16, 2*hd)
					roundQuery(o, qb, q, make([]float32, 2*hd), 0.125)
					start[i] = query{ml: ml, acc: make([]float32, hd), qb: qb}
					for d := range start[i].acc {
						start[i].acc[d] = float32(r.NormFloat64())
					}
				}
				clone := func() (w scratch) {
					w.s = make([]float32, groupQueries*Tile)
					w.np = np
					w.alone = query{ml: make([]float32, 2), acc: make([]float32, hd)}
					for i, q := range start {
						w.pend[i] = query{ml: slices.Clone(q.ml), acc: slices.Clone(q.acc), qb: q.qb}
					}
					return w
				}
				for _, tc := range []struct {
					tile0 int
					pairs bool
				}{{0, false}, {0, true}, {Tile, false}, {Tile, true}} {
					tile0, off := tc.tile0, tc.tile0*hd
					want, got := clone(), clone()
					dotGo(&want, c, off, n)
					if tc.pairs {
						// V pairs, and a NaN guard past them
						got.vt = make([]float32, Tile*hd)
						for i := range got.vt {
							got.vt[i] = float32(math.NaN())
						}
						ks.pairV(got.vt, c.V16[off:off+n*hd], n, hd)
						for i := (n + 1) / 2 * hd; i < len(got.vt); i++ {
							if !math.IsNaN(float64(got.vt[i])) {
								t.Fatalf("hd %d n %d: pairV wrote past its %d rows", hd, n, (n+1)/2)
							}
						}
						got.vpairs = true
					}
					cv := c
					if tile0 == Tile && n%8 != 0 {
						// the slice ends at the tile's last row: the kernels
						// would read past it, the Go kernel runs
						short := *c
						short.K16 = c.K16[:off+n*hd]
						cv = &short
					}
					ks.dot(&got, cv, off, n)
					for i := range np {
						if !bitsEqual(got.pend[i].ml, want.pend[i].ml) || !bitsEqual(got.pend[i].acc, want.pend[i].acc) {
							t.Fatalf("hd %d n %d, %d queries, tile %d, pairs %v: query %d: ml %v acc[:4] %v, Go ml %v acc[:4] %v", hd, n, np, tile0, tc.pairs, i,
								got.pend[i].ml, got.pend[i].acc[:4], want.pend[i].ml, want.pend[i].acc[:4])
						}
					}
				}
			}
		}
	}
}

// randomState is query i's starting online-softmax state (running max, sum)
// and q of hd normal values times scale: query 0 starts a row (−∞, 0), the
// others are midway through one.
func randomState(r *rand.Rand, i, hd int, scale float64) (ml, q []float32) {
	ml = []float32{float32(r.NormFloat64()), float32(r.Float64() * 10)}
	if i == 0 {
		ml[0], ml[1] = float32(math.Inf(-1)), 0
	}
	q = make([]float32, hd)
	for d := range q {
		q[d] = float32(r.NormFloat64() * scale)
	}
	return ml, q
}

// TestRoundQueryMatchesGo checks the AVX-512 query rounding against
// roundQuery bit for bit, on normal values and on the edges of the rounding:
// ties to even, NaN, infinities (whose low part is NaN), denormals, values
// the scale overflows, and −0.
func TestRoundQueryMatchesGo(t *testing.T) {
	if !kernels.CPU().Supports(kernels.AVX512BF16) {
		t.Skip("no AVX512_BF16")
	}
	r := rand.New(rand.NewPCG(7, 7))
	o := ops.For(kernels.Generic)
	special := []float32{
		float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1e-40, -1e-45, 3e38, float32(math.Copysign(0, -1)),
		math.Float32frombits(0x3f808000), math.Float32frombits(0x3f818000), // ties: to even down, to even up
		math.Float32frombits(0x3f80ffff), math.Float32frombits(0x7f7fffff), math.Float32frombits(0x7fa00001), // signalling NaN
	}
	for _, hd := range []int{16, 32, 48, 64, 128, 256} {
		ks := bindKernels(kernels.AVX512BF16, hd)
		for round := range 20 {
			q := make([]float32, hd)
			for d := range q {
				q[d] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(9)-4)))
				if round > 0 && r.IntN(4) == 0 {
					q[d] = special[r.IntN(len(special))]
				}
			}
			scale := []float32{0.125, 0.0883883, 1, 4}[round%4]
			want, got := make([]uint16, 2*hd), make([]uint16, 2*hd)
			roundQuery(o, want, q, make([]float32, 2*hd), scale)
			ks.roundQ(got, q, make([]float32, 2*hd), scale)
			if !slices.Equal(got, want) {
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("hd %d scale %v: word %d of %d (q %v) = %#x, want %#x", hd, scale, i, 2*hd, q[i%hd], got[i], want[i])
					}
				}
			}
		}
	}
}

// warmAVX512 must read no byte past n: the tile it warms can end where the
// cache's mapping does. The page after the buffer is unmapped, so a read
// past it faults.
func TestWarmStaysInBounds(t *testing.T) {
	if !kernels.CPU().Supports(kernels.AVX512) {
		t.Skip("no AVX-512")
	}
	mem := guardedPages(t, 1)[0]
	page := len(mem)
	for _, n := range []int{0, 2, 254, 256, 300, 511, 512, page} {
		start := (page - n) &^ 1 // a uint16 boundary; n = 0 points at the guard page
		warmAVX512((*uint16)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(mem)), start)), page-start)
	}
}

// The AVX2 in-place kernels read no K or V row at or past n: a tile whose
// rows end right before an unmapped page runs for every length.
func TestDirectAVX2StaysInBounds(t *testing.T) {
	if !kernels.CPU().Supports(kernels.AVX2) {
		t.Skip("no AVX2")
	}
	pages := guardedPages(t, 2)
	const hd = 64
	r := rand.New(rand.NewPCG(6, 6))
	ks := bindKernels(kernels.AVX2, hd)
	for _, n := range []int{1, 2, 3, 7, 8, 15} {
		rows := func(page []byte) []uint16 { // n rows ending at the page's end
			s := unsafe.Slice((*uint16)(unsafe.Pointer(&page[len(page)-n*hd*2])), n*hd)
			for i := range s {
				s[i] = 0x3f80 + uint16(r.IntN(64))
			}
			return s
		}
		c := &Cache{Slots: 1, KVHeads: 1, SeqLen: n, HeadDim: hd, K16: rows(pages[0]), V16: rows(pages[1])}
		for _, np := range []int{2, 4} {
			var w scratch
			w.s = make([]float32, groupQueries*Tile)
			w.np = np
			for i := range np {
				ml, q := randomState(r, i, hd, 1)
				w.pend[i] = query{ml: ml, acc: make([]float32, hd), q: q}
			}
			if !ks.direct(&w, c, 0, n, 0.125) {
				t.Fatalf("n %d, %d queries: no in-place kernel ran", n, np)
			}
		}
	}
}

// guardedPages maps n pages, each followed by one that faults when read, and
// returns them; they are unmapped when the test ends.
func guardedPages(t *testing.T, n int) [][]byte {
	page := unix.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 2*n*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	pages := make([][]byte, n)
	for i := range pages {
		at := 2 * i * page
		if err := unix.Mprotect(mem[at+page:at+2*page], unix.PROT_NONE); err != nil {
			t.Fatal(err)
		}
		pages[i] = mem[at : at+page]
	}
	return pages
}
