package engine_test

import (
	"context"
	"fmt"

	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/modeldir"
	"github.com/ellm-dev/ellm/pkg/synth"
)

// Generate streams tokens to a callback; the built-in synthetic model
// needs no download.
func ExampleEngine_Generate() {
	dir, err := synth.DefaultModel()
	if err != nil {
		panic(err)
	}
	md, err := modeldir.Open(dir)
	if err != nil {
		panic(err)
	}
	e, err := engine.New(md, engine.Options{SequenceLength: 256, Threads: 1})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	prompt := md.Tokenizer.Encode("Hello")
	var text string
	res, err := e.Generate(context.Background(), engine.Request{Tokens: prompt, MaxTokens: 4, StopTokens: []int32{}},
		func(ev engine.Event) error {
			text += md.Tokenizer.Decode([]int32{ev.Token})
			return nil
		})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.CompletionTokens, res.FinishReason, len(res.Tokens) == len(prompt)+4, text != "")

	// The same prompt again: all but its last token come from the slot's KV.
	res, _ = e.Generate(context.Background(), engine.Request{Tokens: prompt, MaxTokens: 1}, nil)
	fmt.Println(res.CachedTokens == len(prompt)-1)
	// Output:
	// 4 length true true
	// true
}
