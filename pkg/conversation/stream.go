package conversation

import (
	"strings"

	"github.com/ellm-dev/ellm/pkg/reasoning"
	"github.com/ellm-dev/ellm/pkg/tokenizer"
	"github.com/ellm-dev/ellm/pkg/toolcall"
)

// StreamOptions say how generated tokens become a reply.
type StreamOptions struct {
	// Stops are the stop strings: the text ends before the first one.
	Stops []string
	// IncludeStop keeps the stop string that ends the text
	// (include_stop_str_in_output).
	IncludeStop bool
	// KeepSpecial writes special tokens' text (skip_special_tokens false).
	KeepSpecial bool
	// MinTokens: stop strings are not matched before this many tokens.
	MinTokens int
	// Reasoning splits <think> blocks out of the text (a chat reply);
	// Thinking says the prompt leaves one open.
	Reasoning, Thinking bool
	// ToolCalls parses tool calls out of the content; FormatNone: none.
	ToolCalls toolcall.Parser
}

// Delta is a piece of a reply: reasoning, content, and pieces of tool
// calls (the first piece of a call carries its ID and name, the next ones
// its arguments).
type Delta struct {
	Reasoning, Content string
	Calls              []toolcall.CallDelta
}

// Empty reports whether d carries nothing.
func (d Delta) Empty() bool { return d.Reasoning == "" && d.Content == "" && len(d.Calls) == 0 }

// Stream turns generated tokens into a reply, one pipeline: UTF-8-safe
// detokenization (a character split across tokens is held until complete),
// stop strings (the end of the text that could still become one is held
// back, so that no stop string is ever emitted unless IncludeStop), then the
// reasoning split and tool-call parsing. Feed it each token with Token and
// end it with Flush; the concatenation of the deltas is the reply whatever
// the token boundaries.
type Stream struct {
	tok     Tokenizer
	opts    StreamOptions
	text    tokenizer.UTF8Stream
	stop    stopper
	think   *reasoning.Stream // nil: no reasoning split
	calls   *toolcall.Stream  // nil: tool calls are not parsed
	n       int
	stopped bool
}

// NewStream starts a reply.
func (m *Model) NewStream(o StreamOptions) *Stream {
	s := &Stream{tok: m.Tokenizer, opts: o, stop: stopper{stops: o.Stops, include: o.IncludeStop}}
	if o.Reasoning {
		s.think = reasoning.NewStream(o.Thinking)
	}
	if o.ToolCalls.Format != toolcall.FormatNone {
		s.calls = o.ToolCalls.NewStream()
	}
	return s
}

// Token adds a generated token and returns the delta it completes (often
// empty) and whether a stop string ended the reply: the caller stops
// generating then, and calls Flush.
func (s *Stream) Token(id int32) (Delta, bool) {
	if s.stopped {
		return Delta{}, true
	}
	s.n++
	s.stop.armed = s.n >= s.opts.MinTokens
	var text string
	if s.opts.KeepSpecial || !s.tok.IsSpecial(id) {
		text = s.text.Write(s.tok.TokenBytes(id))
	}
	text, s.stopped = s.stop.add(text)
	return s.parse(text, false), s.stopped
}

// Flush ends the reply and returns what was held back, as the parsers
// release it: the text held for a stop string or an unfinished character
// (invalid bytes become U+FFFD; nothing after a stop string), then what the
// reasoning and tool-call parsers held. Empty deltas are left out.
func (s *Stream) Flush() []Delta {
	var out []Delta
	if !s.stopped {
		rest, _ := s.stop.add(s.text.Flush())
		if d := s.parse(rest+s.stop.flush(), false); !d.Empty() {
			out = append(out, d)
		}
	}
	if d := s.parse("", true); !d.Empty() {
		out = append(out, d)
	}
	return out
}

// parse splits text into reasoning, content and tool calls; final flushes
// the parsers.
func (s *Stream) parse(text string, final bool) Delta {
	var d Delta
	switch {
	case s.think == nil:
		d.Content = text
	case final:
		d.Reasoning, d.Content = s.think.Flush()
	default:
		d.Reasoning, d.Content = s.think.Add(text)
	}
	if s.calls == nil {
		return d
	}
	content := d.Content
	d.Content = ""
	deltas := s.calls.Add(content)
	if final {
		deltas = append(deltas, s.calls.Flush()...)
	}
	for _, td := range deltas {
		if td.Call == nil {
			d.Content += td.Content
			continue
		}
		d.Calls = append(d.Calls, *td.Call)
	}
	return d
}

// stopper cuts the text at the first stop string. It holds back the end of
// the text that could still become a stop string. Until armed, stop strings
// are not matched (min_tokens).
type stopper struct {
	stops   []string
	include bool
	armed   bool
	held    string
}

// add returns the text that is safe to emit and whether a stop string was hit.
func (s *stopper) add(text string) (string, bool) {
	if len(s.stops) == 0 {
		return text, false
	}
	s.held += text
	cut, end := -1, 0
	for _, st := range s.stops {
		if !s.armed {
			break
		}
		if i := strings.Index(s.held, st); i >= 0 && (cut < 0 || i < cut) {
			cut, end = i, i+len(st)
		}
	}
	if cut >= 0 {
		if !s.include {
			end = cut
		}
		out := s.held[:end]
		s.held = ""
		return out, true
	}
	keep := 0
	for _, st := range s.stops {
		for n := min(len(st)-1, len(s.held)); n > keep; n-- {
			if strings.HasSuffix(s.held, st[:n]) {
				keep = n
				break
			}
		}
	}
	out := s.held[:len(s.held)-keep]
	s.held = s.held[len(s.held)-keep:]
	return out, false
}

func (s *stopper) flush() string {
	out := s.held
	s.held = ""
	return out
}
