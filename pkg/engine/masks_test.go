package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ellm-dev/ellm/pkg/grammar"
	"github.com/ellm-dev/ellm/pkg/model"
	"github.com/ellm-dev/ellm/pkg/sample"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

// overlapBackend's forward pass waits for the constraint's Prepare to have
// started: it returns only if the mask is worked out while it runs.
type overlapBackend struct {
	*fakeBackend
	prepared chan struct{}
	late     atomic.Int32 // forward passes that waited in vain
}

func (b *overlapBackend) forward(segs []model.Segment) error {
	for _, s := range segs {
		if s.Logits != model.LogitsNone {
			select {
			case <-b.prepared:
			case <-time.After(5 * time.Second):
				b.late.Add(1)
			}
			break
		}
	}
	return b.fakeBackend.forward(segs)
}

// preparedConstraint allows every token; it records its Prepare calls and
// fails a Mask that comes before its Prepare.
type preparedConstraint struct {
	b               *overlapBackend
	ready           bool
	prepares, masks int
	unprepared      int
	on              map[int]int // Prepare calls by goroutine id
}

// goid is the calling goroutine's id (the first line of its stack).
func goid() int {
	var buf [64]byte
	line := buf[:runtime.Stack(buf[:], false)]
	id, _ := strconv.Atoi(strings.Fields(string(line))[1])
	return id
}

func (c *preparedConstraint) Prepared() bool { return c.ready }

func (c *preparedConstraint) Prepare() {
	c.prepares++
	c.on[goid()]++
	c.ready = true
	c.b.prepared <- struct{}{}
}

func (c *preparedConstraint) Mask([]uint64) {
	c.masks++
	if !c.ready {
		c.unprepared++
	}
}

func (c *preparedConstraint) Accept(int32) error {
	c.ready = false
	return nil
}

// TestMasksOverlapForward checks that a constraint's next mask is worked
// out while the forward pass computes the logits it applies to (every
// forward pass with logits finds Prepare started), by the engine's one
// mask worker: every Prepare runs on one goroutine, and no goroutine
// appears during the generation.
func TestMasksOverlapForward(t *testing.T) {
	const slots, seqLen, vocab = 1, 256, 97
	be := &overlapBackend{fakeBackend: newFake(slots, seqLen, vocab), prepared: make(chan struct{}, 1)}
	o := withDefaults(Options{BatchSize: slots, SequenceLength: seqLen})
	e, err := newEngine(o, Info{Slots: slots, SequenceLength: seqLen}, be, vocab, nil, "fake-model-identity-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	c := &preparedConstraint{b: be, on: map[int]int{}}
	var counts []int
	_, err = e.Generate(context.Background(), Request{Tokens: seqTokens(1, 20), MaxTokens: 100, Constraint: c}, func(Event) error {
		counts = append(counts, runtime.NumGoroutine())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 100 || c.masks != 100 || c.prepares != 100 {
		t.Fatalf("%d tokens, %d masks, %d prepares; want 100 each", len(counts), c.masks, c.prepares)
	}
	if c.unprepared > 0 || be.late.Load() > 0 {
		t.Errorf("%d masks not prepared ahead, %d forward passes without a Prepare running", c.unprepared, be.late.Load())
	}
	if len(c.on) != 1 {
		t.Errorf("Prepare ran on %d goroutines (calls by goroutine id: %v), want the one mask worker", len(c.on), c.on)
	}
	for i, n := range counts { // other tests' goroutines may still be ending
		if n > counts[0] {
			t.Fatalf("token %d: %d goroutines, %d at the first token", i, n, counts[0])
		}
	}
}

// hiddenPrepare hides a constraint's Prepare: its masks are worked out
// in the step that applies them, after the forward pass.
type hiddenPrepare struct{ sample.Constraint }

// BenchmarkConstrainedDecode measures the time per generated token of a
// JSON-schema generation on the tiny model with the real Qwen3 vocabulary
// (151,936 ids), with a new grammar per generation so that every state's
// mask is computed: "worker" prepares each mask on the engine's mask
// worker during the forward pass, "in-step" computes it after (the same
// grammar with Prepare hidden), "free" has no constraint. The overlap
// needs a CPU the pool's threads leave free: compare threads=1 and
// threads=2 on a machine with 2 cores.
func BenchmarkConstrainedDecode(b *testing.B) {
	md := openModel(b, sharedtest.Path(b, "models", "tiny-qwen3-a"))
	tok := md.Tokenizer
	vocab := grammar.NewVocab(tok.VocabSize(), tok.TokenBytes, tok.IsSpecial, md.EOS)
	schema := json.RawMessage(`{"type":"array","minItems":4,"maxItems":8,"items":{"type":"object","properties":{
		"name":{"type":"string","minLength":8,"maxLength":40},"age":{"type":"integer","minimum":0,"maximum":120},
		"tags":{"type":"array","minItems":1,"items":{"enum":["alpha","beta","gamma"]}}},
		"required":["name","age","tags"],"additionalProperties":false}}`)
	for _, threads := range []int{1, 2} {
		e := newModelEngine(b, md.Dir, Options{BatchSize: 1, SequenceLength: 512, Threads: threads})
		for _, mode := range []string{"worker", "in-step", "free"} {
			b.Run(fmt.Sprintf("threads=%d/%s", threads, mode), func(b *testing.B) {
				tokens, seed := 0, uint64(0)
				for b.Loop() {
					seed++
					req := Request{Tokens: seqTokens(1, 20), MaxTokens: 200, Sampling: sample.Params{Temperature: 1, Seed: &seed}}
					if mode != "free" {
						g, err := grammar.CompileSchema(schema, grammar.Compact)
						if err != nil {
							b.Fatal(err)
						}
						req.Constraint = g.Constraint(vocab)
						if mode == "in-step" {
							req.Constraint = hiddenPrepare{req.Constraint}
						}
					}
					res, err := e.Generate(context.Background(), req, func(Event) error { return nil })
					if err != nil {
						b.Fatal(err)
					}
					tokens += res.CompletionTokens
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(tokens), "µs/token")
				b.ReportMetric(float64(tokens)/float64(b.N), "tokens/op")
			})
		}
		e.Close()
	}
}
