//go:build !purego

package gemm

import "github.com/ellm-dev/ellm/kernels"

func asmKernels(kernels.Path) (kernelSet, bool) { return kernelSet{}, false }
