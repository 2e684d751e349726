package toolcall

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
)

// Call is one tool call in OpenAI terms.
type Call struct {
	ID        string
	Name      string
	Arguments string // a JSON object
}

// Delta is one piece of streamed output: plain content, or a piece of a tool
// call.
type Delta struct {
	Content string
	Call    *CallDelta
}

// CallDelta is a piece of the tool call number Index of the message. The
// first piece of a call carries its ID and Name, the following ones the next
// fragment of its Arguments, as OpenAI streams tool_calls.
type CallDelta struct {
	Index     int
	ID, Name  string
	Arguments string
}

// Parser parses one format. The zero NewID draws random ids.
type Parser struct {
	Format Format
	// Tools is the request's tool list (OpenAI JSON). Qwen3-Coder writes
	// every parameter as text; the parameter's JSON-schema type decides
	// whether it becomes a number, boolean, object, array, null or string.
	Tools json.RawMessage
	// NewID returns the id of the next call; nil means RandomID.
	NewID func() string
}

// Parse splits a complete model output into content and tool calls with
// random call ids. Malformed tool-call text stays in content.
func Parse(text string, f Format, tools json.RawMessage) (content string, calls []Call) {
	return Parser{Format: f, Tools: tools}.Parse(text)
}

// NewStream starts parsing a streamed output, with random call ids.
func NewStream(f Format, tools json.RawMessage) *Stream {
	return Parser{Format: f, Tools: tools}.NewStream()
}

// Parse is the batch form of the parser's stream: the same text gives the
// same content and calls (ids aside) however it is streamed.
func (p Parser) Parse(text string) (content string, calls []Call) {
	s := p.NewStream()
	var b strings.Builder
	for _, d := range append(s.Add(text), s.Flush()...) {
		switch {
		case d.Call == nil:
			b.WriteString(d.Content)
		case d.Call.Index == len(calls):
			calls = append(calls, Call{ID: d.Call.ID, Name: d.Call.Name, Arguments: d.Call.Arguments})
		default:
			calls[d.Call.Index].Arguments += d.Call.Arguments
		}
	}
	return b.String(), calls
}

// NewStream starts parsing a streamed output.
func (p Parser) NewStream() *Stream {
	newID := p.NewID
	if newID == nil {
		newID = RandomID
	}
	return &Stream{format: p.Format, schema: parseSchema(p.Tools), newID: newID, atGap: true}
}

// RandomID returns "call_" and 24 random hex digits, like vLLM's ids.
func RandomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "call_" + hex.EncodeToString(b[:])
}

// SequentialIDs returns an id generator yielding call_1, call_2, … for
// deterministic output (tests, seeded runs).
func SequentialIDs() func() string {
	var n atomic.Int64
	return func() string { return "call_" + strconv.FormatInt(n.Add(1), 10) }
}

const (
	openTag  = "<tool_call>"
	closeTag = "</tool_call>"
)

// Stream parses output incrementally. A call is emitted once its block is
// complete and well formed (so malformed text can still become content),
// and text that may begin a <tool_call> tag is held back until decided.
// Whitespace that only separates tool calls from each other or from the ends
// of the output is not content.
type Stream struct {
	format Format
	schema schema
	newID  func() string

	held   []byte // text not yet decided
	inCall bool   // held starts with openTag
	// wait, when set, is a string that must appear in held past waitFrom
	// before the open block can be decided: a long parameter value is
	// then not parsed again at every token.
	wait     string
	waitFrom int
	// object, when active, follows the unfinished JSON object of a Qwen3
	// call, so that it is decoded once it closes rather than at every token.
	object objectEnd
	atGap  bool   // at the start or right after a call
	gap    string // whitespace held at a gap
	calls  int
	out    []Delta
}

// Add consumes the next piece of output and returns what is now decided.
func (s *Stream) Add(text string) []Delta {
	s.held = append(s.held, text...)
	switch {
	case s.wait != "":
		if !bytes.Contains(s.held[s.waitFrom:], []byte(s.wait)) {
			s.waitFrom = max(0, len(s.held)-len(s.wait)+1)
			return nil
		}
	case s.object.active:
		if !s.object.closed(s.held) {
			return nil
		}
	}
	s.run(false)
	return s.take()
}

// Flush ends the stream: a block still open is malformed and becomes content,
// except one whose calls are complete and only lack the closing </tool_call>.
func (s *Stream) Flush() []Delta {
	s.run(true)
	if s.gap != "" && s.calls == 0 {
		s.emitContent(s.gap)
	}
	s.gap = ""
	return s.take()
}

func (s *Stream) take() []Delta {
	out := s.out
	s.out = nil
	return out
}

func (s *Stream) run(final bool) {
	buf := string(s.held)
	defer func() { s.held = append(s.held[:0], buf...) }()
	s.wait, s.object = "", objectEnd{}
	for {
		if !s.inCall {
			if s.format == FormatNone {
				s.text(buf)
				buf = ""
				return
			}
			i := strings.Index(buf, openTag)
			if i < 0 {
				keep := 0
				if !final {
					keep = partialSuffix(buf, openTag)
				}
				s.text(buf[:len(buf)-keep])
				buf = buf[len(buf)-keep:]
				return
			}
			s.text(buf[:i])
			buf, s.inCall = buf[i:], true
		}
		body := buf[len(openTag):]
		var calls []Call
		var n int
		var st status
		if s.format == FormatXML {
			calls, n, st = s.parseXML(body, final)
		} else {
			calls, n, st = s.parseJSONBlock(body, final)
		}
		switch {
		case st == needMore && !final:
			if s.wait != "" {
				s.waitFrom = max(0, len(buf)-len(s.wait)+1)
			}
			if s.object.active {
				s.object.pos += len(openTag)
			}
			return
		case st == ok:
			s.gap = ""
			for _, c := range calls {
				s.emitCall(c)
			}
			buf, s.atGap = body[n:], true
		default: // malformed: the tag is plain text, scanning resumes after it
			s.text(openTag)
			buf = body
		}
		s.wait, s.object = "", objectEnd{}
		s.inCall = false
	}
}

// text handles plain text outside calls, holding whitespace at a gap.
func (s *Stream) text(t string) {
	if t == "" {
		return
	}
	if s.atGap {
		rest := trimSpace(t)
		s.gap += t[:len(t)-len(rest)]
		if rest == "" {
			return
		}
		t, s.gap, s.atGap = s.gap+rest, "", false
	}
	s.emitContent(t)
}

func (s *Stream) emitContent(t string) {
	if n := len(s.out); n > 0 && s.out[n-1].Call == nil {
		s.out[n-1].Content += t
		return
	}
	s.out = append(s.out, Delta{Content: t})
}

func (s *Stream) emitCall(c Call) {
	i := s.calls
	s.calls++
	s.out = append(s.out,
		Delta{Call: &CallDelta{Index: i, ID: s.newID(), Name: c.Name}},
		Delta{Call: &CallDelta{Index: i, Arguments: c.Arguments}})
}

// status is what a block parser knows about the text after <tool_call>.
type status int

const (
	ok        status = iota // complete, well-formed calls
	needMore                // a proper prefix of a well-formed block
	malformed               // no continuation can make it well formed
)

// expect matches the literal lit at the start of s.
func expect(s, lit string) status {
	switch {
	case strings.HasPrefix(s, lit):
		return ok
	case strings.HasPrefix(lit, s):
		return needMore
	default:
		return malformed
	}
}

// closeBlock matches optional whitespace and </tool_call> at body[i:] and
// returns the length of the block. At the end of the output a missing
// </tool_call> is forgiven, as vLLM forgives it.
func closeBlock(body string, i int, final bool) (int, status) {
	rest := trimSpace(body[i:])
	i = len(body) - len(rest)
	if final && rest == "" {
		return i, ok
	}
	st := expect(rest, closeTag)
	return i + len(closeTag), st
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

// trimSpace drops leading ASCII whitespace. Only ASCII counts: a multi-byte
// space split across two chunks must not be judged differently from whole.
func trimSpace(s string) string {
	return strings.TrimLeft(s, " \t\r\n")
}
