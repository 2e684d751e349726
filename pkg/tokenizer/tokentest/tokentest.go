// Package tokentest is a tokenizer for the tests of what sits above
// pkg/tokenizer (the conversation layer, the server): byte-level, so that
// every character and tag can be split across tokens, with Qwen3's chat
// tokens as added tokens.
package tokentest

import "strings"

// Bytes is byte-level: ids 0–255 are the bytes, Added[i] is id 256+i.
type Bytes struct{}

// Added are the added tokens, in id order from 256: <|im_end|> (256) and
// <|endoftext|> (257) end a reply.
var Added = []struct {
	Text    string
	Special bool
}{
	{"<|im_end|>", true}, {"<|endoftext|>", true}, {"<|im_start|>", true},
	{"<think>", false}, {"</think>", false}, {"<tool_call>", false}, {"</tool_call>", false},
}

// Encode matches the added tokens first, as a Hugging Face tokenizer does.
func (Bytes) Encode(text string) []int32 {
	var ids []int32
	for len(text) > 0 {
		id, n := int32(text[0]), 1
		for i, a := range Added {
			if strings.HasPrefix(text, a.Text) {
				id, n = int32(256+i), len(a.Text)
				break
			}
		}
		ids = append(ids, id)
		text = text[n:]
	}
	return ids
}

// Decode returns the text of ids, special tokens included.
func (b Bytes) Decode(ids []int32) string {
	var s []byte
	for _, id := range ids {
		s = append(s, b.TokenBytes(id)...)
	}
	return string(s)
}

// TokenBytes returns the bytes id stands for.
func (Bytes) TokenBytes(id int32) []byte {
	if id < 256 {
		return []byte{byte(id)}
	}
	return []byte(Added[id-256].Text)
}

// IsSpecial reports whether id is a special added token (not text).
func (Bytes) IsSpecial(id int32) bool { return id >= 256 && Added[id-256].Special }

// VocabSize is the number of ids.
func (Bytes) VocabSize() int { return 256 + len(Added) }
