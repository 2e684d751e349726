package ops_test

import (
	"fmt"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ops"
)

// RoPE rotates pairs (i, i+D/2) of each head by position·θ^(−2i/D).
func ExampleKernels_ApplyRope() {
	k := ops.For(kernels.Active()) // bound once, where the caller is built
	rope, err := ops.NewRope(4, 16, 10000, nil)
	if err != nil {
		panic(err)
	}
	x := []float32{1, 0, 0, 0} // one token, one head of 4
	if err := k.ApplyRope(rope, x, 1, []int32{1}); err != nil {
		panic(err)
	}
	// pair (0, 2) turned by 1 radian: (cos 1, sin 1)
	fmt.Printf("%.4f %.4f %.4f %.4f\n", x[0], x[1], x[2], x[3])
	// Output: 0.5403 0.0000 0.8415 0.0000
}

// The MoE router: softmax over expert logits, then the top k.
func ExampleTopK() {
	logits := []float32{0.5, 2, -1, 2, 1}
	ops.For(kernels.Active()).Softmax(logits)
	idx, w := make([]int32, 2), make([]float32, 2)
	ops.TopK(idx, w, logits)
	fmt.Println(idx, w[0] == w[1])
	// Output: [1 3] true
}
