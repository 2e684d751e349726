package gemm

import (
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ceiling"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// Probe shape: a prefill-shaped product small enough to stay in L2 (64 KiB
// of bf16 weights, 128 KiB of activations) so that it measures the tile
// kernels, not memory, with enough row tiles (16) that the avx512 path
// widens each block of weights once for many tiles, as in a real prefill.
const (
	probeM = 128
	probeN = 128
	probeK = 256
)

// Probe times one path's kernels on one weight kind, on the calling thread:
// the start-up calibration that picks each operation's path (kernels/tune).
type Probe struct {
	pool *threads.Pool
	c    *Context
	w    *Weight
	x, y []float32
}

// NewProbe prepares a probe of path p for int8 weights, or bf16 weights.
// The CPU must support p.
func NewProbe(p kernels.Path, int8 bool) *Probe {
	rng := rand.New(rand.NewPCG(1, 2))
	bits := make([]uint16, probeN*probeK)
	for i := range bits {
		bits[i] = toBF16(float32(rng.NormFloat64() * 0.05))
	}
	pr := &Probe{pool: threads.New(1, false), x: make([]float32, probeM*probeK), y: make([]float32, probeM*probeN)}
	for i := range pr.x {
		pr.x[i] = float32(rng.NormFloat64())
	}
	if int8 {
		pr.w = QuantizeInt8(bits, probeN, probeK)
	} else {
		pr.w = FromBF16(bits, probeN, probeK)
	}
	pr.c = newContext(pr.pool, probeM, probeK, p, p)
	return pr
}

// Measure runs the product for at least d of this thread's CPU time and
// returns its rate in G multiply-adds×2 per CPU second (GFLOP/s, or GOP/s
// for int8). CPU time, not wall time, so that other processes sharing the
// machine slow neither candidate down in the comparison.
func (pr *Probe) Measure(d time.Duration) float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pr.c.MatMul(pr.y, pr.x, probeM, pr.w) // warm the caches
	start := ceiling.ThreadCPU()
	calls := 0
	for {
		pr.c.MatMul(pr.y, pr.x, probeM, pr.w)
		calls++
		if took := ceiling.ThreadCPU() - start; took >= d {
			return float64(calls) * 2 * probeM * probeN * probeK / took.Seconds() / 1e9
		}
	}
}

// Close stops the probe's pool.
func (pr *Probe) Close() { pr.pool.Close() }
