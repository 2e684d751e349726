package gemm

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestFromBF16Parts checks the pairs layout against its definition (pair q
// of channel c of a panel: elements 2q and 2q+1 of the row, low first; an
// odd K's last element alone; channels past N zero) for weights given
// whole and in parts, with rows that start on a word (the word loads) and
// rows that do not (the element loop), and that QuantizeInt8Parts equals
// QuantizeInt8 of the concatenation.
func TestFromBF16Parts(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sh := range []struct {
		k     int
		parts []int // rows per part
	}{
		{2, []int{16}}, {7, []int{33}}, {1024, []int{32, 16, 16}}, {1, []int{17}},
		{3, []int{1, 47}}, {130, []int{5, 11, 16}}, {64, []int{48}},
	} {
		n := 0
		for _, r := range sh.parts {
			n += r
		}
		w := make([]uint16, n*sh.k)
		for i := range w {
			w[i] = uint16(rng.Uint32())
		}
		for _, shift := range []int{0, 1} { // 1: every row off a word boundary when k is even
			buf := make([]uint16, len(w)+shift)
			copy(buf[shift:], w)
			var parts [][]uint16
			for at := shift; at < len(buf); {
				r := sh.parts[len(parts)]
				parts = append(parts, buf[at:at+r*sh.k])
				at += r * sh.k
			}
			p := FromBF16Parts(parts, sh.k)
			if p.N != n || p.K != sh.k {
				t.Fatalf("k=%d parts %v: shape %d×%d", sh.k, sh.parts, p.N, p.K)
			}
			for ch := range p.panels * panelWidth {
				for q := range p.steps {
					var want uint32
					if ch < n {
						want = uint32(w[ch*sh.k+2*q])
						if 2*q+1 < sh.k {
							want |= uint32(w[ch*sh.k+2*q+1]) << 16
						}
					}
					panel, c := ch/panelWidth, ch%panelWidth
					if got := p.pairs[(panel*p.steps+q)*panelWidth+c]; got != want {
						t.Fatalf("k=%d parts %v shift %d: channel %d pair %d = %#x, want %#x", sh.k, sh.parts, shift, ch, q, got, want)
					}
				}
			}
			// random bits include NaNs, whose channels get a NaN scale
			qp, qw := QuantizeInt8Parts(parts, sh.k), QuantizeInt8(w, n, sh.k)
			if !slices.Equal(qp.quads, qw.quads) || !slices.EqualFunc(qp.scale, qw.scale, sameBits) || !slices.Equal(qp.corr, qw.corr) {
				t.Fatalf("k=%d parts %v shift %d: QuantizeInt8Parts differs from QuantizeInt8", sh.k, sh.parts, shift)
			}
		}
	}
}

// TestPartsMustBeWholeRows checks that parts which are not whole rows, or
// no rows at all, are refused.
func TestPartsMustBeWholeRows(t *testing.T) {
	for _, c := range []struct {
		name  string
		parts [][]uint16
		k     int
	}{
		{"partial row", [][]uint16{make([]uint16, 8), make([]uint16, 5)}, 4},
		{"no rows", [][]uint16{nil}, 4},
		{"k 0", [][]uint16{make([]uint16, 4)}, 0},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", c.name)
				}
			}()
			FromBF16Parts(c.parts, c.k)
		}()
	}
}
