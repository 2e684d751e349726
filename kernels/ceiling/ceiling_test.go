package ceiling

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ellm-dev/ellm/kernels/threads"
)

func TestReadSumMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 256, 512, 4096, 1 << 16} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if got, want := readSum(b), readSumGo(b); got != want {
			t.Errorf("%d bytes: readSum %#x, Go %#x", n, got, want)
		}
	}
}

func TestMeasure(t *testing.T) {
	pool := threads.New(2, false)
	defer pool.Close()
	c, err := Measure(pool, Options{Interval: 2 * time.Millisecond, Reps: 2, DRAMBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", c)
	if c.Threads != 2 {
		t.Errorf("Threads = %d", c.Threads)
	}
	for name, p := range map[string]Peak{"DRAM": c.DRAMGBps} {
		if !(p.Single > 0 && p.All > 0) {
			t.Errorf("%s: %+v, want positive", name, p)
		}
	}
	for k, lp := range kindLoops() {
		if p := c.Peak(k); (lp != nil) != (p.Single > 0 && p.All > 0) {
			t.Errorf("%v: peak %+v with its loop present %v", k, p, lp != nil)
		}
	}
	w, err := Measure(pool, Options{Interval: 2 * time.Millisecond, Reps: 2, NoDRAM: true, WallClock: true})
	if err != nil {
		t.Fatal(err)
	}
	if w.DRAMGBps != (Peak{}) {
		t.Errorf("NoDRAM measured DRAM: %+v", w.DRAMGBps)
	}
	if l := loops(); l.fma512 != nil && !(w.FMAGFLOPS.All > 0) {
		t.Errorf("wall-clock FMA ceiling %+v", w.FMAGFLOPS)
	}
}

func TestBurst(t *testing.T) {
	pool := threads.New(2, false)
	defer pool.Close()
	m, err := NewMeter(pool, Options{Interval: 2 * time.Millisecond, Reps: 2, DRAMBytes: 64 << 20, WallClock: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := m.Burst(DRAM); !(got > 0) {
		t.Errorf("DRAM burst %v, want positive", got)
	}
	for k, lp := range kindLoops() {
		got := m.Burst(k)
		if (lp != nil) != (got > 0) {
			t.Errorf("%v burst %v with loop present %v", k, got, lp != nil)
		}
	}
	noBuf, err := NewMeter(pool, Options{NoDRAM: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := noBuf.Burst(DRAM); got != 0 {
		t.Errorf("DRAM burst without a buffer: %v", got)
	}
}

// kindLoops is each compute ceiling's loop on this CPU (nil: not measured).
func kindLoops() map[Kind]*loop {
	l := loops()
	return map[Kind]*loop{FMA: l.fma512, FMA256: l.fma256, BF16: l.bf16, VNNI: l.vnni, Int8x256: l.int8x256, AMXBF16: l.amxBF16, AMXInt8: l.amxInt8}
}
