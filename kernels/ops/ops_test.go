package ops

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
)

// eachPath runs f once per kernel path this CPU can run, with the set a
// caller built under that path binds.
func eachPath(t *testing.T, f func(t *testing.T, k *Kernels)) {
	t.Helper()
	for _, p := range kernels.Available() {
		t.Run(p.String(), func(t *testing.T) { withPath(t, p, func(k *Kernels) { f(t, k) }) })
	}
}

// withPath runs f with path p forced and the set that a caller built then
// binds (For(kernels.Active()), as the model's runner does), checking that
// it is p's: a test meant to run every path must not run one path twice.
func withPath(t testing.TB, p kernels.Path, f func(k *Kernels)) {
	t.Helper()
	prev, err := kernels.Force(p)
	if err != nil {
		t.Fatal(err)
	}
	defer kernels.Force(prev)
	k := For(kernels.Active())
	if k.Path() != p {
		t.Fatalf("forced %s, bound %s", p, k.Path())
	}
	f(k)
}

func randVec(r *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * scale)
	}
	return x
}

// guarded returns a slice of n elements inside a larger one whose extra
// elements (canaries) must survive every call.
func guarded(n int) (inner, all []float32) {
	all = make([]float32, n+32)
	for i := range all {
		all[i] = 12345
	}
	return all[16 : 16+n : 16+n], all
}

func checkGuard(t *testing.T, all []float32, n int) {
	t.Helper()
	for i, v := range all {
		if (i < 16 || i >= 16+n) && v != 12345 {
			t.Fatalf("canary %d overwritten: %v", i, v)
		}
	}
}

// Exp32's documented bound against math.Exp, over every 97th f32 of
// [-87, 88] (23 million values, both signs, every binade), and its one
// clamping rule at and beyond the ends of that range.
func TestExp32Accuracy(t *testing.T) {
	const maxRel, maxULP = 8.2e-8, 1.0 // the bound Exp32's comment states
	var worst, worstULP float64
	var at float32
	for _, r := range [][2]uint32{{0, math.Float32bits(88)}, {0x80000000, math.Float32bits(-87)}} {
		for b := r[0]; b <= r[1]; b += 97 {
			x := math.Float32frombits(b)
			want, got := math.Exp(float64(x)), float64(Exp32(x))
			if e := math.Abs(got-want) / want; e > worst {
				worst, at = e, x
			}
			ulp := float64(math.Nextafter32(float32(want), float32(math.Inf(1)))) - float64(float32(want))
			worstULP = max(worstULP, math.Abs(got-want)/ulp)
		}
	}
	if worst > maxRel || worstULP > maxULP {
		t.Errorf("Exp32 relative error up to %.3g (at %v), %.2f ulp: documented bound %g, %g ulp", worst, at, worstULP, maxRel, maxULP)
	}
	t.Logf("Exp32 max relative error %.3g at %v, %.2f ulp", worst, at, worstULP)

	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	below := math.Nextafter32(-87, -inf)
	if e := Exp32(-87); !(math.Abs(float64(e)-math.Exp(-87)) <= maxRel*math.Exp(-87)) {
		t.Errorf("Exp32(-87) = %v, want e^-87 = %v", e, math.Exp(-87))
	}
	top := Exp32(88)
	for _, c := range []struct{ x, want float32 }{
		{0, 1}, {below, 0}, {-88, 0}, {-1000, 0}, {-inf, 0}, {nan, 0},
		{math.Nextafter32(88, inf), top}, {100, top}, {inf, top},
	} {
		if got := Exp32(c.x); math.Float32bits(got) != math.Float32bits(c.want) {
			t.Errorf("Exp32(%v) = %v, want %v", c.x, got, c.want)
		}
	}
}

// SiLU as SiLUMul computes it (g / (1 + Exp32(-g)), in f32) is within 4 ulp
// of g / (1 + e^-g) in f64 for g ≥ -88, on every path; below, Exp32's clamp
// makes it g / (1 + e^88), under 1e-36 in magnitude as the true value is.
func TestSiLUAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	g, one, out := make([]float32, 1<<16), make([]float32, 1<<16), make([]float32, 1<<16)
	for i := range g {
		g[i], one[i] = float32(r.NormFloat64()*8), 1
	}
	copy(g, []float32{0, -87, 87, -88.5, 88.5, 100, -100, 1e-30, -1e-30})
	eachPath(t, func(t *testing.T, k *Kernels) {
		k.SiLUMul(out, g, one)
		for i, x := range g {
			if x < -88 {
				if !(out[i] <= 0 && out[i] > -1e-36) {
					t.Fatalf("silu(%v) = %v, want a tiny negative value", x, out[i])
				}
				continue
			}
			want := float64(x) / (1 + math.Exp(-float64(x)))
			ulp := math.Abs(float64(math.Nextafter32(float32(want), float32(math.Inf(1)))) - float64(float32(want)))
			if d := math.Abs(float64(out[i]) - want); d > 4*ulp+1e-37 {
				t.Fatalf("silu(%v) = %v, want %v (%.1f ulp)", x, out[i], want, d/ulp)
			}
		}
	})
}

func TestRMSNormMatchesFloat64(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{16, 64, 128, 1024, 17, 5} {
		x, w := randVec(r, 3*n, 2), randVec(r, n, 1)
		want := make([]float64, 3*n)
		for row := range 3 {
			var ss float64
			for _, v := range x[row*n : (row+1)*n] {
				ss += float64(v) * float64(v)
			}
			s := 1 / math.Sqrt(ss/float64(n)+1e-6)
			for i := range n {
				want[row*n+i] = float64(x[row*n+i]) * s * float64(w[i])
			}
		}
		eachPath(t, func(t *testing.T, k *Kernels) {
			out, all := guarded(3 * n)
			if err := k.RMSNorm(out, x, w, 1e-6); err != nil {
				t.Fatal(err)
			}
			checkGuard(t, all, 3*n)
			for i := range out {
				if d := math.Abs(float64(out[i]) - want[i]); d > 2e-6*max(1, math.Abs(want[i])) {
					t.Fatalf("n=%d: out[%d] = %v, want %v", n, i, out[i], want[i])
				}
			}
			inPlace := slices.Clone(x)
			if err := k.RMSNorm(inPlace, inPlace, w, 1e-6); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(inPlace, out) {
				t.Errorf("n=%d: in-place result differs", n)
			}
		})
	}
}

func TestNormShapeErrors(t *testing.T) {
	k := For(kernels.Generic)
	w := make([]float32, 4)
	for _, c := range []struct {
		name   string
		out, x []float32
	}{
		{"ragged", make([]float32, 6), make([]float32, 6)},
		{"short out", make([]float32, 4), make([]float32, 8)},
	} {
		if err := k.RMSNorm(c.out, c.x, w, 1e-6); err == nil {
			t.Errorf("%s: RMSNorm accepted", c.name)
		}
		if err := k.AddRMSNorm(c.out, slices.Clone(c.x), c.x, w, 1e-6); err == nil {
			t.Errorf("%s: AddRMSNorm accepted", c.name)
		}
	}
	if err := k.AddRMSNorm(make([]float32, 8), make([]float32, 4), make([]float32, 8), w, 1e-6); err == nil {
		t.Error("AddRMSNorm accepted a short residual")
	}
}

// Every path's bound set must equal the Go code bit for bit (the package
// promise), on lengths that exercise every tail (below, at and around the 8-
// and 16-element blocks) and in place where a function allows it. Each
// path's set is the one a caller built under the forced path binds.
func TestPathsBitIdentical(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	ropes := map[int]*Rope{}
	for _, hd := range []int{2, 8, 16, 24, 32, 48, 64} { // rotateBy 8 and 16, and neither
		rope, err := NewRope(hd, 64, 1e6, nil)
		if err != nil {
			t.Fatal(err)
		}
		ropes[hd] = rope
	}
	type result struct {
		norm, head, add, res, rot, silu, siluIn, soft, exp, wide, embed, div []float32
		narrow                                                               []uint16
		arg                                                                  int
		max                                                                  float32
	}
	for _, n := range []int{1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 100, 127, 128, 129, 1000, 4099} {
		x, y, w := randVec(r, 4*n, 3), randVec(r, 4*n, 3), randVec(r, n, 1)
		bits := make([]uint16, 4*n)
		for i := range bits {
			bits[i] = uint16(r.Uint32())
		}
		ids := []int32{3, 0, 2, 2}
		pos := make([]int32, 4*n)
		for i := range pos {
			pos[i] = int32(r.IntN(64)) // the same positions on every path
		}
		var ref result
		for _, p := range kernels.Available() {
			var got result
			withPath(t, p, func(k *Kernels) {
				got.norm = make([]float32, 4*n)
				if err := k.RMSNorm(got.norm, x, w, 1e-6); err != nil {
					t.Fatal(err)
				}
				got.head = slices.Clone(y)
				if err := k.HeadRMSNorm(got.head, w, 1e-6); err != nil {
					t.Fatal(err)
				}
				got.res = slices.Clone(x)
				got.add = make([]float32, 4*n)
				if err := k.AddRMSNorm(got.add, got.res, y, w, 1e-6); err != nil {
					t.Fatal(err)
				}
				got.rot = nil
				for _, hd := range []int{2, 8, 16, 24, 32, 48, 64} {
					if 4*n%hd != 0 {
						continue
					}
					rot := slices.Clone(x)
					heads := min(3, 4*n/hd)
					for heads > 1 && 4*n%(heads*hd) != 0 {
						heads--
					}
					if err := k.ApplyRope(ropes[hd], rot, heads, pos[:4*n/(heads*hd)]); err != nil {
						t.Fatal(err)
					}
					got.rot = append(got.rot, rot...)
				}
				got.silu = make([]float32, 4*n)
				k.SiLUMul(got.silu, x, y)
				got.siluIn = slices.Clone(x)
				k.SiLUMul(got.siluIn, got.siluIn, y)
				if !bitsEqual(got.siluIn, got.silu) {
					t.Errorf("%s n=%d: SiLUMul in place differs", p, n)
				}
				got.div = make([]float32, 4*n)
				k.Divide(got.div, x, 3.7)
				divIn := slices.Clone(x)
				k.Divide(divIn, divIn, 3.7)
				if !bitsEqual(divIn, got.div) {
					t.Errorf("%s n=%d: Divide in place differs", p, n)
				}
				got.soft = slices.Clone(x)
				k.Softmax(got.soft)
				got.exp = make([]float32, 4*n)
				got.exp = append(got.exp, k.ExpSum(got.exp, x, 2))
				got.wide = make([]float32, 4*n)
				k.ToF32(got.wide, bits)
				got.narrow = make([]uint16, 4*n)
				k.ToBF16(got.narrow, x)
				got.embed = make([]float32, len(ids)*n)
				if err := k.Embed(got.embed, bits, n, ids); err != nil {
					t.Fatal(err)
				}
				got.arg = k.Argmax(x)
				got.max = k.Max(x)
			})
			if p == kernels.Generic {
				ref = got
				continue
			}
			for name, pair := range map[string][2][]float32{
				"rmsnorm": {ref.norm, got.norm}, "head-rmsnorm": {ref.head, got.head}, "add-rmsnorm": {ref.add, got.add},
				"residual": {ref.res, got.res}, "rope": {ref.rot, got.rot}, "silu-mul": {ref.silu, got.silu},
				"softmax": {ref.soft, got.soft}, "expsum": {ref.exp, got.exp}, "to-f32": {ref.wide, got.wide},
				"embed": {ref.embed, got.embed}, "divide": {ref.div, got.div},
			} {
				if !bitsEqual(pair[0], pair[1]) {
					t.Errorf("%s n=%d: %s differs from generic", p, n, name)
				}
			}
			if !slices.Equal(ref.narrow, got.narrow) {
				t.Errorf("%s n=%d: to-bf16 differs from generic", p, n)
			}
			if ref.arg != got.arg {
				t.Errorf("%s n=%d: argmax %d, generic %d", p, n, got.arg, ref.arg)
			}
			if math.Float32bits(ref.max) != math.Float32bits(got.max) {
				t.Errorf("%s n=%d: max %g, generic %g", p, n, got.max, ref.max)
			}
		}
	}
}

// The bound functions allocate nothing on any path: they run per token.
func TestKernelsDoNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 11))
	const n = 4 * 128
	x, y, w, out := randVec(r, n, 1), randVec(r, n, 1), randVec(r, 128, 1), make([]float32, n)
	bits := make([]uint16, n)
	rope, err := NewRope(128, 8, 1e6, nil)
	if err != nil {
		t.Fatal(err)
	}
	pos := []int32{1, 2, 3, 4}
	eachPath(t, func(t *testing.T, k *Kernels) {
		for name, f := range map[string]func(){
			"rmsnorm":     func() { k.RMSNorm(out, x, w, 1e-6) },
			"add-rmsnorm": func() { k.AddRMSNorm(out, y, x, w, 1e-6) },
			"rope":        func() { k.ApplyRope(rope, out, 1, pos) },
			"silu-mul":    func() { k.SiLUMul(out, x, y) },
			"divide":      func() { k.Divide(out, x, 3) },
			"softmax":     func() { copy(out, x); k.Softmax(out) },
			"expsum":      func() { k.ExpSum(out, x, 1) },
			"to-bf16":     func() { k.ToBF16(bits, x) },
			"to-f32":      func() { k.ToF32(out, bits) },
			"embed":       func() { k.Embed(out[:128], bits, 128, pos[:1]) },
			"argmax":      func() { k.Argmax(x) },
			"max":         func() { k.Max(x) },
		} {
			if a := testing.AllocsPerRun(10, f); a != 0 {
				t.Errorf("%s allocates %.1f times per call", name, a)
			}
		}
	})
}

func bitsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func TestBF16(t *testing.T) {
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{1, 0x3f80},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie, even stays
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie, odd rounds up
		{math.Float32frombits(0x3f808001), 0x3f81},
		{math.Float32frombits(0x7f7fffff), 0x7f80}, // rounds to +inf
		{float32(math.Inf(-1)), 0xff80},
		{math.Float32frombits(0x7f800001), 0x7fc0}, // signalling NaN made quiet
		{math.Float32frombits(0xffc00000), 0xffc0},
		{math.Float32frombits(0x00008000), 0x0000}, // subnormal tie to even
	} {
		if got := F32ToBF16(c.f); got != c.want {
			t.Errorf("F32ToBF16(%#08x) = %#04x, want %#04x", math.Float32bits(c.f), got, c.want)
		}
	}
	// every bf16 value survives widening and rounding back (NaNs quieted)
	all := make([]uint16, 1<<16)
	for i := range all {
		all[i] = uint16(i)
	}
	eachPath(t, func(t *testing.T, k *Kernels) {
		wide := make([]float32, len(all))
		k.ToF32(wide, all)
		back := make([]uint16, len(all))
		k.ToBF16(back, wide)
		for i, h := range back {
			want := uint16(i)
			if i&0x7fff > 0x7f80 {
				want |= 0x40
			}
			if h != want || math.Float32bits(wide[i]) != uint32(i)<<16 {
				t.Fatalf("bf16 %#04x: widened %#08x, back %#04x", i, math.Float32bits(wide[i]), h)
			}
		}
	})
}

func TestEmbed(t *testing.T) {
	k := For(kernels.Active())
	table := []uint16{0x3f80, 0x4000, 0x4040, 0x4080, 0xbf80, 0}
	out := make([]float32, 6)
	if err := k.Embed(out, table, 2, []int32{2, 0, 1}); err != nil {
		t.Fatal(err)
	}
	if want := []float32{-1, 0, 1, 2, 3, 4}; !slices.Equal(out, want) {
		t.Errorf("Embed = %v, want %v", out, want)
	}
	if err := k.Embed(out[:2], table, 2, []int32{3}); err == nil {
		t.Error("Embed accepted id 3 of a 3-row table")
	}
}

func TestTopK(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for trial := range 200 {
		n := 1 + r.IntN(130)
		k := 1 + r.IntN(min(n, 9))
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.IntN(12)) // many ties
		}
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return x[order[a]] > x[order[b]] })
		idx, vals := make([]int32, k), make([]float32, k)
		TopK(idx, vals, x)
		for j := range k {
			if int(idx[j]) != order[j] || vals[j] != x[order[j]] {
				t.Fatalf("trial %d: TopK(%v, k=%d) = %v %v, want indices %v", trial, x, k, idx, vals, order[:k])
			}
		}
	}
}

func TestArgmax(t *testing.T) {
	nan := float32(math.NaN())
	for _, c := range []struct {
		x    []float32
		want int
	}{
		{nil, -1},
		{[]float32{3}, 0},
		{[]float32{1, 5, 5, 2}, 1},
		{[]float32{nan, -1, 2, 2}, 2},
		{[]float32{float32(math.Inf(-1)), float32(math.Inf(-1))}, 0},
	} {
		eachPath(t, func(t *testing.T, k *Kernels) {
			if got := k.Argmax(c.x); got != c.want {
				t.Errorf("k.Argmax(%v) = %d, want %d", c.x, got, c.want)
			}
		})
	}
	// ties at every offset of a long vector, for the SIMD paths' blocks
	for _, n := range []int{33, 151936} {
		x := make([]float32, n)
		for _, at := range []int{0, 15, 16, n / 2, n - 1} {
			x[at] = 7
			if at+5 < n {
				x[at+5] = 7
			}
			eachPath(t, func(t *testing.T, k *Kernels) {
				if got := k.Argmax(x); got != at {
					t.Errorf("n=%d: Argmax = %d, want %d", n, got, at)
				}
			})
			x[at] = 0
			if at+5 < n {
				x[at+5] = 0
			}
		}
	}
}

// Max skips NaNs on every path, in the SIMD blocks and the tail alike.
func TestMax(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	long := make([]float32, 37)
	for i := range long {
		long[i] = nan
	}
	long[20] = -2
	for _, c := range []struct {
		x    []float32
		want float32
	}{
		{nil, -inf},
		{[]float32{nan}, -inf},
		{[]float32{1, 5, nan, 2}, 5},
		{[]float32{-inf, -inf}, -inf},
		{[]float32{3, inf}, inf},
		{long, -2},
	} {
		eachPath(t, func(t *testing.T, k *Kernels) {
			if got := k.Max(c.x); got != c.want {
				t.Errorf("k.Max(%v) = %g, want %g", c.x, got, c.want)
			}
		})
	}
}

func TestSoftmax(t *testing.T) {
	eachPath(t, func(t *testing.T, k *Kernels) {
		x := []float32{1, 2, 3, -1000}
		k.Softmax(x)
		e := []float64{math.Exp(-2), math.Exp(-1), 1, 0}
		s := e[0] + e[1] + e[2]
		for i := range x {
			if math.Abs(float64(x[i])-e[i]/s) > 1e-7 {
				t.Errorf("softmax[%d] = %v, want %v", i, x[i], e[i]/s)
			}
		}
	})
}

// Bit patterns of every kind (ties, subnormals, NaNs, infinities, huge and
// tiny values) through the conversions and the exponential-based kernels.
func TestPathsBitIdenticalOnRawBits(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	const n = 4099
	x, up := make([]float32, n), make([]float32, n)
	for i := range x {
		b := r.Uint32()
		switch i % 4 {
		case 1:
			b = b&0xffff0000 | 0x8000 // exact tie
		case 2:
			b &= 0x807fffff // subnormal
		}
		x[i] = math.Float32frombits(b)
		up[i] = float32(r.NormFloat64())
	}
	finite := slices.Clone(x)
	for i, v := range finite {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			finite[i] = 0
		}
	}
	gate := slices.Clone(finite)
	for i := range gate {
		gate[i] = float32(math.Mod(float64(gate[i]), 120)) // across exp's whole range
	}
	gate[7], gate[100] = float32(math.NaN()), float32(math.Inf(-1))
	var refB []uint16
	var refS, refE, refD []float32
	for _, p := range kernels.Available() {
		withPath(t, p, func(k *Kernels) {
			b := make([]uint16, n)
			k.ToBF16(b, x)
			s := make([]float32, n)
			k.SiLUMul(s, gate, up)
			e := make([]float32, n)
			sum := k.ExpSum(e, gate, 10)
			e = append(e, sum)
			d := make([]float32, 2*n)
			k.Divide(d[:n], x, 0.3)  // subnormal results round, NaNs stay NaNs
			k.Divide(d[n:], x, 3e37) // most results underflow
			if p == kernels.Generic {
				refB, refS, refE, refD = b, s, e, d
				return
			}
			for i := range d {
				if math.Float32bits(d[i]) != math.Float32bits(refD[i]) {
					t.Fatalf("%s: Divide element %d = %v, generic %v", p, i, d[i], refD[i])
				}
			}
			for i := range b {
				if b[i] != refB[i] {
					t.Fatalf("%s: ToBF16(%#08x) = %#04x, generic %#04x", p, math.Float32bits(x[i]), b[i], refB[i])
				}
			}
			for i := range s {
				if math.Float32bits(s[i]) != math.Float32bits(refS[i]) {
					t.Fatalf("%s: silu(%v)·%v = %v, generic %v", p, gate[i], up[i], s[i], refS[i])
				}
			}
			for i := range e {
				if math.Float32bits(e[i]) != math.Float32bits(refE[i]) {
					t.Fatalf("%s: ExpSum element %d (of %d, e^(%v−10)) = %v, generic %v", p, i, n, gate[min(i, n-1)], e[i], refE[i])
				}
			}
		})
	}
}

// YaRN as transformers computes it, checked on its defining properties:
// dimensions rotating fast enough keep their frequency, slow ones are divided
// by the factor, the ramp in between is monotone, and cos/sin carry the
// attention factor 0.1·ln(factor)+1.
func TestYaRN(t *testing.T) {
	const dim, theta = 128, 1e6
	y := &YaRN{Factor: 4, OriginalMaxPositionEmbeddings: 32768}
	plain, _, err := invFreq(dim, theta, nil)
	if err != nil {
		t.Fatal(err)
	}
	scaled, attn, err := invFreq(dim, theta, y)
	if err != nil {
		t.Fatal(err)
	}
	if want := float32(0.1*math.Log(4) + 1); attn != want {
		t.Errorf("attention factor %v, want %v", attn, want)
	}
	// correction range of HF's find_correction_range for these numbers
	corr := func(rot float64) float64 {
		return dim * math.Log(32768/(rot*2*math.Pi)) / (2 * math.Log(theta))
	}
	low, high := int(math.Floor(corr(32))), int(math.Ceil(corr(1)))
	for i := range dim / 2 {
		ratio := float64(scaled[i]) / float64(plain[i])
		switch {
		case i <= low && ratio != 1:
			t.Errorf("dim %d (< %d): scaled/plain = %v, want 1", i, low, ratio)
		case i >= high && math.Abs(ratio-0.25) > 1e-6:
			t.Errorf("dim %d (> %d): scaled/plain = %v, want 1/4", i, high, ratio)
		case i > 0 && scaled[i] > scaled[i-1]:
			t.Errorf("dim %d: frequency rises", i)
		}
	}
	r, err := NewRope(dim, 8, theta, y)
	if err != nil {
		t.Fatal(err)
	}
	if r.tab[0] != attn || r.tab[dim/2] != 0 {
		t.Errorf("position 0: cos %v sin %v, want %v and 0", r.tab[0], r.tab[dim/2], attn)
	}
	for _, bad := range []*YaRN{{Factor: 1, OriginalMaxPositionEmbeddings: 4096}, {Factor: 4}} {
		if _, err := NewRope(dim, 8, theta, bad); err == nil {
			t.Errorf("NewRope accepted %+v", *bad)
		}
	}
	if _, err := NewRope(7, 8, theta, nil); err == nil {
		t.Error("NewRope accepted an odd head_dim")
	}
}
