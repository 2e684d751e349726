package server

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

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
