package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// TestNFCLongMarks pins NFC on runs of more than 30 combining marks, where
// x/text alone would insert U+034F. Expectations from Python's
// unicodedata.normalize("NFC", s).
func TestNFCLongMarks(t *testing.T) {
	rep := func(s string, n int) string {
		out := ""
		for range n {
			out += s
		}
		return out
	}
	for _, c := range []struct{ in, want string }{
		{"a" + rep("\u0301", 40), "\u00e1" + rep("\u0301", 39)},
		{"e" + rep("\u0323\u0301", 20), "\u1eb9" + rep("\u0323", 19) + rep("\u0301", 20)},
		{"A" + rep("\u0308", 35) + "\u0301x", "\u00c4" + rep("\u0308", 34) + "\u0301x"},
		{"\u1100\u1161" + rep("\u0300", 31) + "\u11a8", "\uac00" + rep("\u0300", 31) + "\u11a8"},
		{"o" + rep("\u0344", 20) + "b", "\u00f6\u0301" + rep("\u0308\u0301", 19) + "b"},
		{rep("\u0301", 35) + "a\u0301", rep("\u0301", 35) + "\u00e1"},
		{"x" + rep("\u0315\u0300", 16) + rep("\u05b0", 3), "x" + rep("\u05b0", 3) + rep("\u0300", 16) + rep("\u0315", 16)},
		{"a\u034f" + rep("\u0301", 31), "a\u034f" + rep("\u0301", 31)},
		{"e\u0301 short", "\u00e9 short"},
	} {
		if got := nfcString(c.in); got != c.want {
			t.Errorf("nfcString(%+q) = %+q, want %+q", c.in, got, c.want)
		}
		if got := exactNFC(c.in); got != c.want {
			t.Errorf("exactNFC(%+q) = %+q, want %+q", c.in, got, c.want)
		}
		tok := &Tokenizer{nfc: true}
		got, sc := tok.normalizeScratch(c.in)
		if got != c.want {
			t.Errorf("normalizeScratch(%+q) = %+q, want %+q", c.in, got, c.want)
		}
		releaseScratch(sc)
	}
}

// exactNFC must agree with x/text wherever x/text's Stream-Safe limit does
// not apply: random strings of starters, marks of several classes, Hangul
// jamo and composition exclusions, then FuzzNFC.
func TestExactNFCRandom(t *testing.T) {
	alphabet := []rune("aeoAEOxб\u0301\u0300\u0308\u0323\u0315\u05b0\u0344\u0345\u1100\u1161\u11a8\uac00\u0958\u093c\u0915\u0b47\u0b3e\u0f73\u212b\u00c5\u1e0a")
	rng := rand.New(rand.NewPCG(7, 8))
	for range 20000 {
		rs := make([]rune, rng.IntN(12))
		for i := range rs {
			rs[i] = alphabet[rng.IntN(len(alphabet))]
		}
		checkExactNFC(t, string(rs))
	}
}

func checkExactNFC(t *testing.T, s string) {
	t.Helper()
	want := norm.NFC.String(s)
	if strings.Count(want, cgj) != strings.Count(s, cgj) {
		return // x/text applied its 30-mark limit: TestNFCLongMarks covers these
	}
	if got := exactNFC(s); got != want {
		t.Fatalf("exactNFC(%+q) = %+q, x/text %+q", s, got, want)
	}
}

func FuzzNFC(f *testing.F) {
	f.Add("e\u0301\u0323 \u1100\u1161\u11a8 \u0344")
	f.Add("\u0958\u093c\u0b47\u0b3e")
	f.Fuzz(func(t *testing.T, s string) {
		if utf8.ValidString(s) {
			checkExactNFC(t, s)
		}
	})
}
