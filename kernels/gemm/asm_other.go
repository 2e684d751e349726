//go:build (!amd64 && !arm64) || purego

package gemm

import "github.com/ellm-dev/ellm/kernels"

// asmKernels: this build has no assembly (an architecture other than amd64
// and arm64, or -tags purego), every path runs the Go kernels.
func asmKernels(kernels.Path, kernels.Features) (kernelSet, bool) { return kernelSet{}, false }
