//go:build !purego

package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ops"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// amxShapes (m, n, k) have K in whole tile steps for bf16 and int8 (a
// multiple of 64): tile heights 1–16 and several tiles, whole and partial
// panels, 1, 2 and 4 panels a call, K of one step to 48.
var amxShapes = [][3]int{{1, 16, 64}, {5, 150, 128}, {16, 64, 64}, {17, 1000, 256}, {40, 200, 1024}, {37, 150, 3072}}

// forAMX runs f on the AMX path, or skips where the CPU or the OS does not
// offer the tiles.
func forAMX(t *testing.T, f func(pools []*threads.Pool)) {
	if !kernels.CPU().Supports(kernels.AMX) {
		t.Skip("no AMX tiles on this CPU, or the OS does not grant them")
	}
	forPath(t, kernels.AMX, f)
}

// forPath runs f on path p (which the CPU must support) with pools of 1, 2
// and 3 threads.
func forPath(t *testing.T, p kernels.Path, f func(pools []*threads.Pool)) {
	prev, err := kernels.Force(p)
	if err != nil {
		t.Fatal(err)
	}
	defer kernels.Force(prev)
	pools := []*threads.Pool{threads.New(1, false), threads.New(2, false), threads.New(3, false)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	f(pools)
}

// ops3 runs MatMul, MatMulAdd (onto base) and SwiGLU of x [m, k] with g and
// u on c, in calls of group rows.
func ops3(c *Context, x, base []float32, m, group int, g, u *Weight) (y, add, h []float32) {
	n, k := g.N, g.K
	y, add, h = make([]float32, m*n), slices.Clone(base), make([]float32, m*n)
	for r0 := 0; r0 < m; r0 += group {
		rows := min(group, m-r0)
		c.MatMul(y[r0*n:], x[r0*k:], rows, g)
		c.MatMulAdd(add[r0*n:], x[r0*k:], rows, g)
		c.SwiGLU(h[r0*n:], x[r0*k:], rows, g, u)
	}
	return y, add, h
}

// assertGroupings checks that ops3 on c in calls of 1, 3, 4, 16, 17 and all
// rows gives want, wantAdd and wantH bit for bit.
func assertGroupings(t *testing.T, what string, c *Context, x, base []float32, g, u *Weight, want, wantAdd, wantH []float32) {
	t.Helper()
	m, n := len(want)/g.N, g.N
	for _, group := range []int{1, 3, 4, 16, 17, m} {
		y, add, h := ops3(c, x, base, m, group, g, u)
		w := fmt.Sprintf("%s, groups of %d", what, group)
		assertBits(t, w+", MatMul", y, want, n)
		assertBits(t, w+", MatMulAdd", add, wantAdd, n)
		assertBits(t, w+", SwiGLU", h, wantH, n)
	}
}

// amxCase is one of amxShapes with its problem (activations and weights),
// the weights of two products packed by the test's pack, and a base for
// MatMulAdd.
type amxCase struct {
	s       [3]int
	m, n, k int
	pr      *problem
	g, u    *Weight
	base    []float32
}

// eachAMXShape calls f with each of amxShapes' problems, drawn from rng.
func eachAMXShape(rng *rand.Rand, pack func(w []uint16, n, k int) *Weight, f func(c amxCase)) {
	for _, s := range amxShapes {
		m, n, k := s[0], s[1], s[2]
		pr, pu := newProblem(rng, m, n, k), newProblem(rng, m, n, k)
		f(amxCase{s: s, m: m, n: n, k: k, pr: pr, g: pack(pr.w, n, k), u: pack(pu.w, n, k), base: randomRows(rng, m*n)})
	}
}

// TestAMXQuadsMatchGeneric: int8 products on AMX tiles are the generic int8
// kernel's bits (both sum the same integers exactly), for every op, on 1–3
// threads, in any grouping of rows, including groupings whose calls of up
// to 8 rows take VNNI and the others tiles.
func TestAMXQuadsMatchGeneric(t *testing.T) {
	forAMX(t, func(pools []*threads.Pool) {
		eachAMXShape(rand.New(rand.NewPCG(11, 12)), QuantizeInt8, func(c amxCase) {
			gen := NewContext(pools[1], c.m, c.k)
			gen.set, gen.prep = genericSet(genPairsBF16, genF32, genQuads, true), nil
			want, wantAdd, wantH := ops3(gen, c.pr.x, c.base, c.m, c.m, c.g, c.u)
			for _, pool := range pools {
				ctx := NewContext(pool, c.m, c.k)
				if form := ctx.formOf(c.m, c.g); (form == formQuadRows) != (c.m > regRows) {
					t.Fatalf("%v: int8 product of %d rows in form %d: tiles above one VNNI tile (%d rows) only", c.s, c.m, form, regRows)
				}
				assertGroupings(t, fmt.Sprintf("int8 %v, %d threads", c.s, pool.Size()), ctx, c.pr.x, c.base, c.g, c.u, want, wantAdd, wantH)
			}
		})
	})
}

// TestAMXPairs: bf16 products on AMX tiles have no exact emulation (a tile
// instruction rounds 32 products its own way), so they are held to what
// the engine relies on: a row's bits do not depend on the rows computed
// with it, the threads or the grouping (row invariance); MatMulAdd is
// y + MatMul and SwiGLU is SiLUMul of the two products, bit for bit; and
// the result is the exact product of the bf16-rounded activations within
// f32 accumulation error.
func TestAMXPairs(t *testing.T) {
	forAMX(t, func(pools []*threads.Pool) {
		silu := ops.For(kernels.AMX)
		eachAMXShape(rand.New(rand.NewPCG(13, 14)), FromBF16, func(c amxCase) {
			ref := NewContext(pools[1], c.m, c.k)
			if form := ref.formOf(c.m, c.g); form != formBF16Rows {
				t.Fatalf("%v: bf16 product not on AMX tiles (form %d)", c.s, form)
			}
			want, wantAdd, wantH := ops3(ref, c.pr.x, c.base, c.m, c.m, c.g, c.u)
			up := make([]float32, c.m*c.n)
			ref.MatMul(up, c.pr.x, c.m, c.u)
			for i := range want {
				if sum := c.base[i] + want[i]; !sameBits(wantAdd[i], sum) {
					t.Fatalf("%v: MatMulAdd y[%d] = %g, want y + MatMul = %g", c.s, i, wantAdd[i], sum)
				}
			}
			h := make([]float32, c.m*c.n)
			silu.SiLUMul(h, want, up)
			assertBits(t, fmt.Sprintf("%v: SwiGLU vs SiLUMul of the products", c.s), wantH, h, c.n)
			checkRoundedProduct(t, c.s, c.pr, want)
			for _, pool := range pools {
				assertGroupings(t, fmt.Sprintf("bf16 %v, %d threads", c.s, pool.Size()), NewContext(pool, c.m, c.k), c.pr.x, c.base, c.g, c.u, want, wantAdd, wantH)
			}
		})
	})
}

// TestAMXFewRows: a bf16 weight marked SetFewRows stays off the tiles for
// every M on the amx path and gives the avx512bf16 path's bits, in any
// grouping of rows.
func TestAMXFewRows(t *testing.T) {
	forAMX(t, func(pools []*threads.Pool) {
		fewRows := func(w []uint16, n, k int) *Weight {
			p := FromBF16(w, n, k)
			p.SetFewRows()
			return p
		}
		eachAMXShape(rand.New(rand.NewPCG(15, 16)), fewRows, func(c amxCase) {
			ref := newContext(pools[1], c.m, c.k, kernels.AVX512BF16, kernels.AVX512BF16)
			want, wantAdd, wantH := ops3(ref, c.pr.x, c.base, c.m, c.m, c.g, c.u)
			for _, pool := range pools {
				ctx := NewContext(pool, c.m, c.k)
				if form := ctx.formOf(c.m, c.g); form != formBF16 {
					t.Fatalf("%v: product of %d rows with a few-rows weight in form %d, want the register kernels' %d", c.s, c.m, form, formBF16)
				}
				assertGroupings(t, fmt.Sprintf("few-rows bf16 %v, %d threads", c.s, pool.Size()), ctx, c.pr.x, c.base, c.g, c.u, want, wantAdd, wantH)
			}
		})
	})
}

// checkRoundedProduct checks y against x·Wᵀ in f64 with x rounded to bf16
// as the kernels round it: what is left is the f32 accumulation's error.
func checkRoundedProduct(t *testing.T, s [3]int, pr *problem, y []float32) {
	t.Helper()
	for i := range pr.m {
		for j := range pr.n {
			var sum, mag float64
			for k := range pr.k {
				v := float64(bf16ToF32(toBF16(pr.x[i*pr.k+k]))) * float64(pr.wf[j*pr.k+k])
				sum += v
				mag += math.Abs(v)
			}
			if err := math.Abs(float64(y[i*pr.n+j]) - sum); !(err <= f32Tol(pr.k)*mag) {
				t.Fatalf("%v: y[%d,%d] = %g, want %g (err %.3g > %.3g·%.3g)", s, i, j, y[i*pr.n+j], sum, err, f32Tol(pr.k), mag)
			}
		}
	}
}

func randomRows(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// TestCoded: products of up to amxFewRows rows with a coded weight
// (Weight.Code) read the coded copy four panels a call, on every path with
// coded kernels (AMX tiles; on avx512 and avx512bf16 the register kernels of
// a few rows, with each prefetch level: the kernels of that level where the
// path has them, else L2's), and give the bits of the same weight uncoded, for every op, on
// 1-3 threads, in any grouping of rows (the groupings of a few rows go
// through the coded kernels, the taller ones through the pairs), with blocks
// coded and raw. With the copy's low bytes spoilt, one row's products
// change: they do read it.
func TestCoded(t *testing.T) {
	for _, p := range kernels.Available() {
		if !ReadsCoded(p) {
			continue
		}
		t.Run(p.String(), func(t *testing.T) {
			forPath(t, p, func(pools []*threads.Pool) {
				rng := rand.New(rand.NewPCG(25, 26))
				for _, s := range amxShapes {
					m, n, k := s[0], s[1], s[2]
					pr := newProblem(rng, m, n, k)
					gw, uw := codedWeights(rng, n, k), codedWeights(rng, n, k)
					g, u := FromBF16(gw, n, k), FromBF16(uw, n, k)
					base := randomRows(rng, m*n)
					want, wantAdd, wantH := ops3(NewContext(pools[1], m, k), pr.x, base, m, m, g, u)
					g.Code()
					u.Code()
					if n*k >= 100_000 {
						assertBlockKinds(t, fmt.Sprint(s), g)
					}
					for p := range numPrefetches {
						g.SetCodedPrefetch(p)
						u.SetCodedPrefetch(p)
						c := NewContext(pools[0], 1, k)
						var one task
						c.form(&one, 1, g)
						// (On AMX a weight of whole tile steps takes the
						// tiles' coded kernel, whatever the level.)
						registers := one.form == formBF16 || one.form == formPairs
						switch {
						case one.form == formBF16 && c.set.coded[PrefetchL1] == nil:
							t.Fatal("the VDPBF16PS path has no coded kernels that prefetch into L1")
						case registers && c.set.coded[p] != nil && one.coded != c.set.coded[p]:
							t.Fatalf("%v, prefetch %v: a row's product takes other coded kernels than the level's", s, p)
						}
						for _, pool := range pools {
							assertGroupings(t, fmt.Sprintf("coded %v, prefetch %v, %d threads", s, p, pool.Size()), NewContext(pool, m, k), pr.x, base, g, u, want, wantAdd, wantH)
						}
						if n >= maxPanels*panelWidth {
							assertReadsCopy(t, fmt.Sprintf("%v, prefetch %v", s, p), c, pr.x[:k], g, want[:n])
						}
					}
				}
			})
		})
	}
}
