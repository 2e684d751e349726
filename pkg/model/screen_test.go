package model

import (
	"math"
	"slices"
	"testing"

	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/pkg/kvcache"
)

// A screened Forward gives every logit an interval that holds it, and
// Refine then computes the panels asked for with the same bits as an
// unscreened Forward and −Inf elsewhere: prefill and decode rows, one
// sequence and three at once.
func TestScreenedLogitsMatch(t *testing.T) {
	for _, name := range []string{"tiny-qwen3-a", "tiny-qwen3moe-a"} {
		m := loadTiny(t, name, LoadOptions{})
		if m.lmScreen == nil {
			t.Fatalf("%s: a bf16 model without a logits screen", name)
		}
		V := m.Config.VocabSize
		full := newRunner(t, m, kvcache.BF16, 3, 32, RunnerOptions{MaxTokens: 32})
		screened := newRunner(t, m, kvcache.BF16, 3, 32, RunnerOptions{MaxTokens: 32})
		prompts := [][]int32{{1, 2, 3, 4, 5}, {9, 8, 7}, {42}}
		steps := [][]Segment{
			{{Slot: 0, Tokens: prompts[0], Logits: LogitsLast}},
			{{Slot: 0, Start: 5, Tokens: []int32{6}, Logits: LogitsLast},
				{Slot: 1, Tokens: prompts[1], Logits: LogitsLast}, {Slot: 2, Tokens: prompts[2], Logits: LogitsLast}},
			{{Slot: 0, Start: 6, Tokens: []int32{11}, Logits: LogitsLast},
				{Slot: 1, Start: 3, Tokens: []int32{12}, Logits: LogitsLast}, {Slot: 2, Start: 1, Tokens: []int32{13}, Logits: LogitsLast}},
		}
		for si, segs := range steps {
			if err := full.Forward(segs); err != nil {
				t.Fatal(err)
			}
			asked := slices.Clone(segs)
			for i := range asked {
				asked[i].Screen = true
			}
			if err := screened.Forward(asked); err != nil {
				t.Fatal(err)
			}
			if !screened.Screened() {
				t.Fatalf("%s step %d: not screened", name, si)
			}
			// The panels of each row's ten largest logits, and the last
			// (partial) panel.
			var panels []int32
			for i := range segs {
				want := full.Logits(i)
				lo, hi := screened.Interval(i)
				for tok, v := range want {
					if !(lo[tok] <= v && v <= hi[tok]) {
						t.Fatalf("%s step %d row %d: logit %d = %g outside [%g, %g]", name, si, i, tok, v, lo[tok], hi[tok])
					}
				}
				order := make([]int32, V)
				for tok := range order {
					order[tok] = int32(tok)
				}
				slices.SortFunc(order, func(a, b int32) int { return cmpDesc(want[a], want[b]) })
				for _, tok := range order[:10] {
					panels = append(panels, tok/gemm.PanelWidth)
				}
			}
			panels = append(panels, int32((V-1)/gemm.PanelWidth))
			slices.Sort(panels)
			panels = slices.Compact(panels)
			screened.Refine(panels)
			if screened.Screened() {
				t.Fatalf("%s step %d: still screened after Refine", name, si)
			}
			for i := range segs {
				want, got := full.Logits(i), screened.Logits(i)
				for tok := range V {
					in := slices.Contains(panels, int32(tok/gemm.PanelWidth))
					if in && math.Float32bits(got[tok]) != math.Float32bits(want[tok]) || !in && !math.IsInf(float64(got[tok]), -1) {
						t.Fatalf("%s step %d row %d: refined logit %d = %g, want %g (panel asked: %v)", name, si, i, tok, got[tok], want[tok], in)
					}
				}
			}
		}
	}
}

func cmpDesc(a, b float32) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// A Forward screens only when every logits row asked for it, and only
// LogitsLast rows can; a model loaded without the screen never does.
func TestScreenOnlyWhenAllAsk(t *testing.T) {
	m := loadTiny(t, "tiny-qwen3-a", LoadOptions{})
	r := newRunner(t, m, kvcache.BF16, 2, 16, RunnerOptions{MaxTokens: 16, MaxLogits: 8})
	for _, tt := range []struct {
		name string
		segs []Segment
		want bool
	}{
		{"one asks, one does not", []Segment{{Slot: 0, Tokens: []int32{1, 2}, Logits: LogitsLast, Screen: true},
			{Slot: 1, Tokens: []int32{3}, Logits: LogitsLast}}, false},
		{"all logits", []Segment{{Slot: 0, Tokens: []int32{1, 2}, Logits: LogitsAll, Screen: true}}, false},
		{"a prefill chunk without logits beside one that asks", []Segment{{Slot: 0, Tokens: []int32{1, 2}, Screen: true},
			{Slot: 1, Tokens: []int32{3}, Logits: LogitsLast, Screen: true}}, true},
	} {
		if err := r.Forward(tt.segs); err != nil {
			t.Fatal(err)
		}
		if r.Screened() != tt.want {
			t.Errorf("%s: Screened() = %v, want %v", tt.name, r.Screened(), tt.want)
		}
	}
	plain := loadTiny(t, "tiny-qwen3-a", LoadOptions{NoLogitScreen: true})
	if plain.lmScreen != nil || plain.ScreenBytes() != 0 {
		t.Fatal("NoLogitScreen loaded a screen")
	}
	r = newRunner(t, plain, kvcache.BF16, 1, 16, RunnerOptions{MaxTokens: 16})
	if err := r.Forward([]Segment{{Tokens: []int32{1, 2}, Logits: LogitsLast, Screen: true}}); err != nil {
		t.Fatal(err)
	}
	if r.Screened() {
		t.Error("a model without a screen screened")
	}
}
