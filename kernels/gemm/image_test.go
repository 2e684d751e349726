package gemm

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// copied is parts copied into buffers of their own (as a file mapped later
// would hold them), by name.
func copied(parts []Part) map[string][]byte {
	m := make(map[string][]byte, len(parts))
	for _, p := range parts {
		b := make([]byte, len(p.Bytes)+4)[4:] // not where the weight's are
		copy(b, p.Bytes)
		m[p.Name] = b
	}
	return m
}

// TestRestore: a weight rebuilt from copies of its parts gives the same
// products, bit for bit, on every path, for each kind, coded or not, and
// a screen rebuilt so gives the same intervals; parts missing or of the
// wrong size are errors.
func TestRestore(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	pool := threads.New(2, false)
	defer pool.Close()
	const n, k = 70, 512
	raw := codedWeights(rng, n, k)
	coded := FromBF16(raw, n, k)
	coded.Code()
	few := FromBF16(raw, n, k)
	few.SetFewRows()
	weights := newProblem(rng, 1, n, k).weights()
	weights["bf16 coded"], weights["bf16 few rows"] = coded, few
	forEachPath(t, func(t *testing.T, p kernels.Path) {
		for name, w := range weights {
			shape, parts := w.Parts()
			r, err := Restore(shape, copied(parts))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if r.Coded() != w.Coded() || r.fewRows != w.fewRows {
				t.Fatalf("%s: restored coded %v, few rows %v; want %v, %v", name, r.Coded(), r.fewRows, w.Coded(), w.fewRows)
			}
			for _, m := range []int{1, 5} {
				c := NewContext(pool, m, k)
				x := newProblem(rng, m, 1, k).x
				want, got := make([]float32, m*n), make([]float32, m*n)
				c.MatMul(want, x, m, w)
				c.MatMul(got, x, m, r)
				assertBits(t, name, got, want, n)
			}
		}
	})
	screen := FromBF16(raw, n, k).Screen()
	floor, shape, parts := screen.ScreenParts()
	r, err := RestoreScreen(floor, shape, copied(parts))
	if err != nil {
		t.Fatal(err)
	}
	split := make([]float32, 2*k)
	screen.Split(split, newProblem(rng, 1, 1, k).x, false)
	y := make([]float32, 2*n)
	c := NewContext(pool, 2, k)
	c.MatMul(y, split, 2, screen.Weight())
	lo0, hi0, lo1, hi1 := slices.Clone(y[:n]), slices.Clone(y[n:]), slices.Clone(y[:n]), slices.Clone(y[n:])
	screen.Interval(lo0, hi0, split, 0, n)
	r.Interval(lo1, hi1, split, 0, n)
	if !slices.EqualFunc(lo0, lo1, sameBits) || !slices.EqualFunc(hi0, hi1, sameBits) {
		t.Fatal("the restored screen's intervals differ")
	}

	shape, parts = coded.Parts()
	for _, tc := range []struct {
		what string
		edit func(Shape, map[string][]byte) Shape
		want string
	}{
		{"no pairs", func(s Shape, m map[string][]byte) Shape { delete(m, "pairs"); return s }, "no pairs"},
		{"short pairs", func(s Shape, m map[string][]byte) Shape { m["pairs"] = m["pairs"][4:]; return s }, "pairs has"},
		{"short flags", func(s Shape, m map[string][]byte) Shape { m["coded.flags"] = m["coded.flags"][1:]; return s }, "coded.flags has"},
		{"other K", func(s Shape, m map[string][]byte) Shape { s.K += 64; return s }, "pairs has"},
		{"unknown kind", func(s Shape, m map[string][]byte) Shape { s.Kind = "f16"; return s }, `kind "f16"`},
		{"table of a weight that cannot be coded", func(s Shape, m map[string][]byte) Shape { s.K = 510; return s }, "coded copy"},
		{"no shape", func(s Shape, m map[string][]byte) Shape { s.N = 0; return s }, "shape 0×"},
	} {
		m := copied(parts)
		if _, err := Restore(tc.edit(shape, m), m); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.what, err, tc.want)
		}
	}
}
