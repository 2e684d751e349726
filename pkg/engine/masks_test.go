package engine

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ellm-dev/ellm/pkg/model"
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
}

func (c *preparedConstraint) Prepare() {
	c.prepares++
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
// mask worker: no goroutine appears or ends during the generation.
func TestMasksOverlapForward(t *testing.T) {
	const slots, seqLen, vocab = 1, 256, 97
	be := &overlapBackend{fakeBackend: newFake(slots, seqLen, vocab), prepared: make(chan struct{}, 1)}
	o := withDefaults(Options{BatchSize: slots, SequenceLength: seqLen})
	e, err := newEngine(o, Info{Slots: slots, SequenceLength: seqLen}, be, vocab, nil, "fake-model-identity-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	c := &preparedConstraint{b: be}
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
	for i, n := range counts {
		if n != counts[0] {
			t.Fatalf("token %d: %d goroutines, %d at the first token", i, n, counts[0])
		}
	}
}
