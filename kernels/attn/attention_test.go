package attn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// eachPath runs f once per kernel path this CPU can run and attention mode,
// with that path forced.
func eachPath(t *testing.T, f func(t *testing.T, p kernels.Path, m Mode)) {
	t.Helper()
	for _, p := range kernels.Available() {
		for _, m := range []Mode{ModeF32, ModeBF16} {
			t.Run(p.String()+"/"+m.String(), func(t *testing.T) {
				prev, err := kernels.Force(p)
				if err != nil {
					t.Fatal(err)
				}
				defer kernels.Force(prev)
				f(t, p, m)
			})
		}
	}
}

// shape is one attention configuration under test.
type shape struct {
	qHeads, kvHeads, headDim int
	dt                       DType
}

func (s shape) String() string {
	return fmt.Sprintf("q%d-kv%d-d%d-%s", s.qHeads, s.kvHeads, s.headDim, s.dt)
}

// fixture is a cache with random K/V for positions [0, seqLen) of every slot
// and random queries for every (slot, position).
type fixture struct {
	shape
	c *Cache
	q [][]float32 // per slot: [seqLen, qHeads, headDim]
}

func newFixture(s shape, slots, seqLen int, seed uint64) *fixture {
	r := rand.New(rand.NewPCG(seed, 7))
	f := &fixture{shape: s, c: NewCache(slots, s.kvHeads, seqLen, s.headDim, s.dt)}
	w := s.kvHeads * s.headDim
	for slot := range slots {
		k, v := make([]float32, seqLen*w), make([]float32, seqLen*w)
		for i := range k {
			k[i], v[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		f.c.StoreRun(slot, 0, seqLen, k, v)
		q := make([]float32, seqLen*s.qHeads*s.headDim)
		for i := range q {
			q[i] = float32(r.NormFloat64() * 1.5)
		}
		f.q = append(f.q, q)
	}
	return f
}

// run computes attention for seqs (their Row fields are assigned here, in
// order) and returns each sequence's output rows.
func (f *fixture) run(a *Attention, seqs []Seq) [][]float32 {
	w := f.qHeads * f.headDim
	rows := 0
	for i := range seqs {
		seqs[i].Row = rows
		rows += seqs[i].N
	}
	q, out := make([]float32, rows*w), make([]float32, rows*w)
	for _, s := range seqs {
		copy(q[s.Row*w:], f.q[s.Slot][s.Start*w:(s.Start+s.N)*w])
	}
	a.Forward(out, q, f.c, seqs)
	res := make([][]float32, len(seqs))
	for i, s := range seqs {
		res[i] = out[s.Row*w : (s.Row+s.N)*w]
	}
	return res
}

// reference is attention in float64 over the cache's stored (rounded) K/V
// for the query of slot at position p, head h; with bf16q the query is
// q·scale in f32, as ModeBF16 folds it (its high and low bf16 parts sum
// to that within 2⁻¹⁷).
func (f *fixture) reference(slot, p, h int, bf16q bool) []float64 {
	hd, g := f.headDim, f.qHeads/f.kvHeads
	q := f.q[slot][(p*f.qHeads+h)*hd : (p*f.qHeads+h+1)*hd]
	qscale := 1 / math.Sqrt(float64(hd))
	if bf16q {
		scale := float32(qscale)
		q = slices.Clone(q)
		for d := range q {
			q[d] *= scale
		}
		qscale = 1
	}
	kv := func(s []uint16, s32 []float32, s8 []int8, scale []float32, i int) float64 {
		switch {
		case s != nil:
			return float64(math.Float32frombits(uint32(s[i]) << 16))
		case s8 != nil:
			return float64(s8[i]) * float64(scale[i/hd])
		}
		return float64(s32[i])
	}
	scores := make([]float64, p+1)
	m := math.Inf(-1)
	for t := range scores {
		o := f.c.off(slot, h/g, t)
		var dot float64
		for d := range hd {
			dot += float64(q[d]) * kv(f.c.K16, f.c.K32, f.c.K8, f.c.KS, o+d)
		}
		scores[t] = dot * qscale
		m = max(m, scores[t])
	}
	out := make([]float64, hd)
	var sum float64
	for t, s := range scores {
		e := math.Exp(s - m)
		sum += e
		o := f.c.off(slot, h/g, t)
		for d := range hd {
			out[d] += e * kv(f.c.V16, f.c.V32, f.c.V8, f.c.VS, o+d)
		}
	}
	for d := range out {
		out[d] /= sum
	}
	return out
}

func newAttention(t testing.TB, pool *threads.Pool, maxRows int, s shape, m Mode) *Attention {
	t.Helper()
	a, err := NewMode(pool, maxRows, s.qHeads, s.kvHeads, s.headDim, m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestMatchesFloat64Reference(t *testing.T) {
	pool := threads.New(2, false)
	defer pool.Close()
	shapes := []shape{{4, 4, 16, F32}, {8, 4, 64, BF16}, {16, 4, 128, BF16}, {8, 1, 128, F32}, {4, 2, 24, BF16},
		{16, 8, 128, Int8}, {8, 2, 64, Int8}, {4, 2, 24, Int8}}
	for _, s := range shapes {
		for _, T := range []int{1, 7, 63, 65, 300} {
			t.Run(fmt.Sprintf("%v/T%d", s, T), func(t *testing.T) {
				f := newFixture(s, 1, T, uint64(T))
				var want [2][]float64 // q as is, q·scale rounded to bf16
				for i := range want {
					for p := range T {
						for h := range s.qHeads {
							want[i] = append(want[i], f.reference(0, p, h, i == 1)...)
						}
					}
				}
				eachPath(t, func(t *testing.T, _ kernels.Path, m Mode) {
					a := newAttention(t, pool, T, s, m)
					got := f.run(a, []Seq{{Slot: 0, Start: 0, N: T}})[0]
					// ModeBF16 differs from the reference with the same
					// scaled query by the probabilities' bf16 rounding:
					// ≤ 2⁻⁸ relative per weight, of outputs |v| ≲ 4.
					ref, tol := want[0], 5e-6
					if a.Mode() == ModeBF16 && s.dt == BF16 {
						ref, tol = want[1], 4*0x1p-8
					}
					var worst float64
					for i, w := range ref {
						worst = max(worst, math.Abs(float64(got[i])-w))
					}
					if worst > tol {
						t.Errorf("%v: max-abs error %.3g vs float64 reference", a.Mode(), worst)
					}
				})
			})
		}
	}
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

// The numeric contract: a row's output does not depend on how the rows of
// its sequence are chunked, on decode vs prefill, or on other sequences.
func TestRowInvariance(t *testing.T) {
	pool := threads.New(2, false)
	defer pool.Close()
	const T = 200
	for _, s := range []shape{{16, 8, 128, BF16}, {8, 2, 64, F32}, {4, 4, 16, BF16}, {8, 2, 144, BF16}, {16, 2, 64, BF16},
		{16, 8, 128, Int8}, {8, 2, 64, Int8}, {32, 4, 16, Int8}, {4, 2, 24, Int8}} {
		f := newFixture(s, 3, T, 11)
		w := s.qHeads * s.headDim
		eachPath(t, func(t *testing.T, _ kernels.Path, m Mode) {
			a := newAttention(t, pool, 3*T, s, m)
			full := f.run(a, []Seq{{Slot: 0, Start: 0, N: T}})[0]
			same := func(what string, start int, got []float32) {
				t.Helper()
				if !bitsEqual(got, full[start*w:start*w+len(got)]) {
					t.Errorf("%v: %s: rows from position %d differ from the full prefill", s, what, start)
				}
			}
			c1 := f.run(a, []Seq{{Slot: 0, Start: 0, N: 130}})[0]
			c2 := f.run(a, []Seq{{Slot: 0, Start: 130, N: 70}})[0]
			same("chunk 0..130", 0, c1)
			same("chunk 130..200", 130, c2)
			same("prefill 50", 0, f.run(a, []Seq{{Slot: 0, Start: 0, N: 50}})[0])
			for p := 50; p < T; p++ {
				same("decode", p, f.run(a, []Seq{{Slot: 0, Start: p, N: 1}})[0])
			}
			// slots 1 and 2 alone, then all three in one call in mixed roles
			alone1 := f.run(a, []Seq{{Slot: 1, Start: 0, N: T}})[0]
			alone2 := f.run(a, []Seq{{Slot: 2, Start: 100, N: 1}})[0]
			batch := f.run(a, []Seq{{Slot: 2, Start: 100, N: 1}, {Slot: 0, Start: 0, N: T}, {Slot: 1, Start: 0, N: T}})
			if !bitsEqual(batch[0], alone2) || !bitsEqual(batch[1], full) || !bitsEqual(batch[2], alone1) {
				t.Errorf("%v: a batch of 3 sequences differs from each alone", s)
			}
		})
	}
}

// SIMD paths against the generic one on awkward sizes: the same result
// within f32 rounding (they accumulate in another order); and the SIMD paths
// against each other bit for bit (they share one arithmetic).
func TestPathsAgree(t *testing.T) {
	pool := threads.New(2, false)
	defer pool.Close()
	for _, hd := range []int{16, 64, 128, 24} {
		for _, ratio := range []int{1, 2, 4, 8} {
			dt := DType(ratio % 3)
			if hd == 64 || hd == 128 {
				dt = BF16 // both modes, every group size
			}
			s := shape{ratio * 2, 2, hd, dt}
			f := newFixture(s, 1, 300, uint64(hd*ratio))
			refs, simds := map[Mode][][]float32{}, map[Mode][][]float32{} // per mode
			eachPath(t, func(t *testing.T, p kernels.Path, m Mode) {
				ref, simd := refs[m], simds[m]
				a := newAttention(t, pool, 300, s, m)
				if a.Path() != p {
					t.Fatalf("built under %s, bound %s: the paths would not be compared", p, a.Path())
				}
				var got [][]float32
				for _, T := range []int{1, 7, 63, 65, 300} {
					got = append(got, f.run(a, []Seq{{Slot: 0, Start: 0, N: T}})[0])
				}
				switch {
				case p == kernels.Generic:
					refs[m] = got
					return
				case hd%16 != 0 || a.Mode() == ModeBF16 && s.dt == BF16:
					// ModeBF16 has one definition on every path; without SIMD
					// kernels for the head size every path binds the Go
					// ones: either way the bits are generic's
					for i := range got {
						if !bitsEqual(got[i], ref[i]) {
							t.Errorf("%v: the Go kernels bound by %s differ from generic", s, p)
						}
					}
					return
				case simd == nil:
					simds[m] = got
				default:
					for i := range got {
						if !bitsEqual(got[i], simd[i]) {
							t.Errorf("%v: differs from the first SIMD path", s)
						}
					}
				}
				for i := range got {
					for j := range got[i] {
						if d := math.Abs(float64(got[i][j] - ref[i][j])); d > 1e-5 {
							t.Fatalf("%v: row element %d differs from generic by %.3g", s, j, d)
						}
					}
				}
			})
		}
	}
}

func TestForwardDoesNotAllocate(t *testing.T) {
	pool := threads.New(2, false)
	defer pool.Close()
	for _, dt := range []DType{BF16, Int8} {
		s := shape{8, 2, 64, dt}
		f := newFixture(s, 2, 130, 3)
		w := s.qHeads * s.headDim
		q, out := make([]float32, 140*w), make([]float32, 140*w)
		seqs := []Seq{{Slot: 0, Start: 0, N: 130}, {Slot: 1, Start: 129, N: 1, Row: 130}}
		eachPath(t, func(t *testing.T, _ kernels.Path, m Mode) {
			a := newAttention(t, pool, 140, s, m)
			if n := testing.AllocsPerRun(20, func() { a.Forward(out, q, f.c, seqs) }); n != 0 {
				t.Errorf("%v: Forward allocates %.1f times per call", s, n)
			}
		})
	}
}

func TestStoreRoundsToBF16(t *testing.T) {
	c := NewCache(2, 2, 4, 2, BF16)
	k := []float32{1, float32(math.Float32frombits(0x3f818000)), -2, 3}
	v := []float32{0.5, 0.25, 0.125, float32(math.NaN())}
	c.Store(1, 3, k, v)
	if got := c.K16[c.off(1, 0, 3)+1]; got != 0x3f82 {
		t.Errorf("K rounded to %#04x, want 0x3f82 (tie to even)", got)
	}
	if got := c.K16[c.off(1, 1, 3)]; got != 0xc000 {
		t.Errorf("K head 1 = %#04x, want 0xc000", got)
	}
	if got := c.V16[c.off(1, 1, 3)+1]; got&0x7fc0 != 0x7fc0 {
		t.Errorf("NaN stored as %#04x", got)
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
	bad := *c
	bad.V16 = bad.V16[:3]
	if bad.Validate() == nil {
		t.Error("Validate accepted a short V")
	}
}

func TestNewRejectsShapes(t *testing.T) {
	pool := threads.New(1, false)
	defer pool.Close()
	for _, c := range [][4]int{{0, 8, 4, 64}, {8, 6, 4, 64}, {8, 8, 0, 64}, {8, 8, 8, 0}} {
		if _, err := New(pool, c[0], c[1], c[2], c[3]); err == nil {
			t.Errorf("New%v accepted", c)
		}
	}
}

// Begin/Head/End, each kv head run by whichever worker claims it, give
// Forward's bits: decode rows, a short prefill and a batch of both.
func TestHeadsMatchForward(t *testing.T) {
	pool := threads.New(2, false)
	defer pool.Close()
	for _, s := range []shape{{16, 8, 128, BF16}, {8, 2, 64, F32}, {4, 4, 16, BF16}, {8, 2, 64, Int8}} {
		f := newFixture(s, 3, 150, 5)
		w := s.qHeads * s.headDim
		eachPath(t, func(t *testing.T, _ kernels.Path, m Mode) {
			a := newAttention(t, pool, 16, s, m)
			for _, seqs := range [][]Seq{
				{{Slot: 0, Start: 140, N: 1}},
				{{Slot: 1, Start: 0, N: 5}},
				{{Slot: 2, Start: 70, N: 1}, {Slot: 0, Start: 3, N: 4, Row: 1}, {Slot: 1, Start: 149, N: 1, Row: 5}},
			} {
				rows := 0
				for _, sq := range seqs {
					rows += sq.N
				}
				q := make([]float32, rows*w)
				for _, sq := range seqs {
					copy(q[sq.Row*w:], f.q[sq.Slot][sq.Start*w:(sq.Start+sq.N)*w])
				}
				want, got := make([]float32, rows*w), make([]float32, rows*w)
				a.Forward(want, q, f.c, seqs)
				a.Begin(got, q, f.c, seqs)
				var next atomic.Int32
				pool.Run(threads.TaskFunc(func(worker, _ int) {
					for h := int(next.Add(1)) - 1; h < s.kvHeads; h = int(next.Add(1)) - 1 {
						a.Head(worker, s.kvHeads-1-h)
					}
				}))
				a.End()
				if !bitsEqual(got, want) {
					t.Errorf("%v %+v: heads one by one differ from Forward", s, seqs)
				}
			}
		})
	}
}

func TestStoreHeadMatchesStore(t *testing.T) {
	for _, dt := range []DType{F32, BF16, Int8} {
		all, byHead := NewCache(2, 3, 4, 16, dt), NewCache(2, 3, 4, 16, dt)
		k, v := make([]float32, 3*16), make([]float32, 3*16)
		for i := range k {
			k[i], v[i] = float32(i)*0.37-5, float32(i)*-1.13+2
		}
		all.Store(1, 2, k, v)
		for h := range 3 {
			byHead.StoreHead(1, 2, h, k[h*16:(h+1)*16], v[h*16:(h+1)*16])
		}
		if fmt.Sprint(all.K16, all.V16, all.K32, all.V32, all.K8, all.V8, all.KS, all.VS) !=
			fmt.Sprint(byHead.K16, byHead.V16, byHead.K32, byHead.V32, byHead.K8, byHead.V8, byHead.KS, byHead.VS) {
			t.Errorf("%v cache: StoreHead per head differs from Store", dt)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("StoreHead of a short row did not panic")
		}
	}()
	NewCache(1, 2, 4, 16, BF16).StoreHead(0, 0, 1, make([]float32, 15), make([]float32, 16))
}

func TestQuantize(t *testing.T) {
	x := []float32{0.5, -1.27, 0.005, 0.0049, -0.635, 1.27, 0}
	q := make([]int8, len(x))
	s := Quantize(q, x)
	if s != float32(1.27)/127 {
		t.Fatalf("scale %v, want max|x|/127", s)
	}
	// 0.005·100 = 0.5 rounds to even (0); -0.635·100 = -63.5 to -64
	if want := []int8{50, -127, 0, 0, -64, 127, 0}; !slices.Equal(q, want) {
		t.Errorf("q = %v, want %v", q, want)
	}
	for i, v := range x {
		if e := math.Abs(float64(v) - float64(q[i])*float64(s)); e > float64(s)/2*1.0001 {
			t.Errorf("x[%d] = %v dequantizes with error %v > scale/2", i, v, e)
		}
	}
	if s := Quantize(q, make([]float32, len(q))); s != 0 || slices.ContainsFunc(q, func(v int8) bool { return v != 0 }) {
		t.Errorf("zeros: scale %v, q %v", s, q)
	}
	// subnormal (x and -2x): 127/max must not overflow; 63.5 rounds to even
	tiny := []float32{math.Float32frombits(1000), -math.Float32frombits(2000)}
	if s := Quantize(q[:2], tiny); q[0] != 64 || q[1] != -127 || s <= 0 {
		t.Errorf("subnormal row: scale %v, q %v", s, q[:2])
	}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
		if s := Quantize(q[:2], []float32{1, bad}); !math.IsNaN(float64(s)) {
			t.Errorf("row with %v: scale %v, want NaN", bad, s)
		}
	}
}

// An int8 cache stores what Quantize gives, per (slot, kv head, position).
func TestStoreQuantizesInt8(t *testing.T) {
	c := NewCache(2, 2, 4, 3, Int8)
	k := []float32{1, -2, 0.5, 0, 0, 0}
	v := []float32{3, 6, -6, 0.1, 0.2, 0.3}
	c.Store(1, 2, k, v)
	o := c.off(1, 0, 2)
	if c.KS[o/3] != 2.0/127 || !slices.Equal(c.K8[o:o+3], []int8{64, -127, 32}) {
		t.Errorf("K head 0: %v × %v", c.K8[o:o+3], c.KS[o/3])
	}
	if o := c.off(1, 1, 2); c.KS[o/3] != 0 || c.VS[o/3] != float32(0.3)/127 || !slices.Equal(c.V8[o:o+3], []int8{42, 85, 127}) {
		t.Errorf("head 1: K scale %v, V %v × %v", c.KS[o/3], c.V8[o:o+3], c.VS[o/3])
	}
	if err := c.Validate(); err != nil || c.DType() != Int8 {
		t.Errorf("Validate = %v, DType = %v", err, c.DType())
	}
	bad := *c
	bad.VS = bad.VS[:3]
	if bad.Validate() == nil {
		t.Error("Validate accepted short V scales")
	}
	bad = *c
	bad.K32 = make([]float32, 2*2*4*3)
	if bad.Validate() == nil {
		t.Error("Validate accepted int8 and f32 slices together")
	}
}
