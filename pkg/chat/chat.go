// Package chat renders a model's Jinja chat template exactly as Hugging Face
// transformers' apply_chat_template does (trim_blocks, lstrip_blocks,
// loopcontrols, tojson = json.dumps(ensure_ascii=False), raise_exception).
//
// Messages and tools arrive as raw JSON and are converted to the template
// engine's ordered values, because key order and the int/float distinction
// reach the output through tojson: decoding into Go maps would reorder keys
// and turn 1 into 1.0.
//
// Known differences from Python jinja2, all on input a template cannot
// render meaningfully: the engine renders where jinja2 raises a TypeError on
// None (`'x' in None`, `'a' + None` renders "aNone"), so such conversations
// are not rejected (Input.OpenAI turns a null content into "" first, as vLLM
// does); integers beyond int64 become floats.
package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/ardanlabs/jinja"

	"github.com/ellm-dev/ellm/pkg/hfdir"
	"github.com/ellm-dev/ellm/pkg/toolcall"
)

// SpecialTokens are the tokenizer's special tokens that transformers passes to
// the template (its special_tokens_map). Empty fields are not passed.
type SpecialTokens struct {
	BOS, EOS, PAD, UNK string
}

// Input is one rendering request. Messages is a JSON array of message objects
// and Tools a JSON array of tool definitions (nil or null = no tools); both
// are passed to the template with their key order and number types kept.
type Input struct {
	Messages            json.RawMessage
	Tools               json.RawMessage
	AddGenerationPrompt bool
	// Kwargs is a JSON object of extra template variables, e.g.
	// {"enable_thinking": false}; nil means none. A variable absent here is
	// undefined in the template, which is not the same as null.
	Kwargs json.RawMessage
	// OpenAI prepares OpenAI-style messages as vLLM does before rendering:
	// a null or missing content becomes "", content given as a list of text
	// parts becomes their texts joined by "\n", and tool_calls arguments
	// given as JSON strings become objects ("" or null: {}). Templates such
	// as Qwen3's fail on a null content and Qwen3-Coder's on string
	// arguments. Off, messages reach the template as given (Hugging Face).
	OpenAI bool
}

// Error is a conversation the template cannot render: input that is not the
// JSON the template needs, a template runtime error, or a conversation the
// template rejects with raise_exception. It is the caller's fault (HTTP 400).
type Error struct {
	Msg string
}

func (e *Error) Error() string { return "chat template: " + e.Msg }

// Template is a compiled chat template. It is safe for concurrent use, and
// Render is deterministic: the same Input always renders the same text.
type Template struct {
	source  string
	tmpl    *jinja.Template
	special SpecialTokens
}

// New compiles a chat template source.
func New(source string, special SpecialTokens) (*Template, error) {
	tmpl, err := jinja.Compile(source)
	if err != nil {
		return nil, fmt.Errorf("compile chat template: %w", err)
	}
	return &Template{source: source, tmpl: tmpl, special: special}, nil
}

// Load reads the chat template of a model or tokenizer directory:
// chat_template.jinja when present, else tokenizer_config.json's
// chat_template. Special tokens come from tokenizer_config.json.
func Load(dir string) (*Template, error) {
	var files [2][]byte
	for i, name := range []string{"tokenizer_config.json", "chat_template.jinja"} {
		b, err := hfdir.ReadFile(dir, name)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("load chat template: %w", err)
		}
		files[i] = b
	}
	t, err := FromFiles(files[0], files[1])
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	return t, nil
}

// FromFiles builds the template of a model directory from the contents of
// its tokenizer_config.json and chat_template.jinja (nil: absent), which
// takes precedence over the config's chat_template, as in transformers.
func FromFiles(tokenizerConfig, jinja []byte) (*Template, error) {
	cfg, err := parseTokenizerConfig(tokenizerConfig)
	if err != nil {
		return nil, err
	}
	source := cfg.template
	switch {
	case jinja != nil:
		source = string(jinja)
	case source == "":
		return nil, errors.New("chat template: neither chat_template.jinja nor a chat_template in tokenizer_config.json")
	}
	return New(source, cfg.special)
}

type tokenizerConfig struct {
	template string
	special  SpecialTokens
}

// parseTokenizerConfig reads the template and special tokens of
// tokenizer_config.json; nil yields an empty config.
func parseTokenizerConfig(b []byte) (tokenizerConfig, error) {
	if b == nil {
		return tokenizerConfig{}, nil
	}
	var raw struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
		BOS          json.RawMessage `json:"bos_token"`
		EOS          json.RawMessage `json:"eos_token"`
		PAD          json.RawMessage `json:"pad_token"`
		UNK          json.RawMessage `json:"unk_token"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return tokenizerConfig{}, fmt.Errorf("tokenizer_config.json: %w", err)
	}
	var cfg tokenizerConfig
	var err error
	if cfg.template, err = templateSource(raw.ChatTemplate); err != nil {
		return tokenizerConfig{}, fmt.Errorf("tokenizer_config.json: %w", err)
	}
	for _, f := range []struct {
		raw json.RawMessage
		dst *string
	}{{raw.BOS, &cfg.special.BOS}, {raw.EOS, &cfg.special.EOS}, {raw.PAD, &cfg.special.PAD}, {raw.UNK, &cfg.special.UNK}} {
		*f.dst = tokenText(f.raw)
	}
	return cfg, nil
}

// templateSource reads chat_template, which is either a string or a list of
// {name, template} of which transformers uses the one named "default".
func templateSource(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var named []struct{ Name, Template string }
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("chat_template is neither a string nor a list of named templates")
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	return "", fmt.Errorf("chat_template has no template named \"default\"")
}

// tokenText reads a special token given as a string or as an AddedToken
// object {"content": …}.
func tokenText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var tok struct{ Content string }
	if json.Unmarshal(raw, &tok) == nil {
		return tok.Content
	}
	return ""
}

// Source returns the template text.
func (t *Template) Source() string { return t.source }

// ToolCallFormat tells which tool-call syntax the template teaches the model:
// Qwen3-Coder's XML (<function=…>) or Qwen3's JSON inside <tool_call>.
func (t *Template) ToolCallFormat() toolcall.Format {
	switch {
	case strings.Contains(t.source, "<function="):
		return toolcall.FormatXML
	case strings.Contains(t.source, "<tool_call>"):
		return toolcall.FormatJSON
	default:
		return toolcall.FormatNone
	}
}

// reserved are the variables Render sets itself; transformers raises a
// TypeError when a keyword argument repeats one of them.
var reserved = map[string]bool{"messages": true, "tools": true, "documents": true, "add_generation_prompt": true}

// Render renders a conversation. Every failure is an *Error.
func (t *Template) Render(in Input) (out string, err error) {
	data, err := t.context(in)
	if err != nil {
		return "", err
	}
	return t.render(data)
}

func (t *Template) render(data map[string]jinja.Value) (out string, err error) {
	// The engine is not ours to trust on every input: a panic inside it is
	// a conversation we cannot render, not a crashed server.
	defer func() {
		if r := recover(); r != nil {
			out, err = "", &Error{Msg: fmt.Sprintf("render: internal template engine error: %v", r)}
		}
	}()
	out, err = t.tmpl.RenderValues(data)
	if err != nil {
		return "", &Error{Msg: err.Error()}
	}
	return out, nil
}

// context builds the template variables as apply_chat_template does:
// special tokens, then kwargs (which may override them), then messages,
// tools, documents and add_generation_prompt.
func (t *Template) context(in Input) (map[string]jinja.Value, error) {
	data := make(map[string]jinja.Value, 8)
	for _, s := range []struct{ name, tok string }{
		{"bos_token", t.special.BOS}, {"eos_token", t.special.EOS},
		{"pad_token", t.special.PAD}, {"unk_token", t.special.UNK},
	} {
		if s.tok != "" {
			data[s.name] = jinja.NewString(s.tok)
		}
	}
	if len(in.Kwargs) > 0 {
		kw, err := decodeJSON(in.Kwargs)
		if err != nil {
			return nil, &Error{Msg: fmt.Sprintf("kwargs: %v", err)}
		}
		if !kw.IsNone() {
			if !kw.IsDict() {
				return nil, &Error{Msg: "kwargs: not a JSON object"}
			}
			d := kw.AsDict()
			for _, k := range d.Keys {
				if reserved[k] {
					return nil, &Error{Msg: fmt.Sprintf("kwargs: %q is set by the renderer", k)}
				}
				data[k] = d.Data[k]
			}
		}
	}
	msgs, err := decodeJSON(in.Messages)
	if err != nil {
		return nil, &Error{Msg: fmt.Sprintf("messages: %v", err)}
	}
	if !msgs.IsList() {
		return nil, &Error{Msg: "messages: not a JSON array"}
	}
	// jinja2 fails on messages[0] of an empty list, where the Go engine
	// renders undefined; OpenAI rejects an empty conversation too.
	if msgs.AsList().Len() == 0 {
		return nil, &Error{Msg: "messages: empty"}
	}
	if in.OpenAI {
		if err := normalizeOpenAI(msgs); err != nil {
			return nil, &Error{Msg: fmt.Sprintf("messages: %v", err)}
		}
	}
	data["messages"] = msgs
	tools := jinja.None()
	if len(in.Tools) > 0 {
		if tools, err = decodeJSON(in.Tools); err != nil {
			return nil, &Error{Msg: fmt.Sprintf("tools: %v", err)}
		}
		if !tools.IsNone() && !tools.IsList() {
			return nil, &Error{Msg: "tools: not a JSON array"}
		}
	}
	data["tools"] = tools
	data["documents"] = jinja.None()
	data["add_generation_prompt"] = jinja.NewBool(in.AddGenerationPrompt)
	return data, nil
}

// normalizeOpenAI applies Input.OpenAI to decoded messages.
func normalizeOpenAI(msgs jinja.Value) error {
	for i, m := range msgs.AsList().Items {
		if !m.IsDict() {
			continue
		}
		msg := m.AsDict()
		content, err := openAIContent(msg)
		if err != nil {
			return fmt.Errorf("message %d: %v", i, err)
		}
		msg.Set("content", content)
		calls, ok := msg.Get("tool_calls")
		if !ok || !calls.IsList() {
			continue
		}
		for j, c := range calls.AsList().Items {
			if !c.IsDict() {
				continue
			}
			fn, ok := c.AsDict().Get("function")
			if !ok || !fn.IsDict() {
				continue
			}
			args, _ := fn.AsDict().Get("arguments")
			switch {
			case args.IsUndefined() || args.IsNone() || (args.IsString() && args.AsString() == ""):
				fn.AsDict().Set("arguments", jinja.NewDict())
			case args.IsString():
				v, err := decodeJSON([]byte(args.AsString()))
				if err != nil {
					return fmt.Errorf("message %d tool call %d: arguments: %v", i, j, err)
				}
				fn.AsDict().Set("arguments", v)
			}
		}
	}
	return nil
}

// openAIContent is a message's content as one string.
func openAIContent(msg *jinja.Dict) (jinja.Value, error) {
	content, _ := msg.Get("content")
	switch {
	case content.IsUndefined() || content.IsNone():
		return jinja.NewString(""), nil
	case !content.IsList():
		return content, nil
	}
	var texts []string
	for _, part := range content.AsList().Items {
		if !part.IsDict() {
			return jinja.Value{}, fmt.Errorf("content part %s is not an object", part)
		}
		typ, _ := part.AsDict().Get("type")
		text, _ := part.AsDict().Get("text")
		if !typ.IsString() || typ.AsString() != "text" || !text.IsString() {
			return jinja.Value{}, fmt.Errorf("unsupported content part of type %s: only text parts are", typ)
		}
		texts = append(texts, text.AsString())
	}
	return jinja.NewString(strings.Join(texts, "\n")), nil
}
