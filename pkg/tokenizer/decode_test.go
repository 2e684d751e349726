package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestLossy pins the replacement of invalid UTF-8: one U+FFFD per maximal
// invalid subpart, the expectations taken from Python's
// bytes.decode("utf-8", "replace").
func TestLossy(t *testing.T) {
	const r = "\uFFFD"
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"abc", "abc"},
		{"a\xf0\x9f\x98\x80b", "a😀b"},
		{"\xe2\x82", r},
		{"\xe2\x82A", r + "A"},
		{"\xf0\x9f\x98", r},
		{"\xed\xa0\x80", r + r + r},
		{"\xc0\xaf", r + r},
		{"\xf4\x90\x80\x80", r + r + r + r},
		{"\xff", r},
		{"\xe0\x80\x80", r + r + r},
		{"\xf0\x80", r + r},
		{"\xe1\x80\xe1\x80\x80", r + "က"},
		{"\x80\x80", r + r},
	} {
		got, n := appendLossy(nil, []byte(c.in), true)
		if string(got) != c.want || n != len(c.in) {
			t.Errorf("appendLossy(%q) = %q, %d; want %q, %d", c.in, got, n, c.want, len(c.in))
		}
	}
}

// streamCheck decodes ids one at a time and checks every chunk is whole
// UTF-8 and the chunks add up to the one-shot Decode.
func streamCheck(t *testing.T, tok *Tokenizer, ids []int32, o DecodeOptions) {
	t.Helper()
	d := NewDecoderWith(tok, o)
	var sb strings.Builder
	for i, id := range ids {
		chunk := d.Add(id)
		if !utf8.ValidString(chunk) {
			t.Fatalf("Add(ids[%d]=%d) = %q: broken UTF-8", i, id, chunk)
		}
		sb.WriteString(chunk)
	}
	tail := d.Flush()
	if !utf8.ValidString(tail) {
		t.Fatalf("Flush() = %q: broken UTF-8", tail)
	}
	sb.WriteString(tail)
	if want := tok.DecodeWith(ids, o); sb.String() != want {
		t.Fatalf("stream of %v = %q, Decode = %q", ids, sb.String(), want)
	}
	if rest := d.Flush(); rest != "" {
		t.Fatalf("second Flush() = %q", rest)
	}
}

func TestDecoderStream(t *testing.T) {
	tok := qwen(t)
	for _, c := range corpusStrings(t) {
		streamCheck(t, tok, c.IDs, DecodeOptions{})
		streamCheck(t, tok, c.IDs, DecodeOptions{SkipSpecial: true})
	}
	// Byte tokens: an emoji streams as nothing until its last byte.
	emoji := "😀"
	d := NewDecoder(tok)
	for i := 0; i < len(emoji)-1; i++ {
		if got := d.Add(tok.byteID[emoji[i]]); got != "" {
			t.Fatalf("byte %d of an emoji streamed %q", i, got)
		}
	}
	if got := d.Add(tok.byteID[emoji[len(emoji)-1]]); got != emoji {
		t.Fatalf("last byte of an emoji streamed %q", got)
	}
	// An unfinished character is U+FFFD at Flush.
	d.Add(tok.byteID[0xE4])
	if got := d.Flush(); got != "\uFFFD" {
		t.Fatalf("Flush of a lone lead byte = %q", got)
	}
}

// FuzzDecoder streams arbitrary ids, biased to single-byte tokens so that
// characters split and break in every way.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte("hello"))
	f.Add([]byte("\xf0\x9f\x98\x80\xe4\xbd"))
	f.Add([]byte{0xff, 0x12, 0x34, 0xed, 0xa0, 0x80})
	tok := qwen(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var ids []int32
		for i := 0; i < len(data); i++ {
			if data[i] < 0xF8 || i+2 >= len(data) {
				ids = append(ids, tok.byteID[data[i]])
				continue
			}
			ids = append(ids, int32(int(data[i+1])<<8|int(data[i+2]))*3%int32(tok.VocabSize()+5)) // a few unknown ids too
			i += 2
		}
		streamCheck(t, tok, ids, DecodeOptions{})
		streamCheck(t, tok, ids, DecodeOptions{SkipSpecial: true})
	})
}
