package tokenizer

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// The pre-tokenizer regexes this package implements by hand. Go's RE2 cannot
// express their lookahead, and a backtracking engine is ~20× slower than the
// direct scanners below. Matching is exact, so any other pattern is rejected
// at load time rather than approximated.
const (
	// Qwen2/Qwen3: one digit per piece.
	patternQwen = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// Llama 3: the same with up to three digits per piece.
	patternLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// GPT-2, what ByteLevel{use_regex: true} applies.
	patternGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// splitKind selects the scanner.
type splitKind uint8

const (
	splitNone  splitKind = iota // the whole segment is one piece
	splitLlama                  // patternQwen / patternLlama3 (maxDigits 1 / 3)
	splitGPT2                   // patternGPT2
)

// splitter cuts normalized text into the pieces the regex would match. The
// patterns match every rune, so the pieces tile the text (Isolated behaviour
// then leaves nothing between matches).
type splitter struct {
	kind      splitKind
	maxDigits int
}

// Rune classes as the Oniguruma patterns see them: \p{L} is general category
// L, \p{N} is category N, \s is the Unicode White_Space property (which has
// U+0085 and U+000B but not U+200B or U+FEFF).
const (
	clsOther   uint8 = iota // [^\s\p{L}\p{N}], also invalid UTF-8 bytes
	clsLetter               // \p{L}
	clsNumber               // \p{N}
	clsSpace                // \s other than \r and \n
	clsNewline              // \r, \n
)

var (
	bmpClassOnce sync.Once
	bmpClass     []uint8    // class of every rune below U+10000
	asciiClass   [256]uint8 // the ASCII part: an array indexed by a byte needs no bounds check
)

func classOfRune(r rune) uint8 {
	switch {
	case r == '\r' || r == '\n':
		return clsNewline
	case unicode.IsLetter(r):
		return clsLetter
	case unicode.IsNumber(r):
		return clsNumber
	case unicode.IsSpace(r): // exactly White_Space
		return clsSpace
	}
	return clsOther
}

func initClasses() {
	bmpClassOnce.Do(func() {
		t := make([]uint8, 0x10000)
		for r := range t {
			t[r] = classOfRune(rune(r))
		}
		bmpClass = t
		copy(asciiClass[:utf8.RuneSelf], t)
	})
}

// classAt returns the class and byte width of the rune at s[i].
func classAt(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	return classAtSlow(s, i)
}

func classAtSlow(s string, i int) (uint8, int) {
	r, w := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && w == 1 {
		return clsOther, 1
	}
	if r < 0x10000 {
		return bmpClass[r], w
	}
	return classOfRune(r), w
}

// run returns the end of the run of class cls starting at i.
func run(s string, i int, cls uint8) int {
	for i < len(s) {
		if b := s[i]; b < utf8.RuneSelf { // the hot loop: classAt inlined by hand
			if asciiClass[b] != cls {
				break
			}
			i++
			continue
		}
		c, w := classAtSlow(s, i)
		if c != cls {
			break
		}
		i += w
	}
	return i
}

// contraction returns the length of 's 't 're 've 'm 'll 'd at s[i] (an
// apostrophe), or 0. Case-insensitive matching follows Unicode simple case
// folding, under which U+017F LATIN SMALL LETTER LONG S is an 's'.
func contraction(s string, i int, fold bool) int {
	at := func(j int) byte {
		if i+j >= len(s) {
			return 0
		}
		c := s[i+j]
		if fold && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		return c
	}
	switch at(1) {
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v':
		if at(2) == 'e' {
			return 3
		}
	case 'l':
		if at(2) == 'l' {
			return 3
		}
	case 0xC5: // U+017F is C5 BF
		if fold && i+2 < len(s) && s[i+2] == 0xBF {
			return 3
		}
	}
	return 0
}

// next returns the end of the piece that starts at s[i], i < len(s).
func (p *splitter) next(s string, i int) int {
	switch p.kind {
	case splitLlama:
		return p.nextLlama(s, i)
	case splitGPT2:
		return nextGPT2(s, i)
	}
	return len(s)
}

func (p *splitter) nextLlama(s string, i int) int {
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if s[i] == '\'' {
		if n := contraction(s, i, true); n > 0 {
			return i + n
		}
	}
	c0, w0 := classAt(s, i)
	switch c0 {
	case clsLetter: // [^\r\n\p{L}\p{N}]?\p{L}+ without the optional rune
		return run(s, i+w0, clsLetter)
	case clsNumber: // \p{N}{1,maxDigits}
		j := i + w0
		for k := 1; k < p.maxDigits && j < len(s); k++ {
			c, w := classAt(s, j)
			if c != clsNumber {
				break
			}
			j += w
		}
		return j
	case clsOther, clsSpace: // [^\r\n\p{L}\p{N}]\p{L}+
		if j := i + w0; j < len(s) {
			if c1, w1 := classAt(s, j); c1 == clsLetter {
				return run(s, j+w1, clsLetter)
			}
		}
	}
	//  ?[^\s\p{L}\p{N}]+[\r\n]*
	j := i
	if s[i] == ' ' {
		j++
	}
	if j < len(s) {
		if c, w := classAt(s, j); c == clsOther {
			j = run(s, j+w, clsOther)
			for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
				j++
			}
			return j
		}
	}
	// What is left starts with \s. \s*[\r\n]+ backtracks to the last line
	// break of the whitespace run.
	end, lastBreak, lastStart, runes := i, -1, i, 0
	for end < len(s) {
		c, w := classAt(s, end)
		if c != clsSpace && c != clsNewline {
			break
		}
		if c == clsNewline {
			lastBreak = end
		}
		lastStart = end
		end += w
		runes++
	}
	if lastBreak >= 0 {
		return lastBreak + 1
	}
	return whitespaceTail(s, end, lastStart, runes)
}

// whitespaceTail matches \s+(?!\S)|\s+ on a whitespace run ending at end,
// of the given rune count, whose last rune starts at lastStart: before a
// non-space the run stops one rune short, leaving that rune to the next piece.
func whitespaceTail(s string, end, lastStart, runes int) int {
	if end == len(s) || runes == 1 {
		return end
	}
	return lastStart
}

func nextGPT2(s string, i int) int {
	// 's|'t|'re|'ve|'m|'ll|'d
	if s[i] == '\'' {
		if n := contraction(s, i, false); n > 0 {
			return i + n
		}
	}
	//  ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+
	j := i
	if s[i] == ' ' && i+1 < len(s) {
		j++
	}
	if c, w := classAt(s, j); c == clsLetter || c == clsNumber || c == clsOther {
		return run(s, j+w, c)
	}
	// \s+(?!\S)|\s+
	end, lastStart, runes := i, i, 0
	for end < len(s) {
		c, w := classAt(s, end)
		if c != clsSpace && c != clsNewline {
			break
		}
		lastStart = end
		end += w
		runes++
	}
	return whitespaceTail(s, end, lastStart, runes)
}
