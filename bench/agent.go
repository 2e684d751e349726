package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

// AgentRequest is one request of the agent pattern.
type AgentRequest struct {
	Turn      int     `json:"turn"`
	Kind      string  `json:"kind"` // "main" or "memory"
	Prompt    int     `json:"prompt_tokens"`
	Cached    int     `json:"cached_tokens"`
	Copied    int     `json:"copied_tokens"`   // of Cached: copied from another slot
	Restored  int     `json:"restored_tokens"` // of Cached: from the prefix store
	Prefilled int     `json:"prefilled_tokens"`
	TTFTms    float64 `json:"ttft_ms"`
	// Reusable is what the prompt shares with what the previous request of
	// its kind computed (its transcript but the reply's last token, whose
	// KV this request computes); CachedFraction is Cached / Reusable.
	Reusable       int     `json:"reusable_tokens"`
	CachedFraction float64 `json:"cached_fraction"`
}

// AgentResults print as a table; a last row sums up the main turns after the first.
type AgentResults []AgentRequest

func (AgentResults) Header() []string {
	return []string{"turn", "request", "prompt", "cached", "copied", "restored", "prefilled", "TTFT ms", "cached / reusable"}
}

func (rs AgentResults) Rows() [][]string {
	var rows [][]string
	var cached, reusable int
	var ttft float64
	for _, r := range rs {
		frac := ""
		if r.Reusable > 0 {
			frac = fmt.Sprintf("%.1f%%", 100*r.CachedFraction)
		}
		rows = append(rows, []string{strconv.Itoa(r.Turn), r.Kind, strconv.Itoa(r.Prompt), strconv.Itoa(r.Cached),
			strconv.Itoa(r.Copied), strconv.Itoa(r.Restored), strconv.Itoa(r.Prefilled), fmt.Sprintf("%.1f", r.TTFTms), frac})
		if r.Kind == "main" && r.Turn > 1 {
			cached, reusable, ttft = cached+r.Cached, reusable+r.Reusable, ttft+r.TTFTms
		}
	}
	if reusable > 0 {
		rows = append(rows, []string{"main, turns 2+", "", "", strconv.Itoa(cached), "", "", "", fmt.Sprintf("%.1f", ttft),
			fmt.Sprintf("%.1f%%", 100*float64(cached)/float64(reusable))})
	}
	return rows
}

// AgentOptions shape the replayed agent.
type AgentOptions struct {
	Turns int
	// SystemTokens is the main request's system prompt and tools;
	// MemoryTokens the memory-extraction request's own system prompt.
	SystemTokens, MemoryTokens int
	// TurnTokens is each turn's new user message (tool results included).
	TurnTokens int
	// ReplyTokens and MemoryReplyTokens are generated per request.
	ReplyTokens, MemoryReplyTokens int
	Seed                           uint64
	Scale                          float64
}

// AgentSequenceLength is the KV positions the longest request of opts needs.
func AgentSequenceLength(opts AgentOptions) int {
	history := opts.Turns * (opts.TurnTokens + opts.ReplyTokens)
	return max(opts.SystemTokens+history, opts.MemoryTokens+history+agentInstruction+opts.MemoryReplyTokens) + 8
}

// agentInstruction is the memory request's closing instruction.
const agentInstruction = 16

// RunAgent replays what a coding agent such as Qwen Code sends, without
// session ids: each turn a main request (its system prompt and tools, the
// conversation so far, a new user message), then a memory-extraction
// request with another system prompt over the same conversation. Both
// system prompts begin with the same few template tokens, as chat templates
// make them. A prefix cache that keeps only one of the two long prompts
// recomputes the other every turn.
func RunAgent(ctx context.Context, g Generator, cfg *modelcfg.Config, opts AgentOptions, progress *Progress) (AgentResults, error) {
	rng := rand.New(rand.NewPCG(opts.Seed, 4))
	header := randomTokens(rng, cfg, 3, 1)
	system := append(slices.Clone(header), randomTokens(rng, cfg, max(opts.SystemTokens-len(header), 1), 2)...)
	memory := append(slices.Clone(header), randomTokens(rng, cfg, max(opts.MemoryTokens-len(header), 1), 3)...)
	instruction := randomTokens(rng, cfg, agentInstruction, 4)
	var history []int32
	var out AgentResults
	// reusable is what prompt shares with the previous request of its kind.
	send := func(turn int, kind string, prompt []int32, reusable, maxTokens int) ([]int32, error) {
		res, err := g.Generate(ctx, engine.Request{Tokens: prompt, MaxTokens: maxTokens, StopTokens: noStop}, discard)
		if err != nil {
			return nil, fmt.Errorf("agent turn %d, %s request: %w", turn, kind, err)
		}
		r := AgentRequest{Turn: turn, Kind: kind, Prompt: res.PromptTokens, Cached: res.CachedTokens,
			Copied: res.CopiedTokens, Restored: res.StoreTokens, Prefilled: res.Prefilled,
			TTFTms: ms(res.TTFT) * opts.Scale, Reusable: min(reusable, len(prompt)-1)} // the last token is always computed
		if r.Reusable > 0 {
			r.CachedFraction = float64(r.Cached) / float64(r.Reusable)
		}
		out = append(out, r)
		progress.Add(1)
		return res.Tokens, nil
	}
	mainReusable, memoryReusable := 0, 0
	for turn := 1; turn <= opts.Turns; turn++ {
		// The main prompt extends the previous main transcript (its reply included).
		history = append(history, randomTokens(rng, cfg, opts.TurnTokens, int32(10+turn))...)
		prompt := append(slices.Clone(system), history...)
		transcript, err := send(turn, "main", prompt, mainReusable, opts.ReplyTokens)
		if err != nil {
			return nil, err
		}
		mainReusable = len(transcript) - 1 // the reply's last token gets its KV with the next turn
		history = append(history, transcript[len(prompt):]...)
		// The memory prompt extends the previous one but for its closing instruction.
		prompt = append(append(slices.Clone(memory), history...), instruction...)
		if _, err := send(turn, "memory", prompt, memoryReusable, opts.MemoryReplyTokens); err != nil {
			return nil, err
		}
		memoryReusable = len(prompt) - len(instruction)
	}
	return out, nil
}
