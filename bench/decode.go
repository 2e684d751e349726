package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

// DecodeResult is time per output token at one context depth and batch.
type DecodeResult struct {
	Depth             int     `json:"depth"`
	Batch             int     `json:"batch"`
	TPOTms            float64 `json:"tpot_ms"` // median over repeats
	TPOT              Summary `json:"tpot_ms_summary"`
	TokensPerSecond   float64 `json:"tokens_per_second"` // all sequences together
	GBps              float64 `json:"gbps"`
	BandwidthFraction float64 `json:"bandwidth_fraction"`
}

// DecodeResults print as a table.
type DecodeResults []DecodeResult

func (DecodeResults) Header() []string {
	return []string{"depth", "batch", "TPOT ms (median)", "spread", "tokens/s", "GB/s read", "of DRAM"}
}

func (rs DecodeResults) Rows() [][]string {
	var rows [][]string
	for _, r := range rs {
		rows = append(rows, []string{strconv.Itoa(r.Depth), strconv.Itoa(r.Batch), fmt.Sprintf("%.2f", r.TPOTms),
			fmt.Sprintf("%.0f%%", 100*r.TPOT.Spread()), fmt.Sprintf("%.1f", r.TokensPerSecond),
			fmt.Sprintf("%.1f", r.GBps), fraction(r.BandwidthFraction)})
	}
	return rows
}

// DecodeOptions configure a TPOT sweep.
type DecodeOptions struct {
	Depths  []int
	Batches []int
	Tokens  int // decode steps timed per measurement
	Warmup  int // decode steps before timing starts
	Repeat  int
	Seed    uint64
	DType   string
	// Coded says the bf16 weights are coded for decode; a step of up to
	// ScreenRows sequences screens their logits (DecodeReads).
	Coded      bool
	ScreenRows int
	// KVBytes is the KV cache's bytes per position (modelcfg.KVBytesPerPosition).
	KVBytes int64
	// DRAM is the read-bandwidth ceiling in bytes/s (0: no fraction).
	DRAM  float64
	Scale float64
}

// RunDecode measures, for each depth and batch, the steady-state interval
// between decode steps while all batch sequences are generating.
func RunDecode(ctx context.Context, g Generator, cfg *modelcfg.Config, opts DecodeOptions, progress *Progress) (DecodeResults, error) {
	rng := rand.New(rand.NewPCG(opts.Seed, 2))
	salt := int32(1 << 10)
	var out DecodeResults
	for _, depth := range opts.Depths {
		for _, batch := range opts.Batches {
			var tpots []float64
			for range max(opts.Repeat, 1) {
				prompts := make([][]int32, batch)
				for i := range prompts {
					salt++
					prompts[i] = randomTokens(rng, cfg, max(depth, 1), salt)
				}
				sessions, err := prime(ctx, g, prompts)
				if err != nil {
					return nil, fmt.Errorf("decode depth %d batch %d: %w", depth, batch, err)
				}
				tpot, err := decodeTogether(ctx, g, sessions, opts.Warmup, opts.Tokens)
				if err != nil {
					return nil, fmt.Errorf("decode depth %d batch %d: %w", depth, batch, err)
				}
				tpots = append(tpots, tpot*opts.Scale)
				progress.Add(1)
			}
			s := Summarize(tpots)
			r := DecodeResult{Depth: depth, Batch: batch, TPOTms: s.Median, TPOT: s}
			r.TokensPerSecond = float64(batch) / (s.Median / 1e3)
			r.GBps = DecodeBytes(cfg, DecodeReads(opts.DType, opts.Coded, batch <= opts.ScreenRows), opts.KVBytes, depth, batch) * opts.Scale / (s.Median / 1e3) / 1e9
			if opts.DRAM > 0 {
				r.BandwidthFraction = r.GBps * 1e9 / opts.DRAM
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// session is a prompt already prefilled into the engine's KV cache.
type session struct {
	id     string
	tokens []int32
}

// prime prefills each prompt, one at a time, into a session of its own, so
// that the timed generations start from a cached context at the given depth
// and all begin decoding at once instead of queueing behind each other's
// prefill. The engine needs a slot per sequence.
func prime(ctx context.Context, g Generator, prompts [][]int32) ([]session, error) {
	out := make([]session, len(prompts))
	for i, p := range prompts {
		id := fmt.Sprintf("bench-decode-%d", i)
		res, err := g.Generate(ctx, engine.Request{Tokens: p, SessionID: id, MaxTokens: 1, StopTokens: noStop}, discard)
		if err != nil {
			return nil, fmt.Errorf("prefill sequence %d: %w", i, err)
		}
		out[i] = session{id: id, tokens: res.Tokens}
	}
	return out, nil
}

// errApart means the sequences of a measurement never decoded in the same step.
var errApart = errors.New("the sequences never decoded together")

// decodeTogether measures a batch, lengthening the warm-up when the engine
// admitted the sequences too far apart for their decoding to overlap (which
// depends on when each request reached the scheduler).
func decodeTogether(ctx context.Context, g Generator, prompts []session, warmup, tokens int) (float64, error) {
	for try := range decodeTries {
		tpot, err := decodeOnce(ctx, g, prompts, warmupOfTry(warmup, tokens, try), tokens)
		if !errors.Is(err, errApart) {
			return tpot, err
		}
	}
	return 0, fmt.Errorf("%w even with %d warm-up steps; increase --tokens", errApart, warmupOfTry(warmup, tokens, decodeTries-1))
}

const decodeTries = 4

func warmupOfTry(warmup, tokens, try int) int {
	for range try {
		warmup = 2*warmup + tokens
	}
	return warmup
}

// DecodeSequenceLength is the KV positions a decode measurement at depth
// needs per sequence: the prompt, its priming token, the longest warm-up.
func DecodeSequenceLength(depth, warmup, tokens int) int {
	return max(depth, 1) + 1 + warmupOfTry(warmup, tokens, decodeTries-1) + tokens
}

// decodeOnce runs len(prompts) generations at once and returns the step
// interval in ms over the window in which every one of them was decoding.
func decodeOnce(ctx context.Context, g Generator, prompts []session, warmup, tokens int) (float64, error) {
	n := warmup + tokens
	stamps := make([][]time.Time, len(prompts))
	errs := make([]error, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		stamps[i] = make([]time.Time, 0, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = g.Generate(ctx, engine.Request{Tokens: p.tokens, SessionID: p.id, MaxTokens: n, StopTokens: noStop}, func(ev engine.Event) error {
				stamps[i] = append(stamps[i], ev.At)
				return nil
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return 0, err
		}
		if len(stamps[i]) != n {
			return 0, fmt.Errorf("sequence %d produced %d of %d tokens", i, len(stamps[i]), n)
		}
	}
	// The window opens when the last sequence has finished its warm-up and
	// closes when the first one stops: inside it, every step serves them all.
	start, end := stamps[0][warmup], stamps[0][n-1]
	for _, s := range stamps[1:] {
		if s[warmup].After(start) {
			start = s[warmup]
		}
		if s[n-1].Before(end) {
			end = s[n-1]
		}
	}
	steps := 0
	for _, t := range stamps[0] {
		if t.After(start) && !t.After(end) {
			steps++
		}
	}
	if steps == 0 {
		return 0, errApart
	}
	return ms(end.Sub(start)) / float64(steps), nil
}
