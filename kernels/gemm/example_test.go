package gemm_test

import (
	"fmt"
	"math"

	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// bf16 returns the bf16 bits of small integers (exact in bf16).
func bf16(vs ...float32) []uint16 {
	out := make([]uint16, len(vs))
	for i, v := range vs {
		out[i] = uint16(math.Float32bits(v) >> 16)
	}
	return out
}

func Example() {
	pool := threads.New(2, false)
	defer pool.Close()

	// W is [N=3 outputs, K=2 inputs], as a safetensors linear layer stores it.
	w := gemm.FromBF16(bf16(
		1, 2,
		3, 4,
		-1, 0.5,
	), 3, 2)
	c := gemm.NewContext(pool, 4, 2) // up to 4 rows of up to 2 inputs

	x := []float32{1, 1, 2, 0} // two rows
	y := make([]float32, 2*3)
	c.MatMul(y, x, 2, w)
	fmt.Println(y)

	c.MatMulAdd(y, x, 2, w) // residual: y += x·Wᵀ
	fmt.Println(y)
	// Output:
	// [3 7 -0.5 2 6 -2]
	// [6 14 -1 4 12 -4]
}
