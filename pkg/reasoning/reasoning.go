// Package reasoning separates a Qwen3 model's <think>…</think> block
// (reasoning_content) from its answer (content), in one pass (Split) or while
// streaming (Stream), the way vLLM's qwen3 reasoning parser does:
//
//   - When the prompt already opened the block (the chat template ended the
//     generation prompt with <think>), the output starts as reasoning; a
//     <think> the model repeats at the very start is dropped.
//   - Otherwise the block starts at the first <think>.
//   - The block ends at the first </think>; later tags are plain content.
//   - A block that never ends (output cut short) is all reasoning.
//
// Unlike vLLM, text before a <think> that the output opens itself is kept as
// content rather than dropped. Tags are removed; the text around them is
// returned verbatim (Qwen3 writes "\n\n" after </think>, which stays content).
package reasoning

import "strings"

const (
	startTag = "<think>"
	endTag   = "</think>"
)

// Split returns the reasoning and the content of a complete model output.
// startsInThinking tells whether the prompt left a <think> block open (see
// PromptOpensThinking).
func Split(text string, startsInThinking bool) (reasoningContent, content string) {
	if startsInThinking {
		text = strings.TrimPrefix(text, startTag)
		r, c, _ := strings.Cut(text, endTag)
		return r, c
	}
	before, inside, opened := strings.Cut(text, startTag)
	if !opened {
		return "", text
	}
	r, after, _ := strings.Cut(inside, endTag)
	return r, before + after
}

// PromptOpensThinking reports whether a rendered prompt ends inside a <think>
// block (its last <think> comes after its last </think>), so that generation
// starts as reasoning. Qwen3's own template never does this (the model writes
// <think> itself, and enable_thinking=false closes an empty block); the
// Qwen3 thinking-2507 templates do.
func PromptOpensThinking(prompt string) bool {
	return strings.LastIndex(prompt, startTag) > strings.LastIndex(prompt, endTag)
}

type state int

const (
	// awaitStart: before the block; content until a <think>.
	awaitStart state = iota
	// atThinkStart: the prompt opened the block and nothing has been read;
	// a repeated <think> here is dropped.
	atThinkStart
	// thinking: reasoning until </think>.
	thinking
	// done: after the block; everything is content.
	done
)

// Stream splits output incrementally. Text that could be the start of a tag
// (such as "</thi") is held back until the next Add decides it, so the
// concatenation of everything returned equals Split of the whole text,
// however the text was chunked.
type Stream struct {
	state   state
	pending string
}

// NewStream starts a stream; startsInThinking is as for Split.
func NewStream(startsInThinking bool) *Stream {
	if startsInThinking {
		return &Stream{state: atThinkStart}
	}
	return &Stream{state: awaitStart}
}

// Add consumes the next piece of output and returns the reasoning and the
// content that are now certain.
func (s *Stream) Add(text string) (reasoning, content string) {
	buf := s.pending + text
	s.pending = ""
	var r, c strings.Builder
	for {
		switch s.state {
		case atThinkStart:
			if len(buf) < len(startTag) && strings.HasPrefix(startTag, buf) {
				s.pending = buf
				return r.String(), c.String()
			}
			buf = strings.TrimPrefix(buf, startTag)
			s.state = thinking
		case awaitStart:
			rest, found := s.scan(buf, startTag, &c)
			if !found {
				return r.String(), c.String()
			}
			buf, s.state = rest, thinking
		case thinking:
			rest, found := s.scan(buf, endTag, &r)
			if !found {
				return r.String(), c.String()
			}
			buf, s.state = rest, done
		case done:
			c.WriteString(buf)
			return r.String(), c.String()
		}
	}
}

// scan writes buf up to tag into out and returns the text after the tag.
// Without the tag it writes all but a tail that could begin the tag, which it
// holds back.
func (s *Stream) scan(buf, tag string, out *strings.Builder) (rest string, found bool) {
	if i := strings.Index(buf, tag); i >= 0 {
		out.WriteString(buf[:i])
		return buf[i+len(tag):], true
	}
	keep := partialSuffix(buf, tag)
	out.WriteString(buf[:len(buf)-keep])
	s.pending = buf[len(buf)-keep:]
	return "", false
}

// Flush ends the stream and returns what was held back: a partial tag at the
// end of the output is plain text.
func (s *Stream) Flush() (reasoning, content string) {
	p := s.pending
	s.pending = ""
	switch s.state {
	case atThinkStart, thinking:
		s.state = thinking
		return p, ""
	default:
		return "", p
	}
}

// partialSuffix returns the length of the longest proper prefix of tag that
// buf ends with.
func partialSuffix(buf, tag string) int {
	for n := min(len(buf), len(tag)-1); n > 0; n-- {
		if strings.HasSuffix(buf, tag[:n]) {
			return n
		}
	}
	return 0
}
