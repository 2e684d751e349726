package model

import (
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// TestChooseCoded: ChooseCoded times both ways and leaves the model as it
// says (the copies kept, or dropped with their bytes no longer counted);
// dropping them takes every copy and exactly the bytes CodedBytes counted,
// and a model without copies has nothing to choose. (The products give the
// same bits either way: kernels/gemm's TestCoded.)
func TestChooseCoded(t *testing.T) {
	pool := threads.New(2, false)
	defer pool.Close()
	m := loadTiny(t, "tiny-qwen3-a", LoadOptions{})
	if !(LoadOptions{}).codes() {
		if _, ok := m.ChooseCoded(pool); ok || m.CodedBytes() != 0 {
			t.Fatalf("no coded kernels on this path: want nothing to choose, got a choice with %d coded bytes", m.CodedBytes())
		}
		t.Skip("this kernel path reads no coded weights")
	}
	coded, total := m.CodedBytes(), m.WeightBytes()
	if coded == 0 {
		t.Fatal("a bf16 model on a path with coded kernels: want coded copies")
	}
	c, ok := m.ChooseCoded(pool)
	if !ok || !(c.PlainGBps > 0) || !(c.CodedGBps > 0) || c.Kept != worthCoding(c.PlainGBps, c.CodedGBps) {
		t.Fatalf("ChooseCoded = %+v, %v: want the choice worthCoding makes of two positive rates", c, ok)
	}
	if s := c.String(); c.Kept && !strings.HasPrefix(s, "coded (") || !c.Kept && !strings.Contains(s, "copy dropped") {
		t.Errorf("%v: says neither what was kept nor what was dropped", c)
	}
	if c.OtherGBps > c.CodedGBps || c.OtherGBps > 0 && !strings.Contains(c.String(), "prefetched into "+c.Prefetch.String()) {
		t.Errorf("%+v (%v): want the faster prefetch level, and the level named where two were timed", c, c)
	}
	assertCodedPrefetch(t, m, c.Prefetch)
	if c.Kept != (m.CodedBytes() == coded) || !c.Kept && (m.CodedBytes() != 0 || m.WeightBytes() != total-coded) {
		t.Fatalf("%v: coded bytes %d → %d, weight bytes %d → %d", c, coded, m.CodedBytes(), total, m.WeightBytes())
	}
	if c.Kept {
		m.keepCoded(false)
		if m.CodedBytes() != 0 || m.WeightBytes() != total-coded {
			t.Fatalf("dropped: coded bytes %d → %d, weight bytes %d → %d (want −%d)", coded, m.CodedBytes(), total, m.WeightBytes(), coded)
		}
	}
	var mem int64
	for _, w := range m.linearWeights() {
		if w.Coded() {
			t.Fatal("a weight kept its coded copy after keepCoded(false)")
		}
	}
	for _, b := range m.WeightMemory() {
		mem += int64(len(b))
	}
	if mem >= total-coded {
		t.Fatalf("weight memory %d bytes after the copies were dropped: want below %d", mem, total-coded)
	}
	if _, ok := m.ChooseCoded(pool); ok {
		t.Fatal("ChooseCoded with the copies gone: want nothing to choose")
	}
}

// TestCodedSample: the load codes the layers' weights in order up to the
// sample's bytes, and lm_head; keeping the copies then codes every other
// weight, dropping them takes every one, and the bytes counted follow.
func TestCodedSample(t *testing.T) {
	if !(LoadOptions{}).codes() {
		t.Skip("this kernel path reads no coded weights")
	}
	for _, keep := range []bool{true, false} {
		m := loadTiny(t, "tiny-qwen3-a", LoadOptions{NoCodedWeights: true})
		ws := m.linearWeights()
		plain := m.WeightBytes()
		if m.CodedBytes() != 0 || len(ws) < 3 || ws[len(ws)-1] != m.lmHead {
			t.Fatalf("loaded without copies: %d coded bytes, %d linear weights", m.CodedBytes(), len(ws))
		}
		// A limit the first two weights reach: they and lm_head are coded.
		m.code(m.codedSample(2*int64(ws[0].N)*int64(ws[0].K) + 1))
		for i, w := range ws {
			if want := i < 2 || w == m.lmHead; w.Coded() != want {
				t.Fatalf("weight %d of %d coded %v after the sample, want %v", i, len(ws), w.Coded(), want)
			}
		}
		sample := m.CodedBytes()
		if sample <= 0 || m.WeightBytes() != plain+sample {
			t.Fatalf("sample: %d coded bytes, weight bytes %d → %d", sample, plain, m.WeightBytes())
		}
		m.keepCoded(keep)
		var held int64
		for i, w := range ws {
			if w.Coded() != keep {
				t.Fatalf("keep %v: weight %d coded %v", keep, i, w.Coded())
			}
			for _, b := range w.Memory()[1:] {
				held += int64(len(b))
			}
		}
		if m.CodedBytes() != held || m.WeightBytes() != plain+held || keep && held <= sample {
			t.Fatalf("keep %v: %d coded bytes counted, %d held (sample %d); weight bytes %d, plain %d", keep, m.CodedBytes(), held, sample, m.WeightBytes(), plain)
		}
	}
}

// The coded copies stay only for a gain beyond the timing's spread: they
// cost memory whatever they save.
func TestWorthCoding(t *testing.T) {
	for _, tc := range []struct {
		plain, coded float64
		want         bool
	}{
		{60, 66, true},    // 10 % faster
		{60, 63, true},    // 5 %
		{60, 62.9, false}, // within the spread
		{60, 60, false},
		{60, 50, false},
	} {
		if got := worthCoding(tc.plain, tc.coded); got != tc.want {
			t.Errorf("worthCoding(%v, %v) = %v, want %v", tc.plain, tc.coded, got, tc.want)
		}
	}
}

// assertCodedPrefetch fails unless every coded weight of m prefetches its
// copy into p, the level its coded choice names.
func assertCodedPrefetch(t *testing.T, m *Model, p gemm.CodedPrefetch) {
	t.Helper()
	for _, w := range m.linearWeights() {
		if w.Coded() && w.CodedPrefetch() != p {
			t.Fatalf("a coded weight prefetches into %v, the coded choice's level %v", w.CodedPrefetch(), p)
		}
	}
}
