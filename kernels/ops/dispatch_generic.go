//go:build !amd64 || purego

package ops

import "github.com/ellm-dev/ellm/kernels"

// Without assembly every SIMD hook declines: it reports that it handled no
// elements and the Go loops do all the work.

const haveAsm = false

func sumSqSIMD(kernels.Path, *[lanes]float32, []float32) int                  { return 0 }
func addSumSqSIMD(kernels.Path, *[lanes]float32, []float32, []float32) int    { return 0 }
func scaleMulSIMD(kernels.Path, []float32, []float32, []float32, float32) int { return 0 }
func rotateSIMD(kernels.Path, []float32, []float32) bool                      { return false }
func siluMulSIMD(kernels.Path, []float32, []float32, []float32) int           { return 0 }
func expSumSIMD(kernels.Path, *[lanes]float32, []float32, []float32, float32) int {
	return 0
}
func toF32SIMD(kernels.Path, []float32, []uint16) int  { return 0 }
func toBF16SIMD(kernels.Path, []uint16, []float32) int { return 0 }
func argmaxSIMD(kernels.Path, []float32) (int, bool)   { return 0, false }
