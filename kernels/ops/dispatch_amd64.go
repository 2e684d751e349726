//go:build amd64 && !purego

package ops

import "github.com/ellm-dev/ellm/kernels"

// haveAsm is true while the assembly versions are being written: until then the
// amd64 build dispatches to Go too.
const haveAsm = true

func sumSquares(_ kernels.Path, x []float32) float32 { return sumSquaresGo(x) }
func addSumSquares(_ kernels.Path, residual, x []float32) float32 {
	return addSumSquaresGo(residual, x)
}
func scaleMul(_ kernels.Path, out, x, w []float32, r float32)      { scaleMulGo(out, x, w, r) }
func rotate(_ kernels.Path, x, cs []float32)                       { rotateGo(x, cs) }
func siluMul(_ kernels.Path, out, gate, up []float32)              { siluMulGo(out, gate, up) }
func argmax(_ kernels.Path, x []float32) int                       { return argmaxGo(x) }
func toF32(_ kernels.Path, dst []float32, src []uint16)            { toF32Go(dst, src) }
func toBF16(_ kernels.Path, dst []uint16, src []float32)           { toBF16Go(dst, src) }
func expSum(_ kernels.Path, dst, src []float32, m float32) float32 { return expSumGo(dst, src, m) }
