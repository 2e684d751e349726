package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/ellm-dev/ellm/bench"
	"github.com/ellm-dev/ellm/kernels/ceiling"
	"github.com/ellm-dev/ellm/pkg/cmdutil"
	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

// LlamaCppOptions are the inputs of `ellm bench llamacpp`.
type LlamaCppOptions struct {
	Common
	LlamaBench        string
	LlamaBatchedBench string
	GGUF              string
	Prefill           string
	PrefillDepths     string
	Depths            string
	Batches           string
	Tokens            int
	// CPU reads the machine's CPU time (nil: /proc), and IdleWindow is how
	// long the idle check before the run watches it (0: one second).
	CPU        func() (bench.CPUSnapshot, error)
	IdleWindow time.Duration
}

func newCmdLlamaCpp(f *cmdutil.Factory, runF func(*LlamaCppOptions) error) *cobra.Command {
	opts := &LlamaCppOptions{Common: Common{IO: f.IO, Version: f.Version}}
	cmd := &cobra.Command{
		Use:   "llamacpp",
		Short: "ellm and llama.cpp side by side on the same weights, alternating, with ratios",
		Long: `Runs ellm's prefill and decode measurements and llama.cpp's llama-bench (and
llama-batched-bench for several sequences) alternately on the same checkpoint, the
same number of threads and the same machine, and prints each engine's median rate,
the ratio ellm / llama.cpp and each engine's fraction of this machine's peak; a
decode of several sequences is also given as a multiple of the engine's own rate
for one sequence at the same depth, when --batch has 1.

A prefill at --prefill-depths D is a conversation's next turn: the prompt continues
D tokens of history already in the KV cache, filled untimed (ellm keeps them in its
slot, llama-bench -d fills its context), and the rate is the new tokens'.

llama.cpp's K/V cache takes the type that matches --kv-dtype byte for byte: f16
(its default) for bf16, q8_0 for int8, f32 for f32.

--gguf must be the checkpoint that --model-path or --preset resolves to, converted
to GGUF (docs/benchmarks.md shows how); the command prints the directory it loads.
Each round measures the ceiling each point is charged against (DRAM read for a
decode, the dtype's best compute ceiling for a prefill) in a short burst between
the two engines' measurements, and the fractions of peak are medians over rounds
of rate / that round's ceiling: a shared machine's ceilings drift during a run.

Measure on an otherwise idle machine: it watches the CPU time other processes
(and, on a VM, other guests: steal) use for a second before the run and during it,
and warns when that reaches a quarter of a core.`,
		Example: `  ellm bench llamacpp --preset qwen3-0.6b --gguf qwen3-0.6b-bf16.gguf --llama-bench ~/llama.cpp/build/bin/llama-bench
  ellm bench llamacpp --preset qwen3-0.6b --dtype int8 --gguf qwen3-0.6b-q8_0.gguf --llama-bench … --prefill 512,2048 --depths 0,4096
  ellm bench llamacpp --preset qwen3-0.6b --gguf … --llama-bench … --prefill 128,512 --prefill-depths 4096,16384 --depths ""
  ellm bench llamacpp --preset qwen3-0.6b --kv-dtype int8 --gguf qwen3-0.6b-bf16.gguf --llama-bench … --prefill "" --depths 4096,16384`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return llamaCppRun(cmd, opts)
		},
	}
	addCommonFlags(cmd, &opts.Common)
	addPrefixCacheFlag(cmd, &opts.Common, "off", noPrefixStore)
	fl := cmd.Flags()
	fl.StringVar(&opts.LlamaBench, "llama-bench", "llama-bench", "path of llama.cpp's llama-bench")
	fl.StringVar(&opts.LlamaBatchedBench, "llama-batched-bench", "", "path of llama.cpp's llama-batched-bench (needed for --batch above 1)")
	fl.StringVar(&opts.GGUF, "gguf", "", "the same checkpoint as GGUF (bf16 for --dtype bf16, Q8_0 for --dtype int8)")
	fl.StringVar(&opts.Prefill, "prefill", "128,512,2048,8192", "prompt lengths to prefill (empty: none)")
	fl.StringVar(&opts.PrefillDepths, "prefill-depths", "0", "tokens of history already in the KV cache that each prefill continues (a conversation's next turn)")
	fl.StringVar(&opts.Depths, "depths", "0,4096,16384", "decode context depths (empty: no decode)")
	fl.StringVar(&opts.Batches, "batch", "1", "numbers of sequences decoding together")
	fl.IntVar(&opts.Tokens, "tokens", 32, "decode steps timed per measurement")
	_ = cmd.MarkFlagRequired("gguf")
	return cmd
}

// comparePoints builds the test list from the flags.
func (o *LlamaCppOptions) comparePoints() ([]bench.ComparePoint, error) {
	var points []bench.ComparePoint
	if strings.TrimSpace(o.Prefill) != "" {
		lengths, err := parseInts("prefill", o.Prefill)
		if err != nil {
			return nil, err
		}
		if slices.Contains(lengths, 0) {
			return nil, errors.New("--prefill: lengths must be positive")
		}
		depths, err := parseInts("prefill-depths", o.PrefillDepths)
		if err != nil {
			return nil, err
		}
		for _, d := range depths {
			for _, n := range lengths {
				points = append(points, bench.ComparePoint{Prefill: n, Depth: d})
			}
		}
	}
	if strings.TrimSpace(o.Depths) != "" {
		depths, err := parseInts("depths", o.Depths)
		if err != nil {
			return nil, err
		}
		batches, err := parseInts("batch", o.Batches)
		if err != nil {
			return nil, err
		}
		if slices.Contains(batches, 0) {
			return nil, errors.New("--batch: batch sizes must be positive")
		}
		if slices.Max(batches) > 1 && o.LlamaBatchedBench == "" {
			return nil, errors.New("--batch above 1 needs --llama-batched-bench")
		}
		for _, d := range depths {
			for _, b := range batches {
				points = append(points, bench.ComparePoint{Depth: d, Batch: b})
			}
		}
	}
	if len(points) == 0 {
		return nil, errors.New("nothing to measure: --prefill and --depths are both empty")
	}
	return points, nil
}

func llamaCppRun(cmd *cobra.Command, opts *LlamaCppOptions) error {
	if opts.Layers > 0 {
		return errors.New("--layers: llama.cpp runs the whole model, so the comparison needs it whole too")
	}
	if opts.Tokens < 1 {
		return fmt.Errorf("--tokens %d: must be at least 1", opts.Tokens)
	}
	points, err := opts.comparePoints()
	if err != nil {
		return err
	}
	gguf, err := os.Stat(opts.GGUF)
	if err != nil {
		return fmt.Errorf("--gguf: %w", err)
	}
	cacheType, err := bench.LlamaCacheType(opts.KVDType)
	if err != nil {
		return fmt.Errorf("--kv-dtype: %w", err)
	}
	seq, slots := 8, 1
	for _, p := range points {
		if p.Prefill > 0 {
			seq = max(seq, p.Depth+p.Prefill+8)
		} else {
			seq = max(seq, bench.DecodeSequenceLength(p.Depth, bench.CompareDecodeWarmup, opts.Tokens))
		}
		slots = max(slots, p.Batch)
	}
	// llama.cpp maps the GGUF: where it does not fit in memory beside
	// ellm's engine, llama.cpp's runs would read their weights from disk.
	s, err := opts.start(cmd.Context(), seq, slots, 0, gguf.Size())
	if err != nil {
		return err
	}
	// From here on only ellm holds the engine, so that closing it frees it.
	info := s.engine.Info()
	ellm := &apart{open: s.reopen, e: s.engine}
	s.engine = nil
	defer ellm.close()
	kvBytes, err := modelcfg.KVBytesPerPosition(s.cfg, opts.KVDType)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "ellm loads %s; --gguf %s must be the same weights\n", info.ModelPath, opts.GGUF)

	llama := &bench.LlamaCpp{Bench: opts.LlamaBench, BatchedBench: opts.LlamaBatchedBench, GGUF: opts.GGUF, Threads: info.Threads, CacheType: cacheType}
	co := bench.CompareOptions{Points: points, Rounds: max(opts.Repeat, 1), Tokens: opts.Tokens, Seed: opts.Seed, DType: opts.DType, Coded: s.model.CodedWeights, ScreenRows: s.model.ScreenRows, KVBytes: kvBytes}
	if s.crowded {
		fmt.Fprintf(opts.IO.ErrOut, "ellm's engine (%s) and --gguf (%s) do not fit in memory together: the engine is closed for each of llama.cpp's runs and started again for ellm's\n",
			engine.Size(info.Fit.Total), engine.Size(gguf.Size()))
		co.BeforeLlama = ellm.close
	}
	if s.machine.Ceilings != nil {
		pool, _ := engine.NewPool(opts.Threads, !opts.PinThreads)
		defer pool.Close()
		meter, err := ceiling.NewMeter(pool, burstOptions)
		if err != nil {
			return err
		}
		defer meter.Close()
		co.Ceiling = bench.BurstCeilings(meter, s.machine.Ceilings, opts.DType)
	}

	// Nothing of ours runs now: whatever the CPUs do is someone else's.
	idle, before, err := opts.checkIdle()
	if err != nil {
		return err
	}
	s.machine.Idle = idle
	p := opts.progress(2*co.Rounds*len(points), "ellm vs llama.cpp")
	res, err := bench.RunCompare(cmd.Context(), ellm, s.cfg, llama, co, p)
	p.Done()
	if err != nil {
		return err
	}
	if after, err := opts.readCPU(); idle != nil && err == nil {
		during := bench.OtherLoad(before, after)
		idle.During = &during
		if during.Busy() {
			fmt.Fprintf(opts.IO.ErrOut, "warning: others used %.2f cores (steal %.2f) during the run: the figures are not an idle machine's\n", during.Others, during.Steal)
		}
	}
	return opts.write(bench.Report{Kind: "ellm vs llama.cpp (its KV cache " + cacheType + ")", Machine: s.machine, Model: s.model, Results: res})
}

// apart is ellm's engine in a comparison that may close it while llama.cpp
// runs (close) and start it again, outside the times measured, at ellm's
// next request.
type apart struct {
	open func() (*engine.Engine, error)
	mu   sync.Mutex // decode runs a batch's sequences concurrently
	e    *engine.Engine
}

func (a *apart) Generate(ctx context.Context, req engine.Request, fn func(engine.Event) error) (engine.Result, error) {
	a.mu.Lock()
	if a.e == nil {
		e, err := a.open()
		if err != nil {
			a.mu.Unlock()
			return engine.Result{}, fmt.Errorf("start ellm again after llama.cpp's run: %w", err)
		}
		a.e = e
	}
	e := a.e
	a.mu.Unlock()
	return e.Generate(ctx, req, fn)
}

func (a *apart) close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.e == nil {
		return nil
	}
	err := a.e.Close()
	a.e = nil
	// Weights packed without an image are on the Go heap, which keeps
	// freed memory until its scavenger returns it: hand it back now, before
	// llama.cpp maps its own.
	debug.FreeOSMemory()
	return err
}

// burstOptions size the per-round ceiling bursts to about 50 ms each for an
// instruction and 30 ms for DRAM on a 2-core VM: a quarter GiB is still
// eight times a large last-level cache.
var burstOptions = ceiling.Options{Interval: 10 * time.Millisecond, Reps: 4, DRAMBytes: 256 << 20, WallClock: true}

func (o *LlamaCppOptions) readCPU() (bench.CPUSnapshot, error) {
	if o.CPU != nil {
		return o.CPU()
	}
	return bench.ReadCPUSnapshot("/proc")
}

// checkIdle watches the CPUs for IdleWindow and warns when others use them;
// it returns what it saw and the snapshot it ended on, the start of the run's
// own window. A machine without /proc is not checked (nil, no error).
func (o *LlamaCppOptions) checkIdle() (*bench.Idleness, bench.CPUSnapshot, error) {
	a, err := o.readCPU()
	if err != nil {
		fmt.Fprintf(o.IO.ErrOut, "warning: cannot check that the machine is idle: %v\n", err)
		return nil, a, nil
	}
	window := o.IdleWindow
	if window <= 0 {
		window = time.Second
	}
	time.Sleep(window)
	b, err := o.readCPU()
	if err != nil {
		return nil, a, fmt.Errorf("check the machine is idle: %w", err)
	}
	load := bench.OtherLoad(a, b)
	if load.Busy() {
		fmt.Fprintf(o.IO.ErrOut, "warning: others used %.2f cores (steal %.2f) before the run: the machine is not idle, so the figures are not either\n", load.Others, load.Steal)
	}
	return &bench.Idleness{Before: load}, b, nil
}

func dramBytes(c *bench.Ceilings) float64 {
	if c == nil {
		return 0
	}
	return c.DRAMGBps * 1e9
}
