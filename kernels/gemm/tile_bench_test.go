//go:build amd64 && !purego

package gemm

import (
	"cmp"
	"testing"
	"time"
	"unsafe"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ceiling"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// BenchmarkTile runs one prefill tile kernel of each family the CPU has (8
// rows × 2 panels of zmm; AMX 16 × 4; the ymm kernels' tallest tile of one
// panel) over L2-resident data on one thread and reports it as a fraction
// of the instruction's peak, measured alternately with it.
func BenchmarkTile(b *testing.B) {
	if !kernels.CPU().Supports(kernels.AVX2) {
		b.Skip("needs avx2")
	}
	pool := threads.New(1, false)
	defer pool.Close()
	meter, err := ceiling.NewMeter(pool, ceiling.Options{Interval: 5 * time.Millisecond, Reps: 2, NoDRAM: true})
	if err != nil {
		b.Fatal(err)
	}
	const ks = 512
	x := alignedU32(8 * ks * 2)
	w := alignedU32(2 * ks * 16 * 2)
	y := make([]float32, 8*32)
	// Realistic operands: bf16 values near 1 in every half-word, so that the
	// f32 kernels read them as ordinary floats too.
	for i := range x {
		x[i] = 0x3f803f80 + uint32(i*2654435761)&0x007f007f
	}
	for i := range w {
		w[i] = 0x3c003c00 + uint32(i*2246822519)&0x007f007f
	}
	type tileCase struct {
		name  string
		k     kernel
		flops float64      // per step per row per panel
		peak  ceiling.Kind // the instruction's single-thread rate
		rows  int          // 8 unless set
		np    int          // 2 unless set
	}
	cases := []tileCase{
		{"f32-ymm", f32x256Kernels[6][1], 32, ceiling.FMA256, 6, 1},
		{"int8-ymm", i8x256Kernels[4][1], 128, ceiling.Int8x256, 4, 1},
	}
	if kernels.CPU().AVXVNNI {
		cases = append(cases, tileCase{"vnni-ymm", vnni256Kernels[6][1], 128, ceiling.Int8x256, 6, 1})
	}
	if kernels.CPU().Supports(kernels.AVX512BF16) {
		cases = append(cases,
			tileCase{"bf16", bf16x512Kernels[8][2], 64, ceiling.BF16, 0, 0},
			tileCase{"pairs-f32", pairs512Kernels[8][2], 64, ceiling.FMA, 0, 0},
			tileCase{"f32", f32x512Kernels[8][2], 32, ceiling.FMA, 0, 0},
			tileCase{"vnni", vnni512Kernels[8][2], 128, ceiling.VNNI, 0, 0})
	}
	if kernels.CPU().Supports(kernels.AMX) {
		// A call of the AMX kernels: 16 rows (one tile) × 4 panels, rows of x one after the other.
		cases = append(cases,
			tileCase{"amx-bf16", amxPairsKernels[16][4], 64, ceiling.AMXBF16, 16, 4},
			tileCase{"amx-int8", amxQuadsKernels[16][4], 128, ceiling.AMXInt8, 16, 4})
	}
	x = alignedU32(16 * ks * 2)
	w = alignedU32(4 * ks * 16 * 2)
	y = make([]float32, 16*64)
	for i := range x {
		x[i] = 0x3f803f80 + uint32(i*2654435761)&0x007f007f
	}
	for i := range w {
		w[i] = 0x3c003c00 + uint32(i*2246822519)&0x007f007f
	}
	for _, tc := range cases {
		rows, np := cmp.Or(tc.rows, 8), cmp.Or(tc.np, 2)
		b.Run(tc.name, func(b *testing.B) {
			sx := make([]float32, rows)
			a := &kargs{x: unsafe.Pointer(&x[0]), w: unsafe.Pointer(&w[0]), ps: ks * 64, ks: ks, r: rows, p: np, lx: ks * 4,
				y: unsafe.Pointer(&y[0]), ldy: uintptr(np * 64), sx: unsafe.Pointer(&sx[0]), sw: unsafe.Pointer(&y[0]), wc: unsafe.Pointer(&y[0]),
				ahead: nearPrefetch}
			if tc.rows != 0 {
				a.amx = newAMXTile()
			}
			var best, peak float64
			for range 10 {
				c := meter.Compute()
				peak = max(peak, c.Peak(tc.peak).Single)
				const calls = 500
				start := ceiling.CPUTime()
				for range calls {
					tc.k(a)
				}
				best = max(best, calls*ks*float64(rows*np)*tc.flops/(ceiling.CPUTime()-start).Seconds()/1e9)
			}
			b.ReportMetric(best, "GFLOP/s")
			b.ReportMetric(100*best/peak, "%peak")
		})
	}
}
