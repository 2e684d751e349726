package model_test

import (
	"fmt"
	"log"

	"github.com/ellm-dev/ellm/kernels/ops"
	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/model"
)

// A prompt is prefilled as one segment, then decoded one token per Forward;
// several sequences share a Forward as segments of different slots.
func ExampleRunner_Forward() {
	m, err := model.Load("../shared/models/tiny-qwen3-a", model.LoadOptions{DType: "bf16"})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	cache, err := kvcache.New(m.Config, 1, 256, kvcache.BF16) // 1 slot of 256 positions
	if err != nil {
		log.Fatal(err)
	}
	defer cache.Close()
	r, err := m.NewRunner(cache, model.RunnerOptions{MaxTokens: 256})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	seq := []int32{785, 3974, 13876, 38835}
	seg := model.Segment{Slot: 0, Start: 0, Tokens: seq, Logits: model.LogitsLast}
	for range 8 {
		if err := r.Forward([]model.Segment{seg}); err != nil {
			log.Fatal(err)
		}
		next := int32(ops.Argmax(r.Logits(0)))
		seg = model.Segment{Slot: 0, Start: len(seq), Tokens: []int32{next}, Logits: model.LogitsLast}
		seq = append(seq, next)
	}
	fmt.Println(len(seq))
}
