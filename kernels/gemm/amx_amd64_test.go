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
	prev, err := kernels.Force(kernels.AMX)
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

// assertGroupings checks that ops3 on c in calls of 1, 3, 16, 17 and all
// rows gives want, wantAdd and wantH bit for bit.
func assertGroupings(t *testing.T, what string, c *Context, x, base []float32, g, u *Weight, want, wantAdd, wantH []float32) {
	t.Helper()
	m, n := len(want)/g.N, g.N
	for _, group := range []int{1, 3, 16, 17, m} {
		y, add, h := ops3(c, x, base, m, group, g, u)
		w := fmt.Sprintf("%s, groups of %d", what, group)
		assertBits(t, w+", MatMul", y, want, n)
		assertBits(t, w+", MatMulAdd", add, wantAdd, n)
		assertBits(t, w+", SwiGLU", h, wantH, n)
	}
}

// TestAMXQuadsMatchGeneric: int8 products on AMX tiles are the generic int8
// kernel's bits (both sum the same integers exactly), for every op, on 1–3
// threads, in any grouping of rows, including groupings whose calls of up
// to 8 rows take VNNI and the others tiles.
func TestAMXQuadsMatchGeneric(t *testing.T) {
	forAMX(t, func(pools []*threads.Pool) {
		rng := rand.New(rand.NewPCG(11, 12))
		for _, s := range amxShapes {
			m, n, k := s[0], s[1], s[2]
			pr, pu := newProblem(rng, m, n, k), newProblem(rng, m, n, k)
			g, u := QuantizeInt8(pr.w, n, k), QuantizeInt8(pu.w, n, k)
			base := randomRows(rng, m*n)
			gen := NewContext(pools[1], m, k)
			gen.set, gen.prep = genericSet(genPairsBF16, true), nil
			want, wantAdd, wantH := ops3(gen, pr.x, base, m, m, g, u)
			for _, pool := range pools {
				c := NewContext(pool, m, k)
				if form := c.formOf(m, g); (form == formQuadRows) != (m > regRows) {
					t.Fatalf("%v: int8 product of %d rows in form %d: tiles above one VNNI tile (%d rows) only", s, m, form, regRows)
				}
				assertGroupings(t, fmt.Sprintf("int8 %v, %d threads", s, pool.Size()), c, pr.x, base, g, u, want, wantAdd, wantH)
			}
		}
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
		rng := rand.New(rand.NewPCG(13, 14))
		silu := ops.For(kernels.AMX)
		for _, s := range amxShapes {
			m, n, k := s[0], s[1], s[2]
			pr, pu := newProblem(rng, m, n, k), newProblem(rng, m, n, k)
			g, u := FromBF16(pr.w, n, k), FromBF16(pu.w, n, k)
			base := randomRows(rng, m*n)
			ref := NewContext(pools[1], m, k)
			if form := ref.formOf(m, g); form != formBF16Rows {
				t.Fatalf("%v: bf16 product not on AMX tiles (form %d)", s, form)
			}
			want, wantAdd, wantH := ops3(ref, pr.x, base, m, m, g, u)
			up := make([]float32, m*n)
			ref.MatMul(up, pr.x, m, u)
			for i := range want {
				if sum := base[i] + want[i]; !sameBits(wantAdd[i], sum) {
					t.Fatalf("%v: MatMulAdd y[%d] = %g, want y + MatMul = %g", s, i, wantAdd[i], sum)
				}
			}
			h := make([]float32, m*n)
			silu.SiLUMul(h, want, up)
			assertBits(t, fmt.Sprintf("%v: SwiGLU vs SiLUMul of the products", s), wantH, h, n)
			checkRoundedProduct(t, s, pr, want)
			for _, pool := range pools {
				assertGroupings(t, fmt.Sprintf("bf16 %v, %d threads", s, pool.Size()), NewContext(pool, m, k), pr.x, base, g, u, want, wantAdd, wantH)
			}
		}
	})
}

// TestAMXFewRows: a bf16 weight marked SetFewRows stays off the tiles for
// every M on the amx path and gives the avx512bf16 path's bits, in any
// grouping of rows.
func TestAMXFewRows(t *testing.T) {
	forAMX(t, func(pools []*threads.Pool) {
		rng := rand.New(rand.NewPCG(15, 16))
		for _, s := range amxShapes {
			m, n, k := s[0], s[1], s[2]
			pr, pu := newProblem(rng, m, n, k), newProblem(rng, m, n, k)
			g, u := FromBF16(pr.w, n, k), FromBF16(pu.w, n, k)
			g.SetFewRows()
			u.SetFewRows()
			base := randomRows(rng, m*n)
			want, wantAdd, wantH := ops3(newContext(pools[1], m, k, kernels.AVX512BF16, kernels.AVX512BF16), pr.x, base, m, m, g, u)
			for _, pool := range pools {
				c := NewContext(pool, m, k)
				if form := c.formOf(m, g); form != formBF16 {
					t.Fatalf("%v: product of %d rows with a few-rows weight in form %d, want the register kernels' %d", s, m, form, formBF16)
				}
				assertGroupings(t, fmt.Sprintf("few-rows bf16 %v, %d threads", s, pool.Size()), c, pr.x, base, g, u, want, wantAdd, wantH)
			}
		}
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
