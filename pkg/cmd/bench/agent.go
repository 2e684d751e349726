package bench

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ellm-dev/ellm/bench"
	"github.com/ellm-dev/ellm/pkg/cmdutil"
)

// AgentOptions are the inputs of `ellm bench agent`.
type AgentOptions struct {
	Common
	BatchSize         int
	Turns             int
	SystemTokens      int
	MemoryTokens      int
	TurnTokens        int
	ReplyTokens       int
	MemoryReplyTokens int
}

func newCmdAgent(f *cmdutil.Factory, runF func(*AgentOptions) error) *cobra.Command {
	opts := &AgentOptions{Common: Common{IO: f.IO}}
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Per-request TTFT and cached tokens of a coding agent's traffic, without session ids",
		Long: `Replays what a coding agent such as Qwen Code sends: each turn a main request
(system prompt and tools, the conversation so far, a new user message), then a
memory-extraction request with another system prompt over the same conversation.
No request names a session: what stays cached is the engine's prefix cache (slot
choice, copies between slots, the host-memory prefix store). Prints, per request,
the prompt, the tokens cached (of which copied from another slot and restored
from the prefix store), TTFT, and the cached share of what the previous request
of its kind left reusable.`,
		Example: `  ellm bench agent --preset qwen3-0.6b --batch-size 2 --turns 8
  ellm bench agent --preset qwen3-0.6b --batch-size 1 --prefix-cache-bytes 0   # no prefix store`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return agentRun(cmd, opts)
		},
	}
	addCommonFlags(cmd, &opts.Common)
	fl := cmd.Flags()
	fl.IntVar(&opts.BatchSize, "batch-size", 2, "KV cache slots")
	addPrefixCacheFlag(cmd, &opts.Common, "auto", "the traffic it measures is what the store is for")
	fl.IntVar(&opts.Turns, "turns", 8, "agent turns (a main and a memory request each)")
	fl.IntVar(&opts.SystemTokens, "system-tokens", 4096, "main system prompt and tool definitions")
	fl.IntVar(&opts.MemoryTokens, "memory-tokens", 1024, "memory-extraction system prompt")
	fl.IntVar(&opts.TurnTokens, "turn-tokens", 256, "new tokens per turn (user message, tool results)")
	fl.IntVar(&opts.ReplyTokens, "reply-tokens", 32, "tokens generated per main request")
	fl.IntVar(&opts.MemoryReplyTokens, "memory-reply-tokens", 16, "tokens generated per memory request")
	return cmd
}

func agentRun(cmd *cobra.Command, opts *AgentOptions) error {
	for _, v := range []struct {
		name string
		n    int
	}{{"batch-size", opts.BatchSize}, {"turns", opts.Turns}, {"system-tokens", opts.SystemTokens},
		{"memory-tokens", opts.MemoryTokens}, {"turn-tokens", opts.TurnTokens}, {"reply-tokens", opts.ReplyTokens},
		{"memory-reply-tokens", opts.MemoryReplyTokens}} {
		if v.n < 1 {
			return fmt.Errorf("--%s %d: must be at least 1", v.name, v.n)
		}
	}
	ao := bench.AgentOptions{Turns: opts.Turns, SystemTokens: opts.SystemTokens, MemoryTokens: opts.MemoryTokens,
		TurnTokens: opts.TurnTokens, ReplyTokens: opts.ReplyTokens, MemoryReplyTokens: opts.MemoryReplyTokens, Seed: opts.Seed}
	s, err := opts.start(cmd.Context(), bench.AgentSequenceLength(ao), opts.BatchSize, 0, 0)
	if err != nil {
		return err
	}
	defer s.engine.Close()
	ao.Scale = s.scale
	p := opts.progress(2*opts.Turns, "requests")
	res, err := bench.RunAgent(cmd.Context(), s.engine, s.cfg, ao, p)
	p.Done()
	if err != nil {
		return err
	}
	if opts.Plot != "" {
		main, memory := bench.Series{Name: "main request"}, bench.Series{Name: "memory request"}
		for _, r := range res {
			ser := &main
			if r.Kind == "memory" {
				ser = &memory
			}
			ser.X, ser.Y = append(ser.X, float64(r.Turn)), append(ser.Y, r.TTFTms)
		}
		if err := bench.Plot(opts.Plot, "Agent TTFT per turn ("+s.model.Name+")", "turn", "TTFT (ms)", main, memory); err != nil {
			return err
		}
	}
	return opts.write(bench.Report{Kind: "agent", Machine: s.machine, Model: s.model, Results: res})
}
