package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

// Generator is the part of the engine the model benchmarks drive.
type Generator interface {
	Generate(ctx context.Context, req engine.Request, fn func(engine.Event) error) (engine.Result, error)
}

// PrefillResult is time to first token at one prompt length, after Depth
// tokens of history already in the KV cache.
type PrefillResult struct {
	Length          int     `json:"length"`
	Depth           int     `json:"depth"`
	ChunkSize       int     `json:"chunk_size,omitempty"`
	TTFTms          float64 `json:"ttft_ms"` // median
	TTFT            Summary `json:"ttft_ms_summary"`
	TokensPerSecond float64 `json:"tokens_per_second"`
	GFLOPS          float64 `json:"gflops"`
	PeakFraction    float64 `json:"peak_fraction"`
}

// PrefillResults print as a table.
type PrefillResults []PrefillResult

func (PrefillResults) Header() []string {
	return []string{"length", "depth", "chunk", "TTFT ms (median)", "spread", "tokens/s", "GFLOP/s", "of peak"}
}

func (rs PrefillResults) Rows() [][]string {
	var rows [][]string
	for _, r := range rs {
		chunk := "single pass"
		if r.ChunkSize > 0 {
			chunk = strconv.Itoa(r.ChunkSize)
		}
		rows = append(rows, []string{strconv.Itoa(r.Length), strconv.Itoa(r.Depth), chunk, fmt.Sprintf("%.1f", r.TTFTms),
			fmt.Sprintf("%.0f%%", 100*r.TTFT.Spread()), fmt.Sprintf("%.1f", r.TokensPerSecond),
			fmt.Sprintf("%.1f", r.GFLOPS), fraction(r.PeakFraction)})
	}
	return rows
}

// PrefillOptions configure a TTFT sweep.
type PrefillOptions struct {
	Lengths []int
	// Depths are the histories the prompts continue (nil: 0 alone): at
	// depth D a prompt's first D tokens are already in the KV cache, as a
	// conversation's earlier turns are, so the timed prefill is a turn's
	// new tokens attending over D more positions (llama-bench -d). The
	// history is prefilled untimed just before.
	Depths    []int
	Repeat    int
	ChunkSize int // recorded in the results; the engine was built with it
	Seed      uint64
	// Salt offsets the prompts' first tokens: callers that run RunPrefill
	// several times on one engine give each run its own range, so no
	// prompt shares even its first token with an earlier run's.
	Salt int32
	// Peak is the FLOP/s ceiling of the path prefill runs on (0: no fraction).
	Peak float64
	// Scale multiplies times for a layer-truncated model (1 otherwise).
	Scale float64
}

// noStop is a stop-token list no vocabulary contains, so generation never
// ends early on a random model's eos.
var noStop = []int32{-1}

// RunPrefill measures time to first token (one generated token) for fresh
// prompts of each length at each depth: every repeat starts with a token
// never used before in the run, so nothing is reused but the history a
// prompt at depth continues.
func RunPrefill(ctx context.Context, g Generator, cfg *modelcfg.Config, opts PrefillOptions, progress *Progress) (PrefillResults, error) {
	rng := rand.New(rand.NewPCG(opts.Seed, 1))
	salt := opts.Salt
	depths := opts.Depths
	if len(depths) == 0 {
		depths = []int{0}
	}
	var out PrefillResults
	for _, depth := range depths {
		for _, n := range opts.Lengths {
			var ttfts []float64
			for rep := -1; rep < max(opts.Repeat, 1); rep++ { // rep -1 is the warm-up
				salt++
				ttft, err := prefillTurn(ctx, g, randomTokens(rng, cfg, depth+n, salt), depth)
				if err != nil {
					return nil, fmt.Errorf("prefill %d tokens at depth %d: %w", n, depth, err)
				}
				if rep >= 0 {
					ttfts = append(ttfts, ms(ttft)*opts.Scale)
				}
				progress.Add(1)
			}
			s := Summarize(ttfts)
			r := PrefillResult{Length: n, Depth: depth, ChunkSize: opts.ChunkSize, TTFTms: s.Median, TTFT: s}
			secs := s.Median / 1e3
			r.TokensPerSecond = float64(n) / secs
			r.GFLOPS = PrefillFLOPs(cfg, n, depth) * opts.Scale / secs / 1e9
			if opts.Peak > 0 {
				r.PeakFraction = r.GFLOPS * 1e9 / opts.Peak
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// prefillTurn prefills toks[:depth] untimed, then times the first token of
// all of toks, of which the engine must take exactly those depth tokens
// from its cache: the slot still holds them.
func prefillTurn(ctx context.Context, g Generator, toks []int32, depth int) (time.Duration, error) {
	if depth > 0 {
		res, err := g.Generate(ctx, engine.Request{Tokens: toks[:depth], MaxTokens: 1, StopTokens: noStop}, discard)
		if err != nil {
			return 0, fmt.Errorf("history: %w", err)
		}
		if res.CachedTokens != 0 {
			return 0, fmt.Errorf("history: %d tokens came from the cache; the measurement would be wrong", res.CachedTokens)
		}
	}
	res, err := g.Generate(ctx, engine.Request{Tokens: toks, MaxTokens: 1, StopTokens: noStop}, discard)
	if err != nil {
		return 0, err
	}
	if res.CachedTokens != depth {
		return 0, fmt.Errorf("%d tokens came from the cache where the history is %d; the measurement would be wrong", res.CachedTokens, depth)
	}
	return res.TTFT, nil
}

func discard(engine.Event) error { return nil }

// fraction prints a fraction of a ceiling; 0 means the ceiling was not measured.
func fraction(f float64) string {
	if f == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", 100*f)
}

// randomTokens draws ordinary (non-special) token ids; the first is salt, so
// that prompts of one run never share a prefix.
func randomTokens(rng *rand.Rand, cfg *modelcfg.Config, n int, salt int32) []int32 {
	limit := ordinaryTokens(cfg)
	toks := make([]int32, n)
	for i := range toks {
		toks[i] = int32(rng.IntN(limit))
	}
	if n > 0 {
		toks[0] = salt % int32(limit)
	}
	return toks
}

// ordinaryTokens is how many low ids are ordinary tokens.
func ordinaryTokens(cfg *modelcfg.Config) int {
	// Special tokens sit at the top of the vocabulary (from 151643 in Qwen3):
	// stay below them and below every declared bos/eos id.
	limit := min(cfg.VocabSize, 151643)
	if cfg.BOSTokenID != nil && *cfg.BOSTokenID > 0 {
		limit = min(limit, *cfg.BOSTokenID)
	}
	for _, id := range cfg.EOSTokenID {
		if id > 0 {
			limit = min(limit, id)
		}
	}
	return limit
}

func since(t time.Time) float64 { return ms(time.Since(t)) }
