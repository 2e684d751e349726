package gemm

import "unsafe"

// The kernels a build without assembly runs (other architectures, -tags
// purego): generic.go's definitions operation for operation, so the same
// bits (TestScalarKernelsMatchDefinitions), with the sums of a block of rows ×
// channels held in registers and each weight widened once for all the
// block's rows, where the definitions keep a panel's 16 sums in memory and
// widen each weight again for every row. On the Zen 3 (one thread, weights
// in L2) four rows of bf16 pairs ran at 2.4 times the definition's rate, one
// row at 1.2–1.35 times, the f32 blocks over widened weights at 4–5 times.
//
// Each block is a function of its own, so that its loop has every register
// to itself (with the tile's loops around it, the compiler keeps their
// variables in registers and spills the block's sums), and holds at most 8
// sums, what amd64's 15 free float registers leave room for beside a step's
// activations and weights (arm64 has 32). The blocks (scalar_blocks.go,
// written by gen_scalar.go) compute channels c… of rows r… of a panel (their
// sums in acc[i][c…], loaded and stored back) over ks ≥ 1 steps: xp points
// at row r's activations of step 0 and wp at channel c's weights of step 0.
// Their loops test at the bottom: the compiler schedules the values of a
// block that nothing in the block uses after all the others, so with the
// test at the top (a block of its own) every sum's add waited for all of a
// step's products, which then spilled; with it at the bottom the sums feed
// the loop's phis in the same block.

//go:generate go run gen_scalar.go

// scalarSet is the kernel set of the f32 paths in a build without assembly.
// A product of more rows than a tile widens its weights block by block for
// the f32 blocks, as the AVX kernels do: BenchmarkPrefill/M512/{qkv,down}/bf16
// ran 1.07–1.35 times faster so.
func scalarSet() kernelSet {
	s := genericSet(scalarPairsF32, scalarF32, scalarQuads, false)
	s.widen = widenPairsGo
	return s
}

// widenPairsGo widens a panel's pair steps to f32 steps, each pair's even k
// then its odd k.
func widenPairsGo(dst *float32, src *uint32, pairs int) {
	d, v := unsafe.Slice(dst, 2*pairs*panelWidth), unsafe.Slice(src, pairs*panelWidth)
	for q := range pairs {
		e, o, w := d[2*q*panelWidth:][:panelWidth], d[(2*q+1)*panelWidth:][:panelWidth], v[q*panelWidth:][:panelWidth]
		for c := range panelWidth {
			e[c], o[c] = even(w[c]), odd(w[c])
		}
	}
}

func scalarPairsF32(a *kargs) { scalarTile(a, false) }
func scalarF32(a *kargs)      { scalarTile(a, true) }

// scalarTile runs a tile four rows at a time, then two, then one; f32 says
// the weights and activations are f32 (formF32), not bf16 pairs and f32
// pairs (formPairs).
func scalarTile(a *kargs, f32 bool) {
	rowX := uintptr(8) // bytes of a row's activations in a step
	if f32 {
		rowX = 4
	}
	step := uintptr(a.r) * rowX
	for p := range a.p {
		w := a.panel(p)
		for r := 0; r < a.r; {
			n := blockRows(a.r - r)
			var acc [4][panelWidth]float32
			xp := unsafe.Add(a.x, uintptr(r)*rowX)
			for c := 0; c < panelWidth; {
				wp := unsafe.Add(w, c*4)
				switch {
				case f32 && n == 4:
					f32Block4x2(&acc, c, xp, wp, step, a.ks)
					c += 2
				case f32 && n == 2:
					f32Block2x4(&acc, c, xp, wp, step, a.ks)
					c += 4
				case f32:
					f32Block1x8(&acc, c, xp, wp, step, a.ks)
					c += 8
				case n == 4:
					pairsBlock4x2(&acc, c, xp, wp, step, a.ks)
					c += 2
				case n == 2:
					pairsBlock2x4(&acc, c, xp, wp, step, a.ks)
					c += 4
				default:
					pairsBlock1x4(&acc, c, xp, wp, step, a.ks)
					c += 4
				}
			}
			for i := range n {
				a.out(r+i, p, &acc[i])
			}
			r += n
		}
	}
}

// blockRows is the rows of the next block when left rows remain: 4, 2 or 1.
func blockRows(left int) int {
	if left >= 4 {
		return 4
	}
	return min(left, 2)
}

// scalarQuads is the int8 kernel (genQuads) in blocks of 4 rows × 2
// channels, 2 × 2 and 1 × 4, each multiply making two products
// (gen_scalar.go, writeQuads).
func scalarQuads(a *kargs) {
	step := uintptr(a.r) * 4 // bytes of a step's activations: a quad a row
	for p := range a.p {
		w := a.panel(p)
		for r := 0; r < a.r; {
			n := blockRows(a.r - r)
			var acc [4][panelWidth]int32
			xp := unsafe.Add(a.x, r*4)
			for c := 0; c < panelWidth; {
				wp := unsafe.Add(w, c*4)
				switch n {
				case 4:
					quadsBlock4x2(&acc, c, xp, wp, step, a.ks)
					c += 2
				case 2:
					quadsBlock2x2(&acc, c, xp, wp, step, a.ks)
					c += 2
				default:
					quadsBlock1x4(&acc, c, xp, wp, step, a.ks)
					c += 4
				}
			}
			for i := range n {
				a.quadsOut(r+i, p, &acc[i])
			}
			r += n
		}
	}
}

// unpack splits an int64 holding S0 + 2³²·S1 into S0 and S1.
func unpack(s int64) (s0, s1 int32) {
	s0 = int32(s)
	return s0, int32((s - int64(s0)) >> 32)
}
