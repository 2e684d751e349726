package model_test

import (
	"fmt"
	"log"
	"path/filepath"
	"slices"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ops"
	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/model"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

// A prompt is prefilled as one segment, then decoded one token per Forward;
// several sequences share a Forward as segments of different slots. Decoding
// token by token gives the same bits as prefilling the whole sequence at once.
func ExampleRunner_Forward() {
	m, err := model.Load(filepath.Join(sharedtest.Root(), "models/tiny-qwen3-a"), model.LoadOptions{DType: "bf16"})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	cache, err := kvcache.New(m.Config, 2, 256, kvcache.BF16) // 2 slots of 256 positions
	if err != nil {
		log.Fatal(err)
	}
	defer cache.Close()
	r, err := m.NewRunner(cache, model.RunnerOptions{MaxTokens: 256, MaxLogits: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	seq := []int32{785, 3974, 13876, 38835}
	seg := model.Segment{Slot: 0, Start: 0, Tokens: seq, Logits: model.LogitsLast}
	var last []float32
	k := ops.For(kernels.Active())
	for range 8 {
		if err := r.Forward([]model.Segment{seg}); err != nil {
			log.Fatal(err)
		}
		last = slices.Clone(r.Logits(0))
		next := int32(k.Argmax(last))
		seg = model.Segment{Slot: 0, Start: len(seq), Tokens: []int32{next}, Logits: model.LogitsLast}
		seq = append(seq, next)
	}

	// The same 11 tokens prefilled in one pass into slot 1.
	whole := seq[:len(seq)-1]
	if err := r.Forward([]model.Segment{{Slot: 1, Start: 0, Tokens: whole, Logits: model.LogitsLast}}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(seq), "tokens; decode equals prefill:", slices.Equal(last, r.Logits(0)))
	// Output: 12 tokens; decode equals prefill: true
}
