package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// spec describes a small byte-level tokenizer.json: the 256 byte symbols at
// ids 0-255 (id = byte value), the given merges and added tokens from id 256.
type spec struct {
	merges       [][2]string // in the byte alphabet, e.g. {"Ġ", "t"}
	extraVocab   []string    // entries no merge produces
	stringMerges bool        // write merges as "a b" instead of [a, b]
	added        []map[string]any
	normalizer   any
	preTokenizer any
	decoder      any
	model        map[string]any // extra model fields
}

var (
	byteLevelNoRegex = map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
	qwenPre          = map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Split", "pattern": map[string]any{"Regex": patternQwen}, "behavior": "Isolated", "invert": false},
		byteLevelNoRegex,
	}}
)

func (s spec) json(tb testing.TB) []byte {
	tb.Helper()
	vocab := map[string]int{}
	for b := range 256 {
		vocab[string(byteToRune[b])] = b
	}
	next := 256
	var merges []any
	for _, m := range s.merges {
		if _, ok := vocab[m[0]+m[1]]; !ok {
			vocab[m[0]+m[1]] = next
			next++
		}
		if s.stringMerges {
			merges = append(merges, m[0]+" "+m[1])
		} else {
			merges = append(merges, []string{m[0], m[1]})
		}
	}
	for _, v := range s.extraVocab {
		vocab[v] = next
		next++
	}
	var added []any
	for i, a := range s.added {
		tok := map[string]any{"id": next + i, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
		for k, v := range a {
			tok[k] = v
		}
		added = append(added, tok)
	}
	model := map[string]any{"type": "BPE", "vocab": vocab, "merges": merges, "byte_fallback": false, "ignore_merges": false}
	for k, v := range s.model {
		model[k] = v
	}
	doc := map[string]any{
		"version": "1.0", "added_tokens": added, "normalizer": s.normalizer,
		"pre_tokenizer": or(s.preTokenizer, qwenPre), "post_processor": byteLevelNoRegex,
		"decoder": or(s.decoder, byteLevelNoRegex), "model": model,
	}
	out, err := json.Marshal(doc)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func or(v, def any) any {
	if v == nil {
		return def
	}
	return v
}

func mustNew(tb testing.TB, s spec, config string) *Tokenizer {
	tb.Helper()
	tok, err := New(s.json(tb), []byte(config))
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// byteIDs is the ids of s under a merge-less byte tokenizer.
func byteIDs(s string) []int32 {
	ids := make([]int32, len(s))
	for i := range ids {
		ids[i] = int32(s[i])
	}
	return ids
}

func cat(parts ...[]int32) []int32 { return slices.Concat(parts...) }

const synthConfig = `{"add_bos_token": false, "bos_token": null, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
 "chat_template": "{{ messages }}", "added_tokens_decoder": {"256": {"content": "<|endoftext|>", "special": true},
 "259": {"content": "<|extra|>", "lstrip": false, "rstrip": false, "normalized": false, "single_word": false, "special": true}}}`

// TestByteTokenizer is the shape of the synthetic default model's tokenizer:
// no merges, NFC, the Qwen split, added tokens from id 256.
func TestByteTokenizer(t *testing.T) {
	s := spec{normalizer: map[string]any{"type": "NFC"}, added: []map[string]any{
		{"content": "<|endoftext|>"}, {"content": "<|im_start|>"}, {"content": "<|im_end|>"},
	}}
	tok := mustNew(t, s, synthConfig)
	if tok.VocabSize() != 260 {
		t.Errorf("VocabSize = %d, want 260 (the config adds <|extra|>)", tok.VocabSize())
	}
	text := "<|im_start|>user\nhe\u0301llo 😀<|im_end|><|extra|>"
	want := cat([]int32{257}, byteIDs("user\nhéllo 😀"), []int32{258, 259})
	if got := tok.Encode(text); !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	if got := tok.EncodeOrdinary("<|im_end|>"); !slices.Equal(got, byteIDs("<|im_end|>")) {
		t.Errorf("EncodeOrdinary = %v", got)
	}
	if got := tok.Decode(want); got != "<|im_start|>user\nhéllo 😀<|im_end|><|extra|>" {
		t.Errorf("Decode = %q", got)
	}
	sp := tok.Special()
	if got := tok.SpecialIDs(); !slices.Equal(got, []int32{256, 257, 258, 259}) {
		t.Errorf("SpecialIDs = %v", got)
	}
	if sp.EOSID != 258 || sp.PADID != 256 || sp.BOSID != -1 {
		t.Errorf("Special = %+v", sp)
	}
}

// TestIgnoreMerges: with ignore_merges a piece that is a vocabulary entry is
// one token even when no merge sequence reaches it.
func TestIgnoreMerges(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		s := spec{merges: [][2]string{{"a", "b"}}, extraVocab: []string{"abc"}, model: map[string]any{"ignore_merges": ignore}}
		tok := mustNew(t, s, "")
		var got []string
		for _, id := range tok.Encode("abc abcd") {
			got = append(got, string(tok.TokenBytes(id)))
		}
		want := []string{"ab", "c", " ", "ab", "c", "d"}
		if ignore {
			want = []string{"abc", " ", "ab", "c", "d"}
		}
		if !slices.Equal(got, want) {
			t.Errorf("ignore_merges %v: Encode = %q, want %q", ignore, got, want)
		}
	}
}

func TestMergeForms(t *testing.T) {
	// json.Marshal writes "<" as \u003c, so the last merge is read through
	// the escaped-string path.
	merges := [][2]string{{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"\"", "<"}}
	for _, stringForm := range []bool{false, true} {
		tok := mustNew(t, spec{merges: merges, stringMerges: stringForm}, "")
		var got []string
		for _, id := range tok.Encode(" the then \"<") {
			got = append(got, string(tok.TokenBytes(id)))
		}
		if want := []string{" the", " the", "n", " ", "\"<"}; !slices.Equal(got, want) {
			t.Errorf("string form %v: Encode = %q, want %q", stringForm, got, want)
		}
	}
}

// TestPreTokenizers covers the ByteLevel-only variants: the GPT-2 regex
// (use_regex true) keeps " 12" together where the Qwen split has one digit
// per piece; add_prefix_space prepends a space to each segment.
func TestPreTokenizers(t *testing.T) {
	merges := [][2]string{{"Ġ", "1"}, {"Ġ1", "2"}, {"1", "2"}}
	gpt2 := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}
	prefix := map[string]any{"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}
	added := []map[string]any{{"content": "<s>"}}
	for _, c := range []struct {
		name string
		pre  any
		text string
		want []string
	}{
		{"qwen", nil, "a 12", []string{"a", " ", "1", "2"}},
		{"gpt2", gpt2, "a 12", []string{"a", " 12"}},
		{"gpt2 seq", map[string]any{"type": "Sequence", "pretokenizers": []any{gpt2}}, "12 12", []string{"12", " 12"}},
		{"prefix", prefix, "12<s>12", []string{" 12", "<s>", " 12"}},
		{"no regex", byteLevelNoRegex, "a 12", []string{"a", " 12"}},
	} {
		tok := mustNew(t, spec{merges: merges, preTokenizer: c.pre, added: added}, "")
		var got []string
		for _, id := range tok.Encode(c.text) {
			got = append(got, string(tok.TokenBytes(id)))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: Encode(%q) = %q, want %q", c.name, c.text, got, c.want)
		}
	}
}

// TestAddedTokenFlags follows Hugging Face's AddedVocabulary: lstrip and
// rstrip swallow the whitespace beside a match, single_word only matches
// between non-word characters, normalized tokens match after NFC.
func TestAddedTokenFlags(t *testing.T) {
	const m = 256 // the one added token's id
	for _, c := range []struct {
		name  string
		token map[string]any
		text  string
		want  []int32
	}{
		{"plain", nil, "a <m> b", cat(byteIDs("a "), []int32{m}, byteIDs(" b"))},
		{"lstrip", map[string]any{"lstrip": true}, "a \t<m> b", cat(byteIDs("a"), []int32{m}, byteIDs(" b"))},
		{"lstrip at start", map[string]any{"lstrip": true}, "  <m>", []int32{m}},
		{"rstrip", map[string]any{"rstrip": true}, "a <m> \n b", cat(byteIDs("a "), []int32{m}, byteIDs("b"))},
		{"both", map[string]any{"lstrip": true, "rstrip": true}, "a <m> b <m>", cat(byteIDs("a"), []int32{m}, byteIDs("b"), []int32{m})},
		{"single word alone", map[string]any{"single_word": true}, "a <m> b", cat(byteIDs("a "), []int32{m}, byteIDs(" b"))},
		{"single word in word", map[string]any{"single_word": true}, "x<m> <m>y <m>", cat(byteIDs("x<m> <m>y "), []int32{m})},
		// Rust's \w: connector punctuation, marks and decimal digits are word
		// characters, other numbers and dashes are not.
		{"single word \\w", map[string]any{"single_word": true}, "_<m> e\u0301<m> 1<m> ²<m> -<m>",
			cat(byteIDs("_<m> e\u0301<m> 1<m> ²"), []int32{m}, byteIDs(" -"), []int32{m})},
		{"longest first", nil, "<m><m>>", cat([]int32{m, m}, byteIDs(">"))},
	} {
		tok := map[string]any{"content": "<m>"}
		for k, v := range c.token {
			tok[k] = v
		}
		tk := mustNew(t, spec{added: []map[string]any{tok}}, "")
		if got := tk.Encode(c.text); !slices.Equal(got, c.want) {
			t.Errorf("%s: Encode(%q) = %v, want %v", c.name, c.text, got, c.want)
		}
	}

	// "Å" decomposed in the input: a normalized token matches it after NFC,
	// a raw one does not.
	nfc := map[string]any{"type": "NFC"}
	for _, normalized := range []bool{true, false} {
		tk := mustNew(t, spec{normalizer: nfc, added: []map[string]any{{"content": "Å", "normalized": normalized}}}, "")
		got := tk.Encode("xA\u030Ay")
		want := cat(byteIDs("x"), []int32{256}, byteIDs("y"))
		if !normalized {
			want = byteIDs("xÅy")
		}
		if !slices.Equal(got, want) {
			t.Errorf("normalized=%v: Encode = %v, want %v", normalized, got, want)
		}
	}

	// Leftmost-longest between overlapping tokens.
	tk := mustNew(t, spec{added: []map[string]any{{"content": "<a>"}, {"content": "<a><b>"}, {"content": "<b>"}}}, "")
	if got, want := tk.Encode("<a><b><b>"), []int32{257, 258}; !slices.Equal(got, want) {
		t.Errorf("overlapping: Encode = %v, want %v", got, want)
	}
}

func TestLoadErrors(t *testing.T) {

	for _, c := range []struct {
		name, want string
		doc        func() []byte
	}{
		{"bad json", "tokenizer.json", func() []byte { return []byte("{") }},
		{"regex", "Split regex", func() []byte {
			pre := map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\w+|\s+`}, "behavior": "Isolated"},
				byteLevelNoRegex}}
			return spec{preTokenizer: pre}.json(t)
		}},
		{"behavior", "behavior", func() []byte {
			pre := map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Split", "pattern": map[string]any{"Regex": patternQwen}, "behavior": "Removed"},
				byteLevelNoRegex}}
			return spec{preTokenizer: pre}.json(t)
		}},
		{"metaspace", "Metaspace", func() []byte { return spec{preTokenizer: map[string]any{"type": "Metaspace"}}.json(t) }},
		{"nfkc", "NFKC", func() []byte { return spec{normalizer: map[string]any{"type": "NFKC"}}.json(t) }},
		{"decoder", "decoder", func() []byte { return spec{decoder: map[string]any{"type": "WordPiece"}}.json(t) }},
		{"model", "WordPiece", func() []byte { return spec{model: map[string]any{"type": "WordPiece"}}.json(t) }},
		{"byte fallback", "byte_fallback", func() []byte { return spec{model: map[string]any{"byte_fallback": true}}.json(t) }},
		{"merge", "not in vocab", func() []byte { return spec{model: map[string]any{"merges": []any{"x yz"}}}.json(t) }},
		{"merge shape", "merge 0", func() []byte { return spec{model: map[string]any{"merges": []any{[]string{"a"}}}}.json(t) }},
		{"missing byte", "byte-level symbol", func() []byte { return spec{model: map[string]any{"vocab": map[string]int{"a": 0}}}.json(t) }},
		{"collision", "has the id", func() []byte {
			doc := strings.Replace(string(spec{added: []map[string]any{{"content": "<m>"}}}.json(t)), `"id":256`, `"id":65`, 1)
			return []byte(doc)
		}},
		{"sparse", "sparse", func() []byte {
			return []byte(strings.Replace(string(spec{added: []map[string]any{{"content": "<m>"}}}.json(t)), `"id":256`, `"id":9000000`, 1))
		}},
		{"range", "out-of-range", func() []byte {
			return []byte(strings.Replace(string(spec{added: []map[string]any{{"content": "<m>"}}}.json(t)), `"id":256`, `"id":-4`, 1))
		}},
	} {
		_, err := New(c.doc(), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, err, c.want)
		}
	}
	for _, cfg := range []string{`{`, `{"eos_token": "<nope>"}`, `{"added_tokens_decoder": {"x": {"content": "zz"}}}`} {
		if _, err := New(spec{}.json(t), []byte(cfg)); err == nil || !strings.Contains(err.Error(), "tokenizer_config.json") {
			t.Errorf("config %s: err = %v", cfg, err)
		}
	}
}

func TestConfigForms(t *testing.T) {
	s := spec{added: []map[string]any{{"content": "<s>"}, {"content": "</s>"}}}
	cfg := `{"bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>", "add_bos_token": true,
	 "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]}`
	tok := mustNew(t, s, cfg)
	sp := tok.Special()
	if sp.BOS != "<s>" || sp.BOSID != 256 || sp.EOSID != 257 || !sp.AddBOS {
		t.Errorf("Special = %+v", sp)
	}
}

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Errorf("Load of an empty dir: %v", err)
	}
	write("tokenizer.json", string(spec{}.json(t)))
	if _, err := Load(dir); err != nil {
		t.Fatalf("Load without config: %v", err)
	}
	write("tokenizer_config.json", `{"eos_token": "a"}`)
	tok, err := Load(dir)
	if err != nil || tok.Special().EOS != "a" {
		t.Fatalf("Load: %v, special %+v", err, tok.Special())
	}
}

// FuzzLoad feeds corrupted tokenizer.json (and config) to New: it may fail,
// never panic, and what loads must encode and decode without panicking.
func FuzzLoad(f *testing.F) {
	f.Add(spec{normalizer: map[string]any{"type": "NFC"}, merges: [][2]string{{"a", "b"}, {"ab", "c"}},
		added: []map[string]any{{"content": "<m>", "lstrip": true}, {"content": "x", "single_word": true, "normalized": true}}}.json(f), []byte(synthConfig))
	f.Add(spec{stringMerges: true, merges: [][2]string{{"Ġ", "t"}}, preTokenizer: map[string]any{"type": "ByteLevel", "add_prefix_space": true}}.json(f), []byte(`{}`))
	f.Add([]byte(`{"model": {"vocab": {}, "merges": []}}`), []byte(`{"chat_template": [{"name": "default"}]}`))
	f.Fuzz(func(t *testing.T, doc, cfg []byte) {
		tok, err := New(doc, cfg)
		if err != nil {
			return
		}
		for _, s := range []string{"abc <m> x\u030A 12", "", "\xff<|im_end|>"} {
			ids := tok.Encode(s)
			tok.Decode(append(ids, -1, int32(tok.VocabSize())))
			tok.EncodeOrdinary(s)
		}
	})
}
