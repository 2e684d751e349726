package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestScalarKernelsMatchDefinitions: the kernels a build without assembly
// runs are generic.go's definitions bit for bit, on every tile shape, step
// count and output mode, with values that round, overflow, underflow and
// carry NaNs and infinities, and the Go widening is the exact one.
func TestScalarKernelsMatchDefinitions(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, k := range []struct {
		name      string
		got, want kernel
		xPerStep  int // activations a row has in a step
	}{{"pairs", scalarPairsF32, genPairsF32, 2}, {"f32", scalarF32, genF32, 1}} {
		for rows := 1; rows <= regRows; rows++ {
			for panels := 1; panels <= maxPanels; panels++ {
				for _, ks := range []int{1, 2, 3, 7, 64} {
					for add := range 2 {
						name := fmt.Sprintf("%s/r%d/p%d/ks%d/add%d", k.name, rows, panels, ks, add)
						x := make([]float32, ks*rows*k.xPerStep)
						for i := range x {
							x[i] = scalarTestValue(rng)
						}
						w := make([]uint32, panels*ks*panelWidth)
						for i := range w {
							lo, hi := math.Float32bits(scalarTestValue(rng)), math.Float32bits(scalarTestValue(rng))
							if k.xPerStep == 2 {
								w[i] = lo>>16 | hi&0xffff0000 // a bf16 pair
							} else {
								w[i] = lo
							}
						}
						sameOutputs(t, rng, name, k.got, k.want, kargs{x: unsafe.Pointer(&x[0]), w: unsafe.Pointer(&w[0]),
							ps: uintptr(ks * panelWidth * 4), ks: ks, ldy: uintptr(panels * panelWidth * 4), add: add, r: rows, p: panels})
					}
				}
			}
		}
	}
	// The widening: every bf16 half, including NaN, infinity and subnormal
	// payloads, becomes its f32 exactly.
	const pairs = 3
	src := make([]uint32, pairs*panelWidth)
	for i := range src {
		src[i] = rng.Uint32()
	}
	src[0], src[1] = 0x7fc1ff80, 0x00018000 // NaN / -∞ pair, subnormal / -0 pair
	dst := make([]float32, 2*pairs*panelWidth)
	widenPairsGo(&dst[0], &src[0], pairs)
	for q := range pairs {
		for c := range panelWidth {
			v := src[q*panelWidth+c]
			if e, o := math.Float32bits(dst[2*q*panelWidth+c]), math.Float32bits(dst[(2*q+1)*panelWidth+c]); e != v<<16 || o != v&0xffff0000 {
				t.Fatalf("widened pair %#08x of step %d, channel %d: %#08x, %#08x", v, q, c, e, o)
			}
		}
	}
}

// TestScalarQuadsMatchDefinition: the int8 kernel of a build without
// assembly, which makes two products a multiply, is genQuads bit for bit,
// including the sums' extremes (activations 255 against weights −128 and
// 127 in every byte).
func TestScalarQuadsMatchDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for rows := 1; rows <= regRows; rows++ {
		for panels := 1; panels <= maxPanels; panels++ {
			for _, ks := range []int{1, 2, 5, 64, 1024} {
				for add := range 2 {
					x, w := make([]uint32, ks*rows), make([]uint32, panels*ks*panelWidth)
					for i := range x {
						x[i] = rng.Uint32()
					}
					for i := range w {
						w[i] = rng.Uint32()
					}
					if ks == 1024 { // the largest |Σ| each way
						for i := range x {
							x[i] = 0xffffffff
						}
						for i := range w {
							w[i] = [2]uint32{0x80808080, 0x7f7f7f7f}[i%panelWidth%2]
						}
					}
					sx, sw, wc := make([]float32, rows), make([]float32, panels*panelWidth), make([]int32, panels*panelWidth)
					for i := range sx {
						sx[i] = scalarTestValue(rng)
					}
					for i := range sw {
						sw[i], wc[i] = scalarTestValue(rng), int32(rng.Uint32()>>12)-1<<19
					}
					sameOutputs(t, rng, fmt.Sprintf("quads/r%d/p%d/ks%d/add%d", rows, panels, ks, add), scalarQuads, genQuads,
						kargs{x: unsafe.Pointer(&x[0]), w: unsafe.Pointer(&w[0]), ps: uintptr(ks * panelWidth * 4), ks: ks,
							ldy: uintptr(panels * panelWidth * 4), add: add, r: rows, p: panels,
							sx: unsafe.Pointer(&sx[0]), sw: unsafe.Pointer(&sw[0]), wc: unsafe.Pointer(&wc[0])})
				}
			}
		}
	}
}

// sameOutputs runs kernels got and want on a's tile, each from the same
// random outputs (which a.add adds to), and checks they give the same bits.
func sameOutputs(t *testing.T, rng *rand.Rand, name string, got, want kernel, a kargs) {
	t.Helper()
	y0 := make([]float32, a.r*a.p*panelWidth)
	for i := range y0 {
		y0[i] = float32(rng.NormFloat64())
	}
	ys := [2][]float32{append([]float32(nil), y0...), append([]float32(nil), y0...)}
	for i, f := range []kernel{got, want} {
		a.y = unsafe.Pointer(&ys[i][0])
		f(&a)
	}
	assertBits(t, name, ys[0], ys[1], a.p*panelWidth)
}

// scalarTestValue is mostly a normal value, sometimes one of the values
// arithmetic treats apart.
func scalarTestValue(rng *rand.Rand) float32 {
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), 1e-40, -3e-39, 3e38, -2.5e38}
	if rng.IntN(16) == 0 {
		return special[rng.IntN(len(special))]
	}
	return float32(rng.NormFloat64() * math.Exp2(float64(rng.IntN(41)-20)))
}
