package bench

import (
	"context"
	"fmt"
	"slices"

	"github.com/ellm-dev/ellm/kernels/ceiling"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

// ComparePoint is one test both engines run: a prefill of Prefill tokens
// after Depth tokens of history already in the KV cache (a conversation's
// next turn), or (Prefill 0) Batch sequences decoding at context Depth.
type ComparePoint struct {
	Prefill int
	Depth   int
	Batch   int
}

func (p ComparePoint) String() string {
	switch {
	case p.Prefill > 0 && p.Depth > 0:
		return fmt.Sprintf("prefill %d at depth %d", p.Prefill, p.Depth)
	case p.Prefill > 0:
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
	// bandwidth for decode; both engines are charged the same work. Each
	// round's rate is divided by the ceiling measured in that round, next
	// to it, and these are the medians over rounds (0: no ceilings), with
	// their spreads ((max-min)/median): a VM's ceilings move with its
	// host's other tenants, so a ceiling taken once would not describe the
	// moments the engines ran in.
	EllmFraction        float64 `json:"ellm_peak_fraction"`
	LlamaFraction       float64 `json:"llamacpp_peak_fraction"`
	EllmFractionSpread  float64 `json:"ellm_peak_fraction_spread"`
	LlamaFractionSpread float64 `json:"llamacpp_peak_fraction_spread"`
	// Ceiling names what the rounds' ceilings measure, e.g. "DRAM read",
	// in CeilingUnit per second ("B", "FLOP", "OP").
	Ceiling     string `json:"ceiling,omitempty"`
	CeilingUnit string `json:"ceiling_unit,omitempty"`
	// EllmPerBatch1 and LlamaPerBatch1 are, for a decode of several
	// sequences, each engine's median throughput over its own median for
	// one sequence at the same depth in the same run (0: no such point): how
	// far a step's one read of the weights serves more sequences (the goal
	// docs/benchmarks.md tracks: 3× at four).
	EllmPerBatch1  float64        `json:"ellm_per_batch1,omitempty"`
	LlamaPerBatch1 float64        `json:"llamacpp_per_batch1,omitempty"`
	Rounds         []CompareRound `json:"rounds"`
}

// CompareRound is one point's measurements in one round.
type CompareRound struct {
	Ellm  float64 `json:"ellm_tokens_per_second"`
	Llama float64 `json:"llamacpp_tokens_per_second"`
	// Ceiling is the point's ceiling measured between the two engines'
	// measurements, in CompareResult.CeilingUnit per second (0: none).
	Ceiling       float64 `json:"ceiling_per_second"`
	EllmFraction  float64 `json:"ellm_peak_fraction"`
	LlamaFraction float64 `json:"llamacpp_peak_fraction"`
}

// Ceiling is one measured ceiling: Unit (FLOP, OP, B) per second.
type Ceiling struct {
	Name, Unit string
	PerSecond  float64
}

// CompareResults print as a table.
type CompareResults []CompareResult

func (CompareResults) Header() []string {
	return []string{"test", "ellm tok/s", "llama.cpp tok/s", "ellm / llama.cpp", "ellm of peak", "llama.cpp of peak", "peak (median of rounds)", "× batch 1: ellm, llama.cpp"}
}

func (rs CompareResults) Rows() [][]string {
	var rows [][]string
	for _, r := range rs {
		rows = append(rows, []string{r.Test,
			fmt.Sprintf("%.1f ±%.0f%%", r.Ellm.Median, 100*r.Ellm.Spread()),
			fmt.Sprintf("%.1f ±%.0f%%", r.Llama.Median, 100*r.Llama.Spread()),
			fmt.Sprintf("%.2f", r.Ratio), fractionSpread(r.EllmFraction, r.EllmFractionSpread),
			fractionSpread(r.LlamaFraction, r.LlamaFractionSpread), r.ceiling(), r.perBatch1()})
	}
	return rows
}

func (r CompareResult) perBatch1() string {
	if r.EllmPerBatch1 == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f, %.2f", r.EllmPerBatch1, r.LlamaPerBatch1)
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
	// Coded says ellm's bf16 weights are coded for decode; its steps of up
	// to ScreenRows sequences screen their logits (DecodeReads). llama.cpp
	// reads the weights as stored.
	Coded      bool
	ScreenRows int
	// KVBytes is ellm's KV cache bytes per position
	// (modelcfg.KVBytesPerPosition; both engines are charged it).
	KVBytes int64
	// Ceiling measures, now, the ceiling a point is charged against: the
	// dtype's best FLOP/s for a prefill, DRAM read bytes/s for a decode
	// (BurstCeilings). It runs once per point and round, between the two
	// engines' measurements. Nil: no fractions.
	Ceiling func(ComparePoint) Ceiling
	// BeforeLlama, if set, runs before each of llama.cpp's measurements:
	// where ellm's engine and llama.cpp's weights do not fit in memory
	// together, it closes the engine, which the Generator starts again for
	// ellm's next measurement.
	BeforeLlama func() error
}

// RunCompare measures every point with ellm (g) and llama.cpp (l) alternately.
func RunCompare(ctx context.Context, g Generator, cfg *modelcfg.Config, l *LlamaCpp, opts CompareOptions, progress *Progress) (CompareResults, error) {
	rounds := max(opts.Rounds, 1)
	recorded := make([][]CompareRound, len(opts.Points))
	ceilings := make([]Ceiling, len(opts.Points))
	for round := range rounds {
		for i, p := range opts.Points {
			var r CompareRound
			// Fresh prompts per measurement, so nothing comes from ellm's prefix cache.
			measurement := round*len(opts.Points) + i
			measure := []func() error{
				func() (err error) {
					r.Ellm, err = ellmRate(ctx, g, cfg, p, opts, measurement)
					return err
				},
				func() (err error) {
					if opts.BeforeLlama != nil {
						if err := opts.BeforeLlama(); err != nil {
							return err
						}
					}
					r.Llama, err = llamaRate(ctx, l, p, opts)
					return err
				},
			}
			if round%2 == 1 {
				measure[0], measure[1] = measure[1], measure[0]
			}
			for j, m := range measure {
				if err := m(); err != nil {
					return nil, fmt.Errorf("%v, round %d: %w", p, round+1, err)
				}
				progress.Add(1)
				if j == 0 && opts.Ceiling != nil {
					// Between the engines: as close in time to both as one burst can be.
					c := opts.Ceiling(p)
					r.Ceiling, ceilings[i] = c.PerSecond, c
				}
			}
			recorded[i] = append(recorded[i], r)
		}
	}
	out := make(CompareResults, len(opts.Points))
	for i, p := range opts.Points {
		out[i] = compareResult(cfg, p, opts, ceilings[i], recorded[i])
	}
	for i, p := range opts.Points {
		if p.Prefill > 0 || p.Batch < 2 {
			continue
		}
		one := slices.Index(opts.Points, ComparePoint{Depth: p.Depth, Batch: 1})
		if one < 0 {
			continue
		}
		out[i].EllmPerBatch1 = out[i].Ellm.Median / out[one].Ellm.Median
		out[i].LlamaPerBatch1 = out[i].Llama.Median / out[one].Llama.Median
	}
	return out, nil
}

// compareResult summarizes one point's rounds: rates, their ratio, and each
// engine's fraction of peak, per round against that round's ceiling.
func compareResult(cfg *modelcfg.Config, p ComparePoint, opts CompareOptions, ceiling Ceiling, rounds []CompareRound) CompareResult {
	var ellm, llama, ellmFrac, llamaFrac []float64
	for i := range rounds {
		r := &rounds[i]
		ellm, llama = append(ellm, r.Ellm), append(llama, r.Llama)
		if r.Ceiling > 0 {
			r.EllmFraction = peakFraction(cfg, p, opts, DecodeReads(opts.DType, opts.Coded, p.Batch <= opts.ScreenRows), r.Ellm, r.Ceiling)
			r.LlamaFraction = peakFraction(cfg, p, opts, DecodeReads(opts.DType, false, false), r.Llama, r.Ceiling)
			ellmFrac, llamaFrac = append(ellmFrac, r.EllmFraction), append(llamaFrac, r.LlamaFraction)
		}
	}
	res := CompareResult{Test: p.String(), Ellm: Summarize(ellm), Llama: Summarize(llama),
		Ceiling: ceiling.Name, CeilingUnit: ceiling.Unit, Rounds: rounds}
	res.Ratio = res.Ellm.Median / res.Llama.Median
	ef, lf := Summarize(ellmFrac), Summarize(llamaFrac)
	res.EllmFraction, res.EllmFractionSpread = ef.Median, ef.Spread()
	res.LlamaFraction, res.LlamaFractionSpread = lf.Median, lf.Spread()
	return res
}

func ellmRate(ctx context.Context, g Generator, cfg *modelcfg.Config, p ComparePoint, opts CompareOptions, measurement int) (float64, error) {
	seed := opts.Seed + uint64(measurement)*7919
	if p.Prefill > 0 {
		// A warm-up and a measured prompt per call: two first tokens of its own.
		res, err := RunPrefill(ctx, g, cfg, PrefillOptions{Lengths: []int{p.Prefill}, Depths: []int{p.Depth}, Repeat: 1, Seed: seed, Salt: int32(2 * measurement), Scale: 1}, nil)
		if err != nil {
			return 0, err
		}
		return res[0].TokensPerSecond, nil
	}
	res, err := RunDecode(ctx, g, cfg, DecodeOptions{Depths: []int{p.Depth}, Batches: []int{p.Batch}, Tokens: opts.Tokens,
		Warmup: CompareDecodeWarmup, Repeat: 1, Seed: seed, DType: opts.DType, Coded: opts.Coded, ScreenRows: opts.ScreenRows, KVBytes: opts.KVBytes, Scale: 1}, nil)
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
		return l.Prefill(ctx, p.Prefill, p.Depth)
	}
	return l.Decode(ctx, p.Depth, p.Batch, opts.Tokens)
}

// peakFraction is the work tokensPerSecond does per second over ceiling
// (FLOP/s, or bytes/s with per bytes a weight).
func peakFraction(cfg *modelcfg.Config, p ComparePoint, opts CompareOptions, per Reads, tokensPerSecond, ceiling float64) float64 {
	if p.Prefill > 0 {
		return PrefillFLOPs(cfg, p.Prefill, p.Depth) * tokensPerSecond / float64(p.Prefill) / ceiling
	}
	steps := tokensPerSecond / float64(p.Batch)
	return DecodeBytes(cfg, per, opts.KVBytes, p.Depth, p.Batch) * steps / ceiling
}

// BurstCeilings measures a point's ceiling with m's short bursts: DRAM read
// for a decode, and for a prefill the compute ceiling that was the best for
// dtype at the run's start (start; nil: no compute ceiling).
func BurstCeilings(m *ceiling.Meter, start *Ceilings, dtype string) func(ComparePoint) Ceiling {
	compute := start.MachineKind(dtype)
	return func(p ComparePoint) Ceiling {
		if p.Prefill == 0 {
			return Ceiling{Name: ceiling.DRAM.String(), Unit: ceiling.DRAM.Unit(), PerSecond: m.Burst(ceiling.DRAM) * 1e9}
		}
		if start == nil {
			return Ceiling{}
		}
		return Ceiling{Name: compute.String(), Unit: compute.Unit(), PerSecond: m.Burst(compute) * 1e9}
	}
}

// ceiling prints the median of the rounds' ceilings with its spread.
func (r CompareResult) ceiling() string {
	var cs []float64
	for _, rr := range r.Rounds {
		if rr.Ceiling > 0 {
			cs = append(cs, rr.Ceiling)
		}
	}
	if len(cs) == 0 {
		return "n/a"
	}
	s := Summarize(cs)
	return fmt.Sprintf("%s %.1f G%s/s ±%.0f%%", r.Ceiling, s.Median/1e9, r.CeilingUnit, 100*s.Spread())
}

// fractionSpread prints a median fraction with its spread over rounds.
func fractionSpread(f, spread float64) string {
	if f == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%s ±%.0f%%", fraction(f), 100*spread)
}
