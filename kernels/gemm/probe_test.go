package gemm

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/threads"
)

func TestProbe(t *testing.T) {
	for _, p := range kernels.Available() {
		for _, int8 := range []bool{false, true} {
			pr := NewProbe(p, int8)
			if r := pr.Measure(time.Millisecond); !(r > 0) {
				t.Errorf("%s int8=%v: rate %v", p, int8, r)
			}
			_, asm := asmKernels(p, kernels.CPU()) // without assembly the amx path runs avx512bf16's emulation
			tiles := pr.c.formOf(probeM, pr.w) >= formBF16Rows
			if pr.c.set.bf16Act != p.RoundsToBF16() || tiles != (p == kernels.AMX && asm) {
				t.Errorf("%s: the probe does not run the path's kernels", p)
			}
			pr.Close()
		}
	}
}

// A Context whose bf16 and int8 products take different paths (kernels.Choose)
// gives, for each weight kind, the bits of its own path alone.
func TestMixedPaths(t *testing.T) {
	if kernels.Forced() {
		t.Skip("ELLM_KERNELS forces one path")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	const m, n, k = 19, 40, 70
	pr := newProblem(rng, m, n, k)
	bf, i8 := FromBF16(pr.w, n, k), QuantizeInt8(pr.w, n, k)
	pool := threads.New(2, false)
	defer pool.Close()
	product := func(w *Weight) []float32 {
		y := make([]float32, m*n)
		NewContext(pool, m, k).MatMul(y, pr.x, m, w)
		return y
	}
	prev := kernels.Active()
	defer kernels.Force(prev)
	alone := map[kernels.Path][2][]float32{}
	for _, p := range kernels.Available() {
		if _, err := kernels.Force(p); err != nil {
			t.Fatal(err)
		}
		alone[p] = [2][]float32{product(bf), product(i8)}
	}
	for _, pb := range kernels.Available() {
		for _, pi := range kernels.Available() {
			if _, err := kernels.Force(kernels.CPU().Best()); err != nil {
				t.Fatal(err)
			}
			if err := kernels.Choose(kernels.MatMulBF16, pb); err != nil {
				t.Fatal(err)
			}
			if err := kernels.Choose(kernels.MatMulInt8, pi); err != nil {
				t.Fatal(err)
			}
			if got := product(bf); !slices.Equal(got, alone[pb][0]) {
				t.Errorf("bf16 on %s (int8 on %s): not the bits of %s alone", pb, pi, pb)
			}
			if got := product(i8); !slices.Equal(got, alone[pi][1]) {
				t.Errorf("int8 on %s (bf16 on %s): not the bits of %s alone", pi, pb, pi)
			}
		}
	}
}
