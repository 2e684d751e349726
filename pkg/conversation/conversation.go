// Package conversation is what lies between a chat and the engine's
// tokens, shared by the server and the terminal: the prompt a conversation
// renders to, and what a new turn adds to a session's transcript (Prompt,
// Continue); the sampling parameters of a request over the model's
// generation_config.json (Sampling); and the stream that turns generated
// tokens into text, stop strings, reasoning and tool calls (Stream).
package conversation

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/ellm-dev/ellm/pkg/chat"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/reasoning"
)

// Tokenizer is what a conversation uses of pkg/tokenizer.
type Tokenizer interface {
	Encode(text string) []int32
	Decode(ids []int32) string
	TokenBytes(id int32) []byte
	IsSpecial(id int32) bool
	VocabSize() int
}

// Model is what a conversation needs of a model directory.
type Model struct {
	Tokenizer Tokenizer
	// Template is the chat template; nil: the model takes raw text only.
	Template *chat.Template
	// Generation is generation_config.json: the sampling defaults.
	Generation modelcfg.GenerationConfig
	// EOS are the tokens that end a reply (the default stop tokens).
	EOS []int32
}

// Chat is what a chat prompt is rendered from: OpenAI messages, tools and
// the template's extra arguments (chat_template_kwargs), as JSON.
type Chat struct {
	Messages []json.RawMessage `json:"messages"`
	Tools    json.RawMessage   `json:"tools,omitempty"`
	Kwargs   json.RawMessage   `json:"kwargs,omitempty"`
}

// Session is a conversation's last request and the exact tokens the model
// saw and generated for it.
type Session struct {
	Chat       Chat
	Transcript []int32
}

// ErrNoTemplate is returned by Render for a model without a chat template.
var ErrNoTemplate = errors.New("this model has no chat template")

// Render renders c with the model's chat template, OpenAI message forms
// (content parts, arguments as JSON text) accepted.
func (m *Model) Render(c Chat, addGenerationPrompt bool) (string, error) {
	if m.Template == nil {
		return "", ErrNoTemplate
	}
	msgs, err := json.Marshal(c.Messages)
	if err != nil {
		return "", err
	}
	return m.Template.Render(chat.Input{Messages: msgs, Tools: c.Tools, AddGenerationPrompt: addGenerationPrompt,
		Kwargs: c.Kwargs, OpenAI: true})
}

// Prompt is a chat rendered and tokenized, ready to generate.
type Prompt struct {
	Tokens []int32
	// Text is the full rendering, generation prompt included.
	Text string
	// Thinking: the rendering leaves a <think> block open, so the reply
	// starts as reasoning (StreamOptions.Thinking).
	Thinking bool
	// Continued: Tokens continue the session's transcript (Continue).
	Continued bool
}

// Prompt renders c with the generation prompt and tokenizes it: the
// continuation of prev's transcript when c extends it (Continue), else the
// whole rendering. prev is nil outside a session.
func (m *Model) Prompt(prev *Session, c Chat) (Prompt, error) {
	text, err := m.Render(c, true)
	if err != nil {
		return Prompt{}, err
	}
	p := Prompt{Text: text, Thinking: reasoning.PromptOpensThinking(text)}
	if prev != nil {
		p.Tokens, p.Continued = m.Continue(*prev, c, text)
	}
	if !p.Continued {
		p.Tokens = m.Tokenizer.Encode(text)
	}
	return p, nil
}

// Continue returns the prompt that continues prev's transcript with c, whose
// full rendering (generation prompt included) is text, when c extends prev:
// prev's messages, an assistant message standing for the reply prev's
// transcript ends with, then new messages, with the same tools and kwargs.
// The prompt is the transcript, the end token closing the reply when
// generation did not (max_tokens, a stop string), then the tokens of what
// the new messages add to text after the end of that assistant turn. The
// engine then prefills just those: re-rendering the reply would not give the
// tokens that were generated (Qwen3 drops earlier <think> blocks, tool calls
// are re-rendered from JSON).
//
// The end of the assistant turn is found by counting end markers: the
// rendering of the conversation up to that turn ends with one, and text is
// cut after as many. This holds whatever the template does to earlier turns
// (it may rewrite them, not add or remove turns).
func (m *Model) Continue(prev Session, c Chat, text string) ([]int32, bool) {
	k := len(prev.Chat.Messages)
	t := prev.Transcript
	if len(c.Messages) < k+2 || len(t) == 0 || !jsonEqual(prev.Chat.Tools, c.Tools) || !jsonEqual(prev.Chat.Kwargs, c.Kwargs) {
		return nil, false
	}
	for i := range k {
		if !jsonEqual(prev.Chat.Messages[i], c.Messages[i]) {
			return nil, false
		}
	}
	var msg struct{ Role string }
	if json.Unmarshal(c.Messages[k], &msg) != nil || msg.Role != "assistant" {
		return nil, false
	}
	upto, err := m.Render(Chat{Messages: c.Messages[:k+1], Tools: c.Tools, Kwargs: c.Kwargs}, false)
	if err != nil {
		return nil, false
	}
	end, endText := int32(-1), ""
	for _, id := range m.EOS {
		if txt := string(m.Tokenizer.TokenBytes(id)); txt != "" && strings.HasSuffix(strings.TrimRight(upto, " \n"), txt) {
			end, endText = id, txt
		}
	}
	if end < 0 {
		return nil, false
	}
	prompt := slices.Clip(t)
	if last := t[len(t)-1]; last != end {
		if slices.Contains(m.EOS, last) {
			return nil, false // ended with another end token than the template's
		}
		prompt = append(prompt, end)
	}
	pos := 0
	for range strings.Count(upto, endText) {
		i := strings.Index(text[pos:], endText)
		if i < 0 {
			return nil, false
		}
		pos += i + len(endText)
	}
	return append(prompt, m.Tokenizer.Encode(text[pos:])...), true
}

// Compact returns c with every JSON value compacted (null dropped): the form
// a session keeps, in which Continue compares it.
func (c Chat) Compact() Chat {
	out := Chat{Messages: make([]json.RawMessage, len(c.Messages)), Tools: compact(c.Tools), Kwargs: compact(c.Kwargs)}
	for i, m := range c.Messages {
		out.Messages[i] = compact(m)
	}
	return out
}

func jsonEqual(a, b json.RawMessage) bool {
	return bytes.Equal(compact(a), compact(b))
}

func compact(m json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, m) != nil {
		return m
	}
	if b.String() == "null" {
		return nil
	}
	return b.Bytes()
}
