package bench

import (
	"context"
	"fmt"

	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

// ComparePoint is one test both engines run: a prefill of Prefill tokens,
// or (Prefill 0) Batch sequences decoding at context Depth.
type ComparePoint struct {
	Prefill int
	Depth   int
	Batch   int
}

func (p ComparePoint) String() string {
	if p.Prefill > 0 {
		return fmt.Sprintf("prefill %d", p.Prefill)
	}
	return fmt.Sprintf("decode depth %d batch %d", p.Depth, p.Batch)
}

// CompareResult is one point measured by both engines.
type CompareResult struct {
	Test string `json:"test"`
	// Tokens per second (all sequences together for decode), over rounds.
	Ellm  Summary `json:"ellm_tokens_per_second"`
	Llama Summary `json:"llamacpp_tokens_per_second"`
	// Ratio is ellm's median over llama.cpp's.
	Ratio float64 `json:"ratio"`
	// Fractions of the machine's peak: compute for prefill (the best
	// ceiling for the dtype, whichever path an engine takes), DRAM read
	// bandwidth for decode; both engines are charged the same work.
	EllmFraction  float64 `json:"ellm_peak_fraction"`
	LlamaFraction float64 `json:"llamacpp_peak_fraction"`
}

// CompareResults print as a table.
type CompareResults []CompareResult

func (CompareResults) Header() []string {
	return []string{"test", "ellm tok/s", "llama.cpp tok/s", "ellm / llama.cpp", "ellm of peak", "llama.cpp of peak"}
}

func (rs CompareResults) Rows() [][]string {
	var rows [][]string
	for _, r := range rs {
		rows = append(rows, []string{r.Test,
			fmt.Sprintf("%.1f ±%.0f%%", r.Ellm.Median, 100*r.Ellm.Spread()),
			fmt.Sprintf("%.1f ±%.0f%%", r.Llama.Median, 100*r.Llama.Spread()),
			fmt.Sprintf("%.2f", r.Ratio), fraction(r.EllmFraction), fraction(r.LlamaFraction)})
	}
	return rows
}

// CompareOptions say what RunCompare measures.
type CompareOptions struct {
	Points []ComparePoint
	// Rounds is how many times each point is measured by each engine; the
	// engines alternate within a round and swap who goes first every round,
	// so drift in the machine's speed falls on both.
	Rounds int
	Tokens int // decode steps timed per measurement
	Seed   uint64
	DType  string
	// KVBytes is ellm's KV cache bytes per position
	// (modelcfg.KVBytesPerPosition; both engines are charged it).
	KVBytes int64
	// Peak is the machine's best FLOP/s for the dtype, DRAM its read bytes/s (0: no fractions).
	Peak, DRAM float64
}

// RunCompare measures every point with ellm (g) and llama.cpp (l) alternately.
func RunCompare(ctx context.Context, g Generator, cfg *modelcfg.Config, l *LlamaCpp, opts CompareOptions, progress *Progress) (CompareResults, error) {
	rounds := max(opts.Rounds, 1)
	ellm := make([][]float64, len(opts.Points))
	llama := make([][]float64, len(opts.Points))
	for round := range rounds {
		for i, p := range opts.Points {
			// Fresh prompts per measurement, so nothing comes from ellm's prefix cache.
			measurement := round*len(opts.Points) + i
			measure := []func() error{
				func() error {
					v, err := ellmRate(ctx, g, cfg, p, opts, measurement)
					ellm[i] = append(ellm[i], v)
					return err
				},
				func() error {
					v, err := llamaRate(ctx, l, p, opts)
					llama[i] = append(llama[i], v)
					return err
				},
			}
			if round%2 == 1 {
				measure[0], measure[1] = measure[1], measure[0]
			}
			for _, m := range measure {
				if err := m(); err != nil {
					return nil, fmt.Errorf("%v, round %d: %w", p, round+1, err)
				}
				progress.Add(1)
			}
		}
	}
	out := make(CompareResults, len(opts.Points))
	for i, p := range opts.Points {
		r := CompareResult{Test: p.String(), Ellm: Summarize(ellm[i]), Llama: Summarize(llama[i])}
		r.Ratio = r.Ellm.Median / r.Llama.Median
		r.EllmFraction, r.LlamaFraction = peakFraction(cfg, p, opts, r.Ellm.Median), peakFraction(cfg, p, opts, r.Llama.Median)
		out[i] = r
	}
	return out, nil
}

func ellmRate(ctx context.Context, g Generator, cfg *modelcfg.Config, p ComparePoint, opts CompareOptions, measurement int) (float64, error) {
	seed := opts.Seed + uint64(measurement)*7919
	if p.Prefill > 0 {
		// A warm-up and a measured prompt per call: two first tokens of its own.
		res, err := RunPrefill(ctx, g, cfg, PrefillOptions{Lengths: []int{p.Prefill}, Repeat: 1, Seed: seed, Salt: int32(2 * measurement), Scale: 1}, nil)
		if err != nil {
			return 0, err
		}
		return res[0].TokensPerSecond, nil
	}
	res, err := RunDecode(ctx, g, cfg, DecodeOptions{Depths: []int{p.Depth}, Batches: []int{p.Batch}, Tokens: opts.Tokens,
		Warmup: CompareDecodeWarmup, Repeat: 1, Seed: seed, DType: opts.DType, KVBytes: opts.KVBytes, Scale: 1}, nil)
	if err != nil {
		return 0, err
	}
	return res[0].TokensPerSecond, nil
}

// CompareDecodeWarmup is the decode steps ellm runs before timing (llama-bench
// warms up with a run of its own).
const CompareDecodeWarmup = 4

func llamaRate(ctx context.Context, l *LlamaCpp, p ComparePoint, opts CompareOptions) (float64, error) {
	if p.Prefill > 0 {
		return l.Prefill(ctx, p.Prefill)
	}
	return l.Decode(ctx, p.Depth, p.Batch, opts.Tokens)
}

func peakFraction(cfg *modelcfg.Config, p ComparePoint, opts CompareOptions, tokensPerSecond float64) float64 {
	if p.Prefill > 0 {
		if opts.Peak <= 0 {
			return 0
		}
		return PrefillFLOPs(cfg, p.Prefill, 0) * tokensPerSecond / float64(p.Prefill) / opts.Peak
	}
	if opts.DRAM <= 0 {
		return 0
	}
	steps := tokensPerSecond / float64(p.Batch)
	return DecodeBytes(cfg, opts.DType, opts.KVBytes, p.Depth, p.Batch) * steps / opts.DRAM
}
