// Package client is a streaming chat client for OpenAI-compatible servers
// (ellm serve, vLLM): `ellm run --url` and `ellm bench serve` use it.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/ellm-dev/ellm/pkg/server/openai"
)

// Client talks to one server. The zero HTTP uses http.DefaultClient.
type Client struct {
	// BaseURL is the server's address, e.g. http://127.0.0.1:8000 (a
	// trailing /v1 is accepted).
	BaseURL string
	APIKey  string
	// Model is sent as the request's model; "" lets the server choose.
	Model string
	HTTP  *http.Client
}

// Message is a chat message.
type Message struct {
	Role             string     `json:"role"`
	Content          string     `json:"content"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
	Name             string     `json:"name,omitempty"`
}

// ToolCall is a call the assistant made.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and holds its JSON arguments.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ChatOptions are a request's generation settings; nil pointers leave the
// server's defaults.
type ChatOptions struct {
	MaxTokens                         int
	Temperature, TopP, MinP           *float64
	TopK                              *int
	Seed                              *int64
	Stop                              []string
	PresencePenalty, FrequencyPenalty *float64
	RepetitionPenalty                 *float64
	// Think sets chat_template_kwargs.enable_thinking when not nil.
	Think *bool
	// SessionID names an ellm transcript session (sent as X-Session-ID).
	SessionID string
	// Tools is the OpenAI tools array, passed through.
	Tools json.RawMessage
}

// Delta is a piece of the streamed reply.
type Delta struct {
	Content, Reasoning string
}

// Reply is the finished reply.
type Reply struct {
	// Message is the assistant message, ready to append to the history.
	Message      Message
	FinishReason string
	Usage        Usage
	// TTFT is the time from sending the request to the first content or
	// reasoning piece.
	TTFT time.Duration
}

// Usage counts the request's tokens.
type Usage struct {
	PromptTokens, CachedTokens, CompletionTokens int
}

// APIError is an error response from the server.
type APIError struct {
	Status               int
	Message, Type, Param string
}

func (e *APIError) Error() string {
	if e.Param != "" {
		return fmt.Sprintf("server: %d %s (%s): %s", e.Status, e.Type, e.Param, e.Message)
	}
	return fmt.Sprintf("server: %d %s: %s", e.Status, e.Type, e.Message)
}

func (c *Client) url(path string) string {
	return strings.TrimSuffix(strings.TrimSuffix(c.BaseURL, "/"), "/v1") + path
}

func (c *Client) do(ctx context.Context, method, path string, body any, header http.Header) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(path), r)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return nil, apiError(resp.StatusCode, b)
	}
	return resp, nil
}

func apiError(status int, body []byte) error {
	var e openai.ErrorResponse
	if json.Unmarshal(body, &e) != nil || e.Error.Message == "" {
		return &APIError{Status: status, Type: http.StatusText(status), Message: strings.TrimSpace(string(body))}
	}
	ae := &APIError{Status: status, Message: e.Error.Message, Type: e.Error.Type}
	if e.Error.Param != nil {
		ae.Param = *e.Error.Param
	}
	return ae
}

// StreamChat sends the conversation and calls fn with each piece of the
// reply as it arrives; fn's error stops the request and is returned.
func (c *Client) StreamChat(ctx context.Context, messages []Message, opts ChatOptions, fn func(Delta) error) (Reply, error) {
	body := map[string]any{"messages": messages, "stream": true, "stream_options": map[string]bool{"include_usage": true}}
	if c.Model != "" {
		body["model"] = c.Model
	}
	set := func(k string, v any, ok bool) {
		if ok {
			body[k] = v
		}
	}
	set("max_tokens", opts.MaxTokens, opts.MaxTokens > 0)
	set("temperature", opts.Temperature, opts.Temperature != nil)
	set("top_p", opts.TopP, opts.TopP != nil)
	set("min_p", opts.MinP, opts.MinP != nil)
	set("top_k", opts.TopK, opts.TopK != nil)
	set("seed", opts.Seed, opts.Seed != nil)
	set("stop", opts.Stop, len(opts.Stop) > 0)
	set("presence_penalty", opts.PresencePenalty, opts.PresencePenalty != nil)
	set("frequency_penalty", opts.FrequencyPenalty, opts.FrequencyPenalty != nil)
	set("repetition_penalty", opts.RepetitionPenalty, opts.RepetitionPenalty != nil)
	set("chat_template_kwargs", map[string]any{"enable_thinking": opts.Think}, opts.Think != nil)
	set("tools", opts.Tools, len(opts.Tools) > 0)
	header := http.Header{}
	if opts.SessionID != "" {
		header.Set("X-Session-ID", opts.SessionID)
	}
	start := time.Now()
	resp, err := c.do(ctx, http.MethodPost, "/v1/chat/completions", body, header)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	reply := Reply{Message: Message{Role: "assistant"}}
	var content, reasoning strings.Builder
	err = readEvents(resp.Body, func(data []byte) error {
		var chunk openai.ChatCompletionChunk
		if err := json.Unmarshal(data, &chunk); err != nil {
			return fmt.Errorf("bad chunk %q: %w", data, err)
		}
		if chunk.Usage != nil {
			reply.Usage = Usage{PromptTokens: chunk.Usage.PromptTokens, CompletionTokens: chunk.Usage.CompletionTokens}
			if d := chunk.Usage.PromptTokensDetails; d != nil {
				reply.Usage.CachedTokens = d.CachedTokens
			}
		}
		for _, ch := range chunk.Choices {
			if ch.FinishReason != nil {
				reply.FinishReason = *ch.FinishReason
			}
			var d Delta
			if ch.Delta.Content != nil {
				d.Content = *ch.Delta.Content
			}
			if ch.Delta.ReasoningContent != nil {
				d.Reasoning = *ch.Delta.ReasoningContent
			}
			for _, tc := range ch.Delta.ToolCalls {
				reply.Message.ToolCalls = mergeCall(reply.Message.ToolCalls, tc)
			}
			if d.Content == "" && d.Reasoning == "" {
				continue
			}
			if reply.TTFT == 0 {
				reply.TTFT = time.Since(start)
			}
			content.WriteString(d.Content)
			reasoning.WriteString(d.Reasoning)
			if err := fn(d); err != nil {
				return err
			}
		}
		return nil
	})
	reply.Message.Content = content.String()
	reply.Message.ReasoningContent = reasoning.String()
	return reply, err
}

func mergeCall(calls []ToolCall, tc openai.ToolCall) []ToolCall {
	i := len(calls)
	if tc.Index != nil {
		i = *tc.Index
	}
	if i < len(calls) {
		calls[i].Function.Arguments += tc.Function.Arguments
		return calls
	}
	return append(calls, ToolCall{ID: tc.ID, Type: "function", Function: FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
}

// errNoDone is a stream that ended without [DONE].
var errNoDone = errors.New("server: stream ended early")

// readEvents calls fn with each server-sent event's data until [DONE].
func readEvents(r io.Reader, fn func(data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // blank separators, comments, other fields
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			return nil
		}
		var e openai.ErrorResponse
		if bytes.HasPrefix(data, []byte(`{"error"`)) && json.Unmarshal(data, &e) == nil {
			return &APIError{Status: http.StatusOK, Message: e.Error.Message, Type: e.Error.Type}
		}
		if err := fn(data); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errNoDone
}

// Models lists the served model ids.
func (c *Client) Models(ctx context.Context) ([]string, error) {
	resp, err := c.do(ctx, http.MethodGet, "/v1/models", nil, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list openai.ModelList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("models: %w", err)
	}
	ids := make([]string, len(list.Data))
	for i, m := range list.Data {
		ids[i] = m.ID
	}
	return ids, nil
}

// Health reports whether the server answers /health.
func (c *Client) Health(ctx context.Context) error {
	resp, err := c.do(ctx, http.MethodGet, "/health", nil, nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}
