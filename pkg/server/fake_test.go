package server

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ellm-dev/ellm/pkg/chat"
	"github.com/ellm-dev/ellm/pkg/conversation"
	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/sample"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
	"github.com/ellm-dev/ellm/pkg/tokenizer/tokentest"
)

// fakeTokenizer is byte-level: ids 0–255 are bytes, the added tokens follow.
type fakeTokenizer = tokentest.Bytes

const fakeEnd = 256 // <|im_end|>

// fakeEngine answers with a scripted reply, keeps per-request prefill
// accounting with a prefix cache over every transcript it produced, and has
// a fixed number of slots.
type fakeEngine struct {
	tmpl  *chat.Template
	seq   int
	slots chan struct{}
	delay time.Duration
	// reply is the text generated for a prompt.
	reply func(prompt string) string
	store *fakeSessions

	mu        sync.Mutex
	cache     [][]int32
	prefilled []int // prompt tokens computed, per request
	busy      int
}

func newFakeEngine(t testing.TB, reply func(prompt string) string) *fakeEngine {
	t.Helper()
	tmpl, err := chat.Load(sharedtest.Path(t, "qwen3-tokenizer"))
	if err != nil {
		t.Fatal(err)
	}
	return &fakeEngine{tmpl: tmpl, seq: 1 << 16, slots: make(chan struct{}, 2), reply: reply, store: newFakeSessions()}
}

// fakeEOS are the fake model's end tokens: <|im_end|>, <|endoftext|>.
var fakeEOS = []int32{fakeEnd, fakeEnd + 1}

// model is the fake model: greedy by default.
func (f *fakeEngine) model() *conversation.Model {
	zero := 0.0
	return &conversation.Model{Tokenizer: fakeTokenizer{}, Template: f.tmpl, Generation: modelcfg.GenerationConfig{Temperature: &zero},
		EOS: slices.Clone(fakeEOS)}
}
func (f *fakeEngine) Info() engine.Info {
	return engine.Info{ModelName: "fake-qwen3", SequenceLength: f.seq, Slots: cap(f.slots), KernelPath: "generic",
		Threads: 2, ThreadsWhy: "2 (affinity 4 CPUs, cgroup quota 2.5 CPUs (cpu.max), 4 physical cores)", PinnedCPUs: []int{0, 2},
		ScreenRows: 2, LogitScreen: "up to 2 rows a pass (measured at 4: 10.1 ms screened, 9.7 in full)"}
}
func (f *fakeEngine) Stats() engine.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return engine.Stats{SlotsBusy: f.busy, Slots: cap(f.slots)}
}

func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func (f *fakeEngine) Generate(ctx context.Context, req engine.Request, fn func(engine.Event) error) (engine.Result, error) {
	if len(req.Tokens)+req.MaxTokens > f.seq {
		return engine.Result{}, engine.ErrTooLong
	}
	select {
	case f.slots <- struct{}{}:
	case <-ctx.Done():
		return engine.Result{}, ctx.Err()
	}
	f.mu.Lock()
	f.busy++
	cached := 0
	for _, c := range f.cache {
		cached = max(cached, commonPrefix(c, req.Tokens))
	}
	cached = min(cached, len(req.Tokens)-1) // the last prompt token is always computed
	f.prefilled = append(f.prefilled, len(req.Tokens)-cached)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.busy--
		f.mu.Unlock()
		<-f.slots
	}()
	tok := fakeTokenizer{}
	script := append(tok.Encode(f.reply(tok.Decode(req.Tokens))), fakeEnd)
	res := engine.Result{PromptTokens: len(req.Tokens), CachedTokens: cached, FinishReason: "length"}
	res.Tokens = append([]int32(nil), req.Tokens...)
	start := time.Now()
	allowed := make([]uint64, (tok.VocabSize()+63)/64)
	for i := 0; i < req.MaxTokens; i++ {
		next := script[min(i, len(script)-1)]
		if req.Constraint != nil {
			for j := range allowed {
				allowed[j] = ^uint64(0)
			}
			req.Constraint.Mask(allowed)
			if allowed[next/64]&(1<<(next%64)) == 0 {
				next = -1
				for id := range tok.VocabSize() {
					if allowed[id/64]&(1<<(id%64)) != 0 {
						next = int32(id)
						break
					}
				}
				if next < 0 {
					return res, sample.ErrNoToken
				}
			}
			if err := req.Constraint.Accept(next); err != nil {
				return res, err
			}
		}
		if f.delay > 0 {
			select {
			case <-time.After(f.delay):
			case <-ctx.Done():
				return res, ctx.Err()
			}
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if i == 0 {
			res.TTFT = time.Since(start)
		}
		res.Tokens = append(res.Tokens, next)
		res.CompletionTokens++
		stops := req.StopTokens
		if stops == nil {
			stops = fakeEOS
		}
		if slices.Contains(stops, next) {
			res.FinishReason = "stop" // like the engine: no event for a stop token
			break
		}
		ev := engine.Event{Token: next, Logprob: -0.5}
		if req.TopLogprobs > 0 {
			ev.Top = []sample.TokenLogprob{{Token: next, Logprob: -0.5}}
		}
		err := fn(ev)
		if err == engine.ErrStop {
			res.FinishReason = "stop"
			break
		}
		if err != nil {
			return res, err
		}
	}
	res.Total = time.Since(start)
	f.mu.Lock()
	f.cache = append(f.cache, res.Tokens) // like the engine, the last sampled token's KV is computed too
	f.mu.Unlock()
	return res, nil
}

// fakeSessions is the fake engine's session store: transcripts in a map that
// several fake engines may share (a restart), no KV.
type fakeSessions struct {
	mu          sync.Mutex
	transcripts map[string]engine.Transcript
	used        map[string]time.Time
	busy        map[string]bool
	saves       int
}

func newFakeSessions() *fakeSessions {
	return &fakeSessions{transcripts: map[string]engine.Transcript{}, used: map[string]time.Time{}, busy: map[string]bool{}}
}

func (f *fakeEngine) Transcript(id string) (engine.Transcript, bool) {
	f.store.mu.Lock()
	defer f.store.mu.Unlock()
	t, ok := f.store.transcripts[id]
	return t, ok
}

func (f *fakeEngine) SaveTranscript(id string, t engine.Transcript) error {
	f.store.mu.Lock()
	defer f.store.mu.Unlock()
	f.store.transcripts[id], f.store.used[id] = t, time.Now()
	return nil
}

func (f *fakeEngine) Sessions() ([]engine.SessionInfo, error) {
	f.store.mu.Lock()
	defer f.store.mu.Unlock()
	var out []engine.SessionInfo
	for id, t := range f.store.transcripts {
		out = append(out, engine.SessionInfo{ID: id, Tokens: len(t.Tokens), Bytes: int64(4 * len(t.Tokens)), LastUsed: f.store.used[id]})
	}
	return out, nil
}

func (f *fakeEngine) DeleteSession(id string) (engine.Purged, error) {
	f.store.mu.Lock()
	defer f.store.mu.Unlock()
	if f.store.busy[id] {
		return engine.Purged{}, engine.ErrSessionBusy
	}
	t, ok := f.store.transcripts[id]
	if !ok {
		return engine.Purged{}, engine.ErrNoSession
	}
	delete(f.store.transcripts, id)
	return engine.Purged{Stored: true, SlotTokens: len(t.Tokens)}, nil
}

func (f *fakeEngine) SaveSessions() error {
	f.store.mu.Lock()
	f.store.saves++
	f.store.mu.Unlock()
	return nil
}
