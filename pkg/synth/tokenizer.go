package synth

import (
	_ "embed"
	"fmt"
	"path/filepath"
	"strconv"
)

// specialTokens are the Qwen3 added tokens, in Qwen3's order, with Qwen3's
// "special" flags (tool and think markers are added but not special, so they
// survive decoding with skip_special_tokens). The byte tokenizer gives them
// ids 256, 257, … in this order.
var specialTokens = []struct {
	content string
	special bool
}{
	{"<|endoftext|>", true}, {"<|im_start|>", true}, {"<|im_end|>", true},
	{"<|object_ref_start|>", true}, {"<|object_ref_end|>", true}, {"<|box_start|>", true}, {"<|box_end|>", true},
	{"<|quad_start|>", true}, {"<|quad_end|>", true}, {"<|vision_start|>", true}, {"<|vision_end|>", true},
	{"<|vision_pad|>", true}, {"<|image_pad|>", true}, {"<|video_pad|>", true},
	{"<tool_call>", false}, {"</tool_call>", false},
	{"<|fim_prefix|>", false}, {"<|fim_middle|>", false}, {"<|fim_suffix|>", false}, {"<|fim_pad|>", false},
	{"<|repo_name|>", false}, {"<|file_sep|>", false},
	{"<tool_response>", false}, {"</tool_response>", false}, {"<think>", false}, {"</think>", false},
}

// reservedTokens pad the vocabulary to ByteVocabSize, a multiple of 32 that
// kernels tile without a tail. They are special, so they never reach text.
const reservedTokens = 6

// ByteVocabSize is the vocabulary of the byte tokenizer: 256 bytes, the Qwen3
// added tokens and a few reserved ones.
const ByteVocabSize = 256 + 26 + reservedTokens

// byteTokenID is the id of an added token of the byte tokenizer.
func byteTokenID(content string) int {
	for i, t := range specialTokens {
		if t.content == content {
			return 256 + i
		}
	}
	panic("synth: no added token " + content) // only called with the constants above
}

// bytesToUnicode is GPT-2's byte-level alphabet: printable bytes map to
// themselves, the others to code points from U+0100 up, so every byte is one
// visible character in tokenizer.json.
func bytesToUnicode() [256]rune {
	var m [256]rune
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			m[b] = rune(b)
		} else {
			m[b] = rune(256 + n)
			n++
		}
	}
	return m
}

// qwenSplitRegex is the pre-tokenizer pattern of Qwen2/Qwen3 tokenizers. With
// no merges it does not change the ids, but keeping the Qwen3 pipeline means
// the byte tokenizer exercises the same code paths as the real one.
const qwenSplitRegex = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

type addedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

func addedTokens() []addedToken {
	var ts []addedToken
	for i, t := range specialTokens {
		ts = append(ts, addedToken{ID: 256 + i, Content: t.content, Special: t.special})
	}
	for i := 0; i < reservedTokens; i++ {
		ts = append(ts, addedToken{ID: 256 + len(specialTokens) + i, Content: fmt.Sprintf("<|reserved_%d|>", i), Special: true})
	}
	return ts
}

// ByteTokenizerJSON is a Hugging Face tokenizer.json: byte-level BPE whose
// vocabulary is the 256 bytes (id = byte value) with no merges, Qwen3's
// normalizer and pre-tokenizer, and the Qwen3 added tokens from id 256.
func ByteTokenizerJSON() ([]byte, error) {
	vocab := map[string]int{}
	for b, r := range bytesToUnicode() {
		vocab[string(r)] = b
	}
	byteLevel := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
	tok := map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": addedTokens(),
		"normalizer":   map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": qwenSplitRegex}, "behavior": "Isolated", "invert": false},
			byteLevel,
		}},
		"post_processor": byteLevel,
		"decoder":        byteLevel,
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": []any{},
		},
	}
	return marshalJSON(tok)
}

//go:embed chatml.jinja
var chatTemplate string

// ChatTemplate is the ChatML chat template of the byte tokenizer.
func ChatTemplate() string { return chatTemplate }

// ByteTokenizerConfigJSON is the tokenizer_config.json that goes with ByteTokenizerJSON.
func ByteTokenizerConfigJSON() ([]byte, error) {
	decoder := map[string]addedToken{}
	var extra []string
	for _, t := range addedTokens() {
		decoder[strconv.Itoa(t.ID)] = t
		if t.Special && t.Content != "<|endoftext|>" {
			extra = append(extra, t.Content)
		}
	}
	cfg := map[string]any{
		"add_bos_token":                false,
		"add_prefix_space":             false,
		"added_tokens_decoder":         decoder,
		"additional_special_tokens":    extra,
		"bos_token":                    nil,
		"chat_template":                chatTemplate,
		"clean_up_tokenization_spaces": false,
		"eos_token":                    "<|im_end|>",
		"errors":                       "replace",
		"model_max_length":             131072,
		"pad_token":                    "<|endoftext|>",
		"split_special_tokens":         false,
		"tokenizer_class":              "Qwen2Tokenizer",
		"unk_token":                    nil,
	}
	return marshalJSON(cfg)
}

// WriteByteTokenizer writes tokenizer.json and tokenizer_config.json of the byte tokenizer into dir.
func WriteByteTokenizer(dir string) error {
	tj, err := ByteTokenizerJSON()
	if err != nil {
		return err
	}
	tc, err := ByteTokenizerConfigJSON()
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, "tokenizer.json"), tj); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, "tokenizer_config.json"), tc)
}
