package engine

import (
	"context"
	"errors"
	"math"
	"testing"
)

// TestExtremeMaxTokens: a client's max_tokens near the int range's end is
// too long, never an overflowed length check or a huge allocation.
func TestExtremeMaxTokens(t *testing.T) {
	e, _ := newFakeEngine(t, fakeOpts{seqLen: 64})
	for _, n := range []int{math.MaxInt, math.MaxInt - 1, math.MaxInt - 10, math.MaxInt/2 + 1, 1 << 62, 65} {
		for _, top := range []int{0, MaxTopLogprobs} {
			req := Request{Tokens: seqTokens(0, 10), MaxTokens: n, TopLogprobs: top}
			if _, err := e.Generate(context.Background(), req, nil); !errors.Is(err, ErrTooLong) {
				t.Errorf("MaxTokens %d, TopLogprobs %d: err %v, want ErrTooLong", n, top, err)
			}
		}
	}
	// What fits still runs.
	if _, res := collect(t, e, Request{Tokens: seqTokens(0, 10), MaxTokens: 54}); res.CompletionTokens != 54 {
		t.Errorf("MaxTokens 54 of 54 left: %d tokens", res.CompletionTokens)
	}
}
