package bench

import (
	"github.com/spf13/cobra"

	"github.com/ellm-dev/ellm/bench"
	"github.com/ellm-dev/ellm/pkg/cmdutil"
)

// SessionOptions are the inputs of `ellm bench session`.
type SessionOptions struct {
	Common
	Turns       int
	TurnTokens  int
	ReplyTokens int
}

func newCmdSession(f *cmdutil.Factory, runF func(*SessionOptions) error) *cobra.Command {
	opts := &SessionOptions{Common: Common{IO: f.IO, Version: f.Version}}
	cmd := &cobra.Command{
		Use:     "session",
		Short:   "Per-turn TTFT of a growing conversation, with the session cache and without it",
		Example: `  ellm bench session --preset qwen3-0.6b --turns 20 --turn-tokens 256 --reply-tokens 64 --plot turns.png`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return sessionRun(cmd, opts)
		},
	}
	addCommonFlags(cmd, &opts.Common)
	cmd.Flags().IntVar(&opts.Turns, "turns", 20, "conversation turns")
	cmd.Flags().IntVar(&opts.TurnTokens, "turn-tokens", 256, "new tokens each turn adds")
	cmd.Flags().IntVar(&opts.ReplyTokens, "reply-tokens", 64, "tokens generated per turn")
	return cmd
}

func sessionRun(cmd *cobra.Command, opts *SessionOptions) error {
	seq := opts.Turns*(opts.TurnTokens+opts.ReplyTokens) + 8
	s, err := opts.start(cmd.Context(), seq, 1, 0, 0)
	if err != nil {
		return err
	}
	defer s.engine.Close()
	p := opts.progress(2*opts.Turns, "session")
	res, err := bench.RunSession(cmd.Context(), s.engine, s.cfg, bench.SessionOptions{
		Turns: opts.Turns, TurnTokens: opts.TurnTokens, ReplyTokens: opts.ReplyTokens, Seed: opts.Seed, Scale: s.scale,
	}, p)
	p.Done()
	if err != nil {
		return err
	}
	if opts.Plot != "" {
		warm, cold := bench.Series{Name: "session cache"}, bench.Series{Name: "no cache (re-prefill history)"}
		for _, r := range res {
			warm.X, warm.Y = append(warm.X, float64(r.Turn)), append(warm.Y, r.TTFTms)
			cold.X, cold.Y = append(cold.X, float64(r.Turn)), append(cold.Y, r.ColdTTFTms)
		}
		if err := bench.Plot(opts.Plot, "TTFT per turn ("+s.model.Name+")", "turn", "TTFT (ms)", warm, cold); err != nil {
			return err
		}
	}
	return opts.write(bench.Report{Kind: "session", Machine: s.machine, Model: s.model, Results: res})
}
