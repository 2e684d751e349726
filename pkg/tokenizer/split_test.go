package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// The reference splitter is a small backtracking matcher that interprets the
// patterns as written, alternative by alternative, rune by rune. It shares no
// code with the scanners in split.go, only the meaning of the classes.

type refItem struct {
	pred     func(rune) bool
	min, max int
	notAhead bool // (?!pred): zero-width
}

func one(p func(rune) bool) refItem  { return refItem{pred: p, min: 1, max: 1} }
func opt(p func(rune) bool) refItem  { return refItem{pred: p, min: 0, max: 1} }
func plus(p func(rune) bool) refItem { return refItem{pred: p, min: 1, max: 1 << 30} }
func star(p func(rune) bool) refItem { return refItem{pred: p, min: 0, max: 1 << 30} }

func lit(c rune) func(rune) bool { return func(r rune) bool { return r == c } }

// fold is (?i) for one ASCII letter under Unicode simple case folding.
func fold(c rune) func(rune) bool {
	return func(r rune) bool {
		return r == c || r == unicode.ToUpper(c) || (c == 's' && r == 'ſ')
	}
}

var (
	isL     = unicode.IsLetter
	isN     = unicode.IsNumber
	isS     = unicode.IsSpace
	isCRLF  = func(r rune) bool { return r == '\r' || r == '\n' }
	isOther = func(r rune) bool { return !isS(r) && !isL(r) && !isN(r) }
	notS    = func(r rune) bool { return !isS(r) }
)

func contractions(f func(rune) func(rune) bool) [][]refItem {
	var alts [][]refItem
	for _, c := range []string{"s", "t", "re", "ve", "m", "ll", "d"} {
		alt := []refItem{one(lit('\''))}
		for _, r := range c {
			alt = append(alt, one(f(r)))
		}
		alts = append(alts, alt)
	}
	return alts
}

func llamaRef(maxDigits int) [][]refItem {
	return append(contractions(fold),
		[]refItem{opt(func(r rune) bool { return !isCRLF(r) && !isL(r) && !isN(r) }), plus(isL)},
		[]refItem{{pred: isN, min: 1, max: maxDigits}},
		[]refItem{opt(lit(' ')), plus(isOther), star(isCRLF)},
		[]refItem{star(isS), plus(isCRLF)},
		[]refItem{plus(isS), {pred: notS, notAhead: true}},
		[]refItem{plus(isS)},
	)
}

func gpt2Ref() [][]refItem {
	exact := func(c rune) func(rune) bool { return lit(c) }
	return append(contractions(exact),
		[]refItem{opt(lit(' ')), plus(isL)},
		[]refItem{opt(lit(' ')), plus(isN)},
		[]refItem{opt(lit(' ')), plus(isOther)},
		[]refItem{plus(isS), {pred: notS, notAhead: true}},
		[]refItem{plus(isS)},
	)
}

// refRune decodes like the scanners: an invalid byte is a one-byte U+FFFD,
// which is in no class but "other".
func refRune(s string, i int) (rune, int) { return utf8.DecodeRuneInString(s[i:]) }

func refMatch(s string, i int, items []refItem) int {
	if len(items) == 0 {
		return i
	}
	it := items[0]
	if it.notAhead {
		if i < len(s) {
			if r, _ := refRune(s, i); it.pred(r) {
				return -1
			}
		}
		return refMatch(s, i, items[1:])
	}
	ends := []int{i}
	for j := i; len(ends)-1 < it.max && j < len(s); {
		r, w := refRune(s, j)
		if !it.pred(r) {
			break
		}
		j += w
		ends = append(ends, j)
	}
	for k := len(ends) - 1; k >= it.min; k-- { // greedy, then backtrack
		if e := refMatch(s, ends[k], items[1:]); e >= 0 {
			return e
		}
	}
	return -1
}

// refSplit returns the piece boundaries of s: the first alternative that
// matches at each position (the patterns match every rune, so matches tile s).
func refSplit(tb testing.TB, alts [][]refItem, s string) []int {
	var ends []int
	for i := 0; i < len(s); {
		e := -1
		for _, alt := range alts {
			if e = refMatch(s, i, alt); e > i {
				break
			}
		}
		if e <= i {
			tb.Fatalf("reference: nothing matches at %d of %q", i, s)
		}
		ends = append(ends, e)
		i = e
	}
	return ends
}

func fastSplit(sp splitter, s string) []int {
	var ends []int
	for i := 0; i < len(s); {
		i = sp.next(s, i)
		ends = append(ends, i)
	}
	return ends
}

var splitters = []struct {
	name string
	fast splitter
	ref  [][]refItem
}{
	{"qwen", splitter{kind: splitLlama, maxDigits: 1}, llamaRef(1)},
	{"llama3", splitter{kind: splitLlama, maxDigits: 3}, llamaRef(3)},
	{"gpt2", splitter{kind: splitGPT2}, gpt2Ref()},
}

func checkSplit(t *testing.T, s string) {
	t.Helper()
	initClasses()
	for _, sp := range splitters {
		want := refSplit(t, sp.ref, s)
		if got := fastSplit(sp.fast, s); !slices.Equal(got, want) {
			t.Fatalf("%s: split(%q)\n got %q\nwant %q", sp.name, s, pieces(s, got), pieces(s, want))
		}
	}
}

func pieces(s string, ends []int) []string {
	var out []string
	start := 0
	for _, e := range ends {
		out = append(out, s[start:e])
		start = e
	}
	return out
}

// splitEdgeCases are the corners of the patterns: contractions (folded,
// partial), the optional rune before letters, digit groups, whitespace runs
// before text, line breaks and end of text, \s membership of U+0085/U+000B
// (yes) and U+200B/U+FEFF (no), invalid UTF-8.
var splitEdgeCases = []string{
	"", "a", " ", "  ", "'", "'s", "'S", "'ſ", "'RE", "'rE", "'l", "'ll", "'LL", "'x", "don't", "DON'T", "they're", "'ve'm'd",
	"12345", "1 2", "a1b2", "  x", "   x", "\t\tx", " \n x", "x  \n\n  ", "\r\n\r\n", "a\r\n", "  \r\n  ", "!!!\n\n\nx",
	" !!", "!! ", "\u0085x", "x\u0085", ".\u0085.", "\vx", "\u200bx", "\ufeffx", "a\u3000b", "\u3000\u3000a",
	"é", "e\u0301", "\u0301x", "①②", "²x", "\xff\xfe", "a\xffb", "\xe2\x82", "x\xe2\x82\xac", "'\xff", "𝟙𝟚", "你好世界", "👍🏽👍",
	"if x > 0:\n    return x\n", "{\"a\": [1, 2]}", "<|im_start|>user\nhi<|im_end|>",
}

func TestSplitReference(t *testing.T) {
	for _, s := range splitEdgeCases {
		checkSplit(t, s)
	}
	for _, c := range corpusStrings(t) {
		checkSplit(t, c.Text)
	}
}

// TestSplitRandom checks random strings over an alphabet that hits every
// class boundary; FuzzSplit explores further.
func TestSplitRandom(t *testing.T) {
	alphabet := []string{"a", "Z", "é", "你", "1", "²", " ", " ", "\t", "\n", "\r", "\u0085", "\u3000", "\u200b", "'", "s", "S", "ſ", "l", "r", "e", "!", ".", "😀", "\xff", "\u0301"}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		var sb strings.Builder
		for n := rng.IntN(12); n > 0; n-- {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		checkSplit(t, sb.String())
	}
}

func FuzzSplit(f *testing.F) {
	for _, s := range splitEdgeCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 256 { // the reference backtracks
			s = s[:256]
		}
		checkSplit(t, s)
	})
}
