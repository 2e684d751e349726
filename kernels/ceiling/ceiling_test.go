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
	if l := loops(); l.fma512 != nil && !(c.FMAGFLOPS.Single > 0) {
		t.Errorf("FMA ceiling %+v on a CPU with AVX-512", c.FMAGFLOPS)
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
