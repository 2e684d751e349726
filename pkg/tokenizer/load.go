package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ellm-dev/ellm/pkg/hfdir"
)

// The subset of tokenizer.json this package reads. Fields that change the
// result and are not implemented are checked and rejected, never ignored.
type fileJSON struct {
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
	Model         modelJSON        `json:"model"`
}

type addedTokenJSON struct {
	ID         *int64 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized *bool  `json:"normalized"`
	Special    bool   `json:"special"`
}

type modelJSON struct {
	Type                    string          `json:"type"`
	Vocab                   json.RawMessage `json:"vocab"`  // parsed by parseVocab
	Merges                  json.RawMessage `json:"merges"` // parsed by parseMerges: 150k small values
	Dropout                 *float64        `json:"dropout"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	ByteFallback            bool            `json:"byte_fallback"`
	IgnoreMerges            bool            `json:"ignore_merges"`
}

// componentJSON is any normalizer, pre-tokenizer, post-processor or decoder.
type componentJSON struct {
	Type           string            `json:"type"`
	Normalizers    []json.RawMessage `json:"normalizers"`
	Pretokenizers  []json.RawMessage `json:"pretokenizers"`
	Processors     []json.RawMessage `json:"processors"`
	Decoders       []json.RawMessage `json:"decoders"`
	Pattern        *patternJSON      `json:"pattern"`
	Behavior       string            `json:"behavior"`
	Invert         bool              `json:"invert"`
	AddPrefixSpace bool              `json:"add_prefix_space"`
	UseRegex       *bool             `json:"use_regex"`
}

type patternJSON struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

type configJSON struct {
	BOSToken           json.RawMessage           `json:"bos_token"`
	EOSToken           json.RawMessage           `json:"eos_token"`
	PADToken           json.RawMessage           `json:"pad_token"`
	UNKToken           json.RawMessage           `json:"unk_token"`
	AddBOSToken        *bool                     `json:"add_bos_token"`
	AddEOSToken        *bool                     `json:"add_eos_token"`
	AddedTokensDecoder map[string]addedTokenJSON `json:"added_tokens_decoder"`
}

// maxVocab bounds token ids so a corrupted file cannot make us allocate
// gigabytes.
const maxVocab = 1 << 24

// Load reads dir/tokenizer.json and, when present, dir/tokenizer_config.json
// (its added tokens and special tokens; the chat template is pkg/chat's).
func Load(dir string) (*Tokenizer, error) {
	tj, err := hfdir.ReadFile(dir, "tokenizer.json")
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	cj, err := hfdir.ReadFile(dir, "tokenizer_config.json")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	t, err := New(tj, cj)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", dir, err)
	}
	return t, nil
}

// New builds a tokenizer from the contents of tokenizer.json and
// tokenizer_config.json (config may be empty).
func New(tokenizerJSON, configJSON []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(tokenizerJSON, &f); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	var cfg configJSONDoc
	if len(bytes.TrimSpace(configJSON)) > 0 {
		if err := json.Unmarshal(configJSON, &cfg.configJSON); err != nil {
			return nil, fmt.Errorf("tokenizer_config.json: %w", err)
		}
		cfg.present = true
	}
	t := &Tokenizer{cache: newWordCache()}
	if err := t.setModel(&f.Model); err != nil {
		return nil, fmt.Errorf("tokenizer.json: model: %w", err)
	}
	if err := t.setNormalizer(f.Normalizer); err != nil {
		return nil, fmt.Errorf("tokenizer.json: normalizer: %w", err)
	}
	if err := t.setPreTokenizer(f.PreTokenizer); err != nil {
		return nil, fmt.Errorf("tokenizer.json: pre_tokenizer: %w", err)
	}
	if err := checkByteLevel(f.PostProcessor, true); err != nil {
		return nil, fmt.Errorf("tokenizer.json: post_processor: %w", err)
	}
	if err := checkByteLevel(f.Decoder, false); err != nil {
		return nil, fmt.Errorf("tokenizer.json: decoder: %w", err)
	}
	added := f.AddedTokens
	if cfg.present {
		var err error
		if added, err = mergeAddedTokens(added, cfg.AddedTokensDecoder); err != nil {
			return nil, fmt.Errorf("tokenizer_config.json: added_tokens_decoder: %w", err)
		}
	}
	if err := t.setAddedTokens(added); err != nil {
		return nil, fmt.Errorf("tokenizer.json: added_tokens: %w", err)
	}
	if err := t.buildTokenBytes(); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if cfg.present {
		if err := t.setConfig(&cfg.configJSON); err != nil {
			return nil, fmt.Errorf("tokenizer_config.json: %w", err)
		}
	}
	initClasses()
	return t, nil
}

type configJSONDoc struct {
	configJSON
	present bool
}

func (t *Tokenizer) setModel(m *modelJSON) error {
	if m.Type != "" && m.Type != "BPE" {
		return fmt.Errorf("type %q not supported (only BPE)", m.Type)
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return errors.New("BPE dropout not supported")
	}
	if m.ByteFallback {
		return errors.New("byte_fallback not supported")
	}
	if (m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "") || (m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "") {
		return errors.New("continuing_subword_prefix / end_of_word_suffix not supported")
	}
	vocab, err := parseVocab(m.Vocab)
	if err != nil {
		return err
	}
	if len(vocab) == 0 {
		return errors.New("empty vocab")
	}
	t.vocab = vocab
	for _, id := range vocab {
		t.vocabSize = max(t.vocabSize, int(id)+1)
	}
	if err := t.checkDense(len(t.vocab)); err != nil {
		return err
	}
	for b := range 256 {
		id, ok := t.vocab[string(byteToRune[b])]
		if !ok {
			return fmt.Errorf("vocab lacks the byte-level symbol %q for byte 0x%02x", byteToRune[b], b)
		}
		t.byteID[b] = id
	}
	t.ignoreMerges = m.IgnoreMerges
	merges, err := parseMerges(m.Merges)
	if err != nil {
		return err
	}
	t.merges = newMergeTable(len(merges))
	var ab []byte
	for rank, mg := range merges {
		ab = append(append(ab[:0], mg[0]...), mg[1]...)
		ia, oka := t.vocab[string(mg[0])]
		ib, okb := t.vocab[string(mg[1])]
		im, okm := t.vocab[string(ab)]
		if !oka || !okb || !okm {
			return fmt.Errorf("merge %d (%q %q): token not in vocab", rank, mg[0], mg[1])
		}
		t.merges.put(ia, ib, rank, im)
	}
	t.merges.checkOrdered(t.vocabSize)
	return nil
}

// parseMerges reads the merges array, whose elements are spelled "a b" or
// ["a", "b"]. It scans the JSON itself because decoding 150k small values
// through encoding/json dominates the load time; the tokens it returns are
// mostly slices of raw.
func parseMerges(raw json.RawMessage) ([][2][]byte, error) {
	if isNull(raw) {
		return nil, nil
	}
	p := jsonScanner{b: raw}
	if !p.consume('[') {
		return nil, errors.New("merges: not an array")
	}
	var out [][2][]byte
	for p.skipSpace(); !p.consume(']'); p.skipSpace() {
		if len(out) > 0 && !p.consume(',') {
			return nil, fmt.Errorf("merge %d: want ',' at byte %d", len(out), p.i)
		}
		var m [2][]byte
		var err error
		switch {
		case p.consume('['):
			if m[0], err = p.strBytes(); err == nil && p.consume(',') {
				if m[1], err = p.strBytes(); err == nil && !p.consume(']') {
					err = errors.New("want [a, b]")
				}
			} else if err == nil {
				err = errors.New("want [a, b]")
			}
		default:
			var s []byte
			if s, err = p.strBytes(); err == nil {
				if bytes.Count(s, []byte{' '}) != 1 {
					err = fmt.Errorf("%q is not two space-separated tokens", s)
				} else {
					sp := bytes.IndexByte(s, ' ')
					m = [2][]byte{s[:sp], s[sp+1:]}
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("merge %d: %w", len(out), err)
		}
		out = append(out, m)
	}
	return out, nil
}

// parseVocab reads the vocab object {"token": id, ...}; like parseMerges it
// scans the JSON itself, which makes loading several times faster.
func parseVocab(raw json.RawMessage) (map[string]int32, error) {
	if isNull(raw) {
		return nil, nil
	}
	p := jsonScanner{b: raw}
	if !p.consume('{') {
		return nil, errors.New("vocab: not an object")
	}
	vocab := make(map[string]int32, bytes.Count(raw, []byte{':'}))
	for p.skipSpace(); !p.consume('}'); p.skipSpace() {
		if len(vocab) > 0 && !p.consume(',') {
			return nil, fmt.Errorf("vocab: want ',' at byte %d", p.i)
		}
		tok, err := p.str()
		if err != nil {
			return nil, fmt.Errorf("vocab: %w", err)
		}
		if !p.consume(':') {
			return nil, fmt.Errorf("vocab %q: want ':'", tok)
		}
		id, err := p.int()
		if err != nil {
			return nil, fmt.Errorf("vocab %q: %w", tok, err)
		}
		vocab[tok] = id
	}
	return vocab, nil
}

// jsonScanner reads the few JSON shapes of a merges array from well-formed
// input (encoding/json has already validated the document).
type jsonScanner struct {
	b []byte
	i int
}

func (p *jsonScanner) skipSpace() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\n' || p.b[p.i] == '\r' || p.b[p.i] == '\t') {
		p.i++
	}
}

func (p *jsonScanner) consume(c byte) bool {
	p.skipSpace()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// int reads a token id: a JSON number that is an integer in [0, maxVocab).
func (p *jsonScanner) int() (int32, error) {
	p.skipSpace()
	start, n := p.i, 0
	for ; p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9'; p.i++ {
		if n = 10*n + int(p.b[p.i]-'0'); n >= maxVocab {
			return 0, errors.New("id out of range")
		}
	}
	if p.i == start || (p.i < len(p.b) && strings.IndexByte(".eE-", p.b[p.i]) >= 0) {
		return 0, fmt.Errorf("id is not an integer in [0, %d)", maxVocab)
	}
	return int32(n), nil
}

// str reads a string literal.
func (p *jsonScanner) str() (string, error) {
	b, err := p.strBytes()
	return string(b), err
}

// strBytes reads a string literal: a slice of the input when it is plain,
// else decoded by encoding/json (escapes, invalid UTF-8) exactly as the rest
// of the document.
func (p *jsonScanner) strBytes() ([]byte, error) {
	p.skipSpace()
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, fmt.Errorf("want a string at byte %d", p.i)
	}
	start, plain := p.i, true
	for p.i++; p.i < len(p.b) && p.b[p.i] != '"'; p.i++ {
		if p.b[p.i] == '\\' {
			plain = false
			p.i++
		}
	}
	if p.i >= len(p.b) {
		return nil, errors.New("unterminated string")
	}
	p.i++
	lit := p.b[start:p.i]
	if plain && utf8.Valid(lit) {
		return lit[1 : len(lit)-1], nil
	}
	var s string
	err := json.Unmarshal(lit, &s)
	return []byte(s), err
}

func truncate(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

func parseComponent(raw json.RawMessage) (*componentJSON, error) {
	if isNull(raw) {
		return nil, nil
	}
	var c componentJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// flatten expands Sequence components into their parts.
func flatten(raw json.RawMessage) ([]*componentJSON, error) {
	c, err := parseComponent(raw)
	if err != nil || c == nil {
		return nil, err
	}
	if c.Type != "Sequence" {
		return []*componentJSON{c}, nil
	}
	var out []*componentJSON
	for _, part := range slices.Concat(c.Normalizers, c.Pretokenizers, c.Processors, c.Decoders) {
		cs, err := flatten(part)
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	return out, nil
}

func (t *Tokenizer) setNormalizer(raw json.RawMessage) error {
	cs, err := flatten(raw)
	if err != nil {
		return err
	}
	for _, c := range cs {
		if c.Type != "NFC" {
			return fmt.Errorf("%q not supported (only NFC)", c.Type)
		}
		t.nfc = true
	}
	return nil
}

func (t *Tokenizer) setPreTokenizer(raw json.RawMessage) error {
	cs, err := flatten(raw)
	if err != nil {
		return err
	}
	switch {
	case len(cs) == 1 && cs[0].Type == "ByteLevel":
		bl := cs[0]
		if bl.UseRegex == nil || *bl.UseRegex {
			t.split = splitter{kind: splitGPT2}
		}
		t.prefixSpace = bl.AddPrefixSpace
		return nil
	case len(cs) == 2 && cs[0].Type == "Split" && cs[1].Type == "ByteLevel":
		sp, bl := cs[0], cs[1]
		if (bl.UseRegex == nil || *bl.UseRegex) || bl.AddPrefixSpace {
			return errors.New("ByteLevel after Split must have use_regex and add_prefix_space false")
		}
		if sp.Behavior != "Isolated" || sp.Invert {
			return fmt.Errorf("Split behavior %q invert %v not supported (only Isolated)", sp.Behavior, sp.Invert)
		}
		if sp.Pattern == nil || sp.Pattern.Regex == nil {
			return errors.New("Split pattern must be a Regex")
		}
		switch *sp.Pattern.Regex {
		case patternQwen:
			t.split = splitter{kind: splitLlama, maxDigits: 1}
		case patternLlama3:
			t.split = splitter{kind: splitLlama, maxDigits: 3}
		case patternGPT2:
			t.split = splitter{kind: splitGPT2}
		default:
			return fmt.Errorf("Split regex %q not supported (known: the Qwen2/3, Llama 3 and GPT-2 patterns)", *sp.Pattern.Regex)
		}
		return nil
	}
	types := make([]string, len(cs))
	for i, c := range cs {
		types[i] = c.Type
	}
	return fmt.Errorf("%v not supported (want ByteLevel, or Sequence[Split, ByteLevel])", types)
}

// checkByteLevel accepts only a ByteLevel decoder or post-processor (the
// latter only trims offsets, which do not change ids), or none for a
// post-processor.
func checkByteLevel(raw json.RawMessage, optional bool) error {
	cs, err := flatten(raw)
	if err != nil {
		return err
	}
	if len(cs) == 0 && !optional {
		return errors.New("missing (want ByteLevel)")
	}
	for _, c := range cs {
		if c.Type != "ByteLevel" {
			return fmt.Errorf("%q not supported (only ByteLevel)", c.Type)
		}
	}
	return nil
}

// mergeAddedTokens adds the entries of tokenizer_config.json's
// added_tokens_decoder that tokenizer.json lacks; the two must agree.
func mergeAddedTokens(added []addedTokenJSON, dec map[string]addedTokenJSON) ([]addedTokenJSON, error) {
	byID := make(map[int64]string, len(added))
	for _, a := range added {
		if a.ID != nil {
			byID[*a.ID] = a.Content
		}
	}
	var extra []addedTokenJSON
	for key, a := range dec {
		id, err := strconv.ParseInt(key, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("id %q: %w", key, err)
		}
		if c, ok := byID[id]; ok {
			if c != a.Content {
				return nil, fmt.Errorf("id %d is %q here but %q in tokenizer.json", id, a.Content, c)
			}
			continue
		}
		a.ID = &id
		extra = append(extra, a)
	}
	slices.SortFunc(extra, func(a, b addedTokenJSON) int { return int(*a.ID - *b.ID) })
	return append(slices.Clip(added), extra...), nil
}

func (t *Tokenizer) setAddedTokens(added []addedTokenJSON) error {
	t.added = make(map[string]int32, len(added))
	var raw, norm []addedToken
	for _, a := range added {
		if a.ID == nil || *a.ID < 0 || *a.ID >= maxVocab {
			return fmt.Errorf("%q: missing or out-of-range id", a.Content)
		}
		if a.Content == "" {
			return fmt.Errorf("id %d: empty content", *a.ID)
		}
		id := int32(*a.ID)
		t.vocabSize = max(t.vocabSize, int(id)+1)
		normalized := !a.Special // the transformers default
		if a.Normalized != nil {
			normalized = *a.Normalized
		}
		tok := addedToken{content: a.Content, id: id, lstrip: a.LStrip, rstrip: a.RStrip, singleWord: a.SingleWord}
		if normalized && t.nfc {
			// Matched against normalized text, so spelled normalized.
			tok.content = nfcString(tok.content)
			norm = append(norm, tok)
		} else {
			raw = append(raw, tok)
		}
		t.added[a.Content] = id
		if t.addedContent == nil {
			t.addedContent = make(map[int32]string)
		}
		t.addedContent[id] = a.Content
		if a.Special {
			t.specialIDs = append(t.specialIDs, id)
		}
	}
	if err := t.checkDense(len(t.vocab) + len(t.addedContent)); err != nil {
		return err
	}
	t.rawAdded = newAddedMatcher(raw)
	t.normAdded = newAddedMatcher(norm)
	t.special = make([]bool, t.vocabSize)
	for _, id := range t.specialIDs {
		t.special[id] = true
	}
	return nil
}

// checkDense rejects ids far beyond the token count: tables are indexed by
// id, and a corrupted id must not cost gigabytes.
func (t *Tokenizer) checkDense(tokens int) error {
	if t.vocabSize > 2*tokens+1024 {
		return fmt.Errorf("ids up to %d for %d tokens: too sparse", t.vocabSize-1, tokens)
	}
	return nil
}

// buildTokenBytes lays out the bytes of every id in one arena.
func (t *Tokenizer) buildTokenBytes() error {
	spell := make([]string, t.vocabSize)
	for tok, id := range t.vocab {
		if spell[id] != "" {
			return fmt.Errorf("vocab: id %d is both %q and %q", id, spell[id], tok)
		}
		spell[id] = tok
	}
	for id, c := range t.addedContent {
		if v := spell[id]; v != "" && v != c {
			return fmt.Errorf("added token %q has the id %d of vocab entry %q", c, id, v)
		}
		spell[id] = c
	}
	t.tokenOff = make([]uint32, t.vocabSize+1)
	t.tokenData = t.tokenData[:0]
	for id, s := range spell {
		t.tokenData = append(t.tokenData, byteLevelDecode(s)...)
		t.tokenOff[id+1] = uint32(len(t.tokenData))
	}
	t.tokenText = string(t.tokenData)
	t.wholeUTF8 = make([]bool, t.vocabSize)
	for id := range t.wholeUTF8 {
		t.wholeUTF8[id] = utf8.ValidString(t.tokenText[t.tokenOff[id]:t.tokenOff[id+1]])
	}
	return nil
}

func (t *Tokenizer) setConfig(c *configJSON) error {
	s := &t.specials
	for _, f := range []struct {
		raw  json.RawMessage
		name string
		text *string
		id   *int32
	}{
		{c.BOSToken, "bos_token", &s.BOS, &s.BOSID},
		{c.EOSToken, "eos_token", &s.EOS, &s.EOSID},
		{c.PADToken, "pad_token", &s.PAD, &s.PADID},
		{c.UNKToken, "unk_token", &s.UNK, &s.UNKID},
	} {
		*f.id = -1
		tok, err := parseTokenField(f.raw)
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		if tok == "" {
			continue
		}
		id, ok := t.TokenID(tok)
		if !ok {
			return fmt.Errorf("%s %q is not in the vocabulary", f.name, tok)
		}
		*f.text, *f.id = tok, id
	}
	s.AddBOS = c.AddBOSToken != nil && *c.AddBOSToken
	s.AddEOS = c.AddEOSToken != nil && *c.AddEOSToken
	return nil
}

// parseTokenField reads a special-token field: null, "text" or an AddedToken
// object {"content": "text", ...}.
func parseTokenField(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", fmt.Errorf("neither a string nor {\"content\": ...}: %s", truncate(raw))
	}
	return obj.Content, nil
}
