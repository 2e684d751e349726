package chat

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

// FuzzRender feeds arbitrary messages and tools to the real Qwen3 and
// Qwen3-Coder templates: Render must return text or a *Error (never panic),
// and the same input must always render the same text.
func FuzzRender(f *testing.F) {
	var templates []*Template
	for _, dir := range []string{"qwen3-tokenizer", "qwen3-coder-template"} {
		tmpl, err := Load(sharedtest.Path(f, dir))
		if err != nil {
			f.Fatal(err)
		}
		templates = append(templates, tmpl)
	}
	f.Add(`[{"role": "user", "content": "hi"}]`, `null`, true, false)
	f.Add(`[{"role": "system", "content": "s"}, {"role": "assistant", "content": "<think>a</think>b", "tool_calls": [{"function": {"name": "f", "arguments": {"x": [1, 2.5]}}}]}, {"role": "tool", "content": "r"}]`,
		`[{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object", "properties": {"x": {"type": "array"}}}}}]`, false, true)
	f.Add(`[{"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": "{\"a\": 1}"}}]}]`, `[{"name": 3}]`, true, true)
	f.Add(`[{"role": 1, "content": {"a": []}}, [], null, "x"]`, `[[], {}, 2]`, true, false)
	f.Fuzz(func(t *testing.T, messages, tools string, addGenerationPrompt, openAI bool) {
		for _, tmpl := range templates {
			in := Input{Messages: json.RawMessage(messages), Tools: json.RawMessage(tools), AddGenerationPrompt: addGenerationPrompt, OpenAI: openAI}
			out, err := tmpl.Render(in)
			var te *Error
			if err != nil && !errors.As(err, &te) {
				t.Fatalf("error %v (%T) is not a *chat.Error", err, err)
			}
			again, err2 := tmpl.Render(in)
			if again != out || (err == nil) != (err2 == nil) {
				t.Fatalf("rendering twice differs: %q, %v then %q, %v", out, err, again, err2)
			}
		}
	})
}
