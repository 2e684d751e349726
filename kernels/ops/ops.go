// Package ops holds the small per-token kernels of a transformer layer:
// RMSNorm (plain, fused with the residual add, per head), RoPE, SiLU×mul,
// softmax, top-k, argmax, bf16↔f32 conversion and the embedding gather.
//
// The functions that have assembly are methods of Kernels, the set bound to
// one kernel path (For): whatever uses them takes its set once, when it is
// built, so that a call runs its path's code without looking the path up.
//
// Every function computes each output row from that row's inputs alone with
// one fixed arithmetic sequence per kernel path, so results never depend on
// how many rows are processed together. Where an AVX2 or AVX-512 version
// exists it is bit-identical to the pure-Go version: the Go code spells out
// the lane order and uses separate multiply and add (no fused multiply-add),
// which the assembly repeats instruction for instruction.
package ops

import (
	"fmt"

	"github.com/ellm-dev/ellm/kernels"
)

// lanes is the width of the accumulation order every reduction in this
// package follows: element i is accumulated into lane i%lanes, and the lanes
// are folded pairwise (i, i+8), (i, i+4), (i, i+2), (i, i+1) — the shape of an
// AVX-512 register, which AVX2 emulates with two registers.
const lanes = 16

// reduce16 folds 16 lane sums in the package's fixed tree order.
func reduce16(a *[lanes]float32) float32 {
	var b [8]float32
	for i := range 8 {
		b[i] = a[i] + a[i+8]
	}
	for i := range 4 {
		b[i] += b[i+4]
	}
	for i := range 2 {
		b[i] += b[i+2]
	}
	return b[0] + b[1]
}

// Kernels are this package's functions bound to one kernel path: the
// assembly of that path where it has some, the Go code otherwise. The set
// for a path is built once per process and shared; get it with For when
// building what calls it (the model's runner, attention, a sampler), as
// gemm.NewContext takes its paths. kernels.Force changes the path later
// constructions bind, so a test that runs every path builds its objects after
// forcing each one.
type Kernels struct {
	path kernels.Path
	asm  *asmFuncs // nil: every function runs its Go loop
}

// asmFuncs are one path's assembly hooks. Each runs the leading multiple of
// 16 elements (n) and the Go loop that called it finishes the tail in the
// same lane order; the assembly is in ops_amd64.s, with the Go loop it
// repeats named in each function's comment. The reductions return their 16
// lane sums by value: a pointer to the caller's accumulator, passed through
// a function value, would move it to the heap on every call.
type asmFuncs struct {
	sumSq    func(x []float32) [lanes]float32
	addSumSq func(res, x []float32) [lanes]float32
	scaleMul func(out, x, w *float32, n int, r float32)
	rotate   func(x, cs *float32, h, heads int)
	rotateBy int // rotate needs half a head to be a multiple of this
	siluMul  func(out, gate, up *float32, n int)
	divide   func(out, x *float32, n int, d float32)
	expSum   func(dst, src []float32, m float32) [lanes]float32
	toF32    func(dst *float32, src *uint16, n int)
	toBF16   func(dst *uint16, src *float32, n int)
	max      func(x *float32, n int) float32
	findEq   func(x *float32, n int, v float32) int // first index of v, -1 if none
}

var sets = func() (s [kernels.NumPaths]Kernels) {
	for p := range s {
		s[p] = Kernels{path: kernels.Path(p), asm: asmFor(kernels.Path(p))}
	}
	return s
}()

// For is the set of path p. It panics if this CPU cannot run p (callers
// pass kernels.Active() or a path from kernels.Available()).
func For(p kernels.Path) *Kernels {
	if !kernels.CPU().Supports(p) {
		panic(fmt.Sprintf("ops: kernel path %s: this CPU supports at most %s", p, kernels.CPU().Best()))
	}
	return &sets[p]
}

// Path is the kernel path the set was bound for; the avx512bf16 path runs
// the avx512 code of this package.
func (k *Kernels) Path() kernels.Path { return k.path }

// lead16 is the leading multiple of 16 of n elements that k's assembly
// takes (0 without assembly).
func (k *Kernels) lead16(n int) int {
	if k.asm == nil {
		return 0
	}
	return n &^ 15
}
