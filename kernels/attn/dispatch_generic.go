//go:build (!amd64 && !arm64) || purego

package attn

import "github.com/ellm-dev/ellm/kernels"

// simdKernels: this build has no assembly for attention (arm64 has the
// matrix products' alone), every path runs the Go kernels.
func simdKernels(*kernelSet, kernels.Path, int) {}

// qref is only used by the assembly group kernels.
type qref struct{}
