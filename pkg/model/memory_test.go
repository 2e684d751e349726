package model

import (
	"testing"

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
	if !ok || !(c.PlainGBps > 0) || !(c.CodedGBps > 0) {
		t.Fatalf("ChooseCoded = %+v, %v: want a choice from two positive rates", c, ok)
	}
	if c.Kept != (m.CodedBytes() == coded) || !c.Kept && (m.CodedBytes() != 0 || m.WeightBytes() != total-coded) {
		t.Fatalf("%v: coded bytes %d → %d, weight bytes %d → %d", c, coded, m.CodedBytes(), total, m.WeightBytes())
	}
	if c.Kept {
		m.dropCoded()
		if m.CodedBytes() != 0 || m.WeightBytes() != total-coded {
			t.Fatalf("dropped: coded bytes %d → %d, weight bytes %d → %d (want −%d)", coded, m.CodedBytes(), total, m.WeightBytes(), coded)
		}
	}
	var mem int64
	for _, w := range m.linearWeights() {
		if w.Coded() {
			t.Fatal("a weight kept its coded copy after dropCoded")
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
