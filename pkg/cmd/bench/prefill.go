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
	ChunkSize int
	// CPUProfile, if set, receives a CPU profile of the timed prefills only.
	CPUProfile string
}

func newCmdPrefill(f *cmdutil.Factory, runF func(*PrefillOptions) error) *cobra.Command {
	opts := &PrefillOptions{Common: Common{IO: f.IO, Version: f.Version}}
	cmd := &cobra.Command{
		Use:   "prefill",
		Short: "Time to first token per prompt length, as a fraction of the compute peak",
		Example: `  ellm bench prefill --preset qwen3-0.6b --lengths 128,512,2048
  ellm bench prefill --preset qwen3-0.6b --lengths 2048 --chunk-size 512   # chunked, to compare`,
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
	cmd.Flags().IntVar(&opts.ChunkSize, "chunk-size", 0, "prefill in chunks of this many tokens (0: single pass)")
	cmd.Flags().StringVar(&opts.CPUProfile, "cpuprofile", "", "write a CPU profile of the prefills (load and ceilings excluded) to this file, for go tool pprof")
	return cmd
}

func prefillRun(cmd *cobra.Command, opts *PrefillOptions) error {
	lengths, err := parseInts("lengths", opts.Lengths)
	if err != nil {
		return err
	}
	s, err := opts.start(cmd.Context(), slices.Max(lengths)+8, 1, opts.ChunkSize, 0)
	if err != nil {
		return err
	}
	defer s.engine.Close()
	stopProfile, err := startCPUProfile(opts.CPUProfile)
	if err != nil {
		return err
	}
	p := opts.progress(len(lengths)*(max(opts.Repeat, 1)+1), "prefill")
	res, err := bench.RunPrefill(cmd.Context(), s.engine, s.cfg, bench.PrefillOptions{
		Lengths: lengths, Repeat: opts.Repeat, ChunkSize: opts.ChunkSize, Seed: opts.Seed,
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
		x, ttft := make([]float64, len(res)), make([]float64, len(res))
		for i, r := range res {
			x[i], ttft[i] = float64(r.Length), r.TTFTms
		}
		if err := bench.Plot(opts.Plot, fmt.Sprintf("TTFT vs prompt length (%s, %s)", s.model.Name, opts.DType),
			"prompt tokens", "TTFT (ms)", bench.Series{Name: "ellm", X: x, Y: ttft}); err != nil {
			return err
		}
	}
	return opts.write(bench.Report{Kind: "prefill", Machine: s.machine, Model: s.model, Results: res})
}
