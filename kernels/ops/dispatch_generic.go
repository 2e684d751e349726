//go:build !amd64 || purego

package ops

import "github.com/ellm-dev/ellm/kernels"

// asmFor: this build has no assembly for these kernels (arm64 has the
// matrix products' alone), every path runs the Go loops.
func asmFor(kernels.Path) *asmFuncs { return nil }
