package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// agentReply is a fake agent: after a user message it thinks and calls a
// tool, after the tool's answer it thinks and answers.
func agentReply(prompt string) string {
	n := strings.Count(prompt, "<|im_start|>")
	if strings.HasSuffix(prompt, "</tool_response><|im_end|>\n<|im_start|>assistant\n") {
		return fmt.Sprintf("<think>\nThe tool answered (%d).\n</think>\n\nIt is sunny, turn %d.", n, n)
	}
	return fmt.Sprintf("<think>\nI should call the tool (%d).\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"City%d\"}}\n</tool_call>", n, n)
}

type turnUsage struct {
	prompt, cached, completion int
	content                    string
	// added is what Qwen3's template renders for the messages this
	// request added after the previous reply (from the second on).
	added string
}

// runAgent plays a conversation of the given number of requests, re-sending
// the whole history each time, and returns each request's usage.
func runAgent(t *testing.T, c openai.Client, turns int, opts ...option.RequestOption) ([]turnUsage, []openai.ChatCompletionMessageParamUnion) {
	t.Helper()
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are a weather agent."), openai.UserMessage("weather in City0?")}
	var out []turnUsage
	added := ""
	for turn := range turns {
		resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{weatherTool}, Temperature: openai.Float(0)}, opts...)
		if err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		u := resp.Usage
		out = append(out, turnUsage{int(u.PromptTokens), int(u.PromptTokensDetails.CachedTokens), int(u.CompletionTokens), resp.Choices[0].Message.Content, added})
		msg := resp.Choices[0].Message
		msgs = append(msgs, msg.ToParam())
		if len(msg.ToolCalls) > 0 {
			answer := fmt.Sprintf("sunny in %s", msg.ToolCalls[0].Function.Arguments)
			msgs = append(msgs, openai.ToolMessage(answer, msg.ToolCalls[0].ID))
			added = "\n<|im_start|>user\n<tool_response>\n" + answer + "\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
		} else {
			question := fmt.Sprintf("and the weather in City%d?", turn)
			msgs = append(msgs, openai.UserMessage(question))
			added = "\n<|im_start|>user\n" + question + "<|im_end|>\n<|im_start|>assistant\n"
		}
	}
	return out, msgs
}

func TestTranscriptSessions(t *testing.T) {
	const turns = 20
	sessEng := newFakeEngine(t, agentReply)
	_, sessBase := startServer(t, sessEng, Options{})
	withSession, _ := runAgent(t, newClient(sessBase), turns, option.WithHeader("X-Session-ID", "agent-1"))

	plainEng := newFakeEngine(t, agentReply)
	_, plainBase := startServer(t, plainEng, Options{})
	plain, msgs := runAgent(t, newClient(plainBase), turns)

	for i := 1; i < turns; i++ {
		s, prev := withSession[i], withSession[i-1]
		// With a session the prompt is the previous transcript (all
		// cached) plus the new messages: only those are prefilled.
		if s.cached != prev.prompt+prev.completion {
			t.Errorf("turn %d: cached %d, want the whole transcript %d", i, s.cached, prev.prompt+prev.completion)
		}
		newTokens := s.prompt - s.cached
		if eng := sessEng.prefilled[i]; eng != newTokens {
			t.Errorf("turn %d: engine prefilled %d, usage says %d", i, eng, newTokens)
		}
		if want := len(fakeTokenizer{}.Encode(s.added)); newTokens != want {
			t.Errorf("turn %d: %d new tokens prefilled, want the %d of %q", i, newTokens, want, s.added)
		}
		// Without one the engine recomputes from where the re-rendered
		// history diverges: at most the last reply and the new messages.
		p := plain[i]
		if got, limit := p.prompt-p.cached, newTokens+prev.completion; got > limit {
			t.Errorf("turn %d: prefix mode prefilled %d, more than new messages + last reply (%d)", i, got, limit)
		}
		if p.prompt-p.cached <= newTokens {
			t.Errorf("turn %d: prefix mode prefilled %d, expected more than the session's %d (the re-rendered reply)", i, p.prompt-p.cached, newTokens)
		}
		if p.content != s.content {
			t.Errorf("turn %d: replies differ: %q vs %q", i, p.content, s.content)
		}
	}
	// The same conversation sent cold gets the same reply as in prefix mode.
	coldEng := newFakeEngine(t, agentReply)
	_, coldBase := startServer(t, coldEng, Options{})
	cold := newClient(coldBase)
	resp, err := cold.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Messages: msgs[:len(msgs)-1], Tools: []openai.ChatCompletionToolUnionParam{weatherTool}, Temperature: openai.Float(0)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != plain[turns-1].content && len(resp.Choices[0].Message.ToolCalls) == 0 {
		t.Errorf("cold reply %q, prefix mode %q", resp.Choices[0].Message.Content, plain[turns-1].content)
	}
}

func TestSessionChangedHistoryFallsBack(t *testing.T) {
	eng := newFakeEngine(t, agentReply)
	_, base := startServer(t, eng, Options{})
	c := newClient(base)
	sess := option.WithJSONSet("session_id", "s")
	_, msgs := runAgent(t, c, 2, sess)
	msgs[1] = openai.UserMessage("weather in Elsewhere?") // the client rewrote history
	resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{weatherTool}}, sess)
	if err != nil {
		t.Fatal(err)
	}
	rendered := eng.prefilled[len(eng.prefilled)-1]
	if int(resp.Usage.PromptTokens)-int(resp.Usage.PromptTokensDetails.CachedTokens) != rendered || rendered < 20 {
		t.Errorf("fallback prefilled %d (usage %+v)", rendered, resp.Usage)
	}
	if hits := metric(t, base, "ellm_session_hits_total"); hits != "1" {
		t.Errorf("session hits %s, want 1", hits)
	}
	if misses := metric(t, base, "ellm_session_misses_total"); misses != "2" {
		t.Errorf("session misses %s, want 2 (new session, changed history)", misses)
	}
}

func metric(t *testing.T, base, name string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no metric %s", name)
	}
	return string(m[1])
}

func TestSessionsSurviveRestart(t *testing.T) {
	eng := newFakeEngine(t, agentReply)
	s1, base := startServer(t, eng, Options{MaxSessions: 1})
	c := newClient(base)
	sess := option.WithHeader("X-Session-ID", "persist")
	usage, msgs := runAgent(t, c, 2, sess)
	// Another session pushes the first out of memory (MaxSessions 1).
	runAgent(t, c, 1, option.WithHeader("X-Session-ID", "other"))
	if _, ok := s1.sessions.byKey["persist"]; ok {
		t.Fatal("session not evicted from memory")
	}
	// A new server on the same engine store continues the session.
	eng2 := newFakeEngine(t, agentReply)
	eng2.store = eng.store
	_, base2 := startServer(t, eng2, Options{})
	c2 := newClient(base2)
	resp, err := c2.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{weatherTool}}, sess)
	if err != nil {
		t.Fatal(err)
	}
	if hits := metric(t, base2, "ellm_session_hits_total"); hits != "1" {
		t.Fatalf("session not found after restart (hits %s)", hits)
	}
	last := usage[len(usage)-1]
	if want := last.prompt + last.completion + len(fakeTokenizer{}.Encode("\n<|im_start|>user\nand the weather in City1?<|im_end|>\n<|im_start|>assistant\n")); int(resp.Usage.PromptTokens) != want {
		t.Errorf("prompt %d tokens, want %d: the transcript plus the new messages", resp.Usage.PromptTokens, want)
	}
}
