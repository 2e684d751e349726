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

// forEachPath runs f under every path this CPU can run, so that a plain
// `go test` covers all of them.
func forEachPath(t *testing.T, f func(t *testing.T, p kernels.Path)) {
	t.Helper()
	for _, p := range kernels.Available() {
		t.Run(p.String(), func(t *testing.T) {
			prev, err := kernels.Force(p)
			if err != nil {
				t.Fatal(err)
			}
			defer kernels.Force(prev)
			f(t, p)
		})
	}
}

type problem struct {
	m, n, k int
	x       []float32
	w       []uint16 // bf16 bits
	wf      []float32
}

// weights is the problem's weight in every kind a Weight holds, by name.
func (pr *problem) weights() map[string]*Weight {
	n, k := pr.n, pr.k
	return map[string]*Weight{"bf16": FromBF16(pr.w, n, k), "f32": FromF32(pr.wf, n, k), "int8": QuantizeInt8(pr.w, n, k)}
}

func newProblem(rng *rand.Rand, m, n, k int) *problem {
	pr := &problem{m: m, n: n, k: k, x: make([]float32, m*k), w: make([]uint16, n*k), wf: make([]float32, n*k)}
	for i := range pr.x {
		pr.x[i] = float32(rng.NormFloat64())
	}
	for i := range pr.w {
		pr.w[i] = toBF16(float32(rng.NormFloat64() * 0.1))
		pr.wf[i] = bf16ToF32(pr.w[i])
	}
	return pr
}

// reference is x·Wᵀ in f64 and, per output, Σ|x·w| (the scale of its rounding error).
func (pr *problem) reference() (ref, mag []float64) {
	ref, mag = make([]float64, pr.m*pr.n), make([]float64, pr.m*pr.n)
	for i := range pr.m {
		for j := range pr.n {
			var s, a float64
			for k := range pr.k {
				v := float64(pr.x[i*pr.k+k]) * float64(pr.wf[j*pr.k+k])
				s += v
				a += math.Abs(v)
			}
			ref[i*pr.n+j], mag[i*pr.n+j] = s, a
		}
	}
	return ref, mag
}

const guard = 16

var sentinel = float32(math.Float32frombits(0x7fc0dead))

// guarded returns a slice of n elements with sentinel guard bands on both sides.
func guarded(n int) (all, y []float32) {
	all = make([]float32, n+2*guard)
	for i := range all {
		all[i] = sentinel
	}
	return all, all[guard : guard+n : guard+n]
}

func checkGuards(t *testing.T, all []float32) {
	t.Helper()
	for i := range guard {
		for _, j := range []int{i, len(all) - 1 - i} {
			if math.Float32bits(all[j]) != math.Float32bits(sentinel) {
				t.Fatalf("stray write at guard index %d", j)
			}
		}
	}
}

// emulation returns a Context on the generic kernels with the exact
// emulation of path p's arithmetic where one exists.
func emulation(pool *threads.Pool, p kernels.Path, maxM, maxK int) *Context {
	c := NewContext(pool, maxM, maxK)
	c.prep = nil
	if p == kernels.AVX512BF16 {
		c.set = genericSet(genPairsBF16, genF32, genQuads, true)
	} else {
		c.set = genericSet(genPairsF32, genF32, genQuads, false)
	}
	return c
}

var shapes = [][3]int{ // m, n, k
	{1, 1, 1}, {1, 16, 2}, {2, 17, 3}, {3, 15, 4}, {4, 31, 5}, {5, 33, 6}, {6, 48, 7}, {7, 63, 8},
	{8, 64, 9}, {9, 65, 15}, {10, 7, 17}, {11, 129, 31}, {12, 80, 32}, {13, 96, 33}, {14, 112, 63},
	{15, 144, 64}, {16, 150, 65}, {17, 160, 127}, {33, 17, 1000}, {1, 1000, 63}, {63, 65, 1000},
	{65, 200, 17}, {37, 1000, 1000},
}

func TestMatMulAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pool := threads.New(2, false)
	defer pool.Close()
	forEachPath(t, func(t *testing.T, p kernels.Path) {
		for _, s := range shapes {
			pr := newProblem(rng, s[0], s[1], s[2])
			ref, mag := pr.reference()
			c := NewContext(pool, pr.m, pr.k)
			emu := emulation(pool, p, pr.m, pr.k)
			for _, tc := range []struct {
				name string
				w    *Weight
				// tol bounds |y-ref| relative to Σ|x·w|: sequential f32 sums,
				// plus the activations' rounding to bf16 on the bf16 path.
				tol float64
			}{
				{"bf16", FromBF16(pr.w, pr.n, pr.k), bf16Tol(p, pr.k)},
				{"f32", FromF32(pr.wf, pr.n, pr.k), f32Tol(pr.k)},
			} {
				all, y := guarded(pr.m * pr.n)
				c.MatMul(y, pr.x, pr.m, tc.w)
				checkGuards(t, all)
				for i, v := range y {
					if err := math.Abs(float64(v) - ref[i]); !(err <= tc.tol*mag[i]) {
						t.Fatalf("%v %s: y[%d,%d] = %g, want %g (err %.3g > %.3g·%.3g)",
							s, tc.name, i/pr.n, i%pr.n, v, ref[i], err, tc.tol, mag[i])
					}
				}
				if tc.name == "bf16" && p == kernels.AVX512BF16 {
					want := make([]float32, len(y))
					emu.MatMul(want, pr.x, pr.m, tc.w)
					assertBits(t, fmt.Sprintf("%v %s vs emulation", s, tc.name), y, want, pr.n)
				}
			}
		}
	})
}

func f32Tol(k int) float64 { return float64(k+1) * 0x1p-24 * 1.01 }

func bf16Tol(p kernels.Path, k int) float64 {
	if p.RoundsToBF16() {
		return 0x1p-8 + f32Tol(k)
	}
	return f32Tol(k)
}

func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

func assertBits(t *testing.T, what string, got, want []float32, n int) {
	t.Helper()
	for i := range want {
		if !sameBits(got[i], want[i]) {
			t.Fatalf("%s: y[%d,%d] = %g (%#08x), want %g (%#08x)", what, i/n, i%n,
				got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// TestRowInvariance: a row's outputs are the same bits whether it is computed
// with 36 other rows, alone, or in any grouping, on any number of threads.
func TestRowInvariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const m, n, k = 37, 150, 1100 // K beyond one K block of every kind
	pr := newProblem(rng, m, n, k)
	pools := []*threads.Pool{threads.New(1, false), threads.New(2, false), threads.New(3, false)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	weights := pr.weights()
	forEachPath(t, func(t *testing.T, _ kernels.Path) {
		for name, w := range weights {
			full := make([]float32, m*n)
			NewContext(pools[1], m, k).MatMul(full, pr.x, m, w)
			for _, pool := range pools {
				c := NewContext(pool, m, k)
				for _, group := range []int{1, 2, 3, 5, 8, 9, 13, 16, 17, 36} {
					got := make([]float32, m*n)
					for r0 := 0; r0 < m; r0 += group {
						rows := min(group, m-r0)
						c.MatMul(got[r0*n:], pr.x[r0*k:], rows, w)
					}
					assertBits(t, fmt.Sprintf("%s, %d threads, groups of %d", name, pool.Size(), group), got, full, n)
				}
			}
		}
	})
}

// Outputs, called piecewise from a task of the caller's own on each worker,
// gives MatMul's bits for every channel: whole panels and the partial last
// one, one row tile and several, every path and weight kind.
func TestOutputsMatchMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const n, k = 150, 70 // a partial last panel, odd K
	pool := threads.New(2, false)
	defer pool.Close()
	forEachPath(t, func(t *testing.T, _ kernels.Path) {
		for _, m := range []int{1, 3, 8, 11} {
			pr := newProblem(rng, m, n, k)
			for name, w := range pr.weights() {
				c := NewContext(pool, 16, k)
				want := make([]float32, m*n)
				c.MatMul(want, pr.x, m, w)
				all, got := guarded(m * n)
				c.Prepare(got, pr.x, m, w)
				// Uneven pieces, handed out in an order unlike the panels'.
				pieces := [][2]int{{96, 150}, {0, 16}, {48, 96}, {16, 48}, {32, 32}}
				pool.Run(threads.TaskFunc(func(worker, workers int) {
					for i := worker; i < len(pieces); i += workers {
						c.Outputs(worker, pieces[i][0], pieces[i][1])
					}
				}))
				c.Done()
				checkGuards(t, all)
				assertBits(t, fmt.Sprintf("%s, m = %d", name, m), got, want, n)
			}
		}
	})
	c := NewContext(pool, 1, k)
	x, y := make([]float32, k), make([]float32, n)
	c.Prepare(y, x, 1, FromF32(make([]float32, n*k), n, k))
	for _, r := range [][2]int{{8, 16}, {0, 20}, {16, 151}, {32, 16}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Outputs(%d, %d) of 150 channels did not panic", r[0], r[1])
				}
			}()
			c.Outputs(0, r[0], r[1])
		}()
	}
}

// Staged products (rows prepared in pieces by the workers of a task of the
// caller's, then MatMulStaged / SwiGLUStaged) are the same bits as MatMul /
// SwiGLU, for every weight kind and path, one row to several row tiles.
func TestStagedMatchesMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const n, k = 150, 70 // a partial last panel, odd K
	pool := threads.New(2, false)
	defer pool.Close()
	forEachPath(t, func(t *testing.T, _ kernels.Path) {
		for _, m := range []int{1, 3, 8, 11, 29} {
			pr := newProblem(rng, m, n, k)
			for name, w := range pr.weights() {
				c := NewContext(pool, 32, k)
				stage := func() {
					// Uneven pieces that split row tiles, in an order unlike the rows'.
					cuts := []int{0, m / 3, m / 3, m/2 + 1, m}
					pool.Run(threads.TaskFunc(func(worker, workers int) {
						for i := len(cuts) - 2 - worker; i >= 0; i -= workers {
							c.Stage(pr.x, m, w, min(cuts[i], m), min(cuts[i+1], m))
						}
					}))
				}
				want := make([]float32, m*n)
				c.MatMul(want, pr.x, m, w)
				all, got := guarded(m * n)
				stage()
				c.MatMulStaged(got, pr.x, m, w)
				checkGuards(t, all)
				assertBits(t, fmt.Sprintf("%s, m = %d", name, m), got, want, n)

				c.SwiGLU(want, pr.x, m, w, w)
				stage()
				c.SwiGLUStaged(got, pr.x, m, w, w)
				checkGuards(t, all)
				assertBits(t, fmt.Sprintf("SwiGLU %s, m = %d", name, m), got, want, n)
			}
		}
	})
}

// TestGuidedChunksBalance simulates two workers claiming a tall product's
// chunks (multiply's rule), the second starting up to 20 panels late and
// running up to 30 % slower, and bounds how long the first to finish waits
// for the other: about a chunk of the last size, not a block.
func TestGuidedChunksBalance(t *testing.T) {
	for _, n := range []int64{64, 128, 256, 384} {
		for _, least := range []int64{1, minChunk} {
			worst := 0.0
			for late := range 80 {
				for _, slow := range []float64{1, 1.1, 1.3} {
					var next int64
					at, speed := [2]float64{0, float64(late) / 4}, [2]float64{1, slow}
					for next < n {
						w := 0
						if at[1] < at[0] {
							w = 1
						}
						size := min(chunkSize(n-next, blockPanels, least, 2*2), n-next)
						next += size
						at[w] += float64(size) * speed[w]
					}
					worst = max(worst, math.Abs(at[0]-at[1]))
				}
			}
			if worst > 2 {
				t.Errorf("%d panels, chunks down to %d: a worker waits up to %.2f panels' time at the end, want ≤ 2", n, least, worst)
			}
		}
	}
}

// TestRowGroupsMatch: a tall product taken in groups of rows (groupRows)
// gives the bits of one group, for MatMul, MatMulAdd and SwiGLU, every path,
// weight kind and thread count, with groups that split a row tile's worth
// of activations unevenly and a last group shorter than the others.
func TestRowGroupsMatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const m, n, k = 45, 150, 70
	pr, pu := newProblem(rng, m, n, k), newProblem(rng, m, n, k)
	pools := []*threads.Pool{threads.New(1, false), threads.New(2, false), threads.New(3, false)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	defer func(b int) { groupBytes = b }(groupBytes)
	forEachPath(t, func(t *testing.T, _ kernels.Path) {
		for name, mk := range map[string]func([]uint16, int, int) *Weight{"bf16": FromBF16, "int8": QuantizeInt8} {
			g, u := mk(pr.w, n, k), mk(pu.w, n, k)
			base := make([]float32, m*n)
			for i := range base {
				base[i] = float32(rng.NormFloat64())
			}
			run := func(c *Context) (y, add, h []float32) {
				y, add, h = make([]float32, m*n), slices.Clone(base), make([]float32, m*n)
				c.MatMul(y, pr.x, m, g)
				c.MatMulAdd(add, pr.x, m, g)
				c.SwiGLU(h, pr.x, m, g, u)
				return y, add, h
			}
			groupBytes = 1 << 30
			y, add, h := run(NewContext(pools[1], m, k))
			for _, bytes := range []int{1, 300, 1000, 2500} {
				groupBytes = bytes
				for _, pool := range pools {
					c := NewContext(pool, m, k)
					c.task.m, c.task.w = m, g
					c.form(&c.task, m, g)
					if rows := c.task.groupRows(); rows >= m && !c.task.widen {
						t.Fatalf("%d bytes: one group of %d rows, want several", bytes, rows)
					}
					gy, gadd, gh := run(c)
					what := fmt.Sprintf("%s, groups of %d bytes, %d threads", name, bytes, pool.Size())
					assertBits(t, what+", MatMul", gy, y, n)
					assertBits(t, what+", MatMulAdd", gadd, add, n)
					assertBits(t, what+", SwiGLU", gh, h, n)
				}
			}
		}
	})
}

// TestEpilogues: MatMulAdd is y + (x·Wᵀ) and SwiGLU is silu(x·Gᵀ)·(x·Uᵀ),
// bit for bit, with nothing written outside the output.
func TestEpilogues(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pool := threads.New(2, false)
	defer pool.Close()
	forEachPath(t, func(t *testing.T, _ kernels.Path) {
		for _, s := range [][3]int{{1, 1, 1}, {3, 17, 9}, {9, 150, 64}, {17, 1000, 65}} {
			m, n, k := s[0], s[1], s[2]
			pr, pu := newProblem(rng, m, n, k), newProblem(rng, m, n, k)
			c := NewContext(pool, m, k)
			for name, mk := range map[string]func([]uint16, int, int) *Weight{"bf16": FromBF16, "int8": QuantizeInt8} {
				g, u := mk(pr.w, n, k), mk(pu.w, n, k)
				yg, yu := make([]float32, m*n), make([]float32, m*n)
				c.MatMul(yg, pr.x, m, g)
				c.MatMul(yu, pr.x, m, u)

				all, y := guarded(m * n)
				base := make([]float32, m*n)
				for i := range y {
					y[i] = float32(rng.NormFloat64())
					base[i] = y[i]
				}
				c.MatMulAdd(y, pr.x, m, g)
				checkGuards(t, all)
				want := make([]float32, m*n)
				for i := range want {
					want[i] = base[i] + yg[i]
				}
				assertBits(t, fmt.Sprintf("%v %s MatMulAdd", s, name), y, want, n)

				all, h := guarded(m * n)
				c.SwiGLU(h, pr.x, m, g, u)
				checkGuards(t, all)
				ops.For(kernels.Generic).SiLUMul(want, yg, yu)
				assertBits(t, fmt.Sprintf("%v %s SwiGLU", s, name), h, want, n)
			}
		}
	})
}

// TestSpecialValues: NaN, Inf and denormal inputs come out as the reference
// arithmetic of the path says: the same bits as the emulation on the bf16
// path (with overflowing products too), the same class (NaN, ±Inf, finite)
// as the generic kernels on the f32 paths. (Products that overflow are left
// out there: a fused multiply-add may keep them finite where the generic
// kernel's rounded product is already Inf.)
func TestSpecialValues(t *testing.T) {
	pool := threads.New(2, false)
	defer pool.Close()
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
		math.Float32frombits(1), math.Float32frombits(0x807fffff), 0x1p-126, -0x1p-125, 0x1.8p-126}
	overflowing := append(specials, 1e38, -1e38, 0x1p-70, 0x1p-80)
	const m, n, k = 9, 40, 70
	forEachPath(t, func(t *testing.T, p kernels.Path) {
		emu := emulation(pool, p, m, k)
		c := NewContext(pool, m, k)
		for _, bitExact := range []bool{false, true} {
			if bitExact && p != kernels.AVX512BF16 {
				continue
			}
			pr := newProblem(rand.New(rand.NewPCG(7, 8)), m, n, k)
			sp := specials
			if bitExact {
				sp = overflowing
			}
			sprinkle(rand.New(rand.NewPCG(9, 9)), pr, sp)
			for _, w := range []*Weight{FromBF16(pr.w, n, k), FromF32(pr.wf, n, k)} {
				got, want := make([]float32, m*n), make([]float32, m*n)
				c.MatMul(got, pr.x, m, w)
				emu.MatMul(want, pr.x, m, w)
				for i := range want {
					g, e := got[i], want[i]
					if bitExact && w.kind == kindBF16 {
						if !sameBits(g, e) {
							t.Fatalf("y[%d] = %g (%#x), emulation %g (%#x)", i, g, math.Float32bits(g), e, math.Float32bits(e))
						}
						continue
					}
					if (g != g) != (e != e) || (isInf32(g) || isInf32(e)) && g != e {
						t.Fatalf("kind %d: y[%d] = %g, generic %g", w.kind, i, g, e)
					}
				}
			}
		}
	})
}

// sprinkle replaces about one activation in ten and one weight in fifty by a special value.
func sprinkle(rng *rand.Rand, pr *problem, sp []float32) {
	for i := range pr.x {
		if rng.IntN(10) == 0 {
			pr.x[i] = sp[rng.IntN(len(sp))]
		}
	}
	for i := range pr.w {
		if rng.IntN(50) == 0 {
			pr.w[i] = toBF16(sp[rng.IntN(len(sp))]) | uint16(rng.IntN(2))
			pr.wf[i] = bf16ToF32(pr.w[i])
		}
	}
}

// TestInt8Error states the quantization error of the int8 path against the
// exact product and checks the kernels against the generic integer math.
func TestInt8Error(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	pool := threads.New(2, false)
	defer pool.Close()
	for _, k := range []int{1024, 2100} {
		const m, n = 16, 256
		pr := newProblem(rng, m, n, k)
		ref, _ := pr.reference()
		w := QuantizeInt8(pr.w, n, k)
		want := make([]float32, m*n)
		emulation(pool, kernels.Generic, m, k).MatMul(want, pr.x, m, w)
		forEachPath(t, func(t *testing.T, _ kernels.Path) {
			got := make([]float32, m*n)
			NewContext(pool, m, k).MatMul(got, pr.x, m, w)
			assertBits(t, "int8 vs generic", got, want, n)
			var maxErr, maxRef, sq, sqRef float64
			for i, v := range got {
				d := float64(v) - ref[i]
				maxErr, maxRef = max(maxErr, math.Abs(d)), max(maxRef, math.Abs(ref[i]))
				sq, sqRef = sq+d*d, sqRef+ref[i]*ref[i]
			}
			rel := math.Sqrt(sq / sqRef)
			t.Logf("int8 vs exact (K=%d, Gaussian x and w): max |err| %.3g of max |y| %.3g, relative RMS error %.3g",
				k, maxErr, maxRef, rel)
			if rel > 0.02 || maxErr > 0.05*maxRef {
				t.Errorf("int8 error too large: relative RMS %.3g, max %.3g of %.3g", rel, maxErr, maxRef)
			}
		})
	}
}

func TestNoAllocations(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	pool := threads.New(2, false)
	defer pool.Close()
	const m, n, k = 9, 100, 65
	pr := newProblem(rng, m, n, k)
	forEachPath(t, func(t *testing.T, _ kernels.Path) {
		c := NewContext(pool, m, k)
		y := make([]float32, m*n)
		for name, w := range pr.weights() {
			for _, rows := range []int{1, m} {
				if a := testing.AllocsPerRun(20, func() {
					c.MatMul(y, pr.x, rows, w)
					c.MatMulAdd(y, pr.x, rows, w)
					c.SwiGLU(y, pr.x, rows, w, w)
					c.Stage(pr.x, rows, w, 0, rows)
					c.MatMulStaged(y, pr.x, rows, w)
					c.Stage(pr.x, rows, w, 0, rows)
					c.SwiGLUStaged(y, pr.x, rows, w, w)
				}); a != 0 {
					t.Errorf("%s, m=%d: %.1f allocations per call", name, rows, a)
				}
			}
		}
	})
}

func TestBadArgumentsPanic(t *testing.T) {
	pool := threads.New(1, false)
	defer pool.Close()
	c := NewContext(pool, 4, 8)
	w := FromF32(make([]float32, 3*8), 3, 8)
	big := FromF32(make([]float32, 3*9), 3, 9)
	for name, f := range map[string]func(){
		"m too large":   func() { c.MatMul(make([]float32, 15), make([]float32, 40), 5, w) },
		"m zero":        func() { c.MatMul(make([]float32, 15), make([]float32, 40), 0, w) },
		"short x":       func() { c.MatMul(make([]float32, 12), make([]float32, 31), 4, w) },
		"short y":       func() { c.MatMulAdd(make([]float32, 11), make([]float32, 32), 4, w) },
		"K > maxK":      func() { c.MatMul(make([]float32, 12), make([]float32, 36), 4, big) },
		"gate/up shape": func() { c.SwiGLU(make([]float32, 12), make([]float32, 36), 1, w, big) },
		"weight length": func() { FromBF16(make([]uint16, 5), 2, 3) },
		"stage rows":    func() { c.Stage(make([]float32, 32), 4, w, 2, 5) },
		"stage short x": func() { c.Stage(make([]float32, 31), 4, w, 0, 4) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func TestToBF16(t *testing.T) {
	for _, tc := range []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1
		{0x3f808000, 0x3f80}, // tie, even stays
		{0x3f818000, 0x3f82}, // tie, odd rounds up
		{0x3f808001, 0x3f81}, // above the tie
		{0x7f7fffff, 0x7f80}, // max f32 rounds to +Inf
		{0x00000001, 0x0000}, // denormal to +0
		{0x807fffff, 0x8000}, // denormal to -0
		{0x7f800001, 0x7fc0}, // signalling NaN quieted
		{0xff800000, 0xff80}, // -Inf
	} {
		if got := toBF16(math.Float32frombits(tc.in)); got != tc.want {
			t.Errorf("toBF16(%#08x) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
}

// TestPrepSIMD: the assembly activation preparation of each ISA writes the
// same bits as the Go code, for every length and stride, special values
// included, and nothing between the strided places.
func TestPrepSIMD(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
		math.Float32frombits(1), math.Float32frombits(0x807fffff), 0x1p-126, 3.0000002, 0x1.fffffep127}
	if simdPrep == nil && avx2Prep == nil {
		t.Skip("no assembly preparation on this CPU/build")
	}
	for name, prep := range map[string]*prepFuncs{"avx512": simdPrep, "avx2": avx2Prep} {
		if prep == nil {
			t.Logf("%s: no assembly preparation on this CPU/build", name)
			continue
		}
		for _, n := range []int{1, 15, 16, 17, 31, 32, 33, 64, 1000, 1024} {
			for _, stride := range []int{1, 3, 8} {
				for _, special := range []bool{false, true} {
					x := make([]float32, n)
					for i := range x {
						x[i] = float32(rng.NormFloat64()) * 3
						if special && rng.IntN(8) == 0 {
							x[i] = specials[rng.IntN(len(specials))]
						}
					}
					steps := ceilDiv(n, 2) * stride
					got, want := make([]uint32, steps), make([]uint32, steps)
					if prep.pairs != nil {
						toBF16Pairs(got, stride, x, prep)
						toBF16Pairs(want, stride, x, nil)
						for i := range want {
							if got[i] != want[i] {
								t.Fatalf("%s bf16 pairs n=%d stride=%d: [%d] = %#08x, want %#08x", name, n, stride, i, got[i], want[i])
							}
						}
					}
					clear(got)
					clear(want)
					sg, sw := quantizeRow(got, stride, x, prep), quantizeRow(want, stride, x, nil)
					if !sameBits(sg, sw) {
						t.Fatalf("%s quantize n=%d stride=%d: scale %g, want %g", name, n, stride, sg, sw)
					}
					for i := range ceilDiv(n, 4) * stride {
						if got[i] != want[i] {
							t.Fatalf("%s quads n=%d stride=%d special=%v: [%d] = %#08x, want %#08x", name, n, stride, special, i, got[i], want[i])
						}
					}
					// f32: a NaN guard in every place the copy must not write
					gf, wf := make([]float32, n*stride), make([]float32, n*stride)
					for i := range gf {
						gf[i] = float32(math.NaN())
						wf[i] = gf[i]
					}
					toF32Strided(gf, stride, x, prep)
					toF32Strided(wf, stride, x, nil)
					for i := range wf {
						if math.Float32bits(gf[i]) != math.Float32bits(wf[i]) {
							t.Fatalf("%s f32 n=%d stride=%d: [%d] = %#08x, want %#08x", name, n, stride, i, math.Float32bits(gf[i]), math.Float32bits(wf[i]))
						}
					}
				}
			}
		}
	}
}

// TestBF16UnderflowEdges: results that are denormal only before rounding,
// or cancel to zero, match the emulation (VDPBF16PS flushes after rounding).
func TestBF16UnderflowEdges(t *testing.T) {
	pool := threads.New(1, false)
	defer pool.Close()
	forEachPath(t, func(t *testing.T, p kernels.Path) {
		if p != kernels.AVX512BF16 {
			return
		}
		for _, tc := range []struct{ x, w [2]float32 }{
			{[2]float32{0x1p-80, 0x1p-63}, [2]float32{-0x1p-80, 0x1p-63}},   // 2^-126 - 2^-160: rounds up to normal
			{[2]float32{0x1p-80, 0x1p-63}, [2]float32{0x1p-80, -0x1p-63}},   // -2^-126 + 2^-160
			{[2]float32{0x1.8p-64, 0x1p-63}, [2]float32{-0x1p-63, 0x1p-63}}, // 2^-126 - 1.5·2^-127: denormal
			{[2]float32{1, 0x1p-63}, [2]float32{-0x1p-126, 0x1p-63}},        // exact cancellation
			{[2]float32{0x1p-70, 0x1p-100}, [2]float32{0x1p-70, 0x1p-100}},  // both products far below the range
		} {
			w := FromBF16([]uint16{toBF16(tc.w[0]), toBF16(tc.w[1])}, 1, 2)
			got, want := make([]float32, 1), make([]float32, 1)
			NewContext(pool, 1, 2).MatMul(got, tc.x[:], 1, w)
			emulation(pool, p, 1, 2).MatMul(want, tc.x[:], 1, w)
			assertBits(t, fmt.Sprintf("x %v · w %v", tc.x, tc.w), got, want, 1)
		}
	})
}
