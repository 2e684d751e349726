package gemm

import (
	"math"
	"unsafe"
)

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
// activations and weights (arm64 has 32). The blocks compute channels c… of
// rows r… of a panel (their sums in acc[i][c…], loaded and stored back) over
// ks ≥ 1 steps: xp points at row r's activations of step 0 and wp at channel
// c's weights of step 0. Their loops test at the bottom: the compiler
// schedules the values of a block that nothing in the block uses after all
// the others, so with the test at the top (a block of its own) every sum's
// add waited for all of a step's products, which then spilled; with it at the
// bottom the sums feed the loop's phis in the same block.

// scalarSet is the kernel set of the f32 paths in a build without assembly.
// A product of more rows than a tile widens its weights block by block for
// the f32 blocks, as the AVX kernels do: BenchmarkPrefill/M512/{qkv,down}/bf16
// ran 1.07–1.35 times faster so.
func scalarSet() kernelSet {
	s := genericSet(scalarPairsF32, scalarF32, false)
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
			n := min(4, a.r-r)
			if n == 3 {
				n = 2
			}
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

// even and odd are the two halves of a bf16 pair widened exactly.
func even(v uint32) float32 { return math.Float32frombits(v << 16) }
func odd(v uint32) float32  { return math.Float32frombits(v & 0xffff0000) }

func pairsBlock4x2(acc *[4][panelWidth]float32, c int, xp, wp unsafe.Pointer, xstep uintptr, ks int) {
	s00, s01, s10, s11 := acc[0][c], acc[0][c+1], acc[1][c], acc[1][c+1]
	s20, s21, s30, s31 := acc[2][c], acc[2][c+1], acc[3][c], acc[3][c+1]
	for n := ks; ; {
		x, v := (*[8]float32)(xp), *(*uint64)(wp)
		e0, o0, e1, o1 := even(uint32(v)), odd(uint32(v)), even(uint32(v>>32)), odd(uint32(v>>32))
		s00 += float32(x[0] * e0)
		s00 += float32(x[1] * o0)
		s01 += float32(x[0] * e1)
		s01 += float32(x[1] * o1)
		s10 += float32(x[2] * e0)
		s10 += float32(x[3] * o0)
		s11 += float32(x[2] * e1)
		s11 += float32(x[3] * o1)
		s20 += float32(x[4] * e0)
		s20 += float32(x[5] * o0)
		s21 += float32(x[4] * e1)
		s21 += float32(x[5] * o1)
		s30 += float32(x[6] * e0)
		s30 += float32(x[7] * o0)
		s31 += float32(x[6] * e1)
		s31 += float32(x[7] * o1)
		xp, wp = unsafe.Add(xp, xstep), unsafe.Add(wp, panelWidth*4)
		if n--; n == 0 {
			break
		}
	}
	acc[0][c], acc[0][c+1], acc[1][c], acc[1][c+1] = s00, s01, s10, s11
	acc[2][c], acc[2][c+1], acc[3][c], acc[3][c+1] = s20, s21, s30, s31
}

func pairsBlock2x4(acc *[4][panelWidth]float32, c int, xp, wp unsafe.Pointer, xstep uintptr, ks int) {
	s00, s01, s02, s03 := acc[0][c], acc[0][c+1], acc[0][c+2], acc[0][c+3]
	s10, s11, s12, s13 := acc[1][c], acc[1][c+1], acc[1][c+2], acc[1][c+3]
	for n := ks; ; {
		x, v := (*[4]float32)(xp), (*[2]uint64)(wp)
		u := v[0]
		e0, o0, e1, o1 := even(uint32(u)), odd(uint32(u)), even(uint32(u>>32)), odd(uint32(u>>32))
		s00 += float32(x[0] * e0)
		s00 += float32(x[1] * o0)
		s01 += float32(x[0] * e1)
		s01 += float32(x[1] * o1)
		s10 += float32(x[2] * e0)
		s10 += float32(x[3] * o0)
		s11 += float32(x[2] * e1)
		s11 += float32(x[3] * o1)
		u = v[1]
		e2, o2, e3, o3 := even(uint32(u)), odd(uint32(u)), even(uint32(u>>32)), odd(uint32(u>>32))
		s02 += float32(x[0] * e2)
		s02 += float32(x[1] * o2)
		s03 += float32(x[0] * e3)
		s03 += float32(x[1] * o3)
		s12 += float32(x[2] * e2)
		s12 += float32(x[3] * o2)
		s13 += float32(x[2] * e3)
		s13 += float32(x[3] * o3)
		xp, wp = unsafe.Add(xp, xstep), unsafe.Add(wp, panelWidth*4)
		if n--; n == 0 {
			break
		}
	}
	acc[0][c], acc[0][c+1], acc[0][c+2], acc[0][c+3] = s00, s01, s02, s03
	acc[1][c], acc[1][c+1], acc[1][c+2], acc[1][c+3] = s10, s11, s12, s13
}

func pairsBlock1x4(acc *[4][panelWidth]float32, c int, xp, wp unsafe.Pointer, xstep uintptr, ks int) {
	s0, s1, s2, s3 := acc[0][c], acc[0][c+1], acc[0][c+2], acc[0][c+3]
	for n := ks; ; {
		x, v := (*[2]float32)(xp), (*[2]uint64)(wp)
		u, t := v[0], v[1]
		s0 += float32(x[0] * even(uint32(u)))
		s0 += float32(x[1] * odd(uint32(u)))
		s1 += float32(x[0] * even(uint32(u>>32)))
		s1 += float32(x[1] * odd(uint32(u>>32)))
		s2 += float32(x[0] * even(uint32(t)))
		s2 += float32(x[1] * odd(uint32(t)))
		s3 += float32(x[0] * even(uint32(t>>32)))
		s3 += float32(x[1] * odd(uint32(t>>32)))
		xp, wp = unsafe.Add(xp, xstep), unsafe.Add(wp, panelWidth*4)
		if n--; n == 0 {
			break
		}
	}
	acc[0][c], acc[0][c+1], acc[0][c+2], acc[0][c+3] = s0, s1, s2, s3
}

func f32Block4x2(acc *[4][panelWidth]float32, c int, xp, wp unsafe.Pointer, xstep uintptr, ks int) {
	s00, s01, s10, s11 := acc[0][c], acc[0][c+1], acc[1][c], acc[1][c+1]
	s20, s21, s30, s31 := acc[2][c], acc[2][c+1], acc[3][c], acc[3][c+1]
	for n := ks; ; {
		x, w := (*[4]float32)(xp), (*[2]float32)(wp)
		w0, w1 := w[0], w[1]
		s00 += float32(x[0] * w0)
		s01 += float32(x[0] * w1)
		s10 += float32(x[1] * w0)
		s11 += float32(x[1] * w1)
		s20 += float32(x[2] * w0)
		s21 += float32(x[2] * w1)
		s30 += float32(x[3] * w0)
		s31 += float32(x[3] * w1)
		xp, wp = unsafe.Add(xp, xstep), unsafe.Add(wp, panelWidth*4)
		if n--; n == 0 {
			break
		}
	}
	acc[0][c], acc[0][c+1], acc[1][c], acc[1][c+1] = s00, s01, s10, s11
	acc[2][c], acc[2][c+1], acc[3][c], acc[3][c+1] = s20, s21, s30, s31
}

func f32Block2x4(acc *[4][panelWidth]float32, c int, xp, wp unsafe.Pointer, xstep uintptr, ks int) {
	s00, s01, s02, s03 := acc[0][c], acc[0][c+1], acc[0][c+2], acc[0][c+3]
	s10, s11, s12, s13 := acc[1][c], acc[1][c+1], acc[1][c+2], acc[1][c+3]
	for n := ks; ; {
		x, w := (*[2]float32)(xp), (*[4]float32)(wp)
		s00 += float32(x[0] * w[0])
		s01 += float32(x[0] * w[1])
		s02 += float32(x[0] * w[2])
		s03 += float32(x[0] * w[3])
		s10 += float32(x[1] * w[0])
		s11 += float32(x[1] * w[1])
		s12 += float32(x[1] * w[2])
		s13 += float32(x[1] * w[3])
		xp, wp = unsafe.Add(xp, xstep), unsafe.Add(wp, panelWidth*4)
		if n--; n == 0 {
			break
		}
	}
	acc[0][c], acc[0][c+1], acc[0][c+2], acc[0][c+3] = s00, s01, s02, s03
	acc[1][c], acc[1][c+1], acc[1][c+2], acc[1][c+3] = s10, s11, s12, s13
}

func f32Block1x8(acc *[4][panelWidth]float32, c int, xp, wp unsafe.Pointer, xstep uintptr, ks int) {
	s := (*[8]float32)(acc[0][c:])
	s0, s1, s2, s3, s4, s5, s6, s7 := s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]
	for n := ks; ; {
		x, w := *(*float32)(xp), (*[8]float32)(wp)
		s0 += float32(x * w[0])
		s1 += float32(x * w[1])
		s2 += float32(x * w[2])
		s3 += float32(x * w[3])
		s4 += float32(x * w[4])
		s5 += float32(x * w[5])
		s6 += float32(x * w[6])
		s7 += float32(x * w[7])
		xp, wp = unsafe.Add(xp, xstep), unsafe.Add(wp, panelWidth*4)
		if n--; n == 0 {
			break
		}
	}
	*s = [8]float32{s0, s1, s2, s3, s4, s5, s6, s7}
}
