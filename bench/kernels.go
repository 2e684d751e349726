package bench

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/attn"
	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/kernels/ops"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// KernelResult is one kernel at one shape on one path.
type KernelResult struct {
	Kernel   string  `json:"kernel"`
	Path     string  `json:"path"`
	Shape    string  `json:"shape"`
	Ms       float64 `json:"ms"` // median call time
	Rate     float64 `json:"rate"`
	Unit     string  `json:"unit"` // "GFLOP/s", "GOP/s" or "GB/s"
	Ceiling  float64 `json:"ceiling"`
	Fraction float64 `json:"fraction"`
	Target   float64 `json:"target"` // the fraction the kernel is expected to reach
}

// KernelResults print as a table.
type KernelResults []KernelResult

func (KernelResults) Header() []string {
	return []string{"kernel", "path", "shape", "ms", "rate", "ceiling", "of ceiling", "target"}
}

func (rs KernelResults) Rows() [][]string {
	var rows [][]string
	for _, r := range rs {
		verdict := "met"
		if r.Fraction < r.Target {
			verdict = "below"
		}
		rows = append(rows, []string{r.Kernel, r.Path, r.Shape, fmt.Sprintf("%.2f", r.Ms),
			fmt.Sprintf("%.1f %s", r.Rate, r.Unit), fmt.Sprintf("%.1f", r.Ceiling),
			fmt.Sprintf("%.1f%%", 100*r.Fraction), fmt.Sprintf("%.0f%% (%s)", 100*r.Target, verdict)})
	}
	return rows
}

// KernelOptions configure `ellm bench kernels`.
type KernelOptions struct {
	Paths   []kernels.Path // GEMM paths to measure (int8 runs on the best path)
	Repeat  int
	M       int // prefill rows
	AttnT   int // prefill attention length
	DecodeT int // decode attention context
}

// gemmShapes are Qwen3-0.6B's projections: fused q‖k‖v, o, fused gate‖up, down.
var gemmShapes = []struct {
	name string
	n, k int
}{{"qkv", 2048, 1024}, {"o", 1024, 2048}, {"gate_up", 6144, 1024}, {"down", 1024, 3072}}

// RunKernels measures the prefill GEMMs on each path, the decode GEMV on a
// weight far larger than the last-level cache, and prefill and decode
// attention, each against the ceiling its path is bound by.
func RunKernels(pool *threads.Pool, c *Ceilings, opts KernelOptions, progress *Progress) (KernelResults, error) {
	if c == nil {
		return nil, fmt.Errorf("kernel fractions need the machine's ceilings")
	}
	prev := kernels.Active()
	defer kernels.Force(prev)
	rng := rand.New(rand.NewPCG(7, 7))
	var out KernelResults
	best := kernels.CPU().Best()

	for _, p := range opts.Paths {
		if _, err := kernels.Force(p); err != nil {
			return nil, err
		}
		ceil, unit, target := c.ComputePeak(p, "bf16")/1e9, "GFLOP/s", 0.70
		switch p {
		case kernels.AVX2:
			target = 0.60
		case kernels.Generic, kernels.NEON: // no instruction ceilings measured
			target = 0
		}
		for _, s := range gemmShapes {
			w := gemm.FromBF16(randBF16(rng, s.n*s.k), s.n, s.k)
			ms := timeGEMM(pool, w, opts.M, s.k, s.n, opts.Repeat)
			out = append(out, rateResult("gemm bf16", p, fmt.Sprintf("%s M=%d N=%d K=%d", s.name, opts.M, s.n, s.k),
				ms, 2*float64(opts.M*s.n*s.k), ceil, unit, target))
			progress.Add(1)
		}
	}
	if _, err := kernels.Force(best); err != nil {
		return nil, err
	}
	if best != kernels.Generic {
		ceil := c.ComputePeak(best, "int8") / 1e9
		for _, s := range gemmShapes {
			w := gemm.QuantizeInt8(randBF16(rng, s.n*s.k), s.n, s.k)
			ms := timeGEMM(pool, w, opts.M, s.k, s.n, opts.Repeat)
			out = append(out, rateResult("gemm int8", best, fmt.Sprintf("%s M=%d N=%d K=%d", s.name, opts.M, s.n, s.k),
				ms, 2*float64(opts.M*s.n*s.k), ceil, "GOP/s", 0.50))
			progress.Add(1)
		}
	}

	// Decode: one row through the 151936×1024 lm_head (311 MB of bf16), read once per call.
	const vocab, hidden = 151936, 1024
	head := randBF16(rng, vocab*hidden)
	for _, q := range []struct {
		name  string
		w     *gemm.Weight
		bytes float64
	}{{"gemv bf16", gemm.FromBF16(head, vocab, hidden), 2 * vocab * hidden}, {"gemv int8", gemm.QuantizeInt8(head, vocab, hidden), vocab*hidden + 8*vocab}} {
		ms := timeGEMM(pool, q.w, 1, hidden, vocab, opts.Repeat)
		out = append(out, rateResult(q.name, best, "lm_head M=1 N=151936 K=1024", ms, q.bytes, c.DRAMGBps, "GB/s", 0.80))
		progress.Add(1)
	}

	// Attention at Qwen3-8B-like heads: 32 query heads would do, 16/8 is what the issue names.
	const qHeads, kvHeads, headDim = 16, 8, 128
	r, err := timeAttention(pool, rng, qHeads, kvHeads, headDim, opts.AttnT, opts.AttnT, opts.Repeat)
	if err != nil {
		return nil, err
	}
	flops := 4 * float64(opts.AttnT) * float64(opts.AttnT+1) / 2 * qHeads * headDim
	out = append(out, rateResult("attention prefill", best, fmt.Sprintf("T=%d q/kv heads %d/%d d=%d", opts.AttnT, qHeads, kvHeads, headDim),
		r, flops, c.rate(c.MachineKind("f32")), "GFLOP/s", 0.40))
	progress.Add(1)
	r, err = timeAttention(pool, rng, qHeads, kvHeads, headDim, opts.DecodeT, 1, opts.Repeat)
	if err != nil {
		return nil, err
	}
	kvBytes := 2 * float64(opts.DecodeT) * kvHeads * headDim * 2
	out = append(out, rateResult("attention decode", best, fmt.Sprintf("context %d, bf16 KV", opts.DecodeT), r, kvBytes, c.DRAMGBps, "GB/s", 0.70))
	progress.Add(1)
	return out, nil
}

func rateResult(kernel string, p kernels.Path, shape string, ms, work, ceiling float64, unit string, target float64) KernelResult {
	rate := work / (ms / 1e3) / 1e9
	r := KernelResult{Kernel: kernel, Path: p.String(), Shape: shape, Ms: ms, Rate: rate, Unit: unit, Ceiling: ceiling, Target: target}
	if ceiling > 0 {
		r.Fraction = rate / ceiling
	}
	return r
}

// timeGEMM returns the median time of y = x·Wᵀ for m rows, after a warm-up call.
func timeGEMM(pool *threads.Pool, w *gemm.Weight, m, k, n, repeat int) float64 {
	ctx := gemm.NewContext(pool, m, k)
	x, y := make([]float32, m*k), make([]float32, m*n)
	for i := range x {
		x[i] = float32(i%17)/17 - 0.5
	}
	ctx.MatMul(y, x, m, w)
	return medianMs(repeat, func() { ctx.MatMul(y, x, m, w) })
}

// timeAttention returns the median time of rows query rows at the end of a
// context of t positions (rows = t is a full causal prefill).
func timeAttention(pool *threads.Pool, rng *rand.Rand, qHeads, kvHeads, headDim, t, rows, repeat int) (float64, error) {
	a, err := attn.New(pool, rows, qHeads, kvHeads, headDim)
	if err != nil {
		return 0, err
	}
	c := attn.NewCache(1, kvHeads, t, headDim, attn.BF16)
	for i := range c.K16 {
		c.K16[i] = ops.F32ToBF16(rng.Float32() - 0.5)
		c.V16[i] = ops.F32ToBF16(rng.Float32() - 0.5)
	}
	q := make([]float32, rows*qHeads*headDim)
	for i := range q {
		q[i] = rng.Float32() - 0.5
	}
	o := make([]float32, len(q))
	seqs := []attn.Seq{{Slot: 0, Start: t - rows, N: rows, Row: 0}}
	a.Forward(o, q, c, seqs)
	return medianMs(repeat, func() { a.Forward(o, q, c, seqs) }), nil
}

func randBF16(rng *rand.Rand, n int) []uint16 {
	w := make([]uint16, n)
	for i := range w {
		w[i] = ops.F32ToBF16(float32(rng.NormFloat64() * 0.02))
	}
	return w
}

func medianMs(repeat int, f func()) float64 {
	ts := make([]float64, max(repeat, 1))
	for i := range ts {
		start := time.Now()
		f()
		ts[i] = ms(time.Since(start))
	}
	return Summarize(ts).Median
}
