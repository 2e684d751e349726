package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

// FuzzRequests posts arbitrary bodies to every POST route: bad input is
// always a 4xx in OpenAI's error shape, never a 5xx or a panic.
func FuzzRequests(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"stream":true,"max_tokens":2}`,
		`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object","properties":{"a":{"enum":[1]}}}}},"max_tokens":4}`,
		`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","max_tokens":4}`,
		`{"prompt":[1,2,3],"max_tokens":2}`, `{"prompt":"hi","stop":["i"],"max_tokens":2}`, `{"tokens":[104,105]}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{]"}}]}]}`,
		`{"messages":[{"role":"user","content":"x"}],"logit_bias":{"65":5},"min_tokens":2,"ignore_eos":true,"skip_special_tokens":false,"max_tokens":4}`,
		`{"prompt":"x","guided_json":{"type":"object"},"stop":["}"],"include_stop_str_in_output":true,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`,
		`{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"none","service_tier":"auto","stop_token_ids":[65]}`,
		`{"messages":5}`, `{`, "\xff",
	} {
		f.Add(uint8(0), seed)
	}
	eng := newFakeEngine(f, constReply(`{"a": 1} <tool_call>`))
	eng.seq = 512
	s, err := New(eng, modelOf(eng), Options{MaxBodyBytes: 1 << 14})
	if err != nil {
		f.Fatal(err)
	}
	h := s.Handler()
	routes := []string{"/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize"}
	f.Fuzz(func(t *testing.T, route uint8, body string) {
		checkAnswer(t, h, routes[int(route)%len(routes)], body)
	})
}

// checkAnswer posts body to path: the answer is a success or a 4xx in
// OpenAI's error shape, never a 5xx.
func checkAnswer(t *testing.T, h http.Handler, path, body string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
	if rec.Code >= 500 {
		t.Fatalf("%s %q: %d %s", path, body, rec.Code, rec.Body.String())
	}
	if rec.Code >= 400 && !strings.Contains(rec.Body.String(), `"error":{"message":`) {
		t.Fatalf("%s %q: %d without an OpenAI error body: %s", path, body, rec.Code, rec.Body.String())
	}
}

// validateOnly hands requests to the real engine, which validates them and
// sizes their buffers, under an already-cancelled context, so that its
// scheduler drops them before any forward pass: the fuzzing below is about
// the request → engine.Request path, not about generating (a forward pass
// under coverage instrumentation would leave a handful of executions a
// minute). A request the engine accepts counts as a one-token reply.
type validateOnly struct{ Engine }

func (v validateOnly) Generate(ctx context.Context, req engine.Request, fn func(engine.Event) error) (engine.Result, error) {
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	res, err := v.Engine.Generate(cancelled, req, fn)
	if errors.Is(err, context.Canceled) {
		return engine.Result{PromptTokens: len(req.Tokens), CompletionTokens: 1, FinishReason: "length",
			Tokens: append(slices.Clip(req.Tokens), 0)}, nil
	}
	return res, err
}

// FuzzExtremeIntegers sends every integer field the server reads, at any
// value, through the server into the real engine: a client number is a 4xx
// or a generation, never a panic, an overflowed check or a huge allocation.
func FuzzExtremeIntegers(f *testing.F) {
	f.Add(uint8(0), int64(5), int64(1), int64(20), int64(2), int64(7), int64(100), 1.5, int64(3), "")
	f.Add(uint8(1), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MinInt64), int64(math.MaxInt32), 100.0, int64(math.MaxInt32), "")
	f.Add(uint8(0), int64(math.MaxInt64-3), int64(0), int64(-1), int64(20), int64(-1), int64(-1), -100.0, int64(-1), "")
	f.Add(uint8(1), int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64), int64(0), int64(151668), 0.0, int64(151645), "")
	f.Add(uint8(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), 0.0, int64(0), "9223372036854775808")
	f.Add(uint8(1), int64(1<<62), int64(1<<62), int64(1<<31), int64(1<<31), int64(1<<63-1), int64(1<<31), 1e300, int64(1<<31), "1e400")
	f.Add(uint8(0), int64(250), int64(250), int64(0), int64(0), int64(0), int64(0), 0.0, int64(0), "-0")
	e, err := engine.New(openModel(f, sharedtest.Path(f, "models", "tiny-qwen3-a")), engine.Options{SequenceLength: 256, BatchSize: 2, Threads: 1})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = e.Close() })
	s, err := New(validateOnly{e}, modelOf(e), Options{})
	if err != nil {
		f.Fatal(err)
	}
	h := s.Handler()
	f.Fuzz(func(t *testing.T, route uint8, maxTok, minTok, topK, topLP, seed, biasID int64, bias float64, stopID int64, raw string) {
		fields := []string{
			fmt.Sprintf(`"min_tokens":%d`, minTok), fmt.Sprintf(`"top_k":%d`, topK), fmt.Sprintf(`"seed":%d`, seed),
			fmt.Sprintf(`"logit_bias":{"%d":%v}`, biasID, bias), fmt.Sprintf(`"stop_token_ids":[%d]`, stopID),
		}
		maxField := fmt.Sprintf("%d", maxTok)
		if raw != "" {
			maxField = raw
		}
		path, prompt := "/v1/chat/completions", `"messages":[{"role":"user","content":"hi"}]`
		if route%2 == 0 {
			fields = append(fields, `"logprobs":true`, fmt.Sprintf(`"top_logprobs":%d`, topLP), `"max_completion_tokens":`+maxField)
		} else {
			path, prompt = "/v1/completions", `"prompt":"hi"`
			fields = append(fields, fmt.Sprintf(`"logprobs":%d`, topLP), `"max_tokens":`+maxField)
		}
		// Each field alone, then all together.
		for i := 0; i <= len(fields); i++ {
			body := "{" + prompt + "," + strings.Join(fields, ",") + "}"
			if i < len(fields) {
				body = "{" + prompt + "," + fields[i] + "}"
			}
			checkAnswer(t, h, path, body)
		}
	})
}
