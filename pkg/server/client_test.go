package server

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/ellm-dev/ellm/pkg/client"
)

// TestClientAgainstServer runs pkg/client's streaming chat against the
// server: reasoning, content, a session's second turn prefilling little.
func TestClientAgainstServer(t *testing.T) {
	eng := newFakeEngine(t, agentReply)
	_, base := startServer(t, eng, Options{APIKey: "k"})
	c := &client.Client{BaseURL: base, APIKey: "k", Model: "fake-qwen3"}
	msgs := []client.Message{{Role: "user", Content: "weather in City0?"}}
	tools := json.RawMessage(`[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`)
	var streamed string
	reply, err := c.StreamChat(context.Background(), msgs, client.ChatOptions{SessionID: "cli", Tools: tools}, func(d client.Delta) error {
		streamed += d.Reasoning + d.Content
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if reply.FinishReason != "tool_calls" || len(reply.Message.ToolCalls) != 1 || reply.Message.ReasoningContent == "" {
		t.Fatalf("reply %+v", reply)
	}
	if streamed != reply.Message.ReasoningContent+reply.Message.Content {
		t.Errorf("streamed %q", streamed)
	}
	msgs = append(msgs, reply.Message, client.Message{Role: "tool", Content: "sunny", ToolCallID: reply.Message.ToolCalls[0].ID})
	reply2, err := c.StreamChat(context.Background(), msgs, client.ChatOptions{SessionID: "cli", Tools: tools}, func(client.Delta) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	want := len(fakeTokenizer{}.Encode("\n<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n"))
	if got := reply2.Usage.PromptTokens - reply2.Usage.CachedTokens; got != want {
		t.Errorf("second turn prefilled %d, want %d", got, want)
	}
	if ids, err := c.Models(context.Background()); err != nil || len(ids) != 1 {
		t.Errorf("models %v %v", ids, err)
	}
	if err := c.Health(context.Background()); err != nil {
		t.Error(err)
	}
}
