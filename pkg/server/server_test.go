package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/ellm-dev/ellm/pkg/conversation"
	"github.com/ellm-dev/ellm/pkg/engine"
)

// startServer serves eng on a loopback listener until the test ends.
func startServer(t *testing.T, eng Engine, opts Options) (*Server, string) {
	t.Helper()
	s, err := New(eng, modelOf(eng), opts)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := serveOn(t, s)
	return s, base
}

// modelOf is the model a test engine serves: a fake's, or a real engine's
// model directory.
func modelOf(eng Engine) *conversation.Model {
	switch e := eng.(type) {
	case interface{ model() *conversation.Model }:
		return e.model()
	case *engine.Engine:
		return e.Model().Conversation()
	case validateOnly:
		return modelOf(e.Engine)
	}
	panic(fmt.Sprintf("modelOf: unknown test engine %T", eng))
}

// serveOn serves s on a loopback listener; stop cancels Serve's context
// (SIGTERM) and returns Serve's error. The test ends with a stop.
func serveOn(t *testing.T, s *Server) (base string, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	var once sync.Once
	var serveErr error
	stop = func() error {
		once.Do(func() { cancel(); serveErr = <-done })
		return serveErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String(), stop
}

func newClient(base string, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{option.WithBaseURL(base + "/v1/"), option.WithAPIKey("k"), option.WithMaxRetries(0)}, opts...)...)
}

func constReply(text string) func(string) string { return func(string) string { return text } }

func TestChatNonStreaming(t *testing.T) {
	eng := newFakeEngine(t, constReply("<think>\nlet me see\n</think>\n\nHello there!"))
	_, base := startServer(t, eng, Options{})
	c := newClient(base)
	resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "fake-qwen3",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "\n\nHello there!" {
		t.Errorf("content %q", got)
	}
	var raw struct {
		Choices []struct {
			Message struct {
				ReasoningContent string `json:"reasoning_content"`
			}
		}
	}
	if err := json.Unmarshal([]byte(resp.RawJSON()), &raw); err != nil {
		t.Fatal(err)
	}
	if got := raw.Choices[0].Message.ReasoningContent; got != "\nlet me see\n" {
		t.Errorf("reasoning_content %q", got)
	}
	if resp.Choices[0].FinishReason != "stop" {
		t.Errorf("finish_reason %q", resp.Choices[0].FinishReason)
	}
	wantPrompt := len(fakeTokenizer{}.Encode("<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"))
	if resp.Usage.PromptTokens != int64(wantPrompt) || resp.Usage.CompletionTokens != int64(len(fakeTokenizer{}.Encode("<think>\nlet me see\n</think>\n\nHello there!"))+1) {
		t.Errorf("usage %+v, want %d prompt tokens", resp.Usage, wantPrompt)
	}
}

func TestChatStreaming(t *testing.T) {
	eng := newFakeEngine(t, constReply("<think>\nhm\n</think>\n\nStreamed héllo 世界!"))
	_, base := startServer(t, eng, Options{})
	c := newClient(base)
	stream := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         "fake-qwen3",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	acc := openai.ChatCompletionAccumulator{}
	var reasoning strings.Builder
	chunks := 0
	for stream.Next() {
		ch := stream.Current()
		acc.AddChunk(ch)
		chunks++
		if len(ch.Choices) > 0 {
			var d struct {
				ReasoningContent string `json:"reasoning_content"`
			}
			_ = json.Unmarshal([]byte(ch.Choices[0].Delta.RawJSON()), &d)
			reasoning.WriteString(d.ReasoningContent)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != "\n\nStreamed héllo 世界!" {
		t.Errorf("content %q", got)
	}
	if reasoning.String() != "\nhm\n" {
		t.Errorf("reasoning %q", reasoning.String())
	}
	if acc.Choices[0].FinishReason != "stop" || acc.Usage.TotalTokens == 0 {
		t.Errorf("finish %q usage %+v", acc.Choices[0].FinishReason, acc.Usage)
	}
	if chunks < 10 {
		t.Errorf("only %d chunks: not streamed", chunks)
	}
}

var weatherTool = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name:        "get_weather",
	Description: openai.String("weather of a city"),
	Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
		"required": []string{"city"}},
})

func TestToolCallsRoundTrip(t *testing.T) {
	eng := newFakeEngine(t, func(prompt string) string {
		if strings.Contains(prompt, "<tool_response>") {
			return "It is sunny in Paris."
		}
		return "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	})
	_, base := startServer(t, eng, Options{})
	c := newClient(base)
	params := openai.ChatCompletionNewParams{
		Model:    "fake-qwen3",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather in Paris?")},
		Tools:    []openai.ChatCompletionToolUnionParam{weatherTool},
	}
	for _, streaming := range []bool{false, true} {
		var msg openai.ChatCompletionMessage
		var finish string
		if streaming {
			stream := c.Chat.Completions.NewStreaming(context.Background(), params)
			acc := openai.ChatCompletionAccumulator{}
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			msg, finish = acc.Choices[0].Message, acc.Choices[0].FinishReason
		} else {
			resp, err := c.Chat.Completions.New(context.Background(), params)
			if err != nil {
				t.Fatal(err)
			}
			msg, finish = resp.Choices[0].Message, resp.Choices[0].FinishReason
		}
		if finish != "tool_calls" || len(msg.ToolCalls) != 1 {
			t.Fatalf("stream=%v: finish %q, %d calls", streaming, finish, len(msg.ToolCalls))
		}
		call := msg.ToolCalls[0]
		if call.Function.Name != "get_weather" || call.Function.Arguments != `{"city": "Paris"}` || call.ID == "" {
			t.Errorf("stream=%v: call %+v", streaming, call)
		}
		next := params
		next.Messages = append(append([]openai.ChatCompletionMessageParamUnion{}, params.Messages...), msg.ToParam(), openai.ToolMessage("sunny, 24C", call.ID))
		resp, err := c.Chat.Completions.New(context.Background(), next)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Choices[0].Message.Content; got != "It is sunny in Paris." {
			t.Errorf("stream=%v: answer after tool %q", streaming, got)
		}
	}
}

func TestCompletions(t *testing.T) {
	eng := newFakeEngine(t, constReply(" world. STOP here"))
	_, base := startServer(t, eng, Options{})
	c := newClient(base)
	resp, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
		Model:  "fake-qwen3",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Hello")},
		Stop:   openai.CompletionNewParamsStopUnion{OfString: openai.String("STOP")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Text != " world. " || resp.Choices[0].FinishReason != "stop" || resp.Usage.PromptTokens != 5 {
		t.Errorf("got %q %q %+v", resp.Choices[0].Text, resp.Choices[0].FinishReason, resp.Usage)
	}
	stream := c.Completions.NewStreaming(context.Background(), openai.CompletionNewParams{
		Model:     "fake-qwen3",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: []int64{72, 105}},
		MaxTokens: openai.Int(4),
	})
	var text strings.Builder
	var finish string
	for stream.Next() {
		ch := stream.Current()
		if len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Text)
			if ch.Choices[0].FinishReason != "" {
				finish = string(ch.Choices[0].FinishReason)
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != " wor" || finish != "length" {
		t.Errorf("stream got %q finish %q", text.String(), finish)
	}
}

func TestErrors(t *testing.T) {
	eng := newFakeEngine(t, constReply("ok"))
	eng.seq = 200
	_, base := startServer(t, eng, Options{APIKey: "secret", MaxBodyBytes: 1 << 12})
	good := `{"model":"fake-qwen3","messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name, path, body, key string
		status                int
		param                 string
	}{
		{"ok", "/v1/chat/completions", good, "secret", 200, ""},
		{"no key", "/v1/chat/completions", good, "", 401, ""},
		{"wrong key", "/v1/chat/completions", good, "secre", 401, ""},
		{"malformed", "/v1/chat/completions", `{"model":`, "secret", 400, ""},
		{"not json", "/v1/chat/completions", `hello`, "secret", 400, ""},
		{"wrong type", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":"ten"}`, "secret", 400, "max_tokens"},
		{"unknown field", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"frobnicate":1}`, "secret", 200, ""},
		{"invalid utf8", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", "secret", 400, ""},
		{"huge", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 1<<13) + `"}]}`, "secret", 413, ""},
		{"unknown model", "/v1/chat/completions", `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, "secret", 404, "model"},
		{"no messages", "/v1/chat/completions", `{"messages":[]}`, "secret", 400, "messages"},
		{"bad role", "/v1/chat/completions", `{"messages":[{"role":"wizard","content":"hi"}]}`, "secret", 400, "messages[0].role"},
		{"bad temperature", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"temperature":-1}`, "secret", 400, "temperature"},
		{"too long", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":190}`, "secret", 400, "max_tokens"},
		{"n", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"n":2}`, "secret", 400, "n"},
		{"bad tool choice", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"tool_choice":"maybe"}`, "secret", 400, "tool_choice"},
		{"bad content", "/v1/chat/completions", `{"messages":[{"role":"user","content":5}]}`, "secret", 400, "messages[0].content"},
		{"bad part", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, "secret", 400, "messages[0].content"},
		{"bad token id", "/detokenize", `{"tokens":[1,99999]}`, "secret", 400, "tokens"},
		{"bad prompt", "/v1/completions", `{"prompt":{"a":1}}`, "secret", 400, "prompt"},
		{"unknown route", "/v2/everything", `{}`, "secret", 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", base+tc.path, strings.NewReader(tc.body))
			if tc.key != "" {
				req.Header.Set("Authorization", "Bearer "+tc.key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if tc.status == 200 {
				return
			}
			var e struct {
				Error struct {
					Message, Type string
					Param         *string
				}
			}
			if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
				t.Fatalf("not an OpenAI error body: %s", body)
			}
			if tc.param != "" && (e.Error.Param == nil || *e.Error.Param != tc.param) {
				t.Errorf("param %v, want %q (%s)", e.Error.Param, tc.param, body)
			}
		})
	}
	resp, err := http.Get(base + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("unhealthy after bad input: %v %v", err, resp)
	}
	resp.Body.Close()
	// The official client surfaces the error with its status.
	c := newClient(base, option.WithAPIKey("secret"))
	_, err = c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "nope", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Errorf("openai client error %v", err)
	}
}

func TestConcurrentRequestsAndDisconnect(t *testing.T) {
	eng := newFakeEngine(t, func(prompt string) string {
		i := strings.LastIndex(prompt, "req ")
		return "answer to " + prompt[i:i+6]
	})
	eng.delay = time.Millisecond
	_, base := startServer(t, eng, Options{})
	c := newClient(base)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			q := fmt.Sprintf("req %02d", i)
			resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(q)}})
			if err != nil {
				errs <- err
				return
			}
			if got := resp.Choices[0].Message.Content; got != "answer to "+q {
				errs <- fmt.Errorf("%s: got %q", q, got)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// A client that goes away frees its slot.
	eng.delay = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("req 99")}})
	if !stream.Next() {
		t.Fatal(stream.Err())
	}
	if eng.Stats().SlotsBusy != 1 {
		t.Fatalf("slots busy %d", eng.Stats().SlotsBusy)
	}
	cancel()
	stream.Close()
	deadline := time.Now().Add(5 * time.Second)
	for eng.Stats().SlotsBusy != 0 {
		if time.Now().After(deadline) {
			t.Fatal("slot not freed after disconnect")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestModelsTokenizeMetrics(t *testing.T) {
	eng := newFakeEngine(t, constReply("ok"))
	_, base := startServer(t, eng, Options{ModelName: "served"})
	c := newClient(base)
	page, err := c.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != "served" {
		t.Errorf("models %+v", page.Data)
	}
	post := func(path, body string, v any) {
		t.Helper()
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	var tok struct {
		Count  int
		Tokens []int32
	}
	post("/tokenize", `{"prompt":"hi<|im_end|>"}`, &tok)
	if tok.Count != 3 || tok.Tokens[2] != fakeEnd {
		t.Errorf("tokenize %+v", tok)
	}
	var detok struct{ Prompt string }
	post("/detokenize", `{"tokens":[104,105,256]}`, &detok)
	if detok.Prompt != "hi<|im_end|>" {
		t.Errorf("detokenize %q", detok.Prompt)
	}
	post("/tokenize", `{"messages":[{"role":"user","content":"hi"}]}`, &tok)
	if want := len(fakeTokenizer{}.Encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")); tok.Count != want {
		t.Errorf("chat tokenize count %d, want %d", tok.Count, want)
	}
	if _, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "served",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`ellm_requests_total{route="POST /v1/chat/completions",status="200"} 1`,
		"ellm_time_to_first_token_seconds_count 1", "ellm_generation_tokens_total 3",
		"ellm_slots 2", "ellm_kv_positions_capacity", "ellm_queue_depth", "ellm_session_hits_total 0",
		`ellm_threads{pinned="0,2",source="2 (affinity 4 CPUs, cgroup quota 2.5 CPUs (cpu.max), 4 physical cores)"} 2`,
		`ellm_logit_screen_rows{choice="up to 2 rows a pass (measured at 4: 10.1 ms screened, 9.7 in full)"} 2`,
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestLogprobs(t *testing.T) {
	eng := newFakeEngine(t, constReply("héllo"))
	_, base := startServer(t, eng, Options{})
	c := newClient(base)
	params := openai.ChatCompletionNewParams{Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		Logprobs: openai.Bool(true), TopLogprobs: openai.Int(1)}
	resp, err := c.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	lps := resp.Choices[0].Logprobs.Content
	// One entry per generated token (the stop token has no event): the
	// byte tokens of "héllo", é being two of them.
	if len(lps) != 6 || lps[0].Token != "h" || lps[0].Logprob != -0.5 || len(lps[0].TopLogprobs) != 1 {
		t.Fatalf("logprobs %+v", lps)
	}
	if lps[1].Token != "\uFFFD" || len(lps[1].Bytes) != 1 || lps[1].Bytes[0] != 0xC3 {
		t.Errorf("partial character token %+v", lps[1])
	}
	stream := c.Chat.Completions.NewStreaming(context.Background(), params)
	n := 0
	for stream.Next() {
		if ch := stream.Current(); len(ch.Choices) > 0 {
			n += len(ch.Choices[0].Logprobs.Content)
		}
	}
	if err := stream.Err(); err != nil || n != 6 {
		t.Errorf("streamed %d logprobs: %v", n, err)
	}
	comp, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("x")}, Logprobs: openai.Int(1)})
	if err != nil {
		t.Fatal(err)
	}
	if lp := comp.Choices[0].Logprobs; len(lp.Tokens) != 6 || len(lp.TokenLogprobs) != 6 || lp.TextOffset[5] != 5 { // byte offsets: é is two bytes
		t.Errorf("completion logprobs %+v", lp)
	}
}

// TestContentParts: text parts render as their texts joined by newlines,
// and the developer role as system.
func TestContentParts(t *testing.T) {
	eng := newFakeEngine(t, constReply("ok"))
	_, base := startServer(t, eng, Options{})
	tokens := func(body string) []int32 {
		resp, err := http.Post(base+"/tokenize", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct{ Tokens []int32 }
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d %v", resp.StatusCode, err)
		}
		return out.Tokens
	}
	parts := tokens(`{"messages":[{"role":"developer","content":[{"type":"text","text":"be"},{"type":"text","text":"brief"}]},{"content":[{"type":"text","text":"hi"}],"role":"user"}]}`)
	plain := tokens(`{"messages":[{"role":"system","content":"be\nbrief"},{"role":"user","content":"hi"}]}`)
	var tok fakeTokenizer
	if got, want := tok.Decode(parts), tok.Decode(plain); got != want {
		t.Errorf("parts render %q, plain %q", got, want)
	}
}
