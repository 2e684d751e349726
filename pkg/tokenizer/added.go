package tokenizer

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// addedToken is an entry of added_tokens, matched in text before BPE.
type addedToken struct {
	content                    string
	id                         int32
	lstrip, rstrip, singleWord bool
}

// addedMatcher finds added tokens leftmost-longest, as Hugging Face's
// Aho-Corasick automaton does. Added tokens are few and start with rare bytes,
// so a first-byte filter and a length-ordered candidate list beat an
// automaton here.
type addedMatcher struct {
	byFirst [256][]*addedToken // longest first
	first   int                // the first byte all tokens share, or -1
}

func newAddedMatcher(tokens []addedToken) *addedMatcher {
	if len(tokens) == 0 {
		return nil
	}
	m := &addedMatcher{first: int(tokens[0].content[0])}
	for i := range tokens {
		tok := &tokens[i]
		m.byFirst[tok.content[0]] = append(m.byFirst[tok.content[0]], tok)
		if int(tok.content[0]) != m.first {
			m.first = -1
		}
	}
	for b := range m.byFirst {
		slices.SortStableFunc(m.byFirst[b], func(x, y *addedToken) int { return len(y.content) - len(x.content) })
	}
	return m
}

// find returns the leftmost-longest raw occurrence at or after from.
func (m *addedMatcher) find(s string, from int) (*addedToken, int) {
	for i := from; i < len(s); i++ {
		if m.first >= 0 { // typically '<': let IndexByte skip the text between
			j := strings.IndexByte(s[i:], byte(m.first))
			if j < 0 {
				break
			}
			i += j
		}
		for _, tok := range m.byFirst[s[i]] {
			if len(s)-i >= len(tok.content) && s[i:i+len(tok.content)] == tok.content {
				return tok, i
			}
		}
	}
	return nil, -1
}

// next returns the next accepted occurrence of an added token at or after
// pos, with the span it covers after lstrip/rstrip (the search goes on at
// stop); startOffset is where the text not yet emitted begins. It follows Hugging Face's
// AddedVocabulary::find_matches: a single_word token touching a word
// character is skipped (and the search resumes after it), lstrip takes the
// whitespace before it back to startOffset, rstrip the whitespace after it.
func (m *addedMatcher) next(s string, pos, startOffset int) (tok *addedToken, start, stop int) {
	for {
		tok, i := m.find(s, pos)
		if tok == nil {
			return nil, 0, 0
		}
		start, stop = i, i+len(tok.content)
		pos = stop
		if tok.singleWord && (endsWithWord(s[:start]) || startsWithWord(s[stop:])) {
			continue
		}
		if tok.lstrip {
			j := start
			for j > startOffset {
				r, w := utf8.DecodeLastRuneInString(s[:j])
				if !unicode.IsSpace(r) {
					break
				}
				j -= w
			}
			start = j
		}
		if tok.rstrip {
			for stop < len(s) {
				r, w := utf8.DecodeRuneInString(s[stop:])
				if !unicode.IsSpace(r) {
					break
				}
				stop += w
			}
		}
		return tok, start, stop
	}
}

// isWordRune is \w of Rust's regex crate, which single_word uses:
// Alphabetic (letters, Nl, Other_Alphabetic), marks, decimal digits,
// connector punctuation and the joiners. Other numbers (such as "²") are not.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.In(r,
		unicode.Nl, unicode.Other_Alphabetic, unicode.Nd, unicode.Pc, unicode.Join_Control)
}

func endsWithWord(s string) bool {
	r, w := utf8.DecodeLastRuneInString(s)
	return w > 0 && isWordRune(r)
}

func startsWithWord(s string) bool {
	r, w := utf8.DecodeRuneInString(s)
	return w > 0 && isWordRune(r)
}
