package tokenizer_test

import (
	"fmt"
	"log"

	"github.com/ellm-dev/ellm/pkg/sharedtest"
	"github.com/ellm-dev/ellm/pkg/tokenizer"
)

func Example() {
	dir := sharedtest.Root() + "/qwen3-tokenizer" // a Hugging Face model directory
	tok, err := tokenizer.Load(dir)
	if err != nil {
		log.Fatal(err)
	}

	// Encode recognises added tokens written in the text, as a chat template
	// renders them; EncodeOrdinary spells them out (for untrusted content).
	ids := tok.Encode("<|im_start|>user\nHello, world!<|im_end|>")
	fmt.Println(ids)
	fmt.Println(len(tok.EncodeOrdinary("<|im_end|>")), "ordinary tokens for <|im_end|>")
	fmt.Printf("%q\n", tok.Decode(ids))
	fmt.Printf("%q\n", tok.DecodeWith(ids, tokenizer.DecodeOptions{SkipSpecial: true}))

	// A streaming decoder holds back the bytes of a character split across
	// tokens ("𝟙" is three) until it is whole.
	d := tokenizer.NewDecoder(tok)
	for _, id := range tok.Encode("𝟙 ok") {
		fmt.Printf("%q ", d.Add(id))
	}
	fmt.Printf("%q\n", d.Flush())
	// Output:
	// [151644 872 198 9707 11 1879 0 151645]
	// 6 ordinary tokens for <|im_end|>
	// "<|im_start|>user\nHello, world!<|im_end|>"
	// "user\nHello, world!"
	// "" "" "𝟙" " ok" ""
}
