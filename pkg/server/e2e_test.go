package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/modeldir"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
	"github.com/ellm-dev/ellm/pkg/tokenizer"
)

// tinyModel is the tiny dense Qwen3 of the shared data set.
func tinyModel(t *testing.T) string {
	return sharedtest.Path(t, "models", "tiny-qwen3-a")
}

// openModel reads a model directory.
func openModel(tb testing.TB, dir string) *modeldir.Model {
	tb.Helper()
	m, err := modeldir.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// tinyEngine loads the tiny dense Qwen3 from the shared data set.
func tinyEngine(t *testing.T, opts engine.Options) *engine.Engine {
	t.Helper()
	if opts.SequenceLength == 0 {
		opts.SequenceLength = 2048
	}
	if opts.BatchSize == 0 {
		opts.BatchSize = 2
	}
	opts.Threads = 1
	e, err := engine.New(openModel(t, tinyModel(t)), opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func greedyChat(msgs ...openai.ChatCompletionMessageParamUnion) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Messages: msgs, Temperature: openai.Float(0), MaxTokens: openai.Int(12)}
}

func TestRealEngineChat(t *testing.T) {
	e := tinyEngine(t, engine.Options{})
	defer e.Close()
	_, base := startServer(t, e, Options{})
	c := newClient(base)
	params := greedyChat(openai.UserMessage("Hello, who are you?"))
	resp, err := c.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	stream := c.Chat.Completions.NewStreaming(context.Background(), params)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if resp.Usage.CompletionTokens == 0 || resp.Choices[0].FinishReason == "" {
		t.Fatalf("response %+v", resp)
	}
	if acc.Choices[0].Message.Content != resp.Choices[0].Message.Content {
		t.Errorf("streamed %q, not streamed %q", acc.Choices[0].Message.Content, resp.Choices[0].Message.Content)
	}
	// The second identical request reuses the prompt's KV.
	if resp2, err := c.Chat.Completions.New(context.Background(), params); err != nil || resp2.Usage.PromptTokensDetails.CachedTokens == 0 {
		t.Errorf("no prefix reuse: %v %+v", err, resp2)
	}
	comp, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The capital of France is")}, MaxTokens: openai.Int(5), Temperature: openai.Float(0)})
	if err != nil || comp.Usage.CompletionTokens == 0 {
		t.Fatalf("completions: %v %+v", err, comp)
	}
}

// TestRealEngineConcurrency runs more requests than slots at once: each
// reply equals the same request's reply run alone (greedy), and a client
// that disconnects frees its slot.
func TestRealEngineConcurrency(t *testing.T) {
	e := tinyEngine(t, engine.Options{BatchSize: 2})
	defer e.Close()
	_, base := startServer(t, e, Options{})
	c := newClient(base)
	const n = 5
	alone := make([]string, n)
	for i := range n {
		resp, err := c.Chat.Completions.New(context.Background(), greedyChat(openai.UserMessage(fmt.Sprintf("question number %d", i))))
		if err != nil {
			t.Fatal(err)
		}
		alone[i] = resp.Choices[0].Message.Content
	}
	var wg sync.WaitGroup
	got := make([]string, n)
	for i := range n {
		wg.Go(func() {
			resp, err := c.Chat.Completions.New(context.Background(), greedyChat(openai.UserMessage(fmt.Sprintf("question number %d", i))))
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = resp.Choices[0].Message.Content
		})
	}
	wg.Wait()
	for i := range n {
		if got[i] != alone[i] {
			t.Errorf("request %d: batched %q, alone %q", i, got[i], alone[i])
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := greedyChat(openai.UserMessage("a long answer please"))
	p.MaxTokens = openai.Int(1500)
	stream := c.Chat.Completions.NewStreaming(ctx, p)
	if !stream.Next() {
		t.Fatal(stream.Err())
	}
	cancel()
	stream.Close()
	deadline := time.Now().Add(10 * time.Second)
	for e.Stats().SlotsBusy != 0 {
		if time.Now().After(deadline) {
			t.Fatal("slot still busy after the client left")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// userTurns plays a conversation of user questions, re-sending the whole
// history each turn, and returns each turn's usage, finish reason and the
// text its new user message adds to the rendered prompt.
func userTurns(t *testing.T, c openai.Client, turns int, opts ...option.RequestOption) (usages []turnUsage, finishes []string, msgs []openai.ChatCompletionMessageParamUnion) {
	t.Helper()
	msgs = []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse.")}
	for turn := range turns {
		q := fmt.Sprintf("Question %d: what comes next?", turn)
		msgs = append(msgs, openai.UserMessage(q))
		p := greedyChat(msgs...)
		p.MaxTokens = openai.Int(8)
		resp, err := c.Chat.Completions.New(context.Background(), p, opts...)
		if err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		u := resp.Usage
		usages = append(usages, turnUsage{prompt: int(u.PromptTokens), cached: int(u.PromptTokensDetails.CachedTokens), completion: int(u.CompletionTokens),
			content: resp.Choices[0].Message.Content, added: "\n<|im_start|>user\n" + q + "<|im_end|>\n<|im_start|>assistant\n"})
		finishes = append(finishes, resp.Choices[0].FinishReason)
		msgs = append(msgs, resp.Choices[0].Message.ToParam())
	}
	return usages, finishes, msgs
}

func TestRealEngineSessions(t *testing.T) {
	const turns = 20
	tok, err := tokenizer.Load(tinyModel(t))
	if err != nil {
		t.Fatal(err)
	}
	e := tinyEngine(t, engine.Options{BatchSize: 2})
	defer e.Close()
	_, base := startServer(t, e, Options{})
	c := newClient(base)
	sess, finishes, _ := userTurns(t, c, turns, option.WithHeader("X-Session-ID", "real"))
	for i := 1; i < turns; i++ {
		prev, u := sess[i-1], sess[i]
		// Prefilled: the new message's tokens, the reply's last token (which
		// gets its KV with them) and, when max_tokens cut the reply, the
		// <|im_end|> the server closes it with.
		want := len(tok.Encode(u.added)) + 1
		if finishes[i-1] == "length" {
			want++
		}
		if got := u.prompt - u.cached; got != want {
			t.Errorf("turn %d: prefilled %d, want %d (prev finish %s)", i, got, want, finishes[i-1])
		}
		if u.prompt != prev.prompt+prev.completion+want-1 {
			t.Errorf("turn %d: prompt %d is not the transcript %d + the new tokens", i, u.prompt, prev.prompt+prev.completion)
		}
	}

	e2 := tinyEngine(t, engine.Options{BatchSize: 2})
	defer e2.Close()
	_, base2 := startServer(t, e2, Options{})
	c2 := newClient(base2)
	plain, _, msgs := userTurns(t, c2, turns)
	for i := 1; i < turns; i++ {
		prev, u := plain[i-1], plain[i]
		if got, limit := u.prompt-u.cached, len(tok.Encode(u.added))+prev.completion+2; got > limit {
			t.Errorf("turn %d: prefix mode prefilled %d > new message + last reply (%d)", i, got, limit)
		}
	}
	// A cold server answers the last request exactly as prefix mode did.
	e3 := tinyEngine(t, engine.Options{BatchSize: 1})
	defer e3.Close()
	_, base3 := startServer(t, e3, Options{})
	c3 := newClient(base3)
	p := greedyChat(msgs[:len(msgs)-1]...)
	p.MaxTokens = openai.Int(8)
	resp, err := c3.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage.PromptTokensDetails.CachedTokens != 0 || resp.Choices[0].Message.Content != plain[turns-1].content {
		t.Errorf("cold reply %q (cached %d), prefix-mode reply %q", resp.Choices[0].Message.Content, resp.Usage.PromptTokensDetails.CachedTokens, plain[turns-1].content)
	}
}

func TestRealEngineSessionRestart(t *testing.T) {
	store := t.TempDir()
	sess := option.WithHeader("X-Session-ID", "restart")
	e := tinyEngine(t, engine.Options{BatchSize: 1, SessionStore: store})
	ctx, stop := context.WithCancel(context.Background())
	s, err := New(e, modelOf(e), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	usages, _, msgs := userTurns(t, newClient("http://"+ln.Addr().String()), 2, sess)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil { // writes the session's KV to the store
		t.Fatal(err)
	}

	e2 := tinyEngine(t, engine.Options{BatchSize: 1, SessionStore: store})
	defer e2.Close()
	_, base := startServer(t, e2, Options{})
	c := newClient(base)
	p := greedyChat(append(msgs, openai.UserMessage("And after a restart?"))...)
	resp, err := c.Chat.Completions.New(context.Background(), p, sess)
	if err != nil {
		t.Fatal(err)
	}
	last := usages[len(usages)-1]
	transcript := last.prompt + last.completion
	if hits := metric(t, base, "ellm_session_hits_total"); hits != "1" {
		t.Errorf("transcript session not found after restart (hits %s)", hits)
	}
	if got := int(resp.Usage.PromptTokensDetails.CachedTokens); got != transcript-1 {
		t.Errorf("after restart %d tokens reused, want the stored transcript's %d but its last token", got, transcript)
	}
}

// TestRealEngineStructuredOutput: the tiny model writes random tokens, yet
// under the schema's constraint its reply is a valid document.
func TestRealEngineStructuredOutput(t *testing.T) {
	e := tinyEngine(t, engine.Options{BatchSize: 1, SequenceLength: 1024})
	defer e.Close()
	_, base := startServer(t, e, Options{})
	c := newClient(base)
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"ok": map[string]any{"type": "boolean"}, "color": map[string]any{"enum": []string{"red", "green", "blue"}},
		"tags": map[string]any{"type": "array", "items": map[string]any{"type": "null"}}},
		"required": []string{"ok", "color"}, "additionalProperties": false}
	for seed := range int64(3) {
		resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Give me JSON.")},
			MaxTokens: openai.Int(600), Seed: openai.Int(seed), Temperature: openai.Float(1),
			ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
				JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "x", Schema: schema, Strict: openai.Bool(true)}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			OK    *bool
			Color string
			Tags  []any
		}
		content := resp.Choices[0].Message.Content
		t.Logf("seed %d: %s", seed, content)
		dec := json.NewDecoder(strings.NewReader(content))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil || got.OK == nil || (got.Color != "red" && got.Color != "green" && got.Color != "blue") {
			t.Errorf("seed %d: %q (finish %s): %v", seed, content, resp.Choices[0].FinishReason, err)
		}
		if resp.Choices[0].FinishReason != "stop" {
			t.Errorf("seed %d: finish %s", seed, resp.Choices[0].FinishReason)
		}
	}
}

// TestRealEngineQueueFull: with one slot and a queue of one, extra
// concurrent requests get a 429 queue_full with Retry-After (OpenAI's
// clients retry it), and the server keeps serving.
func TestRealEngineQueueFull(t *testing.T) {
	e := tinyEngine(t, engine.Options{BatchSize: 1, SequenceLength: 512, MaxQueue: 1})
	defer e.Close()
	_, base := startServer(t, e, Options{})
	c := newClient(base)
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for i := range 5 {
		wg.Go(func() {
			p := greedyChat(openai.UserMessage(fmt.Sprintf("request %d", i)))
			p.MaxTokens = openai.Int(200)
			_, err := c.Chat.Completions.New(context.Background(), p)
			status := 200
			var apiErr *openai.Error
			if errors.As(err, &apiErr) {
				status = apiErr.StatusCode
				if ra := apiErr.Response.Header.Get("Retry-After"); status == 429 && ra != "1" {
					t.Errorf("429 with Retry-After %q", ra)
				}
			} else if err != nil {
				t.Error(err)
			}
			mu.Lock()
			statuses[status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if statuses[429] == 0 || statuses[200] == 0 || statuses[200]+statuses[429] != 5 {
		t.Errorf("statuses %v: want some 200 and some 429", statuses)
	}
	if _, err := c.Chat.Completions.New(context.Background(), greedyChat(openai.UserMessage("still there?"))); err != nil {
		t.Errorf("after overload: %v", err)
	}
}

// TestRealEngineLogitBiasMinTokens drives the engine's sampler through the
// vLLM fields: a +100 bias makes <|im_end|> the greedy choice, min_tokens
// holds it back, ignore_eos generates past it, skip_special_tokens false
// shows it, and a bias on an ordinary token repeats it.
func TestRealEngineLogitBiasMinTokens(t *testing.T) {
	e := tinyEngine(t, engine.Options{BatchSize: 1, SequenceLength: 256})
	defer e.Close()
	_, base := startServer(t, e, Options{})
	end := e.Model().Tokenizer.Encode("<|im_end|>")
	word := e.Model().Tokenizer.Encode(" Paris")
	if len(end) != 1 || len(word) != 1 {
		t.Fatalf("<|im_end|> is %v, \" Paris\" is %v", end, word)
	}
	greedy := `"prompt":"The capital of France is","temperature":0,"repetition_penalty":1`
	const anyText = "*" // the model's own words
	for _, tc := range []struct {
		extra, text, finish string
		completion          int
	}{
		{fmt.Sprintf(`"logit_bias":{"%d":100},"max_tokens":8`, end[0]), "", "stop", 1},
		{fmt.Sprintf(`"logit_bias":{"%d":100},"max_tokens":8,"min_tokens":5`, end[0]), anyText, "stop", 6},
		{fmt.Sprintf(`"logit_bias":{"%d":100},"max_tokens":3,"ignore_eos":true`, end[0]), "", "length", 3},
		{fmt.Sprintf(`"logit_bias":{"%d":100},"max_tokens":3,"ignore_eos":true,"skip_special_tokens":false`, end[0]), strings.Repeat("<|im_end|>", 3), "length", 3},
		{fmt.Sprintf(`"logit_bias":{"%d":100},"max_tokens":3`, word[0]), " Paris Paris Paris", "length", 3},
	} {
		r := postOK(t, base, "/v1/completions", "{"+greedy+","+tc.extra+"}")
		c := r.Choices[0]
		if tc.text != anyText && c.Text != tc.text || c.FinishReason != tc.finish || r.Usage.CompletionTokens != tc.completion {
			t.Errorf("%s: %q finish %s, %d tokens; want %q %s %d", tc.extra, c.Text, c.FinishReason, r.Usage.CompletionTokens, tc.text, tc.finish, tc.completion)
		}
	}
}
