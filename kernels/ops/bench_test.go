package ops

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
)

// benchPaths runs f as a sub-benchmark per kernel path, side by side.
func benchPaths(b *testing.B, name string, bytes int64, f func(k *Kernels)) {
	for _, p := range kernels.Available() {
		b.Run(fmt.Sprintf("%s/%s", name, p), func(b *testing.B) {
			k := For(p)
			b.SetBytes(bytes)
			b.ReportAllocs()
			for b.Loop() {
				f(k)
			}
		})
	}
}

// Per-token shapes of Qwen3-8B: hidden 4096, 32 query heads of 128,
// intermediate 12288, vocabulary 151936.
func BenchmarkOps(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const hidden, heads, hd, inter, vocab = 4096, 32, 128, 12288, 151936
	x, res, w, out := randVec(r, hidden, 1), randVec(r, hidden, 1), randVec(r, hidden, 1), make([]float32, hidden)
	benchPaths(b, "rmsnorm-4096", 4*3*hidden, func(k *Kernels) { k.RMSNorm(out, x, w, 1e-6) })
	benchPaths(b, "add-rmsnorm-4096", 4*5*hidden, func(k *Kernels) { k.AddRMSNorm(out, res, x, w, 1e-6) })

	// one kv head's k_norm, the smallest call a decode step makes: what a
	// call costs beyond its elements shows here
	benchPaths(b, "head-rmsnorm-128", 4*3*hd, func(k *Kernels) { k.HeadRMSNorm(x[:hd], w[:hd], 1e-6) })

	rope, err := NewRope(hd, 4096, 1e6, nil)
	if err != nil {
		b.Fatal(err)
	}
	q, pos := randVec(r, heads*hd, 1), []int32{1000}
	benchPaths(b, "rope-32x128", 4*3*heads*hd, func(k *Kernels) { k.ApplyRope(rope, q, heads, pos) })

	g, u, h := randVec(r, inter, 2), randVec(r, inter, 2), make([]float32, inter)
	benchPaths(b, "silu-mul-12288", 4*3*inter, func(k *Kernels) { k.SiLUMul(h, g, u) })

	bf := make([]uint16, hidden)
	benchPaths(b, "to-bf16-4096", 6*hidden, func(k *Kernels) { k.ToBF16(bf, x) })
	benchPaths(b, "to-f32-4096", 6*hidden, func(k *Kernels) { k.ToF32(out, bf) })

	logits := randVec(r, vocab, 3)
	benchPaths(b, "argmax-151936", 4*vocab, func(k *Kernels) { k.Argmax(logits) })
	benchPaths(b, "expsum-151936", 8*vocab, func(k *Kernels) {
		k.ExpSum(logits, logits, 100)
	})
}
