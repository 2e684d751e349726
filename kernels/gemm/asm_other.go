//go:build !amd64 || purego

package gemm

import "github.com/ellm-dev/ellm/kernels"

// asmKernels: this build has no assembly, every path runs the generic kernels.
func asmKernels(kernels.Path) (kernelSet, bool) { return kernelSet{}, false }
