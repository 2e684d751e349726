package model

import (
	"fmt"
	"testing"

	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/synth"
)

// benchModel generates a preset's shape with fewer layers, a smaller
// vocabulary and (MoE) fewer experts, so that the benchmark's weights fit a
// shared test machine; per-layer costs keep the real shapes.
func benchModel(b *testing.B, preset string, layers, vocab, experts int) *Model {
	b.Helper()
	cfg, err := modelcfg.Preset(preset)
	if err != nil {
		b.Fatal(err)
	}
	if cfg, err = cfg.Truncate(layers); err != nil {
		b.Fatal(err)
	}
	cfg.VocabSize = vocab
	cfg.EOSTokenID, cfg.BOSTokenID, cfg.PadTokenID = nil, nil, nil
	if experts > 0 {
		cfg.NumExperts = experts
	}
	dir := b.TempDir()
	if err := synth.Generate(cfg, dir, synth.Options{Seed: 1}); err != nil {
		b.Fatal(err)
	}
	m, err := Load(dir, LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m
}

// BenchmarkForward measures a prefill of 128 tokens and a decode step of 4
// sequences (one row each) on the active kernel path.
func BenchmarkForward(b *testing.B) {
	for _, bm := range []struct {
		preset                 string
		layers, vocab, experts int
	}{
		{"qwen3-0.6b", 2, 8192, 0},
		{"qwen3-30b-a3b", 1, 8192, 16},
	} {
		m := benchModel(b, bm.preset, bm.layers, bm.vocab, bm.experts)
		cache, err := kvcache.New(m.Config, 4, 256, kvcache.BF16)
		if err != nil {
			b.Fatal(err)
		}
		r, err := m.NewRunner(cache, RunnerOptions{MaxTokens: 128})
		if err != nil {
			b.Fatal(err)
		}
		prompt := make([]int32, 128)
		for i := range prompt {
			prompt[i] = int32(i*31) % int32(bm.vocab)
		}
		name := fmt.Sprintf("%s-%dlayers", bm.preset, bm.layers)
		b.Run(name+"/prefill128", func(b *testing.B) {
			for range b.N {
				if err := r.Forward([]Segment{{Tokens: prompt, Logits: LogitsLast}}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(prompt))/b.Elapsed().Seconds(), "tok/s")
		})
		b.Run(name+"/decode4", func(b *testing.B) {
			segs := make([]Segment, 4)
			for s := range segs {
				if err := r.Forward([]Segment{{Slot: s, Tokens: prompt[:64]}}); err != nil {
					b.Fatal(err)
				}
				segs[s] = Segment{Slot: s, Start: 64, Tokens: prompt[64+s : 65+s], Logits: LogitsLast}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := r.Forward(segs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(segs))/b.Elapsed().Seconds(), "tok/s")
		})
		r.Close()
		cache.Close()
	}
}
