package engine

import (
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ellm-dev/ellm/pkg/model"
	"github.com/ellm-dev/ellm/pkg/sample"
)

func TestGreedyMatchesReference(t *testing.T) {
	e, _ := newFakeEngine(t, fakeOpts{})
	prompt := seqTokens(1, 20)
	got, res := collect(t, e, Request{Tokens: prompt, MaxTokens: 15})
	want := greedyRef(prompt, 15, 97, nil)
	if !slices.Equal(got, want) {
		t.Fatalf("tokens %v, want %v", got, want)
	}
	if res.FinishReason != "length" || res.CompletionTokens != 15 || res.PromptTokens != 20 {
		t.Errorf("result %+v", res)
	}
	if !slices.Equal(res.Tokens, append(slices.Clone(prompt), want...)) {
		t.Errorf("transcript %v", res.Tokens)
	}
}

func TestStopTokens(t *testing.T) {
	e, _ := newFakeEngine(t, fakeOpts{})
	prompt := seqTokens(3, 10)
	ref := greedyRef(prompt, 10, 97, nil)
	stop := ref[4]
	got, res := collect(t, e, Request{Tokens: prompt, MaxTokens: 10, StopTokens: []int32{stop}})
	want := greedyRef(prompt, 10, 97, []int32{stop})
	if !slices.Equal(got, want) || res.FinishReason != "stop" {
		t.Fatalf("tokens %v (%s), want %v then stop", got, res.FinishReason, want)
	}
	// The stop token is in the transcript but is not streamed.
	if last := res.Tokens[len(res.Tokens)-1]; last != stop || res.CompletionTokens != len(want)+1 {
		t.Errorf("transcript ends %d, completion %d; want stop token %d, %d", last, res.CompletionTokens, stop, len(want)+1)
	}
}

func TestErrStop(t *testing.T) {
	e, _ := newFakeEngine(t, fakeOpts{})
	prompt := seqTokens(5, 10)
	n := 0
	res, err := e.Generate(context.Background(), Request{Tokens: prompt, MaxTokens: 20}, func(Event) error {
		if n++; n == 3 {
			return ErrStop
		}
		return nil
	})
	if err != nil || res.FinishReason != "stop" || res.CompletionTokens != 3 || len(res.Tokens) != 13 {
		t.Fatalf("err %v, result %+v", err, res)
	}
	boom := errors.New("client gone")
	_, err = e.Generate(context.Background(), Request{Tokens: prompt, MaxTokens: 20}, func(Event) error { return boom })
	if !errors.Is(err, boom) {
		t.Errorf("err %v, want the callback's", err)
	}
	waitIdle(t, e)
}

func TestConcurrentMoreRequestsThanSlots(t *testing.T) {
	e, be := newFakeEngine(t, fakeOpts{slots: 3, delay: time.Millisecond})
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prompt := seqTokens(i*11, 5+i*3)
			var got []int32
			_, err := e.Generate(context.Background(), Request{Tokens: prompt, MaxTokens: 12}, func(ev Event) error {
				got = append(got, ev.Token)
				return nil
			})
			if want := greedyRef(prompt, 12, 97, nil); err == nil && !slices.Equal(got, want) {
				err = errors.New("tokens differ from the request run alone")
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
	// Continuous batching: some forward passes carried several slots.
	most := 0
	for _, f := range be.segments() {
		most = max(most, len(f))
	}
	if most < 2 {
		t.Errorf("no forward pass batched more than %d slots", most)
	}
	waitIdle(t, e)
}

func TestPrefixReuse(t *testing.T) {
	e, _ := newFakeEngine(t, fakeOpts{slots: 2})
	a := seqTokens(1, 40)
	collect(t, e, Request{Tokens: a, MaxTokens: 5})
	// b shares a's first 30 tokens.
	b := append(slices.Clone(a[:30]), seqTokens(50, 10)...)
	got, res := collect(t, e, Request{Tokens: b, MaxTokens: 8})
	if want := greedyRef(b, 8, 97, nil); !slices.Equal(got, want) {
		t.Fatalf("with reuse: %v, cold: %v", got, want)
	}
	if res.CachedTokens != 30 || res.Prefilled != 10 {
		t.Errorf("cached %d prefilled %d, want 30 and 10", res.CachedTokens, res.Prefilled)
	}
	// The same prompt again reuses all but its last token.
	_, res = collect(t, e, Request{Tokens: b, MaxTokens: 3})
	if res.CachedTokens != len(b)-1 {
		t.Errorf("identical prompt: cached %d, want %d", res.CachedTokens, len(b)-1)
	}
	st := e.Stats()
	if st.PrefixHits != 2 || st.PrefixMisses != 1 || st.ReusedTokens != int64(30+len(b)-1) {
		t.Errorf("stats %+v", st)
	}
}

func TestSessionTurnPrefillsOnlyTheDelta(t *testing.T) {
	e, _ := newFakeEngine(t, fakeOpts{slots: 2})
	turn1 := seqTokens(2, 25)
	_, r1 := collect(t, e, Request{Tokens: turn1, MaxTokens: 6, SessionID: "s1"})
	// Another request in between must not take the session's slot.
	collect(t, e, Request{Tokens: seqTokens(9, 30), MaxTokens: 4})
	collect(t, e, Request{Tokens: seqTokens(13, 30), MaxTokens: 4})
	delta := seqTokens(70, 9)
	turn2 := append(slices.Clone(r1.Tokens), delta...)
	before := e.Stats().PrefilledTokens
	got, r2 := collect(t, e, Request{Tokens: turn2, MaxTokens: 6, SessionID: "s1"})
	// The reply's last token gets its KV with the delta, in the same pass.
	if prefilled := e.Stats().PrefilledTokens - before; prefilled != int64(len(delta)+1) {
		t.Errorf("turn 2 prefilled %d tokens, want the delta %d and the reply's last token", prefilled, len(delta))
	}
	if !r2.SessionHit || r2.CachedTokens != held(r1) {
		t.Errorf("turn 2 %+v", r2)
	}
	if want := greedyRef(turn2, 6, 97, nil); !slices.Equal(got, want) {
		t.Errorf("turn 2 tokens %v, want %v", got, want)
	}
}

// A reply's last sampled token gets no pass of its own: the engine stays
// idle after a generation, and the turn that continues the slot computes
// that token's KV in the pass that prefills its delta.
func TestReplyLastTokenComputedWithNextTurn(t *testing.T) {
	e, be := newFakeEngine(t, fakeOpts{slots: 1})
	_, r1 := collect(t, e, Request{Tokens: seqTokens(2, 20), MaxTokens: 4, SessionID: "s"})
	passes := len(be.segments())
	time.Sleep(20 * time.Millisecond) // a pass the scheduler would run while idle
	if n := len(be.segments()); n != passes {
		t.Fatalf("%d passes after the generation ended, want none", n-passes)
	}
	delta := seqTokens(50, 5)
	turn2 := append(slices.Clone(r1.Tokens), delta...)
	got, _ := collect(t, e, Request{Tokens: turn2, MaxTokens: 2, SessionID: "s"})
	first := be.segments()[passes]
	want := model.Segment{Start: held(r1), Tokens: turn2[held(r1):]}
	if len(first) != 1 || first[0].Start != want.Start || !slices.Equal(first[0].Tokens, want.Tokens) {
		t.Errorf("turn 2's first pass %+v, want one segment of the reply's last token and the delta from %d", first, want.Start)
	}
	if want := greedyRef(turn2, 2, 97, nil); !slices.Equal(got, want) {
		t.Errorf("turn 2 tokens %v, want %v", got, want)
	}
}

func TestSessionStoreEvictRestoreAndRestart(t *testing.T) {
	dir := t.TempDir()
	e, _ := newFakeEngine(t, fakeOpts{slots: 1, opts: Options{SessionStore: dir}})
	var transcripts [3][]int32
	for i := range transcripts {
		_, r := collect(t, e, Request{Tokens: seqTokens(i*5, 20), MaxTokens: 5, SessionID: sid(i)})
		transcripts[i] = r.Tokens
	}
	st := e.Stats()
	if st.SessionsEvicted != 2 || st.SessionsStored != 2 || st.SessionStoreBytes == 0 {
		t.Fatalf("after 3 sessions on 1 slot: %+v", st)
	}
	// Session 0 comes back from the store: only its delta (and its reply's last
	// token) is computed.
	delta := seqTokens(40, 7)
	turn2 := append(slices.Clone(transcripts[0]), delta...)
	got, r := collect(t, e, Request{Tokens: turn2, MaxTokens: 5, SessionID: sid(0)})
	if !r.Restored || r.Prefilled != len(delta)+1 {
		t.Errorf("restored %v prefilled %d, want true and %d", r.Restored, r.Prefilled, len(delta)+1)
	}
	if want := greedyRef(turn2, 5, 97, nil); !slices.Equal(got, want) {
		t.Errorf("restored session tokens %v, want %v", got, want)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	// A restarted engine finds every session, including the one that was in a slot.
	e2, _ := newFakeEngine(t, fakeOpts{slots: 1, opts: Options{SessionStore: dir}})
	if n := e2.Stats().SessionsStored; n != 3 {
		t.Fatalf("restart: %d sessions stored, want 3", n)
	}
	turn2 = append(slices.Clone(transcripts[1]), delta...)
	got, r = collect(t, e2, Request{Tokens: turn2, MaxTokens: 5, SessionID: sid(1)})
	if !r.Restored || r.Prefilled != len(delta)+1 || !slices.Equal(got, greedyRef(turn2, 5, 97, nil)) {
		t.Errorf("after restart: restored %v prefilled %d", r.Restored, r.Prefilled)
	}

	// A corrupted session file is detected and recomputed, never used.
	if !e2.store.has(sid(2)) {
		t.Fatal("session c's KV is not in the store")
	}
	path := e2.store.path(sid(2), kvExt)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-10] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	turn2 = append(slices.Clone(transcripts[2]), delta...)
	got, r = collect(t, e2, Request{Tokens: turn2, MaxTokens: 5, SessionID: sid(2)})
	if r.Restored || r.Prefilled != len(turn2) || !slices.Equal(got, greedyRef(turn2, 5, 97, nil)) {
		t.Errorf("corrupt store file: restored %v prefilled %d of %d", r.Restored, r.Prefilled, len(turn2))
	}
	if st := e2.Stats(); st.SessionsRecomputed != 1 {
		t.Errorf("SessionsRecomputed %d, want 1", st.SessionsRecomputed)
	}
}

func TestSessionStoreOtherModelIsRecomputed(t *testing.T) {
	dir := t.TempDir()
	e, _ := newFakeEngine(t, fakeOpts{slots: 1, opts: Options{SessionStore: dir}})
	_, r := collect(t, e, Request{Tokens: seqTokens(1, 20), MaxTokens: 5, SessionID: "a"})
	e.Close()
	// Same directory, another model identity: the session is not visible.
	be := newFake(1, 128, 97)
	o := withDefaults(Options{BatchSize: 1, SequenceLength: 128, SessionStore: dir})
	e2, err := newEngine(o, Info{}, be, 97, nil, "another-model-identity-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	turn2 := append(slices.Clone(r.Tokens), 5, 6, 7)
	_, r2 := collect(t, e2, Request{Tokens: turn2, MaxTokens: 3, SessionID: "a"})
	if r2.Restored || r2.CachedTokens != 0 {
		t.Errorf("other model's session was used: %+v", r2)
	}
}

func sid(i int) string { return "session-" + string(rune('a'+i)) }

func TestCancellationFreesTheSlot(t *testing.T) {
	e, _ := newFakeEngine(t, fakeOpts{slots: 1, delay: 2 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := e.Generate(ctx, Request{Tokens: seqTokens(1, 10), MaxTokens: 100}, func(Event) error {
		if n++; n == 2 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if n > 4 {
		t.Errorf("%d tokens streamed after cancel", n)
	}
	// The only slot is free again.
	collect(t, e, Request{Tokens: seqTokens(2, 10), MaxTokens: 3})
	waitIdle(t, e)
}

func TestTooLongAndInvalid(t *testing.T) {
	e, _ := newFakeEngine(t, fakeOpts{seqLen: 64})
	tests := []struct {
		req  Request
		want error
	}{
		{Request{Tokens: seqTokens(0, 60), MaxTokens: 5}, ErrTooLong},
		{Request{Tokens: seqTokens(0, 64)}, ErrTooLong},
		{Request{}, ErrInvalid},
		{Request{Tokens: []int32{1, 500}}, ErrInvalid},
		{Request{Tokens: []int32{1}, MaxTokens: -1}, ErrInvalid},
		{Request{Tokens: []int32{1}, TopLogprobs: 21}, ErrInvalid},
	}
	for _, tt := range tests {
		_, err := e.Generate(context.Background(), tt.req, func(Event) error { return nil })
		if !errors.Is(err, tt.want) {
			t.Errorf("%+v: err %v, want %v", tt.req, err, tt.want)
		}
	}
	if st := e.Stats(); st.Steps != 0 {
		t.Errorf("rejected requests ran %d steps", st.Steps)
	}
	// MaxTokens 0 means up to the sequence length.
	_, res := collect(t, e, Request{Tokens: seqTokens(0, 60)})
	if res.CompletionTokens != 4 {
		t.Errorf("MaxTokens 0: %d tokens, want 4", res.CompletionTokens)
	}
}

func TestQueueFull(t *testing.T) {
	e, _ := newFakeEngine(t, fakeOpts{slots: 1, delay: 5 * time.Millisecond, opts: Options{MaxQueue: 1, QueueTimeout: 30 * time.Millisecond}})
	wait := background(e, Request{Tokens: seqTokens(0, 5), MaxTokens: 40})
	// The slot is busy for ~200ms: a waiting request times out, and while
	// it waits the queue (one place) refuses another at once.
	waiting := make(chan error, 1)
	go func() {
		_, err := e.Generate(context.Background(), Request{Tokens: seqTokens(1, 5), MaxTokens: 2}, nil)
		waiting <- err
	}()
	for e.Stats().QueueDepth == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	t0 := time.Now()
	_, err := e.Generate(context.Background(), Request{Tokens: seqTokens(2, 5), MaxTokens: 2}, nil)
	if !errors.Is(err, ErrQueueFull) || time.Since(t0) > 20*time.Millisecond {
		t.Errorf("full queue: err %v after %v, want ErrQueueFull at once", err, time.Since(t0))
	}
	if err := <-waiting; !errors.Is(err, ErrQueueFull) {
		t.Errorf("waiting request: err %v, want ErrQueueFull (timeout)", err)
	}
	wait()
}

func TestStallBoundWhileDecoding(t *testing.T) {
	e, be := newFakeEngine(t, fakeOpts{slots: 2, seqLen: 256, delay: time.Millisecond, opts: Options{StallTokens: 16}})
	wait := background(e, Request{Tokens: seqTokens(0, 5), MaxTokens: 60})
	long := seqTokens(3, 150)
	got, _ := collect(t, e, Request{Tokens: long, MaxTokens: 4})
	wait()
	if want := greedyRef(long, 4, 97, nil); !slices.Equal(got, want) {
		t.Errorf("chunked prompt: %v, want %v", got, want)
	}
	// The short request took slot 0, the long prompt slot 1.
	mixed := 0
	for _, f := range be.segments() {
		decoding, prefill := false, 0
		for _, s := range f {
			switch {
			case s.Slot == 0 && s.Start >= 5:
				decoding = true
			case s.Slot == 1 && s.Start < len(long):
				prefill += len(s.Tokens)
			}
		}
		if decoding && prefill > 0 {
			mixed++
			if prefill > 16 {
				t.Errorf("a step with a decoding slot prefilled %d tokens, bound is 16", prefill)
			}
		}
	}
	if mixed < 150/16 {
		t.Errorf("only %d steps mixed prefill with decoding", mixed)
	}
}

func TestLogprobs(t *testing.T) {
	e, _ := newFakeEngine(t, fakeOpts{})
	prompt := seqTokens(4, 10)
	var evs []Event
	_, err := e.Generate(context.Background(), Request{Tokens: prompt, MaxTokens: 3, Logprobs: true, TopLogprobs: 3}, func(ev Event) error {
		ev.Top = slices.Clone(ev.Top)
		evs = append(evs, ev)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range evs {
		if len(ev.Top) != 3 || ev.Top[0].Token != ev.Token || ev.Top[0].Logprob != ev.Logprob || ev.Logprob >= 0 {
			t.Errorf("event %d: %+v", i, ev)
		}
	}
}

// waitIdle waits for the scheduler to free every slot.
func waitIdle(t *testing.T, e *Engine) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for e.Stats().SlotsBusy != 0 || e.Stats().QueueDepth != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("engine not idle: %+v", e.Stats())
		}
		time.Sleep(time.Millisecond)
	}
}

// rowBackend returns the same logits for every segment and records nothing:
// what remains of a step's allocations is the engine's own.
type rowBackend struct{ row []float32 }

func (b *rowBackend) forward([]model.Segment) error          { return nil }
func (b *rowBackend) logits(int) []float32                   { return b.row }
func (b *rowBackend) exportSlot(io.Writer, int, int) error   { return nil }
func (b *rowBackend) importSlot(io.Reader, int) (int, error) { return 0, nil }
func (b *rowBackend) copyPositions(int, int, int, int) error { return nil }
func (b *rowBackend) positionBytes() int                     { return 1 }
func (b *rowBackend) savePositions([]byte, int, int, int, int, int) error {
	return nil
}
func (b *rowBackend) loadPositions([]byte, int, int, int, int, int) error {
	return nil
}

func TestDecodeStepAllocatesNothing(t *testing.T) {
	const vocab = 151936
	row := make([]float32, vocab)
	for i := range row {
		row[i] = float32(i%1000) / 100
	}
	row[7], row[11] = 20, 19.5 // peaked, as trained models are
	o := withDefaults(Options{BatchSize: 2, SequenceLength: 2048})
	e, err := newEngine(o, Info{}, &rowBackend{row: row}, vocab, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	seed := uint64(1)
	mallocs := func(n int) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := e.Generate(context.Background(), Request{Tokens: []int32{1, 2, 3}, MaxTokens: n,
			Sampling: sample.Params{Temperature: 0.8, TopP: 0.9, TopK: 40, Seed: &seed}, Logprobs: true, TopLogprobs: 2},
			func(Event) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.Mallocs - before.Mallocs
	}
	mallocs(10) // warm up
	short, long := mallocs(20), mallocs(1020)
	// The per-request allocations are the same; 1000 more tokens add none.
	if long > short+20 {
		t.Errorf("1000 more tokens cost %d more allocations (%d vs %d)", long-short, long, short)
	}
}

// BenchmarkEngineOverhead is the engine's own cost per generated token
// (scheduling, sampling over Qwen3's vocabulary, streaming) with a backend
// that computes nothing.
func BenchmarkEngineOverhead(b *testing.B) {
	const vocab = 151936
	row := make([]float32, vocab)
	for i := range row {
		row[i] = float32(i%1000) / 100
	}
	row[7] = 20
	for _, bc := range []struct {
		name string
		p    sample.Params
	}{{"greedy", sample.Params{}}, {"top-k20-top-p0.95", sample.Params{Temperature: 0.6, TopK: 20, TopP: 0.95}}} {
		b.Run(bc.name, func(b *testing.B) {
			e, err := newEngine(withDefaults(Options{BatchSize: 1, SequenceLength: 1 << 16}), Info{}, &rowBackend{row: row}, vocab, nil, "")
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			b.ReportAllocs()
			b.ResetTimer()
			_, err = e.Generate(context.Background(), Request{Tokens: []int32{1}, MaxTokens: b.N, Sampling: bc.p}, nil)
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}
