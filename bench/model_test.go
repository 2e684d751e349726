package bench

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

func preset(t *testing.T, name string) *modelcfg.Config {
	t.Helper()
	c, err := modelcfg.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPrefillFLOPsCountsProjectionsAttentionAndHead(t *testing.T) {
	c := preset(t, "qwen3-0.6b")
	// Qwen3-0.6B: 28 layers of q,k,v,o (1024→2048, 1024→1024 ×2, 2048→1024) and a 3072-wide MLP.
	qkv, afterKV := int64(1024*2048+2*1024*1024), int64(2048*1024+3*1024*3072)
	all, last := linearParamsPerToken(c)
	if want := 28 * (qkv + afterKV); all != want || last != afterKV {
		t.Fatalf("linear params per token %d, %d past the last q/k/v; want %d, %d", all, last, want, afterKV)
	}
	// Past the last layer's q/k/v only the last token: o_proj, the MLP and
	// its attention over the 512 positions.
	n := 512
	want := 2*float64(n)*float64(28*(qkv+afterKV)) - 2*float64(n-1)*float64(afterKV) +
		4*(float64(n)*float64(n+1)/2*27+float64(n))*2048 + 2*151936*1024
	if got := PrefillFLOPs(c, n, 0); math.Abs(got-want) > 1 {
		t.Errorf("PrefillFLOPs = %g, want %g", got, want)
	}
}

func TestLinearParamsCountOnlyActiveExperts(t *testing.T) {
	c := preset(t, "qwen3-30b-a3b")
	active, _ := linearParamsPerToken(c)
	// 3.3B active parameters in all, of which embeddings and lm_head are 2×151936×2048.
	if got := float64(active) / 1e9; got < 2.5 || got > 3.2 {
		t.Errorf("active linear params %.2fB, want about 2.7B", got)
	}
}

func TestDecodeBytesGrowsWithDepthAndBatch(t *testing.T) {
	c := preset(t, "qwen3-0.6b")
	kvPerToken := int64(2 * 28 * 8 * 128 * 2)
	w := DecodeBytes(c, DecodeReads("bf16", false, false), kvPerToken, 0, 1)
	// bf16 weights of a 0.6B model with a tied 151936×1024 head: about 1.2 GB read per step.
	if w < 1.1e9 || w > 1.3e9 {
		t.Errorf("decode bytes at depth 0: %.3g", w)
	}
	if got := DecodeBytes(c, DecodeReads("bf16", false, false), kvPerToken, 1000, 1) - w; math.Abs(got-1000*float64(kvPerToken)) > 1 {
		t.Errorf("KV bytes at depth 1000: %g, want %d", got, 1000*kvPerToken)
	}
	if DecodeBytes(c, DecodeReads("int8", false, false), kvPerToken, 0, 1) >= w {
		t.Error("int8 weights should read fewer bytes than bf16")
	}
	// Coded bf16: 12 bits a weight and two flag bytes per 512.
	coded := DecodeBytes(c, DecodeReads("bf16", true, false), kvPerToken, 0, 1)
	if math.Abs(coded/w-(0.75+1.0/512)) > 1e-9 {
		t.Errorf("coded bf16 weights read %.4f of the bf16 bytes, want 0.7520", coded/w)
	}
	// Screened logits: lm_head read as its int8 copy, a byte a weight.
	head := 151936.0 * 1024
	if screened := DecodeBytes(c, DecodeReads("bf16", true, true), kvPerToken, 0, 1); math.Abs(screened-(coded-head*(gemm.CodedBytesPerWeight-1))) > 1 {
		t.Errorf("screened logits: %g bytes, want %g", screened, coded-head*(gemm.CodedBytesPerWeight-1))
	}
	if DecodeReads("int8", true, false).Linear != 1 || DecodeReads("f32", true, false).Linear != 4 {
		t.Error("only bf16 weights are coded")
	}
	moe := preset(t, "qwen3-30b-a3b")
	if b1, b4 := DecodeBytes(moe, DecodeReads("bf16", false, false), kvPerToken, 0, 1), DecodeBytes(moe, DecodeReads("bf16", false, false), kvPerToken, 0, 4); b4 <= b1 {
		t.Errorf("a batch of 4 should touch more experts than 1: %g vs %g", b4, b1)
	}
}

// fakeGen emits tokens at a fixed interval after a fixed time to first token.
// Its one slot holds the previous prompt: a prompt continuing it reports
// their common prefix cached, plus cached (a cache that serves too much).
type fakeGen struct {
	ttft, step time.Duration
	cached     int
	mu         sync.Mutex
	prompts    [][]int32
}

func (f *fakeGen) Generate(ctx context.Context, req engine.Request, fn func(engine.Event) error) (engine.Result, error) {
	f.mu.Lock()
	held := 0
	if len(f.prompts) > 0 {
		last := f.prompts[len(f.prompts)-1]
		for held < min(len(last), len(req.Tokens)) && last[held] == req.Tokens[held] {
			held++
		}
	}
	f.prompts = append(f.prompts, req.Tokens)
	f.mu.Unlock()
	start := time.Now()
	time.Sleep(f.ttft)
	for i := range req.MaxTokens {
		if i > 0 {
			time.Sleep(f.step)
		}
		if err := fn(engine.Event{Token: 1, At: time.Now()}); err != nil {
			return engine.Result{}, err
		}
	}
	toks := append(append([]int32(nil), req.Tokens...), make([]int32, req.MaxTokens)...)
	return engine.Result{PromptTokens: len(req.Tokens), CachedTokens: held + f.cached, CompletionTokens: req.MaxTokens,
		Tokens: toks, TTFT: f.ttft, Total: time.Since(start)}, nil
}

func TestRunPrefillUsesFreshPromptsAndScales(t *testing.T) {
	c := preset(t, "qwen3-0.6b")
	g := &fakeGen{ttft: 10 * time.Millisecond}
	res, err := RunPrefill(context.Background(), g, c, PrefillOptions{Lengths: []int{8, 32}, Repeat: 2, Scale: 2, Peak: 1e12}, &Progress{})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.prompts) != 6 { // (1 warm-up + 2) × 2 lengths
		t.Fatalf("%d prompts", len(g.prompts))
	}
	firsts := map[int32]bool{}
	for _, p := range g.prompts {
		if firsts[p[0]] {
			t.Errorf("two prompts start with token %d: a prefix could be reused", p[0])
		}
		firsts[p[0]] = true
	}
	if r := res[1]; r.Length != 32 || r.TTFTms != 20 || r.TokensPerSecond != 1600 || r.PeakFraction <= 0 {
		t.Errorf("result %+v", r)
	}
	g.cached = 3
	if _, err := RunPrefill(context.Background(), g, c, PrefillOptions{Lengths: []int{8}, Repeat: 1, Scale: 1}, &Progress{}); err == nil {
		t.Error("a cached prefix must fail the measurement")
	}
}

// At depth D each measured prompt continues a history of D tokens prefilled
// just before, untimed: the time is the new tokens', the FLOPs count their
// attention over the history, and a cache that serves more than the
// history fails the measurement.
func TestRunPrefillAtDepthContinuesAHistory(t *testing.T) {
	c := preset(t, "qwen3-0.6b")
	g := &fakeGen{ttft: 10 * time.Millisecond}
	res, err := RunPrefill(context.Background(), g, c, PrefillOptions{Lengths: []int{8}, Depths: []int{0, 64}, Repeat: 1, Scale: 1}, &Progress{})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.prompts) != 6 { // depth 0: warm-up + 1; depth 64: (history + prompt) × 2
		t.Fatalf("%d prompts", len(g.prompts))
	}
	for i := 2; i < 6; i += 2 {
		history, prompt := g.prompts[i], g.prompts[i+1]
		if len(history) != 64 || len(prompt) != 72 || !slices.Equal(prompt[:64], history) {
			t.Errorf("measurement %d: a %d-token history and a %d-token prompt that does not continue it", i/2, len(history), len(prompt))
		}
	}
	if g.prompts[2][0] == g.prompts[4][0] {
		t.Error("two histories start with the same token: the second could come from the cache")
	}
	if r := res[1]; r.Length != 8 || r.Depth != 64 || r.TokensPerSecond != 800 ||
		math.Abs(r.GFLOPS-PrefillFLOPs(c, 8, 64)/0.01/1e9) > 1e-6 || r.GFLOPS <= res[0].GFLOPS {
		t.Errorf("result at depth 64: %+v (depth 0: %+v)", r, res[0])
	}
	g.cached = 1
	if _, err := RunPrefill(context.Background(), g, c, PrefillOptions{Lengths: []int{8}, Depths: []int{64}, Repeat: 1, Scale: 1}, &Progress{}); err == nil ||
		!strings.Contains(err.Error(), "depth 64") {
		t.Errorf("a cache serving more than the history must fail the measurement: %v", err)
	}
}

func TestRunDecodeMeasuresStepInterval(t *testing.T) {
	c := preset(t, "qwen3-0.6b")
	g := &clockGen{ttft: time.Millisecond, step: 4 * time.Millisecond}
	res, err := RunDecode(context.Background(), g, c, DecodeOptions{Depths: []int{16}, Batches: []int{1, 2}, Tokens: 10, Warmup: 2, Repeat: 1, DType: "bf16", KVBytes: 2 * 2 * 8, Scale: 1}, &Progress{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.TPOTms != 4 {
			t.Errorf("batch %d: TPOT %.2f ms, want 4", r.Batch, r.TPOTms)
		}
	}
}

func TestRunSessionComparesWithColdPrompts(t *testing.T) {
	c := preset(t, "qwen3-0.6b")
	g := &fakeGen{}
	res, err := RunSession(context.Background(), g, c, SessionOptions{Turns: 3, TurnTokens: 5, ReplyTokens: 2, Scale: 1}, &Progress{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 || res[2].History != 14 {
		t.Fatalf("results %+v", res)
	}
	// Turn 3's prompt is turn 2's transcript plus 5 new tokens; its cold twin differs in the first token only.
	warm, cold := g.prompts[2], g.prompts[5]
	if len(warm) != 19 || len(cold) != 19 || warm[0] == cold[0] {
		t.Fatalf("warm %v cold %v", warm, cold)
	}
	for i := 1; i < len(warm); i++ {
		if warm[i] != cold[i] {
			t.Fatalf("cold prompt differs at %d", i)
		}
	}
}

// staggered admits each later sequence only after the earlier ones finished,
// as a scheduler that was busy when they arrived might.
type staggered struct {
	mu   sync.Mutex
	runs int
}

func (s *staggered) Generate(ctx context.Context, req engine.Request, fn func(engine.Event) error) (engine.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs++
	for range req.MaxTokens {
		time.Sleep(100 * time.Microsecond)
		if err := fn(engine.Event{At: time.Now()}); err != nil {
			return engine.Result{}, err
		}
	}
	return engine.Result{}, nil
}

func TestDecodeReportsSequencesThatNeverOverlap(t *testing.T) {
	g := &staggered{}
	_, err := decodeTogether(context.Background(), g, []session{{"a", []int32{1}}, {"b", []int32{2}}}, 2, 4)
	if !errors.Is(err, errApart) {
		t.Fatalf("err = %v, want errApart", err)
	}
	if g.runs != 8 {
		t.Errorf("%d generations, want 4 attempts of 2", g.runs)
	}
}
