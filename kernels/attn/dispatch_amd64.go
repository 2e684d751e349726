//go:build amd64 && !purego

package attn

import (
	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ops"
)

func tile(_ kernels.Path, ml, acc, q, k, v, s []float32, n int, scale float32) {
	tileGo(ml, acc, q, k, v, s, n, scale)
}

func widen(_ kernels.Path, dst []float32, src []uint16) { ops.ToF32(dst, src) }
