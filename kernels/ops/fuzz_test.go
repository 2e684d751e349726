package ops

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
)

// FuzzPathsAgree is differential: any input, every SIMD path bit-identical
// to the Go code (the package promise), at any length and tail.
func FuzzPathsAgree(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 192}, float32(1.5))
	f.Add(make([]byte, 4*37), float32(-3))
	f.Add(slices.Repeat([]byte{0xff, 0xff, 0x7f, 0x7f}, 33), float32(0))
	f.Fuzz(func(t *testing.T, raw []byte, m float32) {
		x := make([]float32, len(raw)/4)
		for i := range x {
			v := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				v = 0 // NaN payloads and overflow to inf are not part of the promise
			}
			x[i] = float32(math.Mod(float64(v), 1e4))
		}
		if len(x) < 2 || len(x)%2 != 0 || math.IsNaN(float64(m)) {
			return
		}
		type result struct {
			norm, silu, exp, div []float32
			bf                   []uint16
			arg                  int
		}
		run := func(k *Kernels) (r result) {
			w := make([]float32, len(x))
			for i := range w {
				w[i] = float32(i%5) - 1.5
			}
			r.norm = make([]float32, len(x))
			if err := k.RMSNorm(r.norm, x, w, 1e-6); err != nil {
				t.Fatal(err)
			}
			r.silu = make([]float32, len(x)/2)
			k.SiLUMul(r.silu, x[:len(x)/2], x[len(x)/2:])
			r.exp = make([]float32, len(x))
			r.exp = append(r.exp, k.ExpSum(r.exp, x, m))
			r.div = make([]float32, len(x))
			k.Divide(r.div, x, m)
			r.bf = make([]uint16, len(x))
			k.ToBF16(r.bf, x)
			r.arg = k.Argmax(x)
			return r
		}
		var ref result
		for _, p := range kernels.Available() {
			var got result
			withPath(t, p, func(k *Kernels) { got = run(k) })
			if p == kernels.Generic {
				ref = got
				continue
			}
			if !bitsEqual(got.norm, ref.norm) || !bitsEqual(got.silu, ref.silu) || !bitsEqual(got.exp, ref.exp) || !bitsEqual(got.div, ref.div) ||
				!slices.Equal(got.bf, ref.bf) || got.arg != ref.arg {
				t.Fatalf("%s differs from generic on %d elements", p, len(x))
			}
		}
	})
}
