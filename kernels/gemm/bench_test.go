package gemm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// Qwen3-0.6B shapes: N×K of the projections, and the lm_head.
var benchShapes = []struct {
	name string
	n, k int
}{
	{"qkv", 2048, 1024}, {"o", 1024, 2048}, {"gate_up", 6144, 1024}, {"down", 1024, 3072},
}

func benchWeights(n, k int) []uint16 {
	rng := rand.New(rand.NewPCG(1, 1))
	w := make([]uint16, n*k)
	for i := range w {
		w[i] = toBF16(float32(rng.NormFloat64() * 0.05))
	}
	return w
}

func benchPaths(b *testing.B, f func(b *testing.B)) {
	for _, p := range kernels.Available() {
		b.Run(p.String(), func(b *testing.B) {
			prev, _ := kernels.Force(p)
			defer kernels.Force(prev)
			f(b)
		})
	}
}

// BenchmarkPrefill: M = 512 rows on 2 threads; GFLOP/s = 2·M·N·K / time.
func BenchmarkPrefill(b *testing.B) {
	pool := threads.New(2, true)
	defer pool.Close()
	const m = 512
	for _, s := range benchShapes {
		wb := benchWeights(s.n, s.k)
		x := make([]float32, m*s.k)
		for i := range x {
			x[i] = float32(i%17) * 0.1
		}
		y := make([]float32, m*s.n)
		for _, kind := range []string{"bf16", "int8"} {
			w := FromBF16(wb, s.n, s.k)
			if kind == "int8" {
				w = QuantizeInt8(wb, s.n, s.k)
			}
			b.Run(fmt.Sprintf("%s/%s", s.name, kind), func(b *testing.B) {
				benchPaths(b, func(b *testing.B) {
					c := NewContext(pool, m, s.k)
					b.ReportAllocs()
					for b.Loop() {
						c.MatMul(y, x, m, w)
					}
					b.ReportMetric(2*float64(m*s.n*s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			})
		}
	}
}

// BenchmarkDecode: M = 1 through the lm_head and one layer's projections;
// throughput is weight bytes streamed per second.
func BenchmarkDecode(b *testing.B) {
	pool := threads.New(2, true)
	defer pool.Close()
	shapes := append([]struct {
		name string
		n, k int
	}{{"lm_head", 151936, 1024}}, benchShapes...)
	for _, s := range shapes {
		wb := benchWeights(s.n, s.k)
		x := make([]float32, s.k)
		y := make([]float32, s.n)
		for _, kind := range []string{"bf16", "int8"} {
			w := FromBF16(wb, s.n, s.k)
			if kind == "int8" {
				w = QuantizeInt8(wb, s.n, s.k)
			}
			b.Run(fmt.Sprintf("%s/%s", s.name, kind), func(b *testing.B) {
				benchPaths(b, func(b *testing.B) {
					c := NewContext(pool, 1, s.k)
					b.SetBytes(int64(w.Bytes()))
					b.ReportAllocs()
					for b.Loop() {
						c.MatMul(y, x, 1, w)
					}
				})
			})
		}
	}
}
