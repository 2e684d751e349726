package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

// SessionTurn compares one turn of a conversation with and without the session cache.
type SessionTurn struct {
	Turn          int     `json:"turn"`
	History       int     `json:"history_tokens"` // tokens before this turn's new ones
	Prefilled     int     `json:"prefilled_tokens"`
	Cached        int     `json:"cached_tokens"`
	TTFTms        float64 `json:"ttft_ms"`
	ColdPrefilled int     `json:"cold_prefilled_tokens"`
	ColdTTFTms    float64 `json:"cold_ttft_ms"`
	Speedup       float64 `json:"speedup"`
}

// SessionResults print as a table; the last row is the total.
type SessionResults []SessionTurn

func (SessionResults) Header() []string {
	return []string{"turn", "history", "prefilled", "cached", "TTFT ms", "no cache: prefilled", "no cache: TTFT ms", "speed-up"}
}

func (rs SessionResults) Rows() [][]string {
	var rows [][]string
	var warm, cold float64
	for _, r := range rs {
		warm += r.TTFTms
		cold += r.ColdTTFTms
		rows = append(rows, []string{strconv.Itoa(r.Turn), strconv.Itoa(r.History), strconv.Itoa(r.Prefilled), strconv.Itoa(r.Cached),
			fmt.Sprintf("%.1f", r.TTFTms), strconv.Itoa(r.ColdPrefilled), fmt.Sprintf("%.1f", r.ColdTTFTms), fmt.Sprintf("%.2f×", r.Speedup)})
	}
	if warm > 0 {
		rows = append(rows, []string{"total", "", "", "", fmt.Sprintf("%.1f", warm), "", fmt.Sprintf("%.1f", cold), fmt.Sprintf("%.2f×", cold/warm)})
	}
	return rows
}

// SessionOptions configure a multi-turn run.
type SessionOptions struct {
	Turns       int
	TurnTokens  int
	ReplyTokens int
	Seed        uint64
	Scale       float64
}

// RunSession plays a conversation twice: first as a session (each turn sends
// the whole transcript plus the new turn; the engine should prefill only the
// delta), then the same prompts with a fresh first token each turn so nothing
// can be reused (the cost of re-prefilling the whole history).
func RunSession(ctx context.Context, g Generator, cfg *modelcfg.Config, opts SessionOptions, progress *Progress) (SessionResults, error) {
	rng := rand.New(rand.NewPCG(opts.Seed, 3))
	var transcript []int32
	var out SessionResults
	prompts := make([][]int32, 0, opts.Turns)
	for turn := 1; turn <= opts.Turns; turn++ {
		prompt := append(transcript, randomTokens(rng, cfg, opts.TurnTokens, int32(turn))...)
		prompts = append(prompts, prompt)
		res, err := g.Generate(ctx, engine.Request{Tokens: prompt, SessionID: "bench-session", MaxTokens: opts.ReplyTokens, StopTokens: noStop}, discard)
		if err != nil {
			return nil, fmt.Errorf("session turn %d: %w", turn, err)
		}
		out = append(out, SessionTurn{Turn: turn, History: len(transcript), Prefilled: res.PromptTokens - res.CachedTokens,
			Cached: res.CachedTokens, TTFTms: ms(res.TTFT) * opts.Scale})
		transcript = res.Tokens
		progress.Add(1)
	}
	for i, prompt := range prompts {
		// A first token no session turn used: the cold prompt shares no prefix.
		cold := append([]int32{int32((opts.Turns + 1 + i) % ordinaryTokens(cfg))}, prompt[1:]...)
		res, err := g.Generate(ctx, engine.Request{Tokens: cold, MaxTokens: 1, StopTokens: noStop}, discard)
		if err != nil {
			return nil, fmt.Errorf("cold turn %d: %w", i+1, err)
		}
		out[i].ColdPrefilled = res.PromptTokens - res.CachedTokens
		out[i].ColdTTFTms = ms(res.TTFT) * opts.Scale
		if out[i].TTFTms > 0 {
			out[i].Speedup = out[i].ColdTTFTms / out[i].TTFTms
		}
		progress.Add(1)
	}
	return out, nil
}
