package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// codedWeights are bf16 weights of shape n×k drawn like newProblem's, with
// outliers far outside their exponents' range every few hundred weights, so
// that some tile-step blocks cannot be coded.
func codedWeights(rng *rand.Rand, n, k int) []uint16 {
	w := newProblem(rng, 1, n, k).w
	for i := range w {
		if rng.IntN(400) == 0 {
			w[i] = toBF16(float32(rng.NormFloat64()) * 1e6)
		}
	}
	return w
}

// restoreBlock is the coded block b with escape esc, of the table lut, as
// pairs: what amxCodedPairs restores.
func restoreBlock(b []byte, lut [32]byte, esc byte) []uint32 {
	lut[escapeCode] = esc
	pairs := make([]uint32, amxSteps*panelWidth)
	low, codes := b[:512], b[512:]
	for r := 0; r < amxSteps; r += 2 {
		for i := range 64 {
			row, e := pairSlot(i)
			code := codes[16*r+i%32] >> (4 * (i / 32)) & 15
			v := uint32(low[32*r+i]) | uint32(lut[code])<<8
			pairs[(r+row)*panelWidth+e/2] |= v << (16 * (e % 2))
		}
	}
	return pairs
}

// TestCodeRestoresPairs: every block a weight codes restores to its pairs
// bit for bit; a block is flagged raw exactly when two of its high bytes are
// not in the table, and has an escape when one is; the table is the 15 most
// frequent high bytes; and the coded copy's size is what Code reports and
// Bytes counts.
func TestCodeRestoresPairs(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	var raws, escaped, blocks int
	for _, s := range [][2]int{{16, 32}, {150, 128}, {1000, 256}, {64, 3072}} {
		n, k := s[0], s[1]
		w := FromBF16(codedWeights(rng, n, k), n, k)
		plain := w.Bytes()
		added := w.Code()
		c := w.coded
		if c == nil || !w.Coded() || added != 4*len(c.blocks)+len(c.flags) || w.Bytes() != plain+added {
			t.Fatalf("%v: Code added %d bytes, coded copy %v, Bytes %d → %d", s, added, c, plain, w.Bytes())
		}
		var count [256]int
		for _, v := range w.pairs {
			count[v>>8&0xff]++
			count[v>>24]++
		}
		table := c.lut[:escapeCode]
		for b := range 256 {
			for _, in := range table {
				if !slices.Contains(table, byte(b)) && count[b] > count[in] {
					t.Fatalf("%v: high byte %#x (%d times) left out of the table for %#x (%d times)", s, b, count[b], in, count[in])
				}
			}
		}
		for i, b := range c.lut {
			if b != c.lut[i%16] {
				t.Fatalf("%v: lut[%d] = %#x, want lut[%d] = %#x repeated", s, i, b, i%16, c.lut[i%16])
			}
		}
		nb := w.panels * c.tsteps
		for p := range w.panels {
			for st := range c.tsteps {
				pairs := w.block(p, st)
				var outside []byte
				for _, v := range pairs {
					for _, h := range []byte{byte(v >> 8), byte(v >> 24)} {
						if !slices.Contains(table, h) && !slices.Contains(outside, h) {
							outside = append(outside, h)
						}
					}
				}
				what := fmt.Sprintf("%v: block (panel %d, step %d)", s, p, st)
				f := st*w.panels + p
				if raw := c.flags[f] != 0; raw != (len(outside) > 1) {
					t.Fatalf("%s flagged raw %v, with high bytes %x outside the table", what, raw, outside)
				}
				blocks++
				if len(outside) > 1 {
					raws++
					continue
				}
				if len(outside) == 1 {
					escaped++
				}
				if got := restoreBlock(c.block(p, st), c.lut, c.flags[nb+f]); !slices.Equal(got, pairs) {
					t.Fatalf("%s restores to %x, want %x", what, got, pairs)
				}
			}
		}
	}
	if raws == 0 || escaped == 0 || raws+escaped == blocks {
		t.Fatalf("%d blocks raw, %d escaped, of %d: the test wants raw, escaped and plain blocks", raws, escaped, blocks)
	}
}

// assertBlockKinds fails unless coded weight w has blocks raw and not.
func assertBlockKinds(t *testing.T, what string, w *Weight) {
	t.Helper()
	raws, nb := 0, w.panels*w.coded.tsteps
	for _, f := range w.coded.flags[:nb] {
		raws += int(f)
	}
	if raws == 0 || raws == nb {
		t.Fatalf("%s: %d of %d blocks raw: the test wants both kinds", what, raws, nb)
	}
}

// TestCodeSkipsWhatItCannotCode: Code leaves weights alone that are not
// bf16 or whose K is not whole tile steps, and codes a weight once.
func TestCodeSkipsWhatItCannotCode(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for name, w := range map[string]*Weight{
		"f32":     FromF32(newProblem(rng, 1, 32, 64).wf, 32, 64),
		"int8":    QuantizeInt8(newProblem(rng, 1, 32, 64).w, 32, 64),
		"K = 48":  FromBF16(newProblem(rng, 1, 32, 48).w, 32, 48),
		"K = 100": FromBF16(newProblem(rng, 1, 32, 100).w, 32, 100),
	} {
		if n := w.Code(); n != 0 || w.coded != nil {
			t.Errorf("%s: Code added %d bytes", name, n)
		}
	}
	w := FromBF16(newProblem(rng, 1, 32, 64).w, 32, 64)
	if w.Code() == 0 || w.Code() != 0 {
		t.Error("a bf16 weight of whole tile steps: want it coded by the first Code only")
	}
}

// TestTimeCodedAndUncode: TimeCoded times the coded weights from the pairs
// and with each prefetch level the path has, and leaves their copies as it
// found them (the products still read them, with the prefetch they had),
// and has nothing to time without any; Uncode drops a copy and its bytes
// once.
func TestTimeCodedAndUncode(t *testing.T) {
	pool := threads.New(2, false)
	defer pool.Close()
	rng := rand.New(rand.NewPCG(27, 28))
	n, k := 4*maxPanels*panelWidth, 256
	pr := newProblem(rng, 1, n, k)
	w, plain := FromBF16(pr.w, n, k), FromBF16(pr.w, n, k)
	want := make([]float32, n)
	NewContext(pool, 1, k).MatMul(want, pr.x[:k], 1, w)
	bytes, added := w.Bytes(), w.Code()
	if r := TimeCoded(pool, []*Weight{plain}, 2); r != (CodedRates{}) {
		t.Fatalf("TimeCoded without coded weights = %+v: want none", r)
	}
	w.SetCodedPrefetch(PrefetchL1)
	r := TimeCoded(pool, []*Weight{plain, w}, 2)
	timed := func(rate float64) bool { return rate > 0 && !math.IsInf(rate, 0) }
	hasL1 := kernelsFor(kernels.Active()).coded[PrefetchL1] != nil
	if !timed(r.Plain) || !timed(r.Coded[PrefetchL2]) || timed(r.Coded[PrefetchL1]) != hasL1 || !w.Coded() || plain.Coded() || w.coded.prefetch != PrefetchL1 {
		t.Fatalf("TimeCoded = %+v (L1 kernels: %v); coded %v, %v, prefetch %v after: want finite positive rates for the pairs and each level, the copy where it was",
			r, hasL1, w.Coded(), plain.Coded(), w.coded.prefetch)
	}
	if ReadsCoded(kernels.Active()) {
		assertReadsCopy(t, "after TimeCoded", NewContext(pool, 1, k), pr.x[:k], w, want)
	}
	if got := w.Uncode(); got != added || w.Coded() || w.Bytes() != bytes || w.Uncode() != 0 {
		t.Fatalf("Uncode = %d (Code added %d), coded %v, bytes %d (want %d)", got, added, w.Coded(), w.Bytes(), bytes)
	}
	y := make([]float32, n)
	NewContext(pool, 1, k).MatMul(y, pr.x[:k], 1, w)
	if !slices.EqualFunc(y, want, sameBits) {
		t.Fatal("the product after Uncode: want the bits of the weight never coded")
	}
}

func TestCodedRatesBest(t *testing.T) {
	for _, tt := range []struct {
		r    CodedRates
		want CodedPrefetch
		rate float64
	}{
		{CodedRates{Plain: 1, Coded: [numPrefetches]float64{2, 3}}, PrefetchL1, 3},
		{CodedRates{Plain: 1, Coded: [numPrefetches]float64{3, 2}}, PrefetchL2, 3},
		{CodedRates{Plain: 1, Coded: [numPrefetches]float64{2, 0}}, PrefetchL2, 2}, // no L1 kernels
		{CodedRates{Plain: 1, Coded: [numPrefetches]float64{2, 2}}, PrefetchL2, 2}, // a tie keeps L2
	} {
		if p, rate := tt.r.Best(); p != tt.want || rate != tt.rate {
			t.Errorf("%+v.Best() = %v, %v: want %v, %v", tt.r, p, rate, tt.want, tt.rate)
		}
	}
	if PrefetchL1.Other() != PrefetchL2 || PrefetchL2.Other() != PrefetchL1 {
		t.Errorf("Other: L1 → %v, L2 → %v", PrefetchL1.Other(), PrefetchL2.Other())
	}
}

// assertReadsCopy fails if a one-row product of x with coded weight w still
// gives want with the low bytes of w's coded copy spoilt.
func assertReadsCopy(t *testing.T, what string, c *Context, x []float32, w *Weight, want []float32) {
	t.Helper()
	spoil := func() {
		for p := range w.panels {
			for s := range w.coded.tsteps {
				low := w.coded.block(p, s)[:codedBlock*2/3]
				for i := range low {
					low[i] ^= 1
				}
			}
		}
	}
	spoil()
	defer spoil()
	y := make([]float32, w.N)
	c.MatMul(y, x, 1, w)
	if slices.EqualFunc(y, want, sameBits) {
		t.Fatalf("%s: a one-row product with the coded copy spoilt gives the same bits: it does not read the copy", what)
	}
}
