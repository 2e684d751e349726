package server

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/pkg/chat"
	openaiwire "github.com/ellm-dev/ellm/pkg/server/openai"
	"github.com/ellm-dev/ellm/pkg/sharedtest"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

func TestResponseFormat(t *testing.T) {
	// The fake model wants to write prose around the JSON; the constraint
	// keeps only what the schema allows (the fake falls back to the lowest
	// allowed token when its script is masked).
	eng := newFakeEngine(t, constReply(`{"city": "Paris", "temp": 21}`))
	var prompts []string
	inner := eng.reply
	eng.reply = func(p string) string { prompts = append(prompts, p); return inner(p) }
	_, base := startServer(t, eng, Options{})
	c := newClient(base)
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"city": map[string]any{"type": "string"}, "temp": map[string]any{"type": "integer"}},
		"required": []string{"city", "temp"}, "additionalProperties": false}
	resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather?")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "w", Schema: schema, Strict: openai.Bool(true)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		City string
		Temp int
	}
	if err := json.Unmarshal([]byte(resp.Choices[0].Message.Content), &got); err != nil || got.City != "Paris" || got.Temp != 21 {
		t.Errorf("content %q: %v", resp.Choices[0].Message.Content, err)
	}
	if !strings.HasSuffix(prompts[0], "<think>\n\n</think>\n\n") {
		t.Errorf("constrained prompt does not disable thinking: %q", prompts[0])
	}

	// A schema the script violates: "temp" must be a string here, so the
	// script's digits are masked and the reply still validates as JSON.
	schema["properties"].(map[string]any)["temp"] = map[string]any{"enum": []string{"warm", "cold"}}
	resp, err = c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather?")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "w", Schema: schema}}},
		MaxTokens: openai.Int(200),
	})
	if err != nil {
		t.Fatal(err)
	}
	content := resp.Choices[0].Message.Content
	if !strings.HasPrefix(content, `{"city": "Paris", "temp": `) || strings.Contains(content, "21") {
		t.Errorf("constraint not applied: %q", content)
	}

	for _, bad := range []string{
		`{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"strange"}}}`,
		`{"type":"json_schema","json_schema":{"name":"x"}}`,
		`{"type":"xml"}`,
	} {
		_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}},
			withRawField("response_format", bad))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
			t.Errorf("%s: %v, want 400", bad, err)
		}
	}
}

func TestJSONObject(t *testing.T) {
	eng := newFakeEngine(t, constReply(`{"a": [1, true]}`))
	_, base := startServer(t, eng, Options{})
	c := newClient(base)
	resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Messages:       []openai.ChatCompletionMessageParamUnion{openai.UserMessage("json please")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != `{"a": [1, true]}` {
		t.Errorf("content %q", got)
	}
}

func TestToolChoiceRequired(t *testing.T) {
	// The script calls get_weather with a number where the schema wants a
	// string; the constraint forces the call's shape.
	call := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	eng := newFakeEngine(t, constReply(call))
	_, base := startServer(t, eng, Options{})
	c := newClient(base)
	for _, choice := range []openai.ChatCompletionToolChoiceOptionUnionParam{
		{OfAuto: openai.String("required")},
		openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}),
	} {
		resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Messages:   []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather in Paris?")},
			Tools:      []openai.ChatCompletionToolUnionParam{weatherTool},
			ToolChoice: choice,
		})
		if err != nil {
			t.Fatal(err)
		}
		ch := resp.Choices[0]
		if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].Function.Arguments != `{"city": "Paris"}` {
			t.Errorf("got %+v", ch)
		}
	}
	_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Messages:   []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")},
		Tools:      []openai.ChatCompletionToolUnionParam{weatherTool},
		ToolChoice: openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "nope"}),
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Errorf("unknown named tool: %v", err)
	}
}

// withRawField sets a body field to a JSON value the typed params cannot
// express (invalid on purpose).
func withRawField(key, raw string) option.RequestOption {
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		panic(err)
	}
	return option.WithJSONSet(key, v)
}

// TestToolChoiceXML forces calls in Qwen3-Coder's XML format. The script
// writes two calls; parallel_tool_calls decides whether the second may
// follow.
func TestToolChoiceXML(t *testing.T) {
	script := "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>\n" +
		"<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>\n</tool_call>"
	eng := newFakeEngine(t, constReply(script))
	coder, err := chat.Load(sharedtest.Path(t, "qwen3-coder-template"))
	if err != nil {
		t.Fatal(err)
	}
	eng.tmpl = coder
	_, base := startServer(t, eng, Options{})
	c := newClient(base)
	for _, parallel := range []bool{false, true} {
		resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Messages:          []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather in Paris?")},
			Tools:             []openai.ChatCompletionToolUnionParam{weatherTool},
			ToolChoice:        openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
			ParallelToolCalls: openai.Bool(parallel),
			MaxTokens:         openai.Int(400),
		})
		if err != nil {
			t.Fatal(err)
		}
		ch := resp.Choices[0]
		want := []string{`{"city": "Paris"}`}
		if parallel {
			want = append(want, `{"city": "Rome"}`)
		}
		var got []string
		for _, tc := range ch.Message.ToolCalls {
			got = append(got, tc.Function.Arguments)
		}
		if ch.FinishReason != "tool_calls" || ch.Message.Content != "" || !slices.Equal(got, want) {
			t.Errorf("parallel %v: finish %q, content %q, calls %q, want %q", parallel, ch.FinishReason, ch.Message.Content, got, want)
		}
	}
}

// TestToolsValidated: every tool is checked whatever tool_choice says, and
// the error names the tool.
func TestToolsValidated(t *testing.T) {
	eng := newFakeEngine(t, constReply("hi"))
	_, base := startServer(t, eng, Options{})
	c := newClient(base)
	for _, tc := range []struct{ tools, want string }{
		{`[{"type":"function","function":{"name":"a","parameters":5}}]`, `tool "a"`},
		{`[{"type":"function","function":{"name":"ok"}},{"type":"function","function":{"name":"loop","parameters":{"$ref":"#"}}}]`, `tool "loop"`},
		{`[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"a"}}]`, "second tool"},
		{`[{"type":"function","function":{"name":"a","parameters":{"type":"object","properties":{"x":{"type":"string","pattern":"(?<=a)"}}}}}]`, "pattern"},
		{`[{"type":"function","function":{"name":"a","parameters":{"type":"object","properties":{"x":{"type":"array","uniqueItems":true}}}}}]`, "uniqueItems"},
	} {
		for _, choice := range []string{`"auto"`, `"none"`, `"required"`} {
			_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}},
				withRawField("tools", tc.tools), withRawField("tool_choice", choice))
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, tc.want) {
				t.Errorf("%s with tool_choice %s: %v, want a 400 with %q", tc.tools, choice, err, tc.want)
			}
		}
	}
}

// TestGrammarsCached: requests with the same schema or tools share one
// compiled grammar (and so its masks); --json-style compact lays out
// response_format output without spaces.
func TestGrammarsCached(t *testing.T) {
	eng := newFakeEngine(t, constReply(`{"a":1}`))
	s, base := startServer(t, eng, Options{JSONStyle: "compact"})
	rf := &openaiwire.ResponseFormat{Type: "json_schema", JSONSchema: &openaiwire.JSONSchema{Name: "x", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}}}`)}}
	g1, err := s.chatGrammar(rf, openaiwire.VLLMSampling{}, openaiwire.ToolChoice{Mode: "none"}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := s.chatGrammar(rf, openaiwire.VLLMSampling{}, openaiwire.ToolChoice{Mode: "none"}, nil, true)
	tools := []openaiwire.Tool{{Type: "function", Function: openaiwire.Function{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	t1, err := s.chatGrammar(nil, openaiwire.VLLMSampling{}, openaiwire.ToolChoice{Mode: "required"}, tools, false)
	if err != nil {
		t.Fatal(err)
	}
	t2, _ := s.chatGrammar(nil, openaiwire.VLLMSampling{}, openaiwire.ToolChoice{Mode: "required"}, tools, false)
	t3, _ := s.chatGrammar(nil, openaiwire.VLLMSampling{}, openaiwire.ToolChoice{Mode: "required"}, tools, true)
	if g1 != g2 || t1 != t2 || t1 == t3 {
		t.Errorf("grammars not shared as they should be: %p %p, %p %p %p", g1, g2, t1, t2, t3)
	}
	c := newClient(base)
	resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Messages:       []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != `{"a":1}` {
		t.Errorf("compact content %q", got)
	}
}
