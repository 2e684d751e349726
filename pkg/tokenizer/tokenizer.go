// Package tokenizer implements Hugging Face byte-level BPE tokenizers (the
// kind Qwen3 ships in tokenizer.json) exactly: added-token extraction, NFC,
// the pre-tokenizer regex, BPE in merge-rank order, the ByteLevel decoder,
// and a streaming detokenizer that only emits whole UTF-8 characters.
//
// Encoding follows the tokenizers library step by step: added tokens are cut
// out of the raw text leftmost-longest (honouring lstrip, rstrip,
// single_word; normalized ones are matched after normalization), each
// remaining segment is NFC-normalized, split by the pre-tokenizer regex with
// Oniguruma's classes (\s is the White_Space property), and each piece is
// byte-mapped and merged lowest rank first. Supported pre-tokenizers are
// Sequence[Split(regex, Isolated), ByteLevel] with the Qwen2/3, Llama 3 or
// GPT-2 regex, and ByteLevel alone (use_regex: the GPT-2 regex); anything
// else fails to load rather than tokenize differently.
package tokenizer

import (
	"slices"
)

// Tokenizer encodes text to token ids and back. It is safe for concurrent
// use.
type Tokenizer struct {
	vocab        map[string]int32 // model vocabulary, spelled as in tokenizer.json
	added        map[string]int32 // added tokens by content
	addedContent map[int32]string
	specialIDs   []int32
	special      []bool // by id
	vocabSize    int

	tokenData []byte   // bytes of every id, concatenated
	tokenText string   // the same as a string, sliced for zero-copy text
	tokenOff  []uint32 // id → tokenData[tokenOff[id]:tokenOff[id+1]]
	wholeUTF8 []bool   // by id: the token's bytes are valid UTF-8 on their own

	byteID       [256]int32
	merges       *mergeTable
	ignoreMerges bool
	cache        *wordCache

	nfc         bool
	split       splitter
	prefixSpace bool
	rawAdded    *addedMatcher // added tokens matched in raw text
	normAdded   *addedMatcher // added tokens matched after normalization

	specials SpecialTokens
}

// SpecialTokens are the named special tokens of tokenizer_config.json. An
// absent token has an empty text and id -1.
type SpecialTokens struct {
	BOS, EOS, PAD, UNK         string
	BOSID, EOSID, PADID, UNKID int32
	AddBOS, AddEOS             bool // add_bos_token / add_eos_token, for the caller to honour
}

// Encode returns the ids of text. Added tokens written in the text (such as
// "<|im_start|>") become their ids, as Hugging Face tokenizers do by default.
func (t *Tokenizer) Encode(text string) []int32 {
	return t.AppendEncode(nil, text)
}

// AppendEncode is Encode appending to dst.
func (t *Tokenizer) AppendEncode(dst []int32, text string) []int32 {
	return t.appendAdded(dst, text, t.rawAdded, false)
}

// EncodeOrdinary returns the ids of text with no added-token recognition:
// text that spells a special token is encoded as ordinary characters, so
// untrusted content cannot inject control tokens.
func (t *Tokenizer) EncodeOrdinary(text string) []int32 {
	return t.AppendEncodeOrdinary(nil, text)
}

// AppendEncodeOrdinary is EncodeOrdinary appending to dst.
func (t *Tokenizer) AppendEncodeOrdinary(dst []int32, text string) []int32 {
	norm, buf := t.normalizeScratch(text)
	dst = t.appendPieces(dst, norm)
	releaseScratch(buf)
	return dst
}

// appendAdded cuts the added tokens of m out of text and encodes the text in
// between: raw text is normalized next (and searched for normalized added
// tokens), normalized text goes to the pre-tokenizer.
func (t *Tokenizer) appendAdded(dst []int32, text string, m *addedMatcher, normalized bool) []int32 {
	if m == nil {
		return t.appendSegment(dst, text, normalized)
	}
	startOffset, pos := 0, 0
	for pos < len(text) {
		tok, start, stop := m.next(text, pos, startOffset)
		if tok == nil {
			break
		}
		if startOffset < start {
			dst = t.appendSegment(dst, text[startOffset:start], normalized)
		}
		dst = append(dst, tok.id)
		startOffset, pos = stop, stop
	}
	if startOffset < len(text) {
		dst = t.appendSegment(dst, text[startOffset:], normalized)
	}
	return dst
}

// appendSegment encodes text between added tokens.
func (t *Tokenizer) appendSegment(dst []int32, seg string, normalized bool) []int32 {
	if normalized {
		return t.appendPieces(dst, seg)
	}
	norm, buf := t.normalizeScratch(seg)
	dst = t.appendAdded(dst, norm, t.normAdded, true)
	releaseScratch(buf)
	return dst
}

// appendPieces pre-tokenizes normalized text and BPE-encodes each piece.
func (t *Tokenizer) appendPieces(dst []int32, s string) []int32 {
	if s == "" {
		return dst
	}
	if t.prefixSpace && s[0] != ' ' {
		s = " " + s
	}
	for i := 0; i < len(s); {
		j := t.split.next(s, i)
		dst = t.appendWord(dst, s[i:j])
		i = j
	}
	return dst
}

// appendWord appends the BPE of one pre-tokenized piece.
func (t *Tokenizer) appendWord(dst []int32, w string) []int32 {
	switch {
	case len(w) == 1:
		return append(dst, t.byteID[w[0]])
	case len(w) == 2 && !t.ignoreMerges:
		a, b := t.byteID[w[0]], t.byteID[w[1]]
		if _, id, ok := t.merges.get(a, b); ok {
			return append(dst, id)
		}
		return append(dst, a, b)
	}
	if ids, ok := t.cache.get(w); ok {
		return append(dst, ids...)
	}
	start := len(dst)
	if id, ok := t.wholeWord(w); ok {
		dst = append(dst, id)
	} else {
		dst = t.merges.merge(dst, w, &t.byteID)
	}
	if len(w) <= cacheMaxWordLen {
		t.cache.put(w, slices.Clone(dst[start:]))
	}
	return dst
}

// wholeWord implements ignore_merges: a piece that is itself in the
// vocabulary is one token.
func (t *Tokenizer) wholeWord(w string) (int32, bool) {
	if !t.ignoreMerges {
		return 0, false
	}
	id, ok := t.vocab[byteLevelEncode([]byte(w))]
	return id, ok
}

// TokenBytes returns the bytes token id stands for (nil for an unknown id).
// The slice is shared: do not modify it.
func (t *Tokenizer) TokenBytes(id int32) []byte {
	if id < 0 || int(id) >= t.vocabSize {
		return nil
	}
	lo, hi := t.tokenOff[id], t.tokenOff[id+1]
	if lo == hi {
		return nil
	}
	return t.tokenData[lo:hi:hi]
}

// TokenID returns the id of an added token's content (such as "<|im_end|>")
// or of a vocabulary entry spelled as in tokenizer.json (such as "Ġthe").
func (t *Tokenizer) TokenID(tok string) (int32, bool) {
	if id, ok := t.added[tok]; ok {
		return id, true
	}
	id, ok := t.vocab[tok]
	return id, ok
}

// IsSpecial reports whether id is an added token marked special.
func (t *Tokenizer) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(t.special) && t.special[id]
}

// SpecialIDs returns the ids of all special added tokens.
func (t *Tokenizer) SpecialIDs() []int32 { return slices.Clone(t.specialIDs) }

// VocabSize is one more than the largest token id (model vocabulary and
// added tokens). A model's embedding table may be larger.
func (t *Tokenizer) VocabSize() int { return t.vocabSize }

// Special returns the named special tokens of tokenizer_config.json.
func (t *Tokenizer) Special() SpecialTokens { return t.specials }
