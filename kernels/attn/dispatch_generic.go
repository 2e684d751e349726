//go:build !amd64 || purego

package attn

import (
	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ops"
)

func tile(_ kernels.Path, ml, acc, q, k, v, s []float32, n int, scale float32) {
	tileGo(ml, acc, q, k, v, s, n, scale)
}

func widenK(p kernels.Path, dst []float32, src16 []uint16, src32 []float32, rows, hd int) []float32 {
	return widenV(p, dst, src16, src32, rows, hd)
}

func widenV(_ kernels.Path, dst []float32, src16 []uint16, src32 []float32, rows, hd int) []float32 {
	if src32 != nil {
		return src32[:rows*hd]
	}
	ops.ToF32(dst[:rows*hd], src16[:rows*hd])
	return dst[:rows*hd]
}

func dequantK(p kernels.Path, dst []float32, src []int8, scale []float32, rows, hd int) []float32 {
	return dequantV(p, dst, src, scale, rows, hd)
}

func dequantV(_ kernels.Path, dst []float32, src []int8, scale []float32, rows, hd int) []float32 {
	dequantGo(dst, src, scale, rows, hd)
	return dst[:rows*hd]
}

// qref is only used by the assembly group kernel.
type qref struct{}

func tileGroup(kernels.Path, *scratch, int, []float32, []float32, int, int, float32) int { return 0 }

func tileDirect(kernels.Path, *scratch, *Cache, int, int, float32) bool { return false }
