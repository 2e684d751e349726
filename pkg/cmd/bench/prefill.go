package bench

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/ellm-dev/ellm/bench"
	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/pkg/cmdutil"
)

// PrefillOptions are the inputs of `ellm bench prefill`.
type PrefillOptions struct {
	Common
	Lengths   string
	Depths    string
	ChunkSize int
	// CPUProfile, if set, receives a CPU profile of the timed prefills only.
	CPUProfile string
}

func newCmdPrefill(f *cmdutil.Factory, runF func(*PrefillOptions) error) *cobra.Command {
	opts := &PrefillOptions{Common: Common{IO: f.IO, Version: f.Version}}
	cmd := &cobra.Command{
		Use:   "prefill",
		Short: "Time to first token per prompt length, as a fraction of the compute peak",
		Long: `Times the first token of fresh prompts of each length. At --depths D each prompt
continues a history of D tokens already in the KV cache (prefilled untimed just
before, as a conversation's earlier turns are): the time is a turn's, its new tokens
attending over D more positions, as llama-bench -d measures it.`,
		Example: `  ellm bench prefill --preset qwen3-0.6b --lengths 128,512,2048
  ellm bench prefill --preset qwen3-0.6b --lengths 2048 --chunk-size 512   # chunked, to compare
  ellm bench prefill --preset qwen3-0.6b --lengths 128,512 --depths 0,4096,16384   # a turn over a long history`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return prefillRun(cmd, opts)
		},
	}
	addCommonFlags(cmd, &opts.Common)
	addPrefixCacheFlag(cmd, &opts.Common, "off", noPrefixStore)
	cmd.Flags().StringVar(&opts.Lengths, "lengths", "128,512,2048,8192", "prompt lengths in tokens")
	cmd.Flags().StringVar(&opts.Depths, "depths", "0", "tokens of history already in the KV cache that each prompt continues")
	cmd.Flags().IntVar(&opts.ChunkSize, "chunk-size", 0, "prefill in chunks of this many tokens (0: single pass)")
	cmd.Flags().StringVar(&opts.CPUProfile, "cpuprofile", "", "write a CPU profile of the prefills (load and ceilings excluded) to this file, for go tool pprof")
	return cmd
}

func prefillRun(cmd *cobra.Command, opts *PrefillOptions) error {
	lengths, err := parseInts("lengths", opts.Lengths)
	if err != nil {
		return err
	}
	depths, err := parseInts("depths", opts.Depths)
	if err != nil {
		return err
	}
	s, err := opts.start(cmd.Context(), slices.Max(depths)+slices.Max(lengths)+8, 1, opts.ChunkSize, 0)
	if err != nil {
		return err
	}
	defer s.engine.Close()
	stopProfile, err := startCPUProfile(opts.CPUProfile)
	if err != nil {
		return err
	}
	p := opts.progress(len(depths)*len(lengths)*(max(opts.Repeat, 1)+1), "prefill")
	res, err := bench.RunPrefill(cmd.Context(), s.engine, s.cfg, bench.PrefillOptions{
		Lengths: lengths, Depths: depths, Repeat: opts.Repeat, ChunkSize: opts.ChunkSize, Seed: opts.Seed,
		Peak: s.machine.Ceilings.ComputePeak(kernels.PathFor(bench.MatMulOp(opts.DType)), opts.DType), Scale: s.scale,
	}, p)
	p.Done()
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if err != nil {
		return err
	}
	if opts.Plot != "" {
		series := make([]bench.Series, len(depths))
		for i, d := range depths {
			series[i].Name = "ellm"
			if len(depths) > 1 {
				series[i].Name = fmt.Sprintf("ellm at depth %d", d)
			}
			for _, r := range res[i*len(lengths) : (i+1)*len(lengths)] {
				series[i].X, series[i].Y = append(series[i].X, float64(r.Length)), append(series[i].Y, r.TTFTms)
			}
		}
		if err := bench.Plot(opts.Plot, fmt.Sprintf("TTFT vs prompt length (%s, %s)", s.model.Name, opts.DType),
			"prompt tokens", "TTFT (ms)", series...); err != nil {
			return err
		}
	}
	return opts.write(bench.Report{Kind: "prefill", Machine: s.machine, Model: s.model, Results: res})
}
