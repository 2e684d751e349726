package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func sse(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, e := range events {
		fmt.Fprintf(w, "data: %s\n\n", e)
	}
}

func TestStreamChat(t *testing.T) {
	var got map[string]any
	var session string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, `{"error":{"message":"no","type":"x"}}`, 401)
			return
		}
		session = r.Header.Get("X-Session-ID")
		_ = json.NewDecoder(r.Body).Decode(&got)
		sse(w,
			`{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{"reasoning_content":"hmm"},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\""}}]},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":": 1}"}}]},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			`{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":7}}}`,
			`[DONE]`)
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL + "/v1", APIKey: "k", Model: "m"}
	think, temp := false, 0.0
	var pieces []Delta
	reply, err := c.StreamChat(context.Background(), []Message{{Role: "user", Content: "hi"}},
		ChatOptions{MaxTokens: 5, Temperature: &temp, Think: &think, SessionID: "s1"},
		func(d Delta) error { pieces = append(pieces, d); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if reply.Message.Content != "Hello" || reply.Message.ReasoningContent != "hmm" || reply.FinishReason != "tool_calls" || len(pieces) != 3 {
		t.Errorf("reply %+v, pieces %+v", reply, pieces)
	}
	if len(reply.Message.ToolCalls) != 1 || reply.Message.ToolCalls[0].Function.Arguments != `{"a": 1}` || reply.Message.ToolCalls[0].ID != "c1" {
		t.Errorf("tool calls %+v", reply.Message.ToolCalls)
	}
	if reply.Usage != (Usage{PromptTokens: 10, CachedTokens: 7, CompletionTokens: 5}) || reply.TTFT <= 0 {
		t.Errorf("usage %+v ttft %v", reply.Usage, reply.TTFT)
	}
	if got["model"] != "m" || got["max_tokens"] != 5.0 || got["temperature"] != 0.0 || got["stream"] != true || session != "s1" {
		t.Errorf("request %v session %q", got, session)
	}
	if kw, _ := got["chat_template_kwargs"].(map[string]any); kw["enable_thinking"] != false {
		t.Errorf("chat_template_kwargs %v", got["chat_template_kwargs"])
	}
}

func TestStreamChatErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		check   func(error) bool
	}{
		{"status", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(400)
			fmt.Fprint(w, `{"error":{"message":"bad temperature","type":"invalid_request_error","param":"temperature"}}`)
		}, func(err error) bool {
			var ae *APIError
			return errors.As(err, &ae) && ae.Status == 400 && ae.Param == "temperature"
		}},
		{"in stream", func(w http.ResponseWriter, r *http.Request) {
			sse(w, `{"choices":[{"index":0,"delta":{"content":"x"}}]}`, `{"error":{"message":"boom","type":"internal_error"}}`, `[DONE]`)
		}, func(err error) bool { return err != nil && strings.Contains(err.Error(), "boom") }},
		{"cut short", func(w http.ResponseWriter, r *http.Request) {
			sse(w, `{"choices":[{"index":0,"delta":{"content":"x"}}]}`)
		}, func(err error) bool { return errors.Is(err, errNoDone) }},
		{"garbage", func(w http.ResponseWriter, r *http.Request) { sse(w, `{not json`) },
			func(err error) bool { return err != nil && strings.Contains(err.Error(), "bad chunk") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			c := &Client{BaseURL: srv.URL}
			_, err := c.StreamChat(context.Background(), []Message{{Role: "user", Content: "hi"}}, ChatOptions{}, func(Delta) error { return nil })
			if !tc.check(err) {
				t.Errorf("error %v", err)
			}
		})
	}
}
