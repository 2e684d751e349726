package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// screenCase is a weight and activations drawn to stress one term of the
// screen's bound.
type screenCase struct {
	name string
	w    func(rng *rand.Rand) float32
	x    func(rng *rand.Rand) float32
}

var screenCases = []screenCase{
	{"gaussian", func(rng *rand.Rand) float32 { return float32(rng.NormFloat64() * 0.05) },
		func(rng *rand.Rand) float32 { return float32(rng.NormFloat64()) }},
	{"outlier weights", func(rng *rand.Rand) float32 {
		if rng.IntN(300) == 0 {
			return float32(rng.NormFloat64() * 1e4)
		}
		return float32(rng.NormFloat64() * 0.05)
	}, func(rng *rand.Rand) float32 { return float32(rng.NormFloat64()) }},
	{"activations spanning 40 decades", func(rng *rand.Rand) float32 { return float32(rng.Float64()*2 - 1) },
		func(rng *rand.Rand) float32 {
			if rng.IntN(10) == 0 {
				return 0
			}
			return float32(rng.NormFloat64() * math.Pow(10, rng.Float64()*40-30))
		}},
	{"subnormal range", func(rng *rand.Rand) float32 { return float32(rng.NormFloat64() * 1e-38) },
		func(rng *rand.Rand) float32 { return float32(rng.NormFloat64() * 1e-3) }},
	{"massive activations", func(rng *rand.Rand) float32 { return float32(rng.NormFloat64() * 0.02) },
		func(rng *rand.Rand) float32 {
			if rng.IntN(200) == 0 {
				return float32(rng.NormFloat64() * 3e3)
			}
			return float32(rng.NormFloat64())
		}},
}

// Every output MatMul computes with a bf16 weight (its pairs, and their
// coded copy where the path has tiles) lies in the interval the screen gives
// it, on every path, for weights and activations that stress each term of
// the bound, zero rows and zero activations included.
func TestScreenIntervalsHold(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	pool := threads.New(2, false)
	defer pool.Close()
	forEachPath(t, func(t *testing.T, _ kernels.Path) {
		for _, sh := range [][2]int{{37, 1}, {150, 70}, {64, 1024}, {33, 3001}} {
			n, k := sh[0], sh[1]
			for _, sc := range screenCases {
				w := make([]uint16, n*k)
				for i := range w {
					w[i] = toBF16(sc.w(rng))
				}
				clear(w[k : 2*k]) // a zero row
				weights := map[string]*Weight{"pairs": FromBF16(w, n, k)}
				if coded := FromBF16(w, n, k); coded.Code() > 0 {
					weights["coded"] = coded
				}
				screen := weights["pairs"].Screen()
				if screen == nil {
					t.Fatalf("%s: no screen for a finite weight", sc.name)
				}
				for _, m := range []int{1, 3} {
					x := make([]float32, m*k)
					for i := range x {
						x[i] = sc.x(rng)
					}
					if m > 1 {
						clear(x[k : 2*k]) // a zero row
					}
					c := NewContext(pool, 2*m, k)
					for name, wt := range weights {
						split, ends := make([]float32, 2*m*k), make([]float32, 2*m*n)
						for i := range m {
							screen.Split(split[2*i*k:], x[i*k:(i+1)*k], c.RoundsActivations(m, wt))
						}
						c.MatMul(ends, split, 2*m, screen.Weight())
						y := make([]float32, m*n)
						c.MatMul(y, x, m, wt)
						for i := range m {
							lo, hi := ends[2*i*n:(2*i+1)*n], ends[(2*i+1)*n:(2*i+2)*n]
							// In two pieces, as the runner's workers do.
							if !screen.Interval(lo, hi, split[2*i*k:], n/3, n) || !screen.Interval(lo, hi, split[2*i*k:], 0, n/3) {
								t.Fatalf("%s: Interval refused finite activations", sc.name)
							}
							for j, v := range y[i*n : (i+1)*n] {
								if !(lo[j] <= v && v <= hi[j]) {
									t.Fatalf("%s, %s, %d×%d, m = %d: row %d output %d = %g outside [%g, %g]",
										sc.name, name, n, k, m, i, j, v, lo[j], hi[j])
								}
							}
						}
					}
				}
			}
		}
	})
}

// The screen is only worth its bytes if its intervals are narrow against
// the spread of the outputs: for Gaussian weights and activations (the
// bound's worst case, a row's largest weight far out in the tail) the
// median width stays under 0.6 of the outputs' standard deviation, so a
// top-20 of 150k outputs (the last near 3.9 deviations) leaves under a
// hundred candidates.
func TestScreenIntervalsAreNarrow(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	const n, k = 2048, 1024
	w := make([]uint16, n*k)
	for i := range w {
		w[i] = toBF16(float32(rng.NormFloat64() * 0.05))
	}
	x := make([]float32, k)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	pool := threads.New(2, false)
	defer pool.Close()
	c := NewContext(pool, 2, k)
	wt := FromBF16(w, n, k)
	screen := wt.Screen()
	y := make([]float32, n)
	c.MatMul(y, x, 1, wt)
	split, approx := make([]float32, 2*k), make([]float32, 2*n)
	screen.Split(split, x, c.RoundsActivations(1, wt))
	c.MatMul(approx, split, 2, screen.Weight())
	screen.Interval(approx[:n], approx[n:], split, 0, n)
	var sum, sq float64
	widths := make([]float64, n)
	for j, v := range y {
		sum += float64(v)
		sq += float64(v) * float64(v)
		widths[j] = float64(approx[n+j] - approx[j])
	}
	sd := math.Sqrt(sq/n - (sum/n)*(sum/n))
	slices.Sort(widths)
	t.Logf("median interval width %.3g deviations", widths[n/2]/sd)
	if med := widths[n/2]; !(med < 0.6*sd) {
		t.Errorf("median interval width %.3g against a standard deviation of %.3g: the screen would keep too many", med, sd)
	}
}

func TestScreenRefusesWhatCannotBeBounded(t *testing.T) {
	const n, k = 20, 40
	w := make([]uint16, n*k)
	for i := range w {
		w[i] = toBF16(float32(i%7) - 3)
	}
	for _, bad := range []float32{float32(math.Inf(1)), float32(math.NaN())} {
		w2 := slices.Clone(w)
		w2[5*k+3] = toBF16(bad)
		if FromBF16(w2, n, k).Screen() != nil {
			t.Errorf("a weight holding %v got a screen", bad)
		}
	}
	if QuantizeInt8(w, n, k).Screen() != nil || FromF32(make([]float32, n*k), n, k).Screen() != nil {
		t.Error("a weight that is not bf16 got a screen")
	}
	s := FromBF16(w, n, k).Screen()
	for _, bad := range []float32{float32(math.Inf(-1)), float32(math.NaN())} {
		x := make([]float32, k)
		x[7] = bad
		split := make([]float32, 2*k)
		s.Split(split, x, false)
		y0, y1 := make([]float32, n), make([]float32, n)
		y0[0], y1[0] = 1, 2
		if s.Interval(y0, y1, split, 0, n) || y0[0] != 1 || y1[0] != 2 {
			t.Errorf("activations holding %v: Interval reported true or changed its outputs", bad)
		}
	}
}

// TestIntervalEndsSIMD: the assembly ends of each ISA are the Go loop's bits
// for every length, with outputs that overflow, NaNs, infinities, signed
// zeros and subnormals among them.
func TestIntervalEndsSIMD(t *testing.T) {
	if endsAVX512 == nil && endsAVX2 == nil {
		t.Skip("no assembly interval ends on this CPU/build")
	}
	rng := rand.New(rand.NewPCG(15, 16))
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
		math.Float32frombits(1), 0x1p-126, 0x1.fffffep127, -0x1.fffffep127, 3e38}
	draw := func(scale float64) float32 {
		if rng.IntN(6) == 0 {
			return specials[rng.IntN(len(specials))]
		}
		return float32(rng.NormFloat64() * scale)
	}
	for name, simd := range map[string]endsFunc{"avx512": endsAVX512, "avx2": endsAVX2} {
		if simd == nil {
			t.Logf("%s: no assembly interval ends on this CPU/build", name)
			continue
		}
		for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 33, 64, 1000} {
			lo, hi, a, b := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
			for i := range n {
				lo[i], hi[i] = draw(10), draw(0.1)
				a[i], b[i] = float32(math.Abs(rng.NormFloat64()*1e-3)), float32(math.Abs(rng.NormFloat64()*1e-2))
				if rng.IntN(10) == 0 {
					a[i], b[i] = 0x1.fffffep127, 0 // products that overflow, and a zero
				}
			}
			n1, n2, floor := float32(rng.Float64()*50), float32(rng.Float64()*3), float32(1e-30)
			gotLo, gotHi, wantLo, wantHi := slices.Clone(lo), slices.Clone(hi), slices.Clone(lo), slices.Clone(hi)
			intervalEnds(gotLo, gotHi, a, b, n1, n2, floor, simd)
			intervalEnds(wantLo, wantHi, a, b, n1, n2, floor, nil)
			for i := range n {
				if math.Float32bits(gotLo[i]) != math.Float32bits(wantLo[i]) || math.Float32bits(gotHi[i]) != math.Float32bits(wantHi[i]) {
					t.Fatalf("%s n=%d: [%d] from (%g, %g) gave [%g, %g], want [%g, %g]", name, n, i, lo[i], hi[i], gotLo[i], gotHi[i], wantLo[i], wantHi[i])
				}
			}
		}
	}
}

func ExampleScreen() {
	// A 4×2 weight, one row of activations.
	w := []uint16{toBF16(1), toBF16(0), toBF16(0), toBF16(2), toBF16(-1), toBF16(1), toBF16(0.5), toBF16(0.25)}
	x := []float32{3, -1}
	wt := FromBF16(w, 4, 2)
	screen := wt.Screen()
	pool := threads.New(1, false)
	defer pool.Close()
	c := NewContext(pool, 2, 2)
	split, ends := make([]float32, 4), make([]float32, 8)
	screen.Split(split, x, c.RoundsActivations(1, wt))
	c.MatMul(ends, split, 2, screen.Weight())
	screen.Interval(ends[:4], ends[4:], split, 0, 4)
	y := make([]float32, 4)
	c.MatMul(y, x, 1, wt)
	for j := range y {
		fmt.Println(ends[j] <= y[j] && y[j] <= ends[4+j], y[j])
	}
	// Output:
	// true 3
	// true -2
	// true -4
	// true 1.25
}
