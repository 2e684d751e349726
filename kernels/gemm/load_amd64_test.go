//go:build !purego

package gemm

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCodeBlockAVX512 compares the kernel with codeBlock on blocks of coded
// weights' pairs and on blocks made to hit every case: all high bytes in
// the table, one outside at each of the 512 slots, the same one outside in
// several pairs of rows, and two different ones (raw).
func TestCodeBlockAVX512(t *testing.T) {
	if codeBlockSIMD == nil {
		t.Skip("no AVX-512 BW")
	}
	rng := rand.New(rand.NewPCG(31, 32))
	w := FromBF16(codedWeights(rng, 64, 1024), 64, 1024)
	lut := w.commonHighBytes()
	code := codeTable(&lut)
	outside := byte(0)
	for code[outside] >= 0 {
		outside++
	}
	other := outside + 1
	for code[other] >= 0 {
		other++
	}
	inTable := func() []uint32 {
		b := make([]uint32, amxSteps*panelWidth)
		for i := range b {
			b[i] = uint32(lut[rng.IntN(escapeCode)])<<8 | uint32(lut[rng.IntN(escapeCode)])<<24 | uint32(rng.Uint32()&0x00ff00ff)
		}
		return b
	}
	setHigh := func(b []uint32, e int, h byte) { // bf16 e of the block's rows in order
		shift := 8 + 16*uint(e%2)
		b[e/2] = b[e/2]&^(0xff<<shift) | uint32(h)<<shift
	}
	var blocks [][]uint32
	for p := range w.panels {
		for s := range w.steps / amxSteps {
			blocks = append(blocks, w.block(p, s))
		}
	}
	blocks = append(blocks, inTable())
	for e := range 2 * amxSteps * panelWidth {
		b := inTable()
		setHigh(b, e, outside)
		blocks = append(blocks, b)
		b = inTable()
		setHigh(b, e, outside)
		setHigh(b, (e+rng.IntN(511)+1)%512, outside)
		setHigh(b, (e+rng.IntN(511)+1)%512, outside)
		blocks = append(blocks, b)
		b = inTable()
		setHigh(b, e, outside)
		setHigh(b, (e+rng.IntN(511)+1)%512, other)
		blocks = append(blocks, b)
	}
	var kinds [3]int
	for i, b := range blocks {
		want := make([]byte, codedBlock)
		got := make([]byte, codedBlock)
		wantEsc, wantOK := codeBlock(b, want, code)
		gotEsc, gotOK := codeBlockSIMD(&b[0], &got[0], &lut)
		if gotOK != wantOK || gotOK && (gotEsc != wantEsc || !bytes.Equal(got, want)) {
			t.Fatalf("block %d: kernel gives ok %v, escape %#x, bytes %x; Go ok %v, escape %#x, bytes %x", i, gotOK, gotEsc, got, wantOK, wantEsc, want)
		}
		switch {
		case !wantOK:
			kinds[0]++
		case escapes(want):
			kinds[1]++
		default:
			kinds[2]++
		}
	}
	if kinds[0] == 0 || kinds[1] == 0 || kinds[2] == 0 {
		t.Fatalf("raw, escaped and plain blocks: %v; the test wants each", kinds)
	}
}

// escapes reports whether a coded block has a code of its escape.
func escapes(block []byte) bool {
	for _, c := range block[512:] {
		if c&15 == escapeCode || c>>4 == escapeCode {
			return true
		}
	}
	return false
}

// BenchmarkCodeBlock codes the blocks of an 8192×1024 weight on one
// thread, into one coded copy reused: the load's coding without its memory's
// first touch (bytes: the bf16 weights coded).
func BenchmarkCodeBlock(b *testing.B) {
	const n, k = 8192, 1024
	w := FromBF16(randBF16(n, k, 6), n, k)
	w.Code()
	c, lut := w.coded, w.coded.lut
	code := codeTable(&lut)
	paths := map[string]func(pairs []uint32, dst []byte){
		"go": func(pairs []uint32, dst []byte) { codeBlock(pairs, dst, code) },
	}
	if codeBlockSIMD != nil {
		paths["avx512"] = func(pairs []uint32, dst []byte) { codeBlockSIMD(&pairs[0], &dst[0], &lut) }
	}
	for name, code := range paths {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(2 * n * k)
			for b.Loop() {
				for p := range w.panels {
					for s := range c.tsteps {
						code(w.block(p, s), c.block(p, s))
					}
				}
			}
		})
	}
}

// TestScreenPanelAVX512 builds screens with the panel kernels and with the
// Go loop and compares them bit for bit: the int8 weight (quads, scales,
// corrections) and every factor, on shapes with a partial last panel, on
// weights with outliers, zero and subnormal channels, ties to round, and
// on weights that are not finite (no screen either way).
func TestScreenPanelAVX512(t *testing.T) {
	if screenPanelSIMD == nil {
		t.Skip("no AVX-512")
	}
	rng := rand.New(rand.NewPCG(33, 34))
	build := func(w *Weight, simd bool) *Screen {
		saved := screenPanelSIMD
		defer func() { screenPanelSIMD = saved }()
		if !simd {
			screenPanelSIMD = nil
		}
		return w.Screen()
	}
	for _, sh := range [][2]int{{16, 4}, {37, 64}, {150, 1024}, {33, 3000}} {
		n, k := sh[0], sh[1]
		raw := codedWeights(rng, n, k)
		for i := range raw {
			switch rng.IntN(50) {
			case 0:
				raw[i] = uint16(rng.IntN(0x80)) | uint16(rng.IntN(2))<<15 // subnormal or zero
			case 1:
				raw[i] = toBF16(float32(rng.IntN(255)-127) / 2) // ties when the scale is 1
			}
		}
		for j := range k {
			raw[3*k+j] = 0 // channel 3 all zeros
			if n > 5 {
				raw[5*k+j] = uint16(rng.IntN(0x80)) // channel 5 subnormal
			}
			if n > 7 {
				raw[7*k+j] = toBF16(float32(j%255-127) * 0.5) // scale 1, halves
			}
		}
		for _, bad := range []uint16{0, 0x7f80, 0xffc1} {
			w := slices.Clone(raw)
			if bad != 0 {
				w[rng.IntN(len(w))] = bad
			}
			pw := FromBF16(w, n, k)
			want, got := build(pw, false), build(pw, true)
			what := fmt.Sprintf("%d×%d, weight %#x", n, k, bad)
			if (want == nil) != (bad != 0) || (got == nil) != (want == nil) {
				t.Fatalf("%s: screens %v (Go) and %v (kernels)", what, want != nil, got != nil)
			}
			if want == nil {
				continue
			}
			checkPanelSums(t, what, pw, want)
			if !slices.Equal(got.q.quads, want.q.quads) || !slices.Equal(got.q.corr, want.q.corr) ||
				!slices.EqualFunc(got.q.scale, want.q.scale, sameBits) || !slices.EqualFunc(got.byNorm1, want.byNorm1, sameBits) ||
				!slices.EqualFunc(got.byNorm2, want.byNorm2, sameBits) || !sameBits(got.floor, want.floor) {
				t.Fatalf("%s: the kernels' screen differs from the Go loop's", what)
			}
		}
	}
}

// checkPanelSums compares the panel kernel's sums with Screen.sums of each
// channel of screen (built by the Go loop) bit for bit: the errors' squares
// must be added in the same order.
func checkPanelSums(t *testing.T, what string, w *Weight, screen *Screen) {
	t.Helper()
	if w.K%4 != 0 {
		return
	}
	q, row := screen.q, make([]uint16, w.K)
	quads := make([]uint32, q.steps*panelWidth)
	for panel := range w.panels {
		pairs := w.pairs[panel*w.steps*panelWidth:]
		var amax [panelWidth]uint32
		panelAbsMaxSIMD(&pairs[0], w.steps, &amax)
		var sw, inv [panelWidth]float32
		for c, a := range amax {
			sw[c], inv[c] = rowScale(a << 16)
		}
		var f panelSums
		screenPanelSIMD(&pairs[0], w.steps, &sw[0], &inv, &quads[0], &f)
		for c := range min(panelWidth, w.N-panel*panelWidth) {
			ch := panel*panelWidth + c
			w.bf16Row(ch, row)
			maxBits, sumQ, maxErr, sqErr, _ := screen.sums(ch, row)
			if uint16(amax[c]) != maxBits || int(f.sumQ[c]) != sumQ || 128*f.sum[c] != q.corr[ch] ||
				math.Float64bits(f.maxErr[c]) != math.Float64bits(maxErr) || math.Float64bits(f.sqErr[c]) != math.Float64bits(sqErr) {
				t.Fatalf("%s: channel %d: kernels' largest |w| %#x, Σ|q| %d, Σq %d, largest error %v, Σe² %v; Go's %#x, %d, %d, %v, %v",
					what, ch, amax[c], f.sumQ[c], f.sum[c], f.maxErr[c], f.sqErr[c], maxBits, sumQ, q.corr[ch]/128, maxErr, sqErr)
			}
		}
	}
}

// BenchmarkScreenBuild builds the screen of a 16384×1024 weight with the
// panel kernels and with the Go loop (bytes: the bf16 weights screened).
func BenchmarkScreenBuild(b *testing.B) {
	const n, k = 16384, 1024
	w := FromBF16(randBF16(n, k, 7), n, k)
	saved := screenPanelSIMD
	defer func() { screenPanelSIMD = saved }()
	for _, path := range []string{"go", "avx512"} {
		if path == "avx512" && saved == nil {
			continue
		}
		b.Run(path, func(b *testing.B) {
			screenPanelSIMD = nil
			if path == "avx512" {
				screenPanelSIMD = saved
			}
			b.SetBytes(2 * n * k)
			for b.Loop() {
				w.Screen()
			}
		})
	}
}
