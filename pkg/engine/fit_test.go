package engine

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/pkg/cpu"
	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/model"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

const gib = int64(1) << 30

func preset(t *testing.T, name string) *modelcfg.Config {
	t.Helper()
	c, err := modelcfg.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A 24 GiB machine, as in the issue: 60,000,000 positions of Qwen3-0.6B is
// refused with the numbers and the largest length that fits.
func TestCheckFitRefusesWithLargestLength(t *testing.T) {
	cfg := preset(t, "qwen3-0.6b")
	mem := cpu.Memory{Total: 24 * gib, Available: 22 * gib}
	opts := Options{SequenceLength: 60_000_000, BatchSize: 1, Threads: 2, AllowLongContext: true}
	f, err := CheckFit(cfg, opts, mem)
	if err != nil {
		t.Fatal(err)
	}
	if f.OK() {
		t.Fatalf("fits: %+v", f)
	}
	if f.KVPerPosition != 112*1024 {
		t.Errorf("bf16 KV per position %d, want 112 KiB (28 layers × 8 kv heads × 128 × 2 × 2)", f.KVPerPosition)
	}
	if f.KVCache != 60_000_000*f.KVPerPosition {
		t.Errorf("KV cache %d", f.KVCache)
	}
	n := f.MaxSequenceLength
	if n < 10_000 || int64(n) > 22*gib/f.KVPerPosition {
		t.Fatalf("largest fitting length %d is implausible", n)
	}
	// It is the largest: n fits, n+1 does not, each checked on its own.
	at := func(seq int) *Fit {
		o := opts
		o.SequenceLength = seq
		g, err := CheckFit(cfg, o, mem)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	if g := at(n); !g.OK() || g.Total > g.Budget {
		t.Errorf("largest length %d does not fit: %v", n, g.Reasons)
	}
	if g := at(n + 1); g.OK() {
		t.Errorf("length %d fits too", n+1)
	}
	msg := f.Err().Error()
	for _, want := range []string{"needs ", "weights", "KV cache", "scratch", "usable", "MemAvailable", "--sequence-length that fits with --batch-size 1 is"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q does not say %q", msg, want)
		}
	}
	var fe *FitError
	if !errors.As(f.Err(), &fe) || fe.Fit != f {
		t.Errorf("Err is %T", f.Err())
	}
}

// Single-pass prefill scratch grows with the sequence: chunking shrinks it,
// so the same memory fits a longer sequence.
func TestCheckFitChunkingFitsLonger(t *testing.T) {
	cfg := preset(t, "qwen3-0.6b")
	mem := cpu.Memory{Total: 24 * gib, Available: 22 * gib}
	whole, err := CheckFit(cfg, Options{SequenceLength: 4096, Threads: 2, AllowLongContext: true}, mem)
	if err != nil {
		t.Fatal(err)
	}
	chunked, err := CheckFit(cfg, Options{SequenceLength: 4096, ChunkSize: 512, Threads: 2, AllowLongContext: true}, mem)
	if err != nil {
		t.Fatal(err)
	}
	if !(chunked.Scratch < whole.Scratch && chunked.MaxSequenceLength > whole.MaxSequenceLength) {
		t.Errorf("chunk 512: scratch %d, max length %d; whole: %d, %d", chunked.Scratch, chunked.MaxSequenceLength, whole.Scratch, whole.MaxSequenceLength)
	}
	// A refusal that chunking would turn around says so.
	g, err := CheckFit(cfg, Options{SequenceLength: whole.MaxSequenceLength * 5 / 4, Threads: 2, AllowLongContext: true}, mem)
	if err != nil {
		t.Fatal(err)
	}
	if g.OK() || !strings.Contains(g.Err().Error(), "or keep it and prefill in chunks: --chunk-size 4096 needs") {
		t.Errorf("refusal without the chunking hint: %v", g.Err())
	}
	// With a fixed chunk, the length is bound by the KV cache alone, nearly.
	if per := chunked.Budget / chunked.KVPerPosition; int64(chunked.MaxSequenceLength) > per {
		t.Errorf("max length %d above budget/KV per position %d", chunked.MaxSequenceLength, per)
	}
}

// The KV dtype is counted through pkg/kvcache: f32 doubles the cache, int8
// nearly halves it.
func TestCheckFitKVDType(t *testing.T) {
	cfg := preset(t, "qwen3-8b")
	mem := cpu.Memory{Total: 512 * gib, Available: 500 * gib}
	bf, err := CheckFit(cfg, Options{SequenceLength: 32768, BatchSize: 4, KVDType: "bf16"}, mem)
	if err != nil {
		t.Fatal(err)
	}
	f32, err := CheckFit(cfg, Options{SequenceLength: 32768, BatchSize: 4, KVDType: "f32"}, mem)
	if err != nil {
		t.Fatal(err)
	}
	per, err := kvcache.BytesPerPosition(cfg, kvcache.BF16)
	if err != nil {
		t.Fatal(err)
	}
	if f32.KVCache != 2*bf.KVCache || bf.KVCache != 4*32768*per {
		t.Errorf("KV bf16 %d, f32 %d", bf.KVCache, f32.KVCache)
	}
	// int8: a byte per value and a 4-byte scale per head and position.
	i8, err := CheckFit(cfg, Options{SequenceLength: 32768, BatchSize: 4, KVDType: "int8"}, mem)
	if err != nil {
		t.Fatal(err)
	}
	if want := bf.KVCache / int64(2*cfg.HeadDim) * int64(cfg.HeadDim+4); i8.KVCache != want || i8.MaxSequenceLength <= bf.MaxSequenceLength {
		t.Errorf("KV int8 %d, want %d; max length %d vs bf16 %d", i8.KVCache, want, i8.MaxSequenceLength, bf.MaxSequenceLength)
	}
	if _, err := CheckFit(cfg, Options{KVDType: "fp4"}, mem); err == nil {
		t.Error("unknown KV dtype accepted")
	}
}

// A cgroup limit tighter than MemAvailable binds, and the refusal names it.
func TestCheckFitCgroupLimitBinds(t *testing.T) {
	cfg := preset(t, "qwen3-8b")
	free := cpu.Memory{Total: 256 * gib, Available: 200 * gib}
	boxed := free
	boxed.CgroupLimit, boxed.CgroupUsage, boxed.Cgroup = 16*gib, gib, "/kubepods/pod1"
	opts := Options{SequenceLength: 32768, BatchSize: 1}
	f, err := CheckFit(cfg, opts, free)
	if err != nil || !f.OK() {
		t.Fatalf("on the free machine: %v %v", err, f.Reasons)
	}
	g, err := CheckFit(cfg, opts, boxed)
	if err != nil {
		t.Fatal(err)
	}
	if g.OK() || g.Budget != int64(Headroom*float64(15*gib)) {
		t.Fatalf("in a 16 GiB cgroup: ok %v, budget %d", g.OK(), g.Budget)
	}
	if msg := g.Err().Error(); !strings.Contains(msg, "cgroup /kubepods/pod1") {
		t.Errorf("refusal %q does not name the cgroup", msg)
	}
}

// Beyond max_position_embeddings: refused, unless YaRN extends the window or
// the override flag is given.
func TestCheckFitContextLimit(t *testing.T) {
	plain := preset(t, "qwen3-0.6b")
	mem := cpu.Memory{Total: 512 * gib, Available: 500 * gib}
	f, err := CheckFit(plain, Options{SequenceLength: 65536}, mem)
	if err != nil {
		t.Fatal(err)
	}
	if f.OK() || !strings.Contains(f.Err().Error(), "exceeds the model's context of 40960") || !strings.Contains(f.Err().Error(), "--allow-long-context") {
		t.Errorf("65536 > 40960 without YaRN: %v", f.Reasons)
	}
	f, err = CheckFit(plain, Options{SequenceLength: 65536, AllowLongContext: true}, mem)
	if err != nil || !f.OK() || len(f.Warnings) != 1 {
		t.Errorf("with --allow-long-context: %v %v %v", err, f.Reasons, f.Warnings)
	}
	yarn := *plain
	yarn.RopeScaling = &modelcfg.RopeScaling{RopeType: "yarn", Factor: 4, OriginalMaxPositionEmbeddings: 32768}
	if ContextLimit(&yarn) != 131072 {
		t.Errorf("YaRN ×4 of 32768: limit %d", ContextLimit(&yarn))
	}
	f, err = CheckFit(&yarn, Options{SequenceLength: 131072}, mem)
	if err != nil || !f.OK() {
		t.Errorf("131072 with YaRN ×4: %v %v", err, f.Reasons)
	}
	f, err = CheckFit(&yarn, Options{SequenceLength: 131073}, mem)
	if err != nil || f.OK() {
		t.Errorf("131073 with YaRN ×4 accepted")
	}
}

func TestLargest(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 1000, 1 << 20, 123456789} {
		if got := largest(func(x int) bool { return x <= n }); got != n {
			t.Errorf("largest(≤%d) = %d", n, got)
		}
	}
}

// New runs the same check before loading anything: with the memory figures
// injected, it refuses what does not fit and starts what does, reporting
// the check it passed.
func TestNewChecksFitFirst(t *testing.T) {
	dir := sharedtest.Path(t, "models", "tiny-qwen3-a")
	// The weights (coded or not, as this CPU runs them) and a few MiB for
	// the KV cache and scratch: some thousands of positions fit, 200000 not.
	weights, _, err := model.WeightBytes(openModel(t, dir).Config, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	available := weights*10/9 + 8<<20
	tight := func() (cpu.Memory, error) { return cpu.Memory{Total: gib, Available: available}, nil }
	_, err = New(openModel(t, dir), Options{SequenceLength: 200_000, Threads: 1, AllowLongContext: true, Memory: tight})
	var fe *FitError
	if !errors.As(err, &fe) || fe.Fit.MaxSequenceLength <= 0 || fe.Fit.MaxSequenceLength >= 200_000 {
		t.Fatalf("%d bytes usable, 200000 positions: %v", available, err)
	}
	fitting := fe.Fit.MaxSequenceLength
	if _, err := New(openModel(t, dir), Options{SequenceLength: fe.Fit.ContextLimit + 1, Threads: 1}); !errors.As(err, &fe) ||
		!strings.Contains(err.Error(), "exceeds the model's context") {
		t.Fatalf("beyond the context: %v", err)
	}
	e, err := New(openModel(t, dir), Options{SequenceLength: fitting, Threads: 1, Memory: tight})
	if err != nil {
		t.Fatalf("the largest length the refusal named (%d): %v", fitting, err)
	}
	defer e.Close()
	if f := e.Info().Fit; f == nil || !f.OK() || f.Memory.Usable() != available {
		t.Errorf("Info().Fit = %+v", f)
	}
	// What the check predicted is what the engine committed.
	info := e.Info()
	// (Weights to within panel padding, which the estimate leaves out, and
	// without the coded copy if the engine timed it slower than the pairs
	// and dropped it, model.ChooseCoded, or the logits screen if it kept no
	// row, model.DropScreen.)
	f, weights := info.Fit, info.Fit.Weights
	if (f.CodedWeights > 0) != (info.DecodeWeights != "") {
		t.Errorf("coded copy predicted %d bytes, decode weights %q: want the load's choice said where a copy was made", f.CodedWeights, info.DecodeWeights)
	}
	if info.CodedWeightBytes == 0 {
		weights -= f.CodedWeights
	}
	if info.ScreenRows == 0 && info.LogitScreen != "" { // measured, kept no row, dropped
		weights -= gemm.ScreenBytes(info.Config.VocabSize, info.Config.HiddenSize)
	}
	// The scratch predicted is the start-up's peak, the logits screen sized
	// for every row a pass can have; ChooseScreen then frees the rows it
	// does not keep (how many depends on the CPU's timing).
	kept, load := runnerOptions(e.opts), e.opts.loadOptions()
	scratch := func(o model.RunnerOptions, l model.LoadOptions) int64 {
		return model.ScratchBytes(info.Config, e.opts.BatchSize, fitting, o, l, e.opts.Threads, kernels.PathFor(kernels.MatMulBF16))
	}
	peak := scratch(kept, load)
	if kept.ScreenRows = info.ScreenRows; info.ScreenRows == 0 {
		load.NoLogitScreen = true
	}
	freed := peak - scratch(kept, load)
	if f.KVCache != info.KVBytes || info.WeightBytes < weights || float64(info.WeightBytes-weights) > 0.01*float64(weights) ||
		f.Scratch != info.ScratchBytes+freed+4*int64(fitting) {
		t.Errorf("predicted weights %d (coded %d) KV %d scratch %d; committed %d (coded %d: %s) %d %d (+ %d transcript, %d of screen freed at %d rows)",
			f.Weights, f.CodedWeights, f.KVCache, f.Scratch, info.WeightBytes, info.CodedWeightBytes, info.DecodeWeights, info.KVBytes, info.ScratchBytes, 4*fitting, freed, info.ScreenRows)
	}
}

// withBudget is memory whose Headroom share is at least b bytes, by at most
// a few.
func withBudget(b int64) cpu.Memory {
	avail := int64(math.Ceil(float64(b) / Headroom))
	return cpu.Memory{Total: 2 * avail, Available: avail}
}

// The logits screen and the coded copy only make decode faster: a
// deployment that fits only without them starts without them, the smaller
// (the screen) left out first, and says so; one that does not fit even
// without them is refused with what it would need without them, and with
// int8 weights.
func TestCheckFitLeavesOutFasterCopies(t *testing.T) {
	cfg := preset(t, "qwen3-8b")
	opts := Options{SequenceLength: 4096, Threads: 2}
	check := func(mem cpu.Memory, o Options) *Fit {
		t.Helper()
		f, err := CheckFit(cfg, o, mem)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	full := check(cpu.Memory{Total: 512 * gib, Available: 500 * gib}, opts)
	if !full.OK() || full.DroppedScreen || full.DroppedCoded || full.Screen != gemm.ScreenBytes(cfg.VocabSize, cfg.HiddenSize) || len(full.Warnings) != 0 {
		t.Fatalf("with room: %+v", full)
	}
	noScreen := opts
	noScreen.NoLogitScreen = true
	lean := noScreen
	lean.NoCodedWeights = true
	leanFit := check(cpu.Memory{Total: 512 * gib, Available: 500 * gib}, lean)

	f := check(withBudget(full.Total-1), opts)
	if !f.OK() || !f.DroppedScreen || f.DroppedCoded || f.Screen != 0 || f.CodedWeights != full.CodedWeights || f.Total > f.Budget ||
		len(f.Warnings) != 1 || !strings.Contains(f.Warnings[0], "logits screen ("+Size(full.Screen)+") is left out") {
		t.Errorf("a byte short of the whole: %+v", f)
	}
	if f.MaxSequenceLength != check(withBudget(full.Total-1), lean).MaxSequenceLength {
		t.Errorf("largest length %d: want the one without the copies, which a longer sequence leaves out", f.MaxSequenceLength)
	}
	// The user's own choice is not a warning.
	if g := check(withBudget(full.Total-1), noScreen); !g.OK() || g.DroppedScreen || len(g.Warnings) != 0 {
		t.Errorf("--screen-logits=false: %+v", g)
	}

	t.Run("coded", func(t *testing.T) {
		if full.CodedWeights == 0 {
			t.Skipf("bf16 products on %s read no coded copy", kernels.PathFor(kernels.MatMulBF16))
		}
		withoutScreen := check(withBudget(1<<50), noScreen)
		f := check(withBudget(withoutScreen.Total-1), opts)
		if !f.OK() || f.DroppedScreen || !f.DroppedCoded || f.CodedWeights != 0 || f.Screen != full.Screen ||
			len(f.Warnings) != 1 || !strings.Contains(f.Warnings[0], "coded copy of the bf16 weights ("+Size(full.CodedWeights)+") is left out") {
			t.Errorf("without the screen still too large: %+v", f)
		}
		f = check(withBudget(leanFit.Total), opts)
		if !f.OK() || !f.DroppedScreen || !f.DroppedCoded || f.Total != leanFit.Total || len(f.Warnings) != 2 {
			t.Errorf("only the lean deployment fits: %+v", f)
		}
	})

	f = check(withBudget(leanFit.Total-1<<20), opts)
	if f.OK() || !f.DroppedScreen || f.Total != leanFit.Total {
		t.Fatalf("short of the lean deployment: %+v", f)
	}
	without := " without the logits screen"
	if full.CodedWeights > 0 {
		without += " and the coded copy"
	}
	msg := f.Err().Error()
	for _, want := range []string{"needs " + Size(leanFit.Total) + without + " (weights", "--dtype int8 needs"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q does not say %q", msg, want)
		}
	}
	if g := check(withBudget(leanFit.Total-1<<20), Options{SequenceLength: 4096, Threads: 2, DType: "int8"}); !g.OK() {
		t.Errorf("the int8 deployment the refusal suggests: %v", g.Reasons)
	}
}

// New loads what its fit decided: with room for the deployment without the
// logits screen and the coded copy only, it starts without them.
func TestNewLeavesOutWhatDoesNotFit(t *testing.T) {
	dir := sharedtest.Path(t, "models", "tiny-qwen3-a")
	cfg := openModel(t, dir).Config
	opts := Options{SequenceLength: 256, Threads: 1}
	lean := opts
	lean.NoLogitScreen, lean.NoCodedWeights = true, true
	roomy := cpu.Memory{Total: 512 * gib, Available: 500 * gib}
	full, err := CheckFit(cfg, opts, roomy)
	if err != nil {
		t.Fatal(err)
	}
	want, err := CheckFit(cfg, lean, roomy)
	if err != nil {
		t.Fatal(err)
	}
	if full.Screen == 0 || full.Total <= want.Total {
		t.Fatalf("nothing to leave out: %+v", full)
	}
	opts.Memory = func() (cpu.Memory, error) { return withBudget(want.Total), nil }
	e, err := New(openModel(t, dir), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	info := e.Info()
	if f := info.Fit; !f.DroppedScreen || f.DroppedCoded != (full.CodedWeights > 0) || f.Total != want.Total {
		t.Errorf("fit %+v, want the lean %+v", f, want)
	}
	if info.ScreenBytes != 0 || info.LogitScreen != "" || info.CodedWeightBytes != 0 || info.DecodeWeights != "" || !e.opts.NoLogitScreen || e.opts.NoCodedWeights != (full.CodedWeights > 0) {
		t.Errorf("started with screen %d bytes (%q), coded copy %d (%q); options %+v", info.ScreenBytes, info.LogitScreen, info.CodedWeightBytes, info.DecodeWeights, e.opts)
	}
	got, err := e.Generate(context.Background(), Request{Tokens: []int32{1, 2, 3}, MaxTokens: 4, StopTokens: []int32{}}, nil)
	if err != nil || got.CompletionTokens != 4 {
		t.Errorf("generate: %+v %v", got, err)
	}
}
