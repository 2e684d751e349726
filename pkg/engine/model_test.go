package engine

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ops"
	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/model"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/modeldir"
	"github.com/ellm-dev/ellm/pkg/sample"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

// runnerGreedy decodes prompt greedily by driving a Runner directly: the
// reference the engine must match token for token.
func runnerGreedy(t *testing.T, dir string, kv kvcache.DType, prompt []int32, n int) []int32 {
	t.Helper()
	m, err := model.Load(dir, model.LoadOptions{DType: "bf16"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cache, err := kvcache.New(m.Config, 1, 256, kv)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	r, err := m.NewRunner(cache, model.RunnerOptions{MaxTokens: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []int32
	seg := model.Segment{Slot: 0, Start: 0, Tokens: prompt, Logits: model.LogitsLast}
	for range n {
		if err := r.Forward([]model.Segment{seg}); err != nil {
			t.Fatal(err)
		}
		tok := int32(ops.For(kernels.Active()).Argmax(r.Logits(0)))
		out = append(out, tok)
		seg = model.Segment{Slot: 0, Start: seg.Start + len(seg.Tokens), Tokens: []int32{tok}, Logits: model.LogitsLast}
	}
	return out
}

// openModel reads the model directory dir.
func openModel(t testing.TB, dir string) *modeldir.Model {
	t.Helper()
	m, err := modeldir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newModelEngine(t testing.TB, dir string, o Options) *Engine {
	t.Helper()
	if o.SequenceLength == 0 {
		o.SequenceLength = 256
	}
	if o.Threads == 0 {
		o.Threads = 2
	}
	e, err := New(openModel(t, dir), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestModelEngine(t *testing.T) {
	for _, name := range []string{"tiny-qwen3-a", "tiny-qwen3moe-a"} {
		t.Run(name, func(t *testing.T) {
			dir := sharedtest.Path(t, "models", name)
			e := newModelEngine(t, dir, Options{BatchSize: 2, ChunkSize: 16, StallTokens: 8})
			tok := e.Model().Tokenizer
			prompts := [][]int32{
				tok.Encode("The quick brown fox jumps over the lazy dog. " + "Once upon a time"),
				tok.Encode("Hello"),
				tok.Encode("The quick brown fox jumps over the lazy dog. " + "In a galaxy far away, there lived"),
				tok.Encode("1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13"),
			}
			const n = 12
			want := make([][]int32, len(prompts))
			for i, p := range prompts {
				want[i] = runnerGreedy(t, dir, kvcache.BF16, p, n)
			}
			noStop := []int32{}
			// Alone, one after the other: prompt 2 shares a prefix with prompt 0.
			for i, p := range prompts {
				got, res := collect(t, e, Request{Tokens: p, MaxTokens: n, StopTokens: noStop})
				if !slices.Equal(got, want[i]) {
					t.Errorf("prompt %d alone: %v, runner: %v", i, got, want[i])
				}
				if i == 2 && res.CachedTokens == 0 {
					t.Errorf("prompt 2 shares a prefix with prompt 0 but reused nothing")
				}
			}
			// All at once, more requests than slots.
			var wg sync.WaitGroup
			got := make([][]int32, len(prompts))
			for i, p := range prompts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					e.Generate(context.Background(), Request{Tokens: p, MaxTokens: n, StopTokens: noStop}, func(ev Event) error {
						got[i] = append(got[i], ev.Token)
						return nil
					})
				}()
			}
			wg.Wait()
			for i := range prompts {
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("prompt %d batched: %v, alone: %v", i, got[i], want[i])
				}
			}
		})
	}
}

// A session evicted to the store and restored continues as if recomputed,
// with a bf16 and with an int8 cache (whose scales the file carries).
func TestModelSessionStore(t *testing.T) {
	for _, kv := range []kvcache.DType{kvcache.BF16, kvcache.Int8} {
		t.Run(string(kv), func(t *testing.T) { testModelSessionStore(t, kv) })
	}
}

func testModelSessionStore(t *testing.T, kv kvcache.DType) {
	dir := sharedtest.Path(t, "models", "tiny-qwen3-a")
	store := t.TempDir()
	// No prefix store: it would hold session b's prefix too, and this test
	// is about what the session store does with a corrupt file.
	e := newModelEngine(t, dir, Options{BatchSize: 1, SessionStore: store, KVDType: string(kv), PrefixCacheBytes: -1})
	cfg, err := modelcfg.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	perPos, err := kvcache.BytesPerPosition(cfg, kv)
	if err != nil || e.Info().KVBytes != perPos*256 || e.Info().KVDType != string(kv) {
		t.Fatalf("KV %d bytes (%q), want 256 positions × %d (%v)", e.Info().KVBytes, e.Info().KVDType, perPos, err)
	}
	tok := e.Model().Tokenizer
	noStop := []int32{}
	_, a1 := collect(t, e, Request{Tokens: tok.Encode("Session A says hello"), MaxTokens: 6, SessionID: "a", StopTokens: noStop})
	_, b1 := collect(t, e, Request{Tokens: tok.Encode("Session B is different"), MaxTokens: 6, SessionID: "b", StopTokens: noStop})
	delta := tok.Encode(" and goodbye")
	turn2 := append(slices.Clone(a1.Tokens), delta...)
	before := e.Stats().PrefilledTokens
	got, r := collect(t, e, Request{Tokens: turn2, MaxTokens: 6, SessionID: "a", StopTokens: noStop})
	// A reply's last token gets its KV with the turn that continues it.
	if !r.Restored || r.CachedTokens != held(a1) {
		t.Errorf("restored %v cached %d, want true and %d", r.Restored, r.CachedTokens, held(a1))
	}
	if n := e.Stats().PrefilledTokens - before; n != int64(len(delta)+1) {
		t.Errorf("turn 2 prefilled %d tokens, want the delta %d and the reply's last token", n, len(delta))
	}
	if want := runnerGreedy(t, dir, kv, turn2, 6); !slices.Equal(got, want) {
		t.Errorf("restored session: %v, recomputed: %v", got, want)
	}

	// Session b was evicted to the store by a's turn; corrupt its KV bytes.
	if !e.store.has("b") {
		t.Fatal("session b is not in the store")
	}
	path := e.store.path("b", kvExt)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0x55
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	turn2 = append(slices.Clone(b1.Tokens), delta...)
	got, r = collect(t, e, Request{Tokens: turn2, MaxTokens: 6, SessionID: "b", StopTokens: noStop})
	if r.Restored || r.CachedTokens != 0 || e.Stats().SessionsRecomputed != 1 {
		t.Errorf("corrupt session: restored %v cached %d stats %+v", r.Restored, r.CachedTokens, e.Stats())
	}
	if want := runnerGreedy(t, dir, kv, turn2, 6); !slices.Equal(got, want) {
		t.Errorf("recomputed session: %v, runner: %v", got, want)
	}
}

// A prefix copied from another slot, or saved to a host buffer and loaded
// back, then extended gives exactly the logits of prefilling the whole
// prompt: KV depends only on the tokens before it (row invariance).
func TestModelCopiedPrefixIsBitIdentical(t *testing.T) {
	dir := sharedtest.Path(t, "models", "tiny-qwen3-a")
	m, err := model.Load(dir, model.LoadOptions{DType: "bf16"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, kv := range []kvcache.DType{kvcache.BF16, kvcache.Int8} {
		t.Run(string(kv), func(t *testing.T) { copiedPrefixIsBitIdentical(t, m, kv) })
	}
}

func copiedPrefixIsBitIdentical(t *testing.T, m *model.Model, kv kvcache.DType) {
	cache, err := kvcache.New(m.Config, 3, 256, kv)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	r, err := m.NewRunner(cache, model.RunnerOptions{MaxTokens: 256, MaxLogits: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	prompt := make([]int32, 150)
	for i := range prompt {
		prompt[i] = int32((i*37 + 11) % m.Config.VocabSize)
	}
	forward := func(slot, start int) []float32 {
		t.Helper()
		if err := r.Forward([]model.Segment{{Slot: slot, Start: start, Tokens: prompt[start:], Logits: model.LogitsLast}}); err != nil {
			t.Fatal(err)
		}
		return slices.Clone(r.Logits(0))
	}
	want := forward(0, 0)
	// Slot 1 holds other tokens first, so a copy that missed a position shows.
	other := slices.Clone(prompt)
	slices.Reverse(other)
	if err := r.Forward([]model.Segment{{Slot: 1, Start: 0, Tokens: other, Logits: model.LogitsNone}}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{1, 63, 64, 100, 149} {
		if err := cache.CopyPositions(1, 0, 0, k); err != nil {
			t.Fatal(err)
		}
		if got := forward(1, k); !slices.Equal(got, want) {
			t.Errorf("%d positions copied from another slot, then prefilled: logits differ from a full prefill", k)
		}
		buf := make([]byte, cache.BufferBytes(160))
		if err := cache.SavePositions(buf, 160, 5, 0, 0, k); err != nil {
			t.Fatal(err)
		}
		if err := cache.LoadPositions(buf, 160, 5, 2, 0, k); err != nil {
			t.Fatal(err)
		}
		if got := forward(2, k); !slices.Equal(got, want) {
			t.Errorf("%d positions restored from a host buffer, then prefilled: logits differ from a full prefill", k)
		}
	}
}

// The engine's prefix copies and prefix store give the tokens and log
// probabilities of an engine that computes every prompt from scratch.
func TestModelEnginePrefixSharingMatchesScratch(t *testing.T) {
	dir := sharedtest.Path(t, "models", "tiny-qwen3-a")
	scratch := newModelEngine(t, dir, Options{BatchSize: 1, PrefixCacheBytes: -1})
	tok := scratch.Model().Tokenizer
	system := tok.Encode("You are a careful assistant. You answer questions about foxes, dogs and the weather in short sentences. ")
	a := append(slices.Clone(system), tok.Encode("The quick brown fox jumps over the lazy dog, again and again, every single morning of the year.")...)
	b := append(slices.Clone(system), tok.Encode("Is it raining?")...)
	run := func(e *Engine, p []int32) (topTokens, Result) { return generateTop(t, e, p) }
	wantB, _ := run(scratch, b)

	// Two slots: b copies the system prompt from a's slot.
	e := newModelEngine(t, dir, Options{BatchSize: 2})
	run(e, a)
	got, res := run(e, b)
	if res.CopiedTokens != len(system) {
		t.Errorf("b copied %d tokens, want the %d of the system prompt", res.CopiedTokens, len(system))
	}
	if !slices.Equal(got.tokens, wantB.tokens) || !slices.Equal(got.logprobs, wantB.logprobs) {
		t.Errorf("after a copy: %v %v, from scratch: %v %v", got.tokens, got.logprobs, wantB.tokens, wantB.logprobs)
	}

	// One slot and small blocks: a leaves for b and comes back from the prefix store.
	e = newModelEngine(t, dir, Options{BatchSize: 1, PrefixBlockTokens: 16})
	_, ra := run(e, a)
	run(e, b)
	a2 := append(slices.Clone(ra.Tokens), tok.Encode(" And then?")...)
	wantA2, _ := run(scratch, a2)
	got, res = run(e, a2)
	if n := held(ra); res.StoreTokens != n-len(system) || res.CachedTokens != n {
		t.Errorf("a's second turn: %d restored, %d cached; want %d and %d (all but the reply's last token)", res.StoreTokens, res.CachedTokens,
			n-len(system), n)
	}
	if !slices.Equal(got.tokens, wantA2.tokens) || !slices.Equal(got.logprobs, wantA2.logprobs) {
		t.Errorf("restored from the prefix store: %v %v, from scratch: %v %v", got.tokens, got.logprobs, wantA2.tokens, wantA2.logprobs)
	}
}

// Draws screened by the int8 copy of lm_head choose the tokens the full
// logits choose, batched: greedy, sampled with top-k (Qwen3's defaults),
// with penalties and bias, and beside a request for logprobs (which needs
// every logit, so it is not screened, nor are the rows batched with it).
func TestModelScreenedDrawsMatch(t *testing.T) {
	dir := sharedtest.Path(t, "models", "tiny-qwen3-a")
	// Every row screened, whatever the start-up would measure on a model
	// this small (TestModelLogitScreenChoice).
	on := newModelEngine(t, dir, Options{BatchSize: 4, LogitScreenRows: 4})
	off := newModelEngine(t, dir, Options{BatchSize: 4, NoLogitScreen: true})
	tok := on.Model().Tokenizer
	seed := uint64(5)
	reqs := []Request{
		{Tokens: tok.Encode("The quick brown fox")},
		{Tokens: tok.Encode("Once upon a time"), Sampling: sample.Params{Temperature: 0.6, TopK: 20, TopP: 0.95, Seed: &seed}},
		{Tokens: tok.Encode("1, 2, 3, 4"), Sampling: sample.Params{RepetitionPenalty: 1.2, PresencePenalty: 0.4,
			LogitBias: []sample.TokenBias{{Token: 11, Bias: 3}}}},
		{Tokens: tok.Encode("In a galaxy far away"), Sampling: sample.Params{Temperature: 1, TopK: 5, Seed: &seed}},
	}
	run := func(e *Engine, reqs []Request) [][]int32 {
		var wg sync.WaitGroup
		got := make([][]int32, len(reqs))
		for i, r := range reqs {
			r.MaxTokens, r.StopTokens = 16, []int32{}
			wg.Go(func() {
				if _, err := e.Generate(context.Background(), r, func(ev Event) error {
					got[i] = append(got[i], ev.Token)
					return nil
				}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		return got
	}
	check := func(what string, reqs []Request) {
		want, got := run(off, reqs), run(on, reqs)
		for i := range reqs {
			if !slices.Equal(got[i], want[i]) || len(got[i]) != 16 {
				t.Errorf("%s, request %d: screened %v, full %v", what, i, got[i], want[i])
			}
		}
	}
	check("screened", reqs)
	st := on.Stats()
	if st.ScreenedRows < 16 || st.ScreenedTokens <= 0 || st.ScreenedTokens >= st.ScreenedRows*int64(on.Model().Config.VocabSize)/2 {
		t.Errorf("screened %d rows computing %d of their tokens' logits: the screen did not run or kept too many", st.ScreenedRows, st.ScreenedTokens)
	}
	if n := off.Stats().ScreenedRows; n != 0 {
		t.Errorf("NoLogitScreen screened %d rows", n)
	}
	before := st.ScreenedRows
	withLogprobs := append(slices.Clone(reqs[:3]), Request{Tokens: reqs[3].Tokens, Sampling: reqs[3].Sampling, Logprobs: true, TopLogprobs: 3})
	check("beside logprobs", withLogprobs)
	if n := on.Stats().ScreenedRows - before; n >= 4*16 {
		t.Errorf("%d rows screened in passes beside a request for logprobs", n)
	}
}

// The engine reports how many logits rows a step screens: measured at
// start-up (the copy dropped if it keeps none), or as set; none without a
// screen. A negative cap is refused.
func TestModelLogitScreenChoice(t *testing.T) {
	dir := sharedtest.Path(t, "models", "tiny-qwen3-a")
	measured := newModelEngine(t, dir, Options{BatchSize: 4}).Info()
	if measured.ScreenRows > 4 || !strings.Contains(measured.LogitScreen, "(measured at ") ||
		(measured.ScreenRows == 0) != strings.HasPrefix(measured.LogitScreen, "off ") {
		t.Errorf("measured: %d rows, %q", measured.ScreenRows, measured.LogitScreen)
	}
	// A screen no row keeps is dropped (as the pure-Go kernels' is), and
	// its bytes no longer counted.
	if (measured.ScreenRows == 0) != (measured.ScreenBytes == 0) {
		t.Errorf("measured: %d rows kept, %d screen bytes", measured.ScreenRows, measured.ScreenBytes)
	}
	set := newModelEngine(t, dir, Options{BatchSize: 4, LogitScreenRows: 3}).Info()
	if set.ScreenRows != 3 || set.LogitScreen != "up to 3 rows a pass (set)" {
		t.Errorf("set to 3: %d rows, %q", set.ScreenRows, set.LogitScreen)
	}
	none := newModelEngine(t, dir, Options{BatchSize: 4, NoLogitScreen: true, LogitScreenRows: 3}).Info()
	if none.ScreenRows != 0 || none.LogitScreen != "" {
		t.Errorf("without a screen: %d rows, %q", none.ScreenRows, none.LogitScreen)
	}
	if _, err := New(openModel(t, dir), Options{BatchSize: 4, SequenceLength: 256, LogitScreenRows: -1}); err == nil || !strings.Contains(err.Error(), "logit screen rows -1") {
		t.Errorf("LogitScreenRows -1: %v", err)
	}
}

// An engine started with a weights image directory writes the image in the
// background (Info.WeightsImage "writing", WeightsImage once written;
// Close waits for it), the next one maps it and generates the same tokens.
func TestModelEngineWeightsImage(t *testing.T) {
	dir := sharedtest.Path(t, "models", "tiny-qwen3-a")
	o := Options{WeightsImageDir: t.TempDir(), WeightsImageKey: "test"}
	prompt := openModel(t, dir).Tokenizer.Encode("Once upon a time")
	var tokens [2][]int32
	for i, want := range []string{"writing ", "mapped "} {
		e := newModelEngine(t, dir, o)
		if got := e.Info().WeightsImage; !strings.HasPrefix(got, want+o.WeightsImageDir) {
			t.Fatalf("start %d: weights image %q, want %q…", i, got, want)
		}
		tokens[i], _ = collect(t, e, Request{Tokens: prompt, MaxTokens: 8, StopTokens: []int32{}})
		e.Close() // the first start's Close waits for the write
		if got := e.WeightsImage(); i == 0 && !strings.HasPrefix(got, "written "+o.WeightsImageDir) {
			t.Fatalf("after the first start: weights image %q, want written…", got)
		}
	}
	if !slices.Equal(tokens[0], tokens[1]) {
		t.Fatalf("from the packed weights %v, from the image %v", tokens[0], tokens[1])
	}
}
