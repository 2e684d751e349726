package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ceiling"
	"github.com/ellm-dev/ellm/pkg/engine"
)

// fakeLlama answers like llama-bench / llama-batched-bench at fixed rates and
// records the calls, interleaved with ellm's through order.
type fakeLlama struct {
	prefill, decode float64
	order           *[]string
	calls           [][]string
}

func (f *fakeLlama) exec(_ context.Context, prog string, args ...string) ([]byte, error) {
	f.calls = append(f.calls, append([]string{prog}, args...))
	*f.order = append(*f.order, "llama")
	if prog == "batched" {
		return []byte("main: n_kv_max = 64\n{\"pp\": 16, \"tg\": 8, \"pl\": 4, \"speed_tg\": " + fmt.Sprint(f.decode) + "}\n"), nil
	}
	rate := f.decode
	if args[slices.Index(args, "-n")+1] == "0" {
		rate = f.prefill
	}
	return []byte(fmt.Sprintf(`[{"n_prompt": 1, "n_gen": 0, "avg_ts": %g, "stddev_ts": 0}]`, rate)), nil
}

// clockGen is a generator on a virtual clock: a prefill takes ttft, each
// decode step takes step, whatever the machine is doing. It records when an
// ellm measurement starts: with a fresh prompt (a prefill) or by priming its
// first decode sequence.
type clockGen struct {
	ttft, step time.Duration
	order      *[]string
	mu         sync.Mutex
	now        time.Time
	firsts     map[int32]int // first tokens of prompts without a session
}

func (g *clockGen) Generate(ctx context.Context, req engine.Request, fn func(engine.Event) error) (engine.Result, error) {
	if g.order != nil && req.MaxTokens == 1 && (req.SessionID == "" || strings.HasSuffix(req.SessionID, "-0")) {
		*g.order = append(*g.order, "ellm")
	}
	g.mu.Lock()
	if req.SessionID == "" {
		if g.firsts == nil {
			g.firsts = map[int32]int{}
		}
		g.firsts[req.Tokens[0]]++
	}
	if req.MaxTokens == 1 { // a prefill or a priming: the batch's decodes start together after it
		g.now = g.now.Add(time.Hour)
	}
	at := g.now
	g.mu.Unlock()
	for i := range req.MaxTokens {
		if err := fn(engine.Event{Token: 1, At: at.Add(g.ttft + time.Duration(i)*g.step)}); err != nil {
			return engine.Result{}, err
		}
	}
	toks := append(append([]int32(nil), req.Tokens...), make([]int32, req.MaxTokens)...)
	return engine.Result{PromptTokens: len(req.Tokens), CompletionTokens: req.MaxTokens, Tokens: toks, TTFT: g.ttft}, nil
}

func TestRunCompareAlternatesAndComputesRatios(t *testing.T) {
	c := preset(t, "qwen3-0.6b")
	var order []string
	g := &clockGen{ttft: 8 * time.Millisecond, step: 4 * time.Millisecond, order: &order}
	fl := &fakeLlama{prefill: 1000, decode: 100, order: &order}
	l := &LlamaCpp{Bench: "bench", BatchedBench: "batched", GGUF: "m.gguf", Threads: 2, CacheType: "q8_0", Exec: fl.exec}
	points := []ComparePoint{{Prefill: 16}, {Depth: 32, Batch: 1}, {Depth: 0, Batch: 4}}
	ceil := func(p ComparePoint) Ceiling {
		order = append(order, "ceiling")
		if p.Prefill > 0 {
			return Ceiling{Name: "VDPBF16PS", Unit: "FLOP", PerSecond: 1e12}
		}
		return Ceiling{Name: "DRAM read", Unit: "B", PerSecond: 50e9}
	}
	release := func() error { order = append(order, "release"); return nil }
	res, err := RunCompare(context.Background(), g, c, l,
		CompareOptions{Points: points, Rounds: 2, Tokens: 8, DType: "bf16", KVBytes: 114688, Ceiling: ceil, BeforeLlama: release}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 {
		t.Fatalf("%d results", len(res))
	}
	for tok, n := range g.firsts {
		if n > 1 {
			t.Errorf("%d prefill prompts start with token %d: the engine's prefix cache could serve them", n, tok)
		}
	}
	// Prefill: 16 tokens in 8 ms = 2000 tok/s against llama.cpp's 1000.
	if r := res[0]; math.Abs(r.Ratio-2) > 1e-9 || r.Test != "prefill 16" || r.EllmFraction <= 0 || r.LlamaFraction <= 0 ||
		r.Ceiling != "VDPBF16PS" || len(r.Rounds) != 2 || r.Rounds[1].Ceiling != 1e12 {
		t.Errorf("prefill: %+v", r)
	}
	// Decode at batch 1: a step every 4 ms = 250 tok/s against 100.
	if r := res[1]; math.Abs(r.Ratio-2.5) > 1e-9 || r.Ellm.N != 2 || r.Llama.N != 2 || r.Ceiling != "DRAM read" ||
		math.Abs(r.EllmFraction/r.LlamaFraction-2.5) > 1e-9 {
		t.Errorf("decode batch 1: %+v", r)
	}
	// Batch 4 counts every sequence: 1000 tok/s against batched-bench's 100.
	if r := res[2]; math.Abs(r.Ratio-10) > 1e-9 {
		t.Errorf("decode batch 4: %+v", r)
	}
	// The engines take turns, the second round starting with llama.cpp, and
	// each point's ceiling is measured between them (a prefill's warm-up
	// makes two ellm entries in a row: fold them); BeforeLlama runs right
	// before each of llama.cpp's measurements.
	var turns []string
	for _, o := range order {
		if len(turns) == 0 || o != "ellm" || turns[len(turns)-1] != "ellm" {
			turns = append(turns, o)
		}
	}
	want := "ellm ceiling release llama ellm ceiling release llama ellm ceiling release llama " +
		"release llama ceiling ellm release llama ceiling ellm release llama ceiling ellm"
	if got := strings.Join(turns, " "); got != want {
		t.Errorf("order %q, want %q", got, want)
	}
	var sawDepth, sawBatched bool
	for _, call := range fl.calls {
		line := strings.Join(call, " ")
		if !strings.Contains(line, "-m m.gguf") || !strings.Contains(line, "-t 2") || !strings.Contains(line, "-ctk q8_0 -ctv q8_0") {
			t.Errorf("call without the model, threads or cache type: %s", line)
		}
		sawDepth = sawDepth || strings.Contains(line, "-d 32")
		sawBatched = sawBatched || strings.HasPrefix(line, "batched") && strings.Contains(line, "-npl 4")
	}
	if !sawDepth || !sawBatched {
		t.Errorf("calls %v", fl.calls)
	}
}

// A decode of several sequences is also given as a multiple of one
// sequence's throughput at its depth, each engine against itself; a point
// without a one-sequence partner at its depth gets none.
func TestRunCompareScalingOverSequences(t *testing.T) {
	c := preset(t, "qwen3-0.6b")
	var order []string
	g := &clockGen{ttft: 8 * time.Millisecond, step: 4 * time.Millisecond, order: &order}
	fl := &fakeLlama{decode: 100, order: &order}
	l := &LlamaCpp{Bench: "bench", BatchedBench: "batched", GGUF: "m.gguf", Threads: 2, CacheType: "f16", Exec: fl.exec}
	points := []ComparePoint{{Depth: 0, Batch: 1}, {Depth: 0, Batch: 4}, {Depth: 64, Batch: 2}}
	res, err := RunCompare(context.Background(), g, c, l, CompareOptions{Points: points, Rounds: 1, Tokens: 8, DType: "bf16", KVBytes: 114688}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A step every 4 ms serves all four sequences: 1000 tok/s against 250;
	// llama.cpp's fake answers 100 tok/s for one sequence and for four.
	if r := res[1]; math.Abs(r.EllmPerBatch1-4) > 1e-9 || math.Abs(r.LlamaPerBatch1-1) > 1e-9 {
		t.Errorf("batch 4: %v and %v times batch 1, want 4 and 1", r.EllmPerBatch1, r.LlamaPerBatch1)
	}
	rows := res.Rows()
	if len(rows[1]) != len(res.Header()) || rows[1][7] != "4.00, 1.00" {
		t.Errorf("batch 4 row %q", rows[1])
	}
	for _, i := range []int{0, 2} {
		if res[i].EllmPerBatch1 != 0 || res[i].LlamaPerBatch1 != 0 || rows[i][7] != "" {
			t.Errorf("%s: %+v, row %q: want no multiple", res[i].Test, res[i], rows[i])
		}
	}
}

// A prefill at depth is a conversation's next turn on both sides: ellm's
// prompt continues a history its cache holds, llama-bench fills -d first,
// and both are charged the turn's FLOPs, attention over the history
// included.
func TestComparePrefillAtDepth(t *testing.T) {
	c := preset(t, "qwen3-0.6b")
	g := &fakeGen{ttft: 8 * time.Millisecond}
	var order []string
	fl := &fakeLlama{prefill: 1000, order: &order}
	l := &LlamaCpp{Bench: "bench", GGUF: "m.gguf", Threads: 2, Exec: fl.exec}
	p := ComparePoint{Prefill: 16, Depth: 512}
	ceil := func(ComparePoint) Ceiling { return Ceiling{Name: "VDPBF16PS", Unit: "FLOP", PerSecond: 1e12} }
	res, err := RunCompare(context.Background(), g, c, l, CompareOptions{Points: []ComparePoint{p}, Rounds: 1, DType: "bf16", Ceiling: ceil}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 16 tokens in 8 ms = 2000 tok/s against llama.cpp's 1000.
	r := res[0]
	if want := PrefillFLOPs(c, 16, 512) / 16 * 2000 / 1e12; r.Test != "prefill 16 at depth 512" || math.Abs(r.Ratio-2) > 1e-9 ||
		math.Abs(r.EllmFraction-want) > 1e-9 || math.Abs(r.LlamaFraction-want/2) > 1e-9 {
		t.Errorf("result %+v, want fractions %g and %g", r, want, want/2)
	}
	if len(fl.calls) != 1 || !strings.Contains(strings.Join(fl.calls[0], " "), "-p 16 -n 0 -d 512") {
		t.Errorf("llama-bench calls %v", fl.calls)
	}
	// The warm-up and the measurement: a history and the prompt continuing it each.
	if len(g.prompts) != 4 || len(g.prompts[3]) != 528 || !slices.Equal(g.prompts[3][:512], g.prompts[2]) {
		t.Errorf("ellm's prompts: %d", len(g.prompts))
	}
}

func TestLlamaCacheType(t *testing.T) {
	for kv, want := range map[string]string{"bf16": "f16", "int8": "q8_0", "f32": "f32"} {
		if got, err := LlamaCacheType(kv); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", kv, got, err, want)
		}
	}
	if _, err := LlamaCacheType("fp8"); err == nil {
		t.Error("a dtype without a counterpart must fail")
	}
	var args []string
	l := &LlamaCpp{Bench: "bench", GGUF: "m.gguf", Threads: 1, Exec: func(_ context.Context, _ string, a ...string) ([]byte, error) {
		args = a
		return []byte(`[{"avg_ts": 1}]`), nil
	}}
	if _, err := l.Prefill(context.Background(), 8, 0); err != nil || slices.Contains(args, "-ctk") {
		t.Errorf("no cache type must leave llama.cpp's default: %v, %v", args, err)
	}
}

func TestLlamaCppParsesAndReportsErrors(t *testing.T) {
	if _, err := parseLlamaBench([]byte(`[]`)); err == nil {
		t.Error("an empty test list must fail")
	}
	if _, err := parseLlamaBench([]byte(`not json`)); err == nil {
		t.Error("garbage must fail")
	}
	if v, err := parseLlamaBench([]byte(`[{"avg_ts": 12.5}]`)); err != nil || v != 12.5 {
		t.Errorf("got %v, %v", v, err)
	}
	if _, err := parseBatchedBench([]byte("|  pp |\n")); err == nil {
		t.Error("no jsonl line must fail")
	}
	l := &LlamaCpp{Bench: "llama-bench", GGUF: "m.gguf", Threads: 1}
	if _, err := l.Decode(context.Background(), 0, 4, 8); err == nil {
		t.Error("batch 4 without llama-batched-bench must fail")
	}
	l.Bench = "/nonexistent/llama-bench"
	if _, err := l.Prefill(context.Background(), 8, 0); err == nil || !strings.Contains(err.Error(), "/nonexistent/llama-bench") {
		t.Errorf("a missing program must name itself: %v", err)
	}
}

// On a VM whose speed swings with its host's other tenants, an engine that
// keeps pace with the machine reads the same fraction of peak every round,
// though its rate and the ceiling both halve; one ceiling taken at the start
// would put it above 100 %.
func TestCompareResultFractionsPerRound(t *testing.T) {
	c := preset(t, "qwen3-0.6b")
	opts := CompareOptions{DType: "bf16", KVBytes: 114688}
	decode := ComparePoint{Depth: 0, Batch: 1}
	bytesPerToken := DecodeBytes(c, DecodeReads("bf16", false, false), 114688, 0, 1)
	// ellm reads at 80 % of each round's DRAM ceiling, llama.cpp at 60 %.
	var rounds []CompareRound
	for _, dram := range []float64{60e9, 30e9, 45e9} {
		rounds = append(rounds, CompareRound{Ellm: 0.8 * dram / bytesPerToken, Llama: 0.6 * dram / bytesPerToken, Ceiling: dram})
	}
	r := compareResult(c, decode, opts, Ceiling{Name: "DRAM read", Unit: "B"}, rounds)
	if math.Abs(r.EllmFraction-0.8) > 1e-9 || math.Abs(r.LlamaFraction-0.6) > 1e-9 || r.EllmFractionSpread > 1e-9 {
		t.Errorf("fractions %v ±%v, %v: want 0.8 ±0, 0.6", r.EllmFraction, r.EllmFractionSpread, r.LlamaFraction)
	}
	if startFraction := r.Ellm.Median * bytesPerToken / 30e9; startFraction < 1.1 {
		t.Fatalf("the test's premise: against the slow round's ceiling the median reads %v", startFraction)
	}
	for i, rr := range r.Rounds {
		if math.Abs(rr.EllmFraction-0.8) > 1e-9 || math.Abs(rr.LlamaFraction-0.6) > 1e-9 {
			t.Errorf("round %d: %+v", i, rr)
		}
	}
	if math.Abs(r.Ratio-4.0/3) > 1e-9 || r.Ellm.N != 3 {
		t.Errorf("ratio %v over %d rounds", r.Ratio, r.Ellm.N)
	}
	// Coded weights: ellm is charged the bytes it reads, llama.cpp the bf16.
	opts.Coded = true
	coded := compareResult(c, decode, opts, Ceiling{Name: "DRAM read", Unit: "B"}, rounds)
	if want := 0.8 * DecodeBytes(c, DecodeReads("bf16", true, false), 114688, 0, 1) / bytesPerToken; math.Abs(coded.EllmFraction-want) > 1e-9 || math.Abs(coded.LlamaFraction-0.6) > 1e-9 {
		t.Errorf("coded fractions %v, %v: want %v, 0.6", coded.EllmFraction, coded.LlamaFraction, want)
	}
	opts.Coded = false
	// A screened step (batch ≤ ScreenRows) reads lm_head's int8 copy; a
	// larger batch its bf16 weights, as llama.cpp does.
	opts.ScreenRows = 1
	screened := compareResult(c, decode, opts, Ceiling{Name: "DRAM read", Unit: "B"}, rounds)
	if want := 0.8 * DecodeBytes(c, DecodeReads("bf16", false, true), 114688, 0, 1) / bytesPerToken; want >= 0.8 || math.Abs(screened.EllmFraction-want) > 1e-9 {
		t.Errorf("screened fraction %v, want %v", screened.EllmFraction, want)
	}
	batch2 := compareResult(c, ComparePoint{Depth: 0, Batch: 2}, opts, Ceiling{Name: "DRAM read", Unit: "B"}, rounds)
	if math.Abs(batch2.EllmFraction/batch2.LlamaFraction-0.8/0.6) > 1e-9 {
		t.Errorf("batch 2 beyond ScreenRows 1: fractions %v, %v, want llama.cpp's bytes for both", batch2.EllmFraction, batch2.LlamaFraction)
	}
	opts.ScreenRows = 0

	// A prefill is charged its FLOPs against the compute ceiling; the median
	// and spread are over rounds, and a round without a ceiling has no fraction.
	prefill := ComparePoint{Prefill: 128}
	flopsPerToken := PrefillFLOPs(c, 128, 0) / 128
	rounds = []CompareRound{
		{Ellm: 0.5 * 400e9 / flopsPerToken, Llama: 0.3 * 400e9 / flopsPerToken, Ceiling: 400e9},
		{Ellm: 0.4 * 200e9 / flopsPerToken, Llama: 0.3 * 200e9 / flopsPerToken, Ceiling: 200e9},
		{Ellm: 0.6 * 300e9 / flopsPerToken, Llama: 0.3 * 300e9 / flopsPerToken, Ceiling: 300e9},
		{Ellm: 1000, Llama: 1000},
	}
	r = compareResult(c, prefill, opts, Ceiling{Name: "VDPBF16PS", Unit: "FLOP"}, rounds)
	if math.Abs(r.EllmFraction-0.5) > 1e-9 || math.Abs(r.EllmFractionSpread-0.4) > 1e-9 || math.Abs(r.LlamaFraction-0.3) > 1e-9 {
		t.Errorf("prefill fractions %v ±%v, %v: want 0.5 ±0.4, 0.3", r.EllmFraction, r.EllmFractionSpread, r.LlamaFraction)
	}
	if r.Rounds[3].EllmFraction != 0 || r.Ellm.N != 4 {
		t.Errorf("round without a ceiling: %+v, %d rates", r.Rounds[3], r.Ellm.N)
	}
	row := CompareResults{r}.Rows()[0]
	if row[4] != "50.0% ±40%" || row[5] != "30.0% ±0%" || row[6] != "VDPBF16PS 300.0 GFLOP/s ±67%" {
		t.Errorf("row %q", row)
	}
	got := compareResult(c, prefill, opts, Ceiling{}, []CompareRound{{Ellm: 1, Llama: 1}})
	if row := (CompareResults{got}).Rows()[0]; got.EllmFraction != 0 || row[4] != "n/a" || row[6] != "n/a" {
		t.Errorf("without ceilings: %+v", got)
	}
}

// The machine's best ceiling for a dtype, on CPUs with and without AVX-512:
// a CPU that lacks an instruction measures it as zero, which must never be
// the denominator.
func TestMachineKind(t *testing.T) {
	zen3 := &Ceilings{FMA256GFLOPS: 110, Int8x256GOPS: 430, DRAMGBps: 40}
	zen5 := &Ceilings{FMAGFLOPS: 220, FMA256GFLOPS: 220, BF16GFLOPS: 440, VNNIGOPS: 880, Int8x256GOPS: 440}
	xeon := &Ceilings{FMAGFLOPS: 200, FMA256GFLOPS: 200, BF16GFLOPS: 100, VNNIGOPS: 800, AMXBF16: 3000, AMXInt8: 6000}
	for _, tc := range []struct {
		name  string
		c     *Ceilings
		dtype string
		want  ceiling.Kind
	}{
		{"zen3", zen3, "bf16", ceiling.FMA256}, {"zen3", zen3, "int8", ceiling.Int8x256}, {"zen3", zen3, "f32", ceiling.FMA256},
		{"zen5", zen5, "bf16", ceiling.BF16}, {"zen5", zen5, "int8", ceiling.VNNI}, {"zen5", zen5, "f32", ceiling.FMA},
		{"xeon", xeon, "bf16", ceiling.AMXBF16}, {"xeon", xeon, "int8", ceiling.AMXInt8}, {"xeon", xeon, "f32", ceiling.FMA},
		{"none", nil, "bf16", ceiling.BF16}, {"none", nil, "int8", ceiling.VNNI},
	} {
		if got := tc.c.MachineKind(tc.dtype); got != tc.want {
			t.Errorf("%s %s: %v, want %v", tc.name, tc.dtype, got, tc.want)
		}
	}
	for _, tc := range []struct {
		c     *Ceilings
		path  kernels.Path
		dtype string
		want  float64
	}{
		{zen3, kernels.AVX2, "bf16", 110e9}, {zen3, kernels.AVX2, "int8", 430e9},
		{zen5, kernels.AVX2, "int8", 440e9}, {zen5, kernels.AVX512BF16, "int8", 880e9},
		{&Ceilings{FMAGFLOPS: 200, Int8x256GOPS: 300}, kernels.AVX512, "int8", 300e9}, // AVX-512 without VNNI
		// f32 FMAs at the path's width
		{&Ceilings{FMAGFLOPS: 200, FMA256GFLOPS: 100}, kernels.AVX512, "bf16", 200e9},
		{&Ceilings{FMAGFLOPS: 200, FMA256GFLOPS: 100}, kernels.AVX2, "f32", 100e9},
		// f32 weights run FMA kernels on the bf16 paths too
		{zen5, kernels.AVX512BF16, "f32", 220e9}, {xeon, kernels.AMX, "f32", 200e9},
		{zen5, kernels.AVX512BF16, "bf16", 440e9}, {xeon, kernels.AMX, "bf16", 3000e9}, {xeon, kernels.AMX, "int8", 6000e9},
	} {
		if got := tc.c.ComputePeak(tc.path, tc.dtype); got != tc.want {
			t.Errorf("ComputePeak(%v, %s) on %+v = %g, want %g", tc.path, tc.dtype, *tc.c, got, tc.want)
		}
	}
}
