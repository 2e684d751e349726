//go:build (!amd64 && !arm64) || purego

package ops

import "github.com/ellm-dev/ellm/kernels"

// asmFor: this build has no assembly (an architecture other than amd64 and
// arm64, or -tags purego), every path runs the Go loops.
func asmFor(kernels.Path) *asmFuncs { return nil }
