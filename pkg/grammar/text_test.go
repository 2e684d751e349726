package grammar

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// textPatterns are guided_regex patterns: alternatives, counted
// repetitions, classes, case folding, Unicode, anchors (redundant at the
// ends, and line anchors inside), an empty match.
var textPatterns = []string{
	`(yes|no|maybe)`,
	`\d{3}-\d{4}`,
	`[a-z]{1,8}@example\.(com|org)`,
	`(?i)hello, [A-Z][a-z]{0,5}!`,
	`^-?(0|[1-9][0-9]{0,5})(\.[0-9]{1,3})?$`,
	`世界?|\p{Greek}{1,3}`,
	`a*`,
	`(?m)[a-c]{1,3}$\n^[x-z]{1,3}`,
	`(?s).{0,4}`,
	`\{"k": (true|false)\}`,
}

// textChoices is a guided_choice list: one choice a prefix of another,
// shared prefixes, a duplicate, Unicode and a newline.
var textChoices = []string{"positive", "negative", "neutral", "pos", "positive", "ja\n", "日本"}

// wholeMatch is Go's regexp anchored at both ends: the reference for
// Regex.
func wholeMatch(t testing.TB, pattern string) *regexp.Regexp {
	t.Helper()
	re, err := anchored(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return re
}

// anchored compiles pattern with Go's regexp to match whole texts only. It
// anchors the parsed pattern, not its text: text would let a \Q quote
// swallow the closing group and anchor.
func anchored(pattern string) (*regexp.Regexp, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, err
	}
	whole := &syntax.Regexp{Op: syntax.OpConcat, Flags: syntax.Perl, Sub: []*syntax.Regexp{{Op: syntax.OpBeginText}, re, {Op: syntax.OpEndText}}}
	return regexp.Compile(whole.String())
}

func textGrammars(tb testing.TB) []maskedGrammar {
	var out []maskedGrammar
	for _, p := range textPatterns {
		g, err := Regex(p)
		if err != nil {
			tb.Fatalf("%s: %v", p, err)
		}
		out = append(out, maskedGrammar{g: g, text: wholeMatch(tb, p).Match})
	}
	g, err := Choice(textChoices)
	if err != nil {
		tb.Fatal(err)
	}
	return append(out, maskedGrammar{g: g, text: func(b []byte) bool { return slices.Contains(textChoices, string(b)) }})
}

func TestRegexMatchesGo(t *testing.T) {
	texts := []string{"", "yes", "no", "maybe", "yesno", "ye", "555-1234", "555-12345", "5551234",
		"bob@example.com", "bob@example.org", "bob@example.net", "BOB@example.com", "abcdefghi@example.com",
		"hello, World!", "HeLLo, W!", "hello, world!", "hello, Worldly!",
		"0", "-0", "01", "12.5", "12.", "-123456.789", "1234567",
		"世", "世界", "界", "αβγ", "αβγδ",
		"a", "aaaa", "ab",
		"ab\nxy", "abc\nz", "ab\n", "\nxy", "abcd\nx", "ab\nxy\n",
		"\n\n\n\n", "a\nb", "12345",
		`{"k": true}`, `{"k": false}`, `{"k": null}`}
	for _, p := range textPatterns {
		g, err := Regex(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		re := wholeMatch(t, p)
		for _, text := range texts {
			prefix, whole := matches(g, text)
			if want := re.MatchString(text); whole != want {
				t.Errorf("%s on %q: whole match %v, Go's regexp %v", p, text, whole, want)
			}
			// A text is a live prefix exactly when some continuation
			// matches; where Go matches text plus a suffix, the prefix
			// must have been kept.
			for _, suffix := range []string{"", "!", "4", "m", "界", "\nx", "e.com"} {
				if re.MatchString(text+suffix) && !prefix {
					t.Errorf("%s: prefix %q refused, but %q matches", p, text, text+suffix)
				}
			}
		}
	}
}

func TestRegexErrors(t *testing.T) {
	for _, tc := range []struct{ pattern, want string }{
		{`\bword\b`, `\b and \B are not supported`},
		{`(?=a)b`, "invalid or unsupported Perl syntax: `(?=`"},
		{`(a)\1`, "invalid escape sequence: `\\1`"},
		{`a{2,1001}`, "invalid repeat count"},
		{`[a-z]{200}`, "compiles to 202 states: at most 128 are supported"},
		{`a$b`, "matches no text"},
		{`[`, "missing closing ]"},
	} {
		_, err := Regex(tc.pattern)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.pattern, err, tc.want)
		}
	}
}

func TestChoice(t *testing.T) {
	g, err := Choice(textChoices)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		text          string
		prefix, whole bool
	}{
		{"", true, false},
		{"pos", true, true},
		{"posi", true, false},
		{"positive", true, true},
		{"positives", false, false},
		{`"positive"`, false, false},
		{"neu", true, false},
		{"neutral", true, true},
		{"ja\n", true, true},
		{"ja", true, false},
		{"日本", true, true},
		{"日", true, false},
		{"x", false, false},
	} {
		if prefix, whole := matches(g, tc.text); prefix != tc.prefix || whole != tc.whole {
			t.Errorf("%q: prefix %v whole %v, want %v %v", tc.text, prefix, whole, tc.prefix, tc.whole)
		}
	}
	for _, tc := range []struct {
		choices []string
		want    string
	}{
		{nil, "no choices"},
		{[]string{"a", ""}, "choice 1 is empty"},
		{make([]string, MaxChoices+1), "choices: at most"},
	} {
		if _, err := Choice(tc.choices); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.choices, err, tc.want)
		}
	}
}

// FuzzRegex compiles arbitrary patterns and feeds arbitrary text: the
// automaton never panics, and on valid UTF-8 it accepts a whole text
// exactly when Go's regexp matches it whole, and keeps every prefix of a
// text that matches.
func FuzzRegex(f *testing.F) {
	for _, p := range textPatterns {
		f.Add(p, "yes")
		f.Add(p, "bob@example.com")
	}
	f.Add(`(?m)^a$\n^b$`, "a\nb")
	f.Add(`[^a]*`, "\x00\n")
	f.Add(`\Q0`, "0")
	f.Fuzz(func(t *testing.T, pattern, text string) {
		g, err := Regex(pattern)
		if err != nil || !utf8.ValidString(text) {
			return
		}
		re, err := anchored(pattern)
		if err != nil {
			t.Fatalf("%q compiled here but not in Go's regexp: %v", pattern, err)
		}
		_, whole := matches(g, text)
		want := re.MatchString(text)
		if whole != want {
			t.Fatalf("%q on %q: whole match %v, Go's regexp %v", pattern, text, whole, want)
		}
		if want {
			for i := range text {
				if prefix, _ := matches(g, text[:i]); !prefix {
					t.Fatalf("%q: prefix %q of the match %q refused", pattern, text[:i], text)
				}
			}
		}
	})
}
