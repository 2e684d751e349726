//go:build !purego

package gemm

import "unsafe"

// The AMX tile kernels, by [rows][panels] as every kernel set: one
// function each for bf16 and int8 that configures its tiles for the call.
var (
	// amxPairsKernels: bf16 activations (rounded as on the avx512bf16 path)
	// × bf16 weights, TDPBF16PS.
	amxPairsKernels = amxTable(pairsAMX)
	// amxQuadsKernels: TDPBUSD sums the same integers as VPDPBUSD, so int8
	// products are the same bits as on every other path.
	amxQuadsKernels = amxTable(quadsAMX)
)

func amxTable(k kernel) (t [maxRows + 1][maxPanels + 1]kernel) {
	for r := 1; r <= maxRows; r++ {
		t[r][1], t[r][2], t[r][4] = k, k, k
	}
	return t
}

func pairsAMX(a *kargs) {
	t := a.amx.set(a)
	amxDotPairs(t)
	pairsOut(a, t.acc)
}

func codedAMX(a *kargs) {
	t := a.amx.setCoded(a)
	amxCodedPairs(t)
	pairsOut(a, t.acc)
}

// The kernels of a coded weight by rows: amxCodedKernels on the tiles
// (kernelSet.tileCoded), and the register kernels of each AVX-512 family
// (kernelSet.coded).
var (
	amxCodedKernels = func() (t [maxRows + 1]kernel) {
		for r := 1; r <= amxFewRows; r++ {
			t[r] = codedAMX
		}
		return t
	}()
	pairs512Coded   = withCoded(&pairs512CodedKernels)
	bf16x512Coded   = withCoded(&bf16x512CodedKernels)
	bf16x512CodedL1 = withCoded(&bf16x512CodedL1Kernels)
)

// withCoded gives the register kernels of a coded weight their operands:
// coded_amd64.h reads them from the worker's amxTile, and restores into its
// buffer.
func withCoded(ks *[maxRows + 1]kernel) *[maxRows + 1]kernel {
	var t [maxRows + 1]kernel
	for r, k := range ks {
		if k != nil {
			t[r] = func(a *kargs) {
				a.amx.setCoded(a)
				k(a)
			}
		}
	}
	return &t
}

func quadsAMX(a *kargs) {
	t := a.amx.set(a)
	amxDotQuads(t)
	quadsOut(a, t.acc)
}

// set points the tile product at kernel call a.
func (t *amxTile) set(a *kargs) *amxTile {
	t.shape(a.r)
	t.x, t.lda, t.w, t.ps, t.steps, t.np = a.x, a.lx, a.w, a.ps, a.ks/amxSteps, a.p
	return t
}

//go:noescape
func amxDotQuads(t *amxTile)

// setCoded points the coded product at call a, whose weight's coded copy
// is a.coded and first panel a.pi.
func (t *amxTile) setCoded(a *kargs) *amxTile {
	t.set(a)
	c, p := a.coded, a.pi
	t.coded = unsafe.Pointer(&c.block(p, 0)[0])
	t.cps = uintptr(c.tsteps * codedBlock)
	t.raw = unsafe.Pointer(&c.flags[p])
	t.panels = uintptr(c.panels)
	t.escOff = uintptr(len(c.flags) / 2)
	t.lut = unsafe.Pointer(&c.lut)
	return t
}

//go:noescape
func amxDotPairs(t *amxTile)

//go:noescape
func amxCodedPairs(t *amxTile)

//go:noescape
func quadsOut(a *kargs, acc unsafe.Pointer)

//go:noescape
func pairsOut(a *kargs, acc unsafe.Pointer)
