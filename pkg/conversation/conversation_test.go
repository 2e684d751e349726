package conversation

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/pkg/chat"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
	"github.com/ellm-dev/ellm/pkg/tokenizer"
)

// qwen3Model is the real Qwen3 tokenizer with the chat template of
// templateDir (Qwen3's own, or Qwen3-Coder's: the same vocabulary).
func qwen3Model(t *testing.T, templateDir string) *Model {
	t.Helper()
	tok, err := tokenizer.Load(sharedtest.Path(t, "qwen3-tokenizer"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.Load(sharedtest.Path(t, templateDir))
	if err != nil {
		t.Fatal(err)
	}
	end, other := tok.Encode("<|im_end|>"), tok.Encode("<|endoftext|>")
	if len(end) != 1 || len(other) != 1 {
		t.Fatalf("end tokens %v %v: want one token each", end, other)
	}
	return &Model{Tokenizer: tok, Template: tmpl, EOS: []int32{end[0], other[0]}}
}

func msgs(t *testing.T, js string) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	if err := json.Unmarshal([]byte(js), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

const tools = `[{"type": "function", "function": {"name": "read", "description": "Read a file",
	"parameters": {"type": "object", "properties": {"path": {"type": "string"}, "lines": {"type": "integer"}}}}}]`

// TestContinue checks what a new turn adds to a session's transcript, with
// the real Qwen3 and Qwen3-Coder templates: the transcript is what the model
// saw and wrote (its reasoning, its tool-call text), which the template
// renders differently once the turn is in the history, and the added tokens
// must be exactly those of the template's text after that turn.
func TestContinue(t *testing.T) {
	const q1 = `{"role": "user", "content": "q1"}`
	for _, tc := range []struct {
		name, template string
		first          string // the session's messages, as JSON list items
		tools          string
		reply          string // what the model generated (its transcript's end)
		next           string // the assistant message for reply, then new messages
		kwargs         string
		want           string // the text the new messages add; "" = not a continuation
		endAdded       bool   // the reply did not end with <|im_end|>
	}{
		{name: "user turn after a reasoning reply", template: "qwen3-tokenizer", first: q1,
			reply: "<think>\nlet me see\n</think>\n\na1<|im_end|>",
			next:  `{"role": "assistant", "content": "a1", "reasoning_content": "let me see"}, {"role": "user", "content": "q2"}`,
			want:  "\n<|im_start|>user\nq2<|im_end|>\n<|im_start|>assistant\n"},
		{name: "reply cut by max_tokens: the end token is added", template: "qwen3-tokenizer", first: q1,
			reply: "<think>\nlet me", endAdded: true,
			next: `{"role": "assistant", "content": "", "reasoning_content": "let me"}, {"role": "user", "content": "go on"}`,
			want: "\n<|im_start|>user\ngo on<|im_end|>\n<|im_start|>assistant\n"},
		{name: "thinking off", template: "qwen3-tokenizer", first: q1, kwargs: `{"enable_thinking": false}`,
			reply: "a1<|im_end|>",
			next:  `{"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"}`,
			want:  "\n<|im_start|>user\nq2<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{name: "JSON tool call and two tool results", template: "qwen3-tokenizer", first: q1, tools: tools,
			reply: "<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"read\", \"arguments\": {\"path\": \"a.go\"}}\n</tool_call><|im_end|>",
			next: `{"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"a.go\"}"}}]},
				{"role": "tool", "tool_call_id": "c1", "content": "r1"}, {"role": "tool", "tool_call_id": "c1", "content": "r2"}`,
			want: "\n<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n</tool_response><|im_end|>\n<|im_start|>assistant\n"},
		{name: "Qwen3-Coder XML tool call and its result", template: "qwen3-coder-template", first: q1, tools: tools,
			reply: "<tool_call>\n<function=read>\n<parameter=path>\na.go\n</parameter>\n</function>\n</tool_call><|im_end|>",
			next: `{"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"a.go\"}"}}]},
				{"role": "tool", "tool_call_id": "c1", "content": "package a"}`,
			want: "\n<|im_start|>user\n<tool_response>\npackage a\n</tool_response>\n<|im_end|>\n<|im_start|>assistant\n"},
		{name: "Qwen3-Coder system and user turn", template: "qwen3-coder-template",
			first: `{"role": "system", "content": "be brief"}, ` + q1, tools: tools,
			reply: "a1<|im_end|>",
			next:  `{"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"}`,
			want:  "\n<|im_start|>user\nq2<|im_end|>\n<|im_start|>assistant\n"},
		{name: "an earlier message edited", template: "qwen3-tokenizer", first: q1, reply: "a1<|im_end|>",
			next: `{"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"}`},
		{name: "no assistant message for the reply", template: "qwen3-tokenizer", first: q1, reply: "a1<|im_end|>",
			next: `{"role": "user", "content": "q2"}, {"role": "user", "content": "q3"}`},
		{name: "reply ended by another end token", template: "qwen3-tokenizer", first: q1, reply: "a1<|endoftext|>",
			next: `{"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := qwen3Model(t, tc.template)
			first := Chat{Messages: msgs(t, "["+tc.first+"]"), Tools: json.RawMessage(tc.tools), Kwargs: json.RawMessage(tc.kwargs)}
			prompt, err := m.Render(first, true)
			if err != nil {
				t.Fatal(err)
			}
			transcript := m.Tokenizer.Encode(prompt + tc.reply)
			next := first
			next.Messages = append(slices.Clone(first.Messages), msgs(t, "["+tc.next+"]")...)
			if tc.want == "" && tc.name == "an earlier message edited" {
				next.Messages[0] = json.RawMessage(`{"role": "user", "content": "q1 edited"}`)
			}
			text, err := m.Render(next, true)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := m.Continue(Session{Chat: first.Compact(), Transcript: transcript}, next, text)
			if tc.want == "" {
				if ok {
					t.Fatalf("continued with %q, want no continuation", m.Tokenizer.Decode(got))
				}
				return
			}
			if !ok {
				t.Fatalf("not continued; full rendering:\n%s", text)
			}
			if !strings.HasSuffix(text, tc.want) {
				t.Fatalf("the test's added text %q is not the end of the rendering %q", tc.want, text)
			}
			want := slices.Clone(transcript)
			if tc.endAdded {
				want = append(want, m.EOS[0])
			}
			want = append(want, m.Tokenizer.Encode(tc.want)...)
			if !slices.Equal(got, want) {
				t.Errorf("prompt ends %q, want %q", m.Tokenizer.Decode(got[len(transcript):]), m.Tokenizer.Decode(want[len(transcript):]))
			}
		})
	}
}

func TestRenderWithoutTemplate(t *testing.T) {
	m := &Model{}
	if _, err := m.Render(Chat{}, true); err != ErrNoTemplate {
		t.Errorf("err = %v, want ErrNoTemplate", err)
	}
}

func TestPrompt(t *testing.T) {
	m := qwen3Model(t, "qwen3-tokenizer")
	first := Chat{Messages: msgs(t, `[{"role": "user", "content": "q1"}]`)}
	p, err := m.Prompt(nil, first)
	if err != nil {
		t.Fatal(err)
	}
	if p.Continued || p.Thinking || !slices.Equal(p.Tokens, m.Tokenizer.Encode(p.Text)) ||
		p.Text != "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\n" {
		t.Errorf("first turn: %+v", p)
	}
	sess := Session{Chat: first, Transcript: m.Tokenizer.Encode(p.Text + "a1<|im_end|>")}
	next := Chat{Messages: msgs(t, `[{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"}]`)}
	p, err = m.Prompt(&sess, next)
	if err != nil || !p.Continued || !slices.Equal(p.Tokens[:len(sess.Transcript)], sess.Transcript) {
		t.Errorf("second turn: %+v, %v", p, err)
	}

	// A template whose generation prompt opens the <think> block (as the
	// Qwen3 thinking-2507 ones do): the reply starts as reasoning.
	opens, err := chat.New(`{% for m in messages %}{{ m.content }}{% endfor %}<think>`+"\n", chat.SpecialTokens{})
	if err != nil {
		t.Fatal(err)
	}
	m.Template = opens
	if p, err = m.Prompt(nil, first); err != nil || !p.Thinking {
		t.Errorf("template opening <think>: %+v, %v", p, err)
	}
	m.Template = nil
	if _, err = m.Prompt(nil, first); err != ErrNoTemplate {
		t.Errorf("no template: %v", err)
	}
}
