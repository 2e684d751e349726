package grammar

import (
	"fmt"
	"slices"
)

// Plain-text grammars: the whole output is text, not JSON. They back vLLM's
// guided_regex and guided_choice (structured_outputs regex and choice).

// Regex is the grammar of text that matches pattern as a whole (Go's RE2
// syntax with Perl flags, as JSON Schema patterns; ^ and $ are redundant at
// its ends). The end tokens are allowed exactly where the text read so far
// matches. Errors name what is not supported: word boundaries, look-around
// and back-references (not RE2), a program beyond 128 states, or a pattern
// that matches nothing.
func Regex(pattern string) (*Grammar, error) {
	r, err := compileRegex(pattern, true)
	if err != nil {
		return nil, err
	}
	return newGrammar(&node{kind: kRegex, re: r}), nil
}

// Choice limits: a longer list is better served by a schema enum or a
// regex, and bounds the work of one mask.
const (
	MaxChoices     = 4096
	maxChoiceBytes = 1 << 20
)

// Choice is the grammar of text that is exactly one of choices (vLLM's
// guided_choice): the bare string, without quotes. Duplicates are merged;
// an empty list is an error, as is the empty string (a reply of no text).
func Choice(choices []string) (*Grammar, error) {
	if len(choices) == 0 {
		return nil, fmt.Errorf("no choices")
	}
	if len(choices) > MaxChoices {
		return nil, fmt.Errorf("%d choices: at most %d are supported", len(choices), MaxChoices)
	}
	total := 0
	for i, c := range choices {
		if c == "" {
			return nil, fmt.Errorf("choice %d is empty", i)
		}
		total += len(c)
	}
	if total > maxChoiceBytes {
		return nil, fmt.Errorf("the choices have %d bytes: at most %d are supported", total, maxChoiceBytes)
	}
	lits := slices.Compact(slices.Sorted(slices.Values(choices)))
	return newGrammar(&node{kind: kLiteral, lits: lits}), nil
}
