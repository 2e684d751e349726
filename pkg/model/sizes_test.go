package model

import (
	"testing"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/kernels/threads"
	"github.com/ellm-dev/ellm/pkg/kvcache"
)

// The fit check sizes a runner with ScratchBytes before anything exists:
// it must be what NewRunner then allocates, dense and MoE, chunked or not.
func TestScratchBytesMatchesRunner(t *testing.T) {
	for _, name := range []string{"tiny-qwen3-a", "tiny-qwen3moe-a"} {
		m := loadTiny(t, name, LoadOptions{})
		for _, c := range []struct{ slots, seq, maxTokens, logits, workers int }{
			{1, 64, 64, 0, 1}, {3, 100, 32, 3, 2}, {2, 50, 500, 7, 3},
		} {
			pool := threads.New(c.workers, false)
			r := newRunner(t, m, kvcache.BF16, c.slots, c.seq, RunnerOptions{MaxTokens: c.maxTokens, MaxLogits: c.logits, Pool: pool})
			want := ScratchBytes(m.Config, c.slots, c.seq, RunnerOptions{MaxTokens: c.maxTokens, MaxLogits: c.logits}, LoadOptions{}, c.workers, kernels.Active())
			if got := r.ScratchBytes(); got != want || got <= 0 {
				t.Errorf("%s %+v: runner holds %d bytes, ScratchBytes says %d", name, c, got, want)
			}
			pool.Close()
		}
	}
}

// WeightBytes predicts what Load commits, to within panel padding.
func TestWeightBytesMatchesLoad(t *testing.T) {
	for _, name := range []string{"tiny-qwen3-a", "tiny-qwen3moe-a"} {
		for _, dt := range []string{"bf16", "int8", "f32"} {
			m := loadTiny(t, name, LoadOptions{DType: dt})
			want, coded, err := WeightBytes(m.Config, LoadOptions{DType: dt})
			if err != nil {
				t.Fatal(err)
			}
			got := m.WeightBytes()
			if got < want || float64(got-want) > 0.02*float64(want) {
				t.Errorf("%s %s: Load committed %d bytes, WeightBytes says %d", name, dt, got, want)
			}
			if c := m.CodedBytes(); c < coded || float64(c-coded) > 0.02*float64(coded) || (c > 0) != (dt == "bf16" && LoadOptions{}.codes()) {
				t.Errorf("%s %s: Load coded %d bytes, WeightBytes says %d", name, dt, c, coded)
			}
		}
	}
}

// WeightMemory covers every packed weight: its bytes add up to what Load
// reports minus the embedding table (mapped) and the per-channel scales and
// factors.
func TestWeightMemoryCoversThePackedWeights(t *testing.T) {
	for _, name := range []string{"tiny-qwen3-a", "tiny-qwen3moe-a"} {
		m := loadTiny(t, name, LoadOptions{DType: "bf16"})
		var n int64
		for _, b := range m.WeightMemory() {
			if len(b) == 0 {
				t.Fatalf("%s: an empty weight buffer", name)
			}
			n += int64(len(b))
		}
		table := 2 * int64(m.Config.VocabSize) * int64(m.Config.HiddenSize)
		norms := int64(0)
		for _, l := range m.layers {
			norms += 4 * int64(len(l.inputNorm)+len(l.postNorm)+len(l.qNorm)+len(l.kNorm)+len(l.qkvBias)+len(l.oBias))
		}
		norms += 4 * int64(len(m.finalNorm))
		// Nor are the screen's four floats a channel (scale, correction and
		// two bound factors; scale and correction for whole panels).
		var screenSmall int64
		if m.lmScreen != nil {
			v := int64(m.Config.VocabSize)
			screenSmall = 4 * (2*((v+gemm.PanelWidth-1)/gemm.PanelWidth*gemm.PanelWidth) + 2*v)
		}
		if want := m.WeightBytes() - table - norms - screenSmall; n != want {
			t.Errorf("%s: weight buffers hold %d bytes, want %d", name, n, want)
		}
	}
}
