package conversation

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/pkg/reasoning"
	"github.com/ellm-dev/ellm/pkg/tokenizer/tokentest"
	"github.com/ellm-dev/ellm/pkg/toolcall"
)

// byteTokenizer is byte-level, so that every character and tag is split
// across tokens.
type byteTokenizer = tokentest.Bytes

// reply is a Stream's output: each Token call's delta, then Flush's.
type reply struct {
	reasoning, content string
	calls              []toolcall.Call
	pieces             []string // the text deltas, in order, non-empty
	stoppedAt          int      // the token whose stop string ended the reply; -1 none
}

func run(o StreamOptions, ids []int32) reply {
	m := &Model{Tokenizer: byteTokenizer{}}
	s := m.NewStream(o)
	r := reply{stoppedAt: -1}
	add := func(d Delta) {
		r.reasoning += d.Reasoning
		r.content += d.Content
		if t := d.Reasoning + d.Content; t != "" {
			r.pieces = append(r.pieces, t)
		}
		for _, c := range d.Calls {
			if c.Index == len(r.calls) {
				r.calls = append(r.calls, toolcall.Call{ID: c.ID, Name: c.Name})
			}
			r.calls[c.Index].Arguments += c.Arguments
		}
	}
	for i, id := range ids {
		d, stop := s.Token(id)
		add(d)
		if stop {
			r.stoppedAt = i
			break
		}
	}
	for _, d := range s.Flush() {
		if d.Empty() {
			panic("Flush returned an empty delta")
		}
		add(d)
	}
	return r
}

func TestStreamText(t *testing.T) {
	enc := byteTokenizer{}.Encode
	for _, tc := range []struct {
		name      string
		o         StreamOptions
		ids       []int32
		want      string
		pieces    []string
		stoppedAt int
	}{
		{name: "multi-byte characters split across tokens are held until whole",
			ids: enc("né 😀"), want: "né 😀", pieces: []string{"n", "é", " ", "😀"}, stoppedAt: -1},
		{name: "an unfinished character at the end becomes U+FFFD",
			ids: enc("a😀")[:3], want: "a\uFFFD", pieces: []string{"a", "\uFFFD"}, stoppedAt: -1},
		{name: "special tokens are not text", ids: enc("hi<|im_end|>"), want: "hi", pieces: []string{"h", "i"}, stoppedAt: -1},
		{name: "special tokens kept", o: StreamOptions{KeepSpecial: true}, ids: enc("hi<|im_end|>"),
			want: "hi<|im_end|>", pieces: []string{"h", "i", "<|im_end|>"}, stoppedAt: -1},
		{name: "a stop string split across tokens is held back and cut", o: StreamOptions{Stops: []string{"STOP"}},
			ids: enc("abSTxSTOPyz"), want: "abSTx", pieces: []string{"a", "b", "STx"}, stoppedAt: 8},
		{name: "include_stop_str_in_output", o: StreamOptions{Stops: []string{"STOP"}, IncludeStop: true},
			ids: enc("abSTOPyz"), want: "abSTOP", pieces: []string{"a", "b", "STOP"}, stoppedAt: 5},
		{name: "the earliest of several stop strings", o: StreamOptions{Stops: []string{"cd", "bcx", "b"}},
			ids: enc("abcd"), want: "a", pieces: []string{"a"}, stoppedAt: 1},
		{name: "a stop string inside a multi-byte character's bytes", o: StreamOptions{Stops: []string{"é!"}},
			ids: enc("aé!b"), want: "a", pieces: []string{"a"}, stoppedAt: 3},
		{name: "held text that never became a stop string is flushed", o: StreamOptions{Stops: []string{"STOP"}},
			ids: enc("abST"), want: "abST", pieces: []string{"a", "b", "ST"}, stoppedAt: -1},
		{name: "stop strings are not matched before min_tokens", o: StreamOptions{Stops: []string{"S"}, MinTokens: 3},
			ids: enc("aSbSc"), want: "aSb", pieces: []string{"a", "S", "b"}, stoppedAt: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(tc.o, tc.ids)
			if r.content != tc.want || r.reasoning != "" || r.stoppedAt != tc.stoppedAt || strings.Join(r.pieces, "|") != strings.Join(tc.pieces, "|") {
				t.Errorf("content %q reasoning %q in pieces %q, stopped at %d; want %q in %q, stopped at %d",
					r.content, r.reasoning, r.pieces, r.stoppedAt, tc.want, tc.pieces, tc.stoppedAt)
			}
		})
	}
}

// TestStreamReply runs a chat reply through the whole pipeline, one byte
// per token so that every tag and character is split, and checks it against
// the batch parsers of pkg/reasoning and pkg/toolcall.
func TestStreamReply(t *testing.T) {
	tools := json.RawMessage(`[{"type": "function", "function": {"name": "read",
		"parameters": {"type": "object", "properties": {"path": {"type": "string"}, "lines": {"type": "integer"}}}}}]`)
	for _, tc := range []struct {
		name, text        string
		o                 StreamOptions
		reasoning, answer string
		calls             []toolcall.Call
	}{
		{name: "reasoning then content", text: "<think>\nno é here\n</think>\n\nVoilà.<|im_end|>",
			o: StreamOptions{Reasoning: true}, reasoning: "\nno é here\n", answer: "\n\nVoilà."},
		{name: "the prompt opened the block", text: "hmm</think>ok",
			o: StreamOptions{Reasoning: true, Thinking: true}, reasoning: "hmm", answer: "ok"},
		{name: "cut short inside reasoning", text: "<think>\nstill thin",
			o: StreamOptions{Reasoning: true}, reasoning: "\nstill thin"},
		{name: "reasoning, content and two JSON tool calls",
			text: "<think>\nread both\n</think>\n\nReading.\n<tool_call>\n{\"name\": \"read\", \"arguments\": {\"path\": \"a.go\"}}\n</tool_call>\n" +
				"<tool_call>\n{\"name\": \"read\", \"arguments\": {\"path\": \"b.go\", \"lines\": 3}}\n</tool_call><|im_end|>",
			o:         StreamOptions{Reasoning: true, ToolCalls: toolcall.Parser{Format: toolcall.FormatJSON, Tools: tools, NewID: toolcall.SequentialIDs()}},
			reasoning: "\nread both\n", answer: "\n\nReading.\n",
			calls: []toolcall.Call{{Name: "read", Arguments: `{"path": "a.go"}`}, {Name: "read", Arguments: `{"path": "b.go", "lines": 3}`}}},
		{name: "Qwen3-Coder XML tool call, typed by the schema",
			text:  "<tool_call>\n<function=read>\n<parameter=path>\nmain.go\n</parameter>\n<parameter=lines>\n10\n</parameter>\n</function>\n</tool_call>",
			o:     StreamOptions{Reasoning: true, ToolCalls: toolcall.Parser{Format: toolcall.FormatXML, Tools: tools, NewID: toolcall.SequentialIDs()}},
			calls: []toolcall.Call{{Name: "read", Arguments: `{"path": "main.go", "lines": 10}`}}},
		{name: "a stop string inside the content ends before the tool call",
			text: "<think>r</think>done. END<tool_call>\n{\"name\": \"read\", \"arguments\": {}}\n</tool_call>",
			o: StreamOptions{Reasoning: true, Stops: []string{" END"},
				ToolCalls: toolcall.Parser{Format: toolcall.FormatJSON, Tools: tools, NewID: toolcall.SequentialIDs()}},
			reasoning: "r", answer: "done."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(tc.o, byteTokenizer{}.Encode(tc.text))
			if r.reasoning != tc.reasoning || r.content != tc.answer {
				t.Errorf("reasoning %q content %q, want %q %q", r.reasoning, r.content, tc.reasoning, tc.answer)
			}
			if len(r.calls) != len(tc.calls) {
				t.Fatalf("calls %+v, want %+v", r.calls, tc.calls)
			}
			for i, c := range r.calls {
				if c.ID == "" || c.Name != tc.calls[i].Name || c.Arguments != tc.calls[i].Arguments {
					t.Errorf("call %d = %+v, want %+v with an id", i, c, tc.calls[i])
				}
			}
			if len(tc.o.Stops) > 0 {
				return
			}
			// Streamed one byte at a time, the same as the batch parsers.
			text := strings.ReplaceAll(tc.text, "<|im_end|>", "")
			wr, wc := reasoning.Split(text, tc.o.Thinking)
			if tc.o.ToolCalls.Format != toolcall.FormatNone {
				wc, _ = tc.o.ToolCalls.Parse(wc)
			}
			if r.reasoning != wr || r.content != wc {
				t.Errorf("streamed %q %q, batch %q %q", r.reasoning, r.content, wr, wc)
			}
		})
	}
}

// FuzzStream checks that reasoning split while streaming, one byte per
// token after the stop strings, is the batch split of the text the stop
// strings leave.
func FuzzStream(f *testing.F) {
	f.Add("<think>é</think>ok STOP more")
	f.Add("日本語 <thi STO")
	f.Fuzz(func(t *testing.T, text string) {
		stops := []string{"STOP"}
		streamed := run(StreamOptions{Stops: stops, Reasoning: true}, byteTokenizer{}.Encode(text))
		plain := run(StreamOptions{Stops: stops}, byteTokenizer{}.Encode(text))
		wr, wc := reasoning.Split(plain.content, false)
		if streamed.reasoning != wr || streamed.content != wc {
			t.Errorf("%q: streamed %q %q, batch %q %q", text, streamed.reasoning, streamed.content, wr, wc)
		}
	})
}
