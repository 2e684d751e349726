package sample_test

import (
	"fmt"

	"github.com/ellm-dev/ellm/pkg/sample"
)

func Example() {
	s := sample.New(4) // one per slot, sized to the vocabulary
	seed := uint64(42)
	s.Reset(sample.Params{Temperature: 0.7, TopK: 2, Seed: &seed}, []int32{3}, nil, 0)
	logits := []float32{0.1, 2, 0.3, 1.9}
	tok, err := s.Sample(logits) // modifies logits in place
	if err != nil {
		panic(err)
	}
	_ = s.Accept(tok)
	fmt.Println(tok == 1 || tok == 3) // top-k 2 keeps tokens 1 and 3

	// Temperature 0 is greedy: the first highest logit.
	s.Reset(sample.Params{}, nil, nil, 0)
	tok, _ = s.Sample([]float32{0.5, 3, 3, 1})
	fmt.Println(tok, s.Logprob(tok) < 0)
	// Output:
	// true
	// 1 true
}
