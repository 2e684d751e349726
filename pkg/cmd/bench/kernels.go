package bench

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ellm-dev/ellm/bench"
	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/pkg/cmdutil"
	"github.com/ellm-dev/ellm/pkg/engine"
)

// KernelsOptions are the inputs of `ellm bench kernels`.
type KernelsOptions struct {
	Common
	Paths   string
	M       int
	AttnT   int
	DecodeT int
}

func newCmdKernels(f *cmdutil.Factory, runF func(*KernelsOptions) error) *cobra.Command {
	opts := &KernelsOptions{Common: Common{IO: f.IO, Version: f.Version}}
	cmd := &cobra.Command{
		Use:   "kernels",
		Short: "GEMM, GEMV and attention throughput as fractions of this machine's measured ceilings",
		Long: `Measures this machine's ceilings first (register-only loops of the FMA,
VDPBF16PS and int8 dot-product instructions the CPU has, DRAM read over a 1 GiB
buffer), then the kernels at Qwen3-0.6B
prefill shapes (M=512), the 151936×1024 lm_head GEMV, causal prefill attention and
decode attention, each as a fraction of the ceiling that bounds it.`,
		Example: `  ellm bench kernels
  ellm bench kernels --paths avx512bf16 --json`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return kernelsRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Paths, "paths", "", "GEMM paths to measure, comma-separated (default: every SIMD path this CPU has)")
	opts.ThreadFlags.AddFlags(fl)
	fl.IntVar(&opts.Repeat, "repeat", 5, "timed calls per kernel (the median is reported)")
	fl.IntVar(&opts.M, "m", 512, "rows of the prefill GEMMs")
	fl.IntVar(&opts.AttnT, "attn-tokens", 4096, "prefill attention length")
	fl.IntVar(&opts.DecodeT, "decode-context", 32768, "decode attention context")
	addOutputFlags(cmd, &opts.Common)
	return cmd
}

func kernelsRun(opts *KernelsOptions) error {
	var paths []kernels.Path
	if opts.Paths == "" {
		for _, p := range kernels.Available() {
			if p != kernels.Generic {
				paths = append(paths, p)
			}
		}
	} else {
		for _, s := range strings.Split(opts.Paths, ",") {
			p, err := kernels.ParsePath(s)
			if err != nil {
				return err
			}
			if !kernels.CPU().Supports(p) {
				return fmt.Errorf("--paths %s: this CPU supports at most %s", p, kernels.CPU().Best())
			}
			paths = append(paths, p)
		}
	}
	pool, th := engine.NewPool(opts.Threads, !opts.PinThreads)
	defer pool.Close()
	c, err := bench.MeasureCeilings(pool)
	if err != nil {
		return err
	}
	m := bench.DescribeMachine(pool.Size())
	m.ThreadsWhy, m.PinnedCPUs = th.Why, pool.CPUs()
	m.Ceilings = c
	p := opts.progress(len(paths)*4+8, "kernels")
	res, err := bench.RunKernels(pool, c, bench.KernelOptions{Paths: paths, Repeat: opts.Repeat, M: opts.M, AttnT: opts.AttnT, DecodeT: opts.DecodeT}, p)
	p.Done()
	if err != nil {
		return err
	}
	return opts.write(bench.Report{Kind: "kernels", Machine: m, Results: res})
}
