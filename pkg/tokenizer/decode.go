package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// DecodeOptions changes how ids become text.
type DecodeOptions struct {
	SkipSpecial bool // drop special added tokens (skip_special_tokens)
}

// Decode returns the text of ids, special tokens included. Byte sequences
// that are not UTF-8 become U+FFFD, one per maximal invalid subpart as in
// Rust's from_utf8_lossy and Python's errors="replace". Unknown ids are
// dropped, as Hugging Face does.
func (t *Tokenizer) Decode(ids []int32) string {
	return t.DecodeWith(ids, DecodeOptions{})
}

// DecodeWith is Decode with options.
func (t *Tokenizer) DecodeWith(ids []int32, o DecodeOptions) string {
	keep := func(id int32) bool { return !o.SkipSpecial || !t.IsSpecial(id) }
	n := 0
	for _, id := range ids {
		if keep(id) {
			n += len(t.TokenBytes(id))
		}
	}
	var sb strings.Builder
	sb.Grow(n)
	for _, id := range ids {
		if keep(id) {
			sb.Write(t.TokenBytes(id))
		}
	}
	if s := sb.String(); !utf8.ValidString(s) {
		out, _ := appendLossy(nil, []byte(s), true)
		return string(out)
	}
	return sb.String()
}

const replacement = "\uFFFD"

// appendLossy appends src to dst with each maximal invalid subpart replaced
// by U+FFFD. Unless final, a trailing incomplete character is left
// unconsumed, since more bytes may complete it; consumed says how far it got.
func appendLossy(dst, src []byte, final bool) (out []byte, consumed int) {
	i := 0
	for i < len(src) {
		if src[i] < utf8.RuneSelf {
			dst = append(dst, src[i])
			i++
			continue
		}
		if r, w := utf8.DecodeRune(src[i:]); r != utf8.RuneError || w > 1 {
			dst = append(dst, src[i:i+w]...)
			i += w
			continue
		}
		n, broken := validPrefix(src[i:])
		if !broken && !final {
			break
		}
		dst = append(dst, replacement...)
		i += max(n, 1)
	}
	return dst, i
}

// validPrefix returns the length of the longest prefix of b that begins a
// well-formed UTF-8 sequence (b[0] is not ASCII, and b is not a complete
// valid sequence), and whether that prefix is definitely broken (false: b
// ends while the sequence could still be completed).
func validPrefix(b []byte) (n int, broken bool) {
	lead := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF) // allowed range of the second byte
	switch {
	case 0xC2 <= lead && lead <= 0xDF:
		need = 1
	case lead == 0xE0:
		need, lo = 2, 0xA0
	case lead == 0xED:
		need, hi = 2, 0x9F
	case 0xE1 <= lead && lead <= 0xEF:
		need = 2
	case lead == 0xF0:
		need, lo = 3, 0x90
	case lead == 0xF4:
		need, hi = 3, 0x8F
	case 0xF1 <= lead && lead <= 0xF3:
		need = 3
	default:
		return 1, true
	}
	for k := 1; k <= need; k++ {
		if k >= len(b) {
			return k, false
		}
		if b[k] < lo || b[k] > hi {
			return k, true
		}
		lo, hi = 0x80, 0xBF
	}
	return need + 1, true // unreachable for invalid input; keeps the contract total
}

// Decoder turns a stream of ids into text, emitting only whole characters:
// the bytes of a character split across tokens (an emoji, a CJK character)
// are held until it is complete. The concatenation of everything Add and
// Flush return equals Decode of all ids.
type Decoder struct {
	t    *Tokenizer
	opts DecodeOptions
	text UTF8Stream
}

// NewDecoder returns a streaming decoder that keeps special tokens.
func NewDecoder(t *Tokenizer) *Decoder { return NewDecoderWith(t, DecodeOptions{}) }

// NewDecoderWith returns a streaming decoder with options.
func NewDecoderWith(t *Tokenizer, o DecodeOptions) *Decoder { return &Decoder{t: t, opts: o} }

// Add consumes one id and returns the text it completes (often "").
func (d *Decoder) Add(id int32) string {
	if d.opts.SkipSpecial && d.t.IsSpecial(id) {
		return ""
	}
	if d.text.empty() && id >= 0 && int(id) < len(d.t.wholeUTF8) && d.t.wholeUTF8[id] {
		// The usual case: a token of whole characters, returned without a copy.
		return d.t.tokenText[d.t.tokenOff[id]:d.t.tokenOff[id+1]]
	}
	return d.text.Write(d.t.TokenBytes(id))
}

// Flush returns what is held back, an unfinished character becoming U+FFFD,
// and resets the decoder.
func (d *Decoder) Flush() string { return d.text.Flush() }

// UTF8Stream turns bytes arriving in pieces into text without splitting a
// character: what a streaming detokenizer needs whatever the tokenizer.
// Invalid bytes become U+FFFD as in Decode.
type UTF8Stream struct {
	pending, out []byte
}

// Write consumes b and returns the text it completes.
func (s *UTF8Stream) Write(b []byte) string {
	s.pending = append(s.pending, b...)
	return s.drain(false)
}

// Flush returns what is held back, an unfinished character becoming U+FFFD.
func (s *UTF8Stream) Flush() string { return s.drain(true) }

func (s *UTF8Stream) empty() bool { return len(s.pending) == 0 }

func (s *UTF8Stream) drain(final bool) string {
	if len(s.pending) == 0 {
		return ""
	}
	var n int
	s.out, n = appendLossy(s.out[:0], s.pending, final)
	s.pending = s.pending[:copy(s.pending, s.pending[n:])]
	return string(s.out)
}
