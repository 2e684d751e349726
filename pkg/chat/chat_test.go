package chat

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/pkg/toolcall"
)

func mustNew(t *testing.T, src string) *Template {
	t.Helper()
	tmpl, err := New(src, SpecialTokens{EOS: "<|im_end|>"})
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func TestRender(t *testing.T) {
	tests := []struct {
		name, src string
		in        Input
		want      string
	}{
		{
			name: "key order and int/float kept through tojson",
			src:  `{{ messages[0] | tojson }}|{{ tools | tojson }}`,
			in: Input{
				Messages: json.RawMessage(`[{"z": 1, "a": 1.0, "m": [2.5, 1e20, -0, 3e-7]}]`),
				Tools:    json.RawMessage(`[{"b": true, "a": null}]`),
			},
			want: `{"z": 1, "a": 1.0, "m": [2.5, 1e+20, 0, 3e-07]}|[{"b": true, "a": null}]`,
		},
		{
			name: "non-ASCII kept, not escaped",
			src:  `{{ messages | tojson }}`,
			in:   Input{Messages: json.RawMessage(`["héllo \u2603 \ud83d\ude00"]`)},
			want: `["héllo ☃ 😀"]`,
		},
		{
			name: "kwargs defined, absent ones undefined",
			src:  `{{ enable_thinking is defined }} {{ other is defined }} {{ x }}`,
			in:   Input{Messages: json.RawMessage(`[{}]`), Kwargs: json.RawMessage(`{"enable_thinking": false, "x": 3}`)},
			want: `True False 3`,
		},
		{
			name: "null tools are none, generation prompt and eos passed",
			src:  `{{ tools is none }} {{ add_generation_prompt }} {{ eos_token }} {{ bos_token is defined }}`,
			in:   Input{Messages: json.RawMessage(`[{}]`), Tools: json.RawMessage(`null`), AddGenerationPrompt: true},
			want: `True True <|im_end|> False`,
		},
		{
			name: "trim_blocks and lstrip_blocks",
			src:  "{% for m in messages %}\n    {% if m %}\n[{{ m }}]\n    {% endif %}\n{% endfor %}",
			in:   Input{Messages: json.RawMessage(`[1, 2]`)},
			want: "[1]\n[2]\n",
		},
		{
			name: "string tool arguments decoded on request",
			src:  `{% for c in messages[0].tool_calls %}{{ c.function.arguments | tojson }};{% endfor %}`,
			in: Input{
				Messages: json.RawMessage(`[{"role": "assistant", "tool_calls": [{"function": {"arguments": "{\"b\": 1, \"a\": 2.0}"}}, {"function": {"arguments": ""}}, {"function": {"arguments": {"k": 1}}}]}]`),
				OpenAI:   true,
			},
			want: `{"b": 1, "a": 2.0};{};{"k": 1};`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mustNew(t, tt.src).Render(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name, src string
		in        Input
		wantMsg   string
	}{
		{"raise_exception", `{% if messages[0].role != 'user' %}{{ raise_exception('Conversations must start with a user message.') }}{% endif %}`,
			Input{Messages: json.RawMessage(`[{"role": "assistant"}]`)}, "Conversations must start with a user message."},
		{"empty messages", `x`, Input{Messages: json.RawMessage(`[]`)}, "messages: empty"},
		{"messages not JSON", `x`, Input{Messages: json.RawMessage(`[{`)}, "messages: invalid JSON"},
		{"messages not an array", `x`, Input{Messages: json.RawMessage(`{}`)}, "messages: not a JSON array"},
		{"trailing data", `x`, Input{Messages: json.RawMessage(`[] []`)}, "data after the value"},
		{"tools not an array", `x`, Input{Messages: json.RawMessage(`[{}]`), Tools: json.RawMessage(`3`)}, "tools: not a JSON array"},
		{"kwargs not an object", `x`, Input{Messages: json.RawMessage(`[{}]`), Kwargs: json.RawMessage(`[1]`)}, "kwargs: not a JSON object"},
		{"kwargs overriding messages", `x`, Input{Messages: json.RawMessage(`[{}]`), Kwargs: json.RawMessage(`{"messages": []}`)}, `"messages" is set by the renderer`},
		{"bad string arguments", `x`, Input{Messages: json.RawMessage(`[{"tool_calls": [{"function": {"arguments": "{nope"}}]}]`), OpenAI: true}, "arguments: invalid JSON"},
		{"non-text content part", `x`, Input{Messages: json.RawMessage(`[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]`), OpenAI: true}, "unsupported content part of type 'image_url'"},
		{"items of a string", `{% for k, v in messages[0] | items %}{% endfor %}`, Input{Messages: json.RawMessage(`["s"]`)}, "mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mustNew(t, tt.src).Render(tt.in)
			var te *Error
			if !errors.As(err, &te) {
				t.Fatalf("got %q, %v; want a *chat.Error", got, err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tt.wantMsg)
			}
		})
	}
}

func TestNewRejectsBadTemplate(t *testing.T) {
	if _, err := New(`{% for x in %}`, SpecialTokens{}); err == nil {
		t.Fatal("want a compile error")
	}
}

func TestToolCallFormat(t *testing.T) {
	tests := []struct {
		src  string
		want toolcall.Format
	}{
		{`{{- '<tool_call>\n{"name": ' }}`, toolcall.FormatJSON},
		{`{{- '\n<tool_call>\n<function=' + tool_call.name + '>\n' }}`, toolcall.FormatXML},
		{`{{ messages }}`, toolcall.FormatNone},
	}
	for _, tt := range tests {
		if got := mustNew(t, tt.src).ToolCallFormat(); got != tt.want {
			t.Errorf("%q: got %v, want %v", tt.src, got, tt.want)
		}
	}
}

// FromFiles reads a model directory's template as transformers does:
// chat_template.jinja over tokenizer_config.json's chat_template (a string,
// or the list entry named "default"), special tokens from the config.
func TestFromFiles(t *testing.T) {
	render := func(tmpl *Template) string {
		out, err := tmpl.Render(Input{Messages: json.RawMessage(`[{"role": "user", "content": "hi"}]`)})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, tc := range []struct {
		name, config, jinja, want string
	}{
		{"config string", `{"chat_template": "cfg {{ eos_token }}", "eos_token": "<|im_end|>"}`, "", "cfg <|im_end|>"},
		{"named list", `{"chat_template": [{"name": "tool_use", "template": "t"}, {"name": "default", "template": "d"}]}`, "", "d"},
		{"jinja file wins", `{"chat_template": "cfg", "eos_token": {"content": "<e>"}}`, "jinja {{ eos_token }}", "jinja <e>"},
		{"jinja file alone", "", "only {{ messages[0].content }}", "only hi"},
	} {
		var cfg, jinja []byte
		if tc.config != "" {
			cfg = []byte(tc.config)
		}
		if tc.jinja != "" {
			jinja = []byte(tc.jinja)
		}
		tmpl, err := FromFiles(cfg, jinja)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := render(tmpl); got != tc.want {
			t.Errorf("%s: rendered %q, want %q", tc.name, got, tc.want)
		}
	}
	for _, cfg := range []string{`{`, `{"chat_template": 3}`, `{"chat_template": [{"name": "x", "template": "t"}]}`, `{}`} {
		if _, err := FromFiles([]byte(cfg), nil); err == nil {
			t.Errorf("config %s: want an error", cfg)
		}
	}
}
