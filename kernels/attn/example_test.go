package attn_test

import (
	"fmt"

	"github.com/ellm-dev/ellm/kernels/attn"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// A prompt of 3 tokens is prefilled, then one token is decoded: each call
// stores the new tokens' K and V first, then attends over everything stored.
func Example() {
	const qHeads, kvHeads, headDim = 4, 2, 16
	pool := threads.New(2, false)
	defer pool.Close()
	cache := attn.NewCache(1, kvHeads, 128, headDim, attn.BF16) // 1 slot, 128 positions, bf16
	a, err := attn.New(pool, 8, qHeads, kvHeads, headDim)
	if err != nil {
		panic(err)
	}
	kv := make([]float32, 3*kvHeads*headDim) // k and v projections of 3 tokens
	for i := range kv {
		kv[i] = float32(i%7) * 0.25
	}
	q := make([]float32, 3*qHeads*headDim)
	out := make([]float32, len(q))

	cache.StoreRun(0, 0, 3, kv, kv) // positions 0..2 of slot 0
	a.Forward(out, q, cache, []attn.Seq{{Slot: 0, Start: 0, N: 3, Row: 0}})

	cache.Store(0, 3, kv[:kvHeads*headDim], kv[:kvHeads*headDim]) // position 3
	a.Forward(out[:qHeads*headDim], q[:qHeads*headDim], cache, []attn.Seq{{Slot: 0, Start: 3, N: 1, Row: 0}})

	// q = 0 gives uniform attention: out is the mean of the 4 V rows,
	// (0.25 + 1.25 + 0.5 + 0.25) / 4 in this element.
	fmt.Printf("%.4f\n", out[1])
	// Output: 0.5625
}
