package bench

import (
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/ellm-dev/ellm/bench"
	"github.com/ellm-dev/ellm/pkg/cmdutil"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

// DecodeOptions are the inputs of `ellm bench decode`.
type DecodeOptions struct {
	Common
	Depths  string
	Batches string
	Tokens  int
	// CPUProfile, if set, receives a CPU profile of the measurements (not
	// the model's load or the ceilings), for go tool pprof. It holds the
	// prefills that fill each depth as well as the decoding: at depth, the
	// prefill kernels (tile4DotPairsAVX512, bf16x512R8P2) are theirs.
	CPUProfile string
}

func newCmdDecode(f *cmdutil.Factory, runF func(*DecodeOptions) error) *cobra.Command {
	opts := &DecodeOptions{Common: Common{IO: f.IO, Version: f.Version}}
	cmd := &cobra.Command{
		Use:     "decode",
		Short:   "Time per output token per context depth and batch, as a fraction of DRAM bandwidth",
		Example: `  ellm bench decode --preset qwen3-0.6b --depths 0,1024,4096 --batch 1,2,4`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return decodeRun(cmd, opts)
		},
	}
	addCommonFlags(cmd, &opts.Common)
	addPrefixCacheFlag(cmd, &opts.Common, "off", noPrefixStore)
	cmd.Flags().StringVar(&opts.Depths, "depths", "0,1024,8192", "context depths (tokens already in the KV cache)")
	cmd.Flags().StringVar(&opts.Batches, "batch", "1,2,4", "numbers of sequences decoding together")
	cmd.Flags().IntVar(&opts.Tokens, "tokens", 32, "decode steps timed per measurement")
	cmd.Flags().StringVar(&opts.CPUProfile, "cpuprofile", "", "write a CPU profile of the measurements (the prefills that fill each depth and the decoding; load and ceilings excluded) to this file, for go tool pprof")
	return cmd
}

const decodeWarmup = 4

func decodeRun(cmd *cobra.Command, opts *DecodeOptions) error {
	depths, err := parseInts("depths", opts.Depths)
	if err != nil {
		return err
	}
	batches, err := parseInts("batch", opts.Batches)
	if err != nil {
		return err
	}
	seq := bench.DecodeSequenceLength(slices.Max(depths), decodeWarmup, opts.Tokens)
	s, err := opts.start(cmd.Context(), seq, slices.Max(batches), 0, 0)
	if err != nil {
		return err
	}
	kvBytes, err := modelcfg.KVBytesPerPosition(s.cfg, opts.KVDType)
	if err != nil {
		return err
	}
	defer s.engine.Close()
	stopProfile, err := startCPUProfile(opts.CPUProfile)
	if err != nil {
		return err
	}
	p := opts.progress(len(depths)*len(batches)*max(opts.Repeat, 1), "decode")
	res, err := bench.RunDecode(cmd.Context(), s.engine, s.cfg, bench.DecodeOptions{
		Depths: depths, Batches: batches, Tokens: opts.Tokens, Warmup: decodeWarmup, Repeat: opts.Repeat,
		Seed: opts.Seed, DType: opts.DType, Coded: s.model.CodedWeights, ScreenRows: s.model.ScreenRows, KVBytes: kvBytes, DRAM: dramBytes(s.machine.Ceilings), Scale: s.scale,
	}, p)
	p.Done()
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if err != nil {
		return err
	}
	if opts.Plot != "" {
		var series []bench.Series
		for _, b := range batches {
			sr := bench.Series{Name: "batch " + strconv.Itoa(b)}
			for _, r := range res {
				if r.Batch == b {
					sr.X, sr.Y = append(sr.X, float64(r.Depth)), append(sr.Y, r.TPOTms)
				}
			}
			series = append(series, sr)
		}
		if err := bench.Plot(opts.Plot, "TPOT vs context depth ("+s.model.Name+", "+opts.DType+")", "context depth (tokens)", "TPOT (ms)", series...); err != nil {
			return err
		}
	}
	return opts.write(bench.Report{Kind: "decode", Machine: s.machine, Model: s.model, Results: res})
}

// startCPUProfile starts a CPU profile into path (nothing when path is
// empty); the returned function stops it and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile %s: %w", path, err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("cpu profile %s: %w", path, err)
		}
		return nil
	}, nil
}
