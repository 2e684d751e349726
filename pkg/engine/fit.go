package engine

import (
	"fmt"
	"strings"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/pkg/cpu"
	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/model"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/sample"
)

// Headroom is the share of usable memory a deployment may commit: the rest
// is left for the Go runtime, HTTP buffers, per-request state and page-cache
// churn.
const Headroom = 0.9

// Fit is what a deployment commits, computed from the model's shape and the
// engine options before anything is allocated, against the memory this
// process may use. serve, run, bench and check-cpu all decide with it.
type Fit struct {
	Model          string `json:"model"`
	DType          string `json:"dtype"`
	KVDType        string `json:"kv_dtype"`
	SequenceLength int    `json:"sequence_length"`
	BatchSize      int    `json:"batch_size"`
	ChunkSize      int    `json:"chunk_size"`
	Threads        int    `json:"threads"`

	Weights int64 `json:"weights_bytes"`
	// CodedWeights is the part of Weights that is the coded copy decode
	// steps stream (Options.NoCodedWeights).
	CodedWeights int64 `json:"coded_weights_bytes"`
	KVCache      int64 `json:"kv_cache_bytes"`
	// KVPerPosition is the KV cache of one position of one slot.
	KVPerPosition int64 `json:"kv_bytes_per_position"`
	// Scratch is the runner's activation, GEMM and attention buffers, the
	// RoPE table, and each slot's sampler and token transcript: the
	// start-up's peak, with the logits screen sized for every row a pass
	// can have before model.Runner.ChooseScreen frees the rows it does
	// not keep (Info.ScratchBytes is after that).
	Scratch int64 `json:"scratch_bytes"`
	Total   int64 `json:"total_bytes"`

	Memory cpu.Memory `json:"memory"`
	// Budget is Headroom × Memory.Usable(): what may be committed.
	Budget int64 `json:"budget_bytes"`
	// ContextLimit is the longest sequence the model supports:
	// max_position_embeddings, or the YaRN window when rope_scaling is set.
	ContextLimit int `json:"context_limit"`
	// MaxSequenceLength is the largest --sequence-length whose deployment
	// fits in Budget at this batch size (0: not even one position).
	MaxSequenceLength int `json:"max_sequence_length"`

	Reasons  []string `json:"reasons,omitempty"`  // why it cannot run (empty: it can)
	Warnings []string `json:"warnings,omitempty"` // it runs, but read this
}

// OK reports whether the deployment may start.
func (f *Fit) OK() bool { return len(f.Reasons) == 0 }

// FitError is the refusal to start a deployment that does not fit.
type FitError struct{ Fit *Fit }

func (e *FitError) Error() string {
	return "deployment refused: " + strings.Join(e.Fit.Reasons, "; ")
}

// Err is a *FitError when the deployment may not start, else nil.
func (f *Fit) Err() error {
	if f.OK() {
		return nil
	}
	return &FitError{Fit: f}
}

// CheckFit sizes the deployment of cfg that opts describe (defaults applied
// as New applies them) against mem, and says whether it may start: the
// sequence length within the model's context (unless opts.AllowLongContext),
// and weights + KV cache + scratch within Headroom of the usable memory.
func CheckFit(cfg *modelcfg.Config, opts Options, mem cpu.Memory) (*Fit, error) {
	opts = withDefaults(opts)
	if opts.Threads <= 0 {
		opts.Threads = cpu.DefaultThreads(cpu.System()).N // as NewPool resolves it
	}
	kvd, err := kvcache.ParseDType(opts.KVDType)
	if err != nil {
		return nil, err
	}
	weights, coded, err := model.WeightBytes(cfg, opts.loadOptions())
	if err != nil {
		return nil, err
	}
	if opts.ChunkSize < 0 {
		return nil, fmt.Errorf("chunk size %d: must not be negative", opts.ChunkSize)
	}
	if opts.LogitScreenRows < 0 {
		return nil, fmt.Errorf("logit screen rows %d: must not be negative", opts.LogitScreenRows)
	}
	// pkg/kvcache says what a position costs in each dtype it has.
	kvPer, err := kvcache.BytesPerPosition(cfg, kvd)
	if err != nil {
		return nil, err
	}
	f := &Fit{
		Model: cfg.Name(), DType: opts.DType, KVDType: string(kvd), SequenceLength: opts.SequenceLength,
		BatchSize: opts.BatchSize, ChunkSize: opts.ChunkSize, Threads: opts.Threads,
		Weights: weights, CodedWeights: coded, KVPerPosition: kvPer,
		Memory: mem, Budget: int64(Headroom * float64(mem.Usable())), ContextLimit: ContextLimit(cfg),
	}
	// One sampler's size depends only on the vocabulary; it is small.
	sampler := sample.New(cfg.VocabSize).Bytes()
	size := func(seq int) (kv, scratch int64) {
		o := opts
		o.SequenceLength = seq
		kv = kvPer * int64(o.BatchSize) * int64(seq)
		scratch = model.ScratchBytes(cfg, o.BatchSize, seq, runnerOptions(o), o.loadOptions(), o.Threads, kernels.PathFor(kernels.MatMulBF16))
		// each slot's transcript holds up to seq tokens
		scratch += int64(o.BatchSize) * (sampler + 4*int64(seq))
		return kv, scratch
	}
	f.KVCache, f.Scratch = size(opts.SequenceLength)
	f.Total = f.Weights + f.KVCache + f.Scratch

	if f.SequenceLength > f.ContextLimit {
		msg := fmt.Sprintf("--sequence-length %d exceeds the model's context of %d positions", f.SequenceLength, f.ContextLimit)
		if opts.AllowLongContext {
			f.Warnings = append(f.Warnings, msg+" (allowed by --allow-long-context: quality degrades beyond it)")
		} else {
			f.Reasons = append(f.Reasons, msg+" (set rope_scaling to YaRN in config.json to extend it, or pass --allow-long-context)")
		}
	}
	if mem.Usable() <= 0 {
		f.Warnings = append(f.Warnings, "usable memory is unknown (no /proc/meminfo): the deployment is not checked against it")
		return f, nil
	}
	fits := func(seq int) bool {
		kv, s := size(seq)
		return f.Weights+kv+s <= f.Budget
	}
	f.MaxSequenceLength = largest(fits)
	if f.Total > f.Budget {
		suggest := fmt.Sprintf("no sequence length fits with --batch-size %d", f.BatchSize)
		if n := f.MaxSequenceLength; n > 0 {
			suggest = fmt.Sprintf("the largest --sequence-length that fits with --batch-size %d is %d", f.BatchSize, n)
			if n > f.ContextLimit && !opts.AllowLongContext {
				suggest += fmt.Sprintf(" (the model's context is %d)", f.ContextLimit)
			}
		}
		// Single-pass prefill scratch grows with the sequence: chunking may
		// make the requested length fit.
		if opts.ChunkSize == 0 && opts.SequenceLength > suggestedChunk {
			o := opts
			o.ChunkSize = suggestedChunk
			if g, err := CheckFit(cfg, o, mem); err == nil && g.Total <= g.Budget {
				suggest += fmt.Sprintf(", or keep it and prefill in chunks: --chunk-size %d needs %s", suggestedChunk, Size(g.Total))
			}
		}
		f.Reasons = append(f.Reasons, fmt.Sprintf("needs %s (weights %s + KV cache %s + scratch %s) but only %s of the %s usable may be committed (%s, %.0f%% kept free); %s",
			Size(f.Total), Size(f.Weights), Size(f.KVCache), Size(f.Scratch), Size(f.Budget), Size(mem.Usable()), mem.Bound(), 100*(1-Headroom), suggest))
	}
	return f, nil
}

// suggestedChunk is the --chunk-size a refusal suggests when single-pass
// prefill scratch is what does not fit.
const suggestedChunk = 4096

// largest is the largest n ≥ 1 with fits(n), fits being monotone (true up
// to some n, false beyond); 0 when fits(1) is false.
func largest(fits func(int) bool) int {
	if !fits(1) {
		return 0
	}
	lo, hi := 1, 2 // fits(lo), hi unknown
	for fits(hi) {
		lo, hi = hi, 2*hi
		if hi > 1<<50 {
			return lo
		}
	}
	for hi-lo > 1 { // fits(lo), !fits(hi)
		mid := lo + (hi-lo)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// ContextLimit is the longest sequence cfg supports: with YaRN the original
// window times the factor, else max_position_embeddings.
func ContextLimit(c *modelcfg.Config) int {
	if r := c.RopeScaling; r != nil && r.Kind() == "yarn" {
		orig := r.OriginalMaxPositionEmbeddings
		if orig == 0 {
			orig = c.MaxPositionEmbeddings // as the runner's RoPE table assumes
		}
		return max(c.MaxPositionEmbeddings, int(r.Factor*float64(orig)))
	}
	return c.MaxPositionEmbeddings
}

// Size formats a byte count for people.
func Size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
