package tokenizer

import (
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	"golang.org/x/text/unicode/norm"
)

// NFC as Hugging Face computes it (Rust's unicode-normalization, like
// Python's unicodedata). golang.org/x/text agrees except on runs of more than
// 30 combining marks, where it follows the Stream-Safe Text Format and
// inserts U+034F COMBINING GRAPHEME JOINER; exactNFC redoes those rare texts
// without the limit.

const cgj = "\u034F"

func nfcString(s string) string {
	if isNFC(s) {
		return s
	}
	return streamSafeFix(s, norm.NFC.String(s))
}

// isNFC is the quick check that settles almost all text without allocating.
func isNFC(s string) bool {
	return isASCII(s) || norm.NFC.QuickSpanString(s) == len(s)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// streamSafeFix returns out, x/text's NFC of src, unless x/text inserted a
// grapheme joiner (NFC itself never adds or removes one).
func streamSafeFix(src, out string) string {
	if strings.Count(out, cgj) == strings.Count(src, cgj) {
		return out
	}
	return exactNFC(src)
}

// nfcScratch is what normalizing costs: the output and norm's iterator,
// whose large reorder buffer norm.Form.AppendString would allocate per call.
type nfcScratch struct {
	buf []byte
	it  norm.Iter
}

var scratchPool = sync.Pool{New: func() any { return new(nfcScratch) }}

// normalizeScratch is normalization for the encoder: text that needs
// changing is normalized into pooled scratch, which the caller hands back
// with releaseScratch once no string of it is in use (the word cache keeps
// copies).
func (t *Tokenizer) normalizeScratch(s string) (string, *nfcScratch) {
	if !t.nfc || isNFC(s) {
		return s, nil
	}
	sc := scratchPool.Get().(*nfcScratch)
	sc.buf = sc.buf[:0]
	for sc.it.InitString(norm.NFC, s); !sc.it.Done(); {
		sc.buf = append(sc.buf, sc.it.Next()...)
	}
	out := unsafe.String(unsafe.SliceData(sc.buf), len(sc.buf))
	if fixed := streamSafeFix(s, out); fixed != out {
		releaseScratch(sc)
		return fixed, nil
	}
	return out, sc
}

func releaseScratch(sc *nfcScratch) {
	if sc != nil {
		scratchPool.Put(sc)
	}
}

// exactNFC is NFC by its definition (UAX #15): full canonical decomposition,
// canonical ordering of every run of combining marks however long, then
// canonical composition. x/text supplies the per-character data: the
// decomposition of one rune, its combining class, and whether a pair
// composes (the NFC of two runes is one rune).
func exactNFC(s string) string {
	var rs []rune
	for _, r := range s {
		rs = append(rs, []rune(norm.NFD.String(string(r)))...)
	}
	ccc := func(r rune) uint8 { return norm.NFD.PropertiesString(string(r)).CCC() }
	for i := 0; i < len(rs); {
		j := i
		for j < len(rs) && ccc(rs[j]) != 0 {
			j++
		}
		if j > i {
			slices.SortStableFunc(rs[i:j], func(a, b rune) int { return int(ccc(a)) - int(ccc(b)) })
			i = j
		} else {
			i++
		}
	}
	compose := func(a, b rune) (rune, bool) {
		if c := []rune(norm.NFC.String(string([]rune{a, b}))); len(c) == 1 {
			return c[0], true
		}
		return 0, false
	}
	if len(rs) == 0 {
		return ""
	}
	// Compose in place, as UAX #15's sample code: a mark composes with the
	// last starter unless something between them has class zero or a class
	// at least its own; a leading mark blocks everything until a starter.
	starter, last := 0, int(ccc(rs[0]))
	if last != 0 {
		last = 256
	}
	out := rs[:1]
	for _, r := range rs[1:] {
		cc := int(ccc(r))
		if c, ok := compose(out[starter], r); ok && (last < cc || last == 0) {
			out[starter] = c
			continue
		}
		if cc == 0 {
			starter = len(out)
		}
		last = cc
		out = append(out, r)
	}
	return string(out)
}
