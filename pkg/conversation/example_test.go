package conversation_test

import (
	"fmt"

	"github.com/ellm-dev/ellm/pkg/conversation"
)

// letters is a toy tokenizer: token i is the i-th piece below.
type letters []string

func (l letters) Encode(string) []int32      { return nil }
func (l letters) Decode([]int32) string      { return "" }
func (l letters) TokenBytes(id int32) []byte { return []byte(l[id]) }
func (l letters) IsSpecial(id int32) bool    { return l[id] == "<|im_end|>" }
func (l letters) VocabSize() int             { return len(l) }

// A reply streamed token by token: the reasoning is split out, the
// character é arrives in two tokens, and the stop string "\n\nQ:" ends the
// reply although no single token holds it.
func ExampleStream() {
	tok := letters{"<think>", "short", "</think>", "Caf", "\xc3", "\xa9", " au lait.\n", "\nQ", ":", " next"}
	m := &conversation.Model{Tokenizer: tok}
	s := m.NewStream(conversation.StreamOptions{Reasoning: true, Stops: []string{"\n\nQ:"}})
	for id := range int32(len(tok)) {
		d, stop := s.Token(id)
		fmt.Printf("%q %q\n", d.Reasoning, d.Content)
		if stop {
			break
		}
	}
	for _, d := range s.Flush() {
		fmt.Printf("%q %q (flush)\n", d.Reasoning, d.Content)
	}
	// Output:
	// "" ""
	// "short" ""
	// "" ""
	// "" "Caf"
	// "" ""
	// "" "é"
	// "" " au lait."
	// "" ""
	// "" ""
}
