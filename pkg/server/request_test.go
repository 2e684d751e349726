package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// post sends a JSON body and returns the status and the response body.
func post(t *testing.T, base, path, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

type errBody struct {
	Error struct {
		Message, Type string
		Param, Code   *string
	}
}

// wantError checks a status and OpenAI error body naming param (and code,
// when given); it returns the message.
func wantError(t *testing.T, status int, body []byte, wantStatus int, param, code string) string {
	t.Helper()
	var e errBody
	if status != wantStatus || json.Unmarshal(body, &e) != nil || e.Error.Message == "" {
		t.Fatalf("status %d, want %d with an error body: %s", status, wantStatus, body)
	}
	if got := e.Error.Param; param == "" && got != nil || param != "" && (got == nil || *got != param) {
		t.Errorf("param %v, want %q: %s", got, param, body)
	}
	if code != "" && (e.Error.Code == nil || *e.Error.Code != code) {
		t.Errorf("code %v, want %q: %s", e.Error.Code, code, body)
	}
	return e.Error.Message
}

type chatReply struct {
	Choices []struct {
		Message struct {
			Content string
		}
		Text         string
		FinishReason string `json:"finish_reason"`
	}
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	}
}

// postOK posts a body that must succeed and decodes the reply.
func postOK(t *testing.T, base, path, body string) chatReply {
	t.Helper()
	status, b := post(t, base, path, body)
	var r chatReply
	if status != 200 || json.Unmarshal(b, &r) != nil || len(r.Choices) != 1 {
		t.Fatalf("%s %s: status %d: %s", path, body, status, b)
	}
	return r
}

// sseData returns the data of each event of a stream.
func sseData(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

const hi = `"messages":[{"role":"user","content":"hi"}]`

// TestUnknownFieldsIgnored: the fields newer SDKs send are ignored (logged
// once per name), while the fields the server reads keep strict types.
func TestUnknownFieldsIgnored(t *testing.T) {
	var log syncBuffer
	_, base := startServer(t, newFakeEngine(t, constReply("ok")), Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	body := `{` + hi + `,"service_tier":"auto","prompt_cache_key":"k","verbosity":"low","safety_identifier":"u1",
		"modalities":["text"],"stream_options":{"include_usage":true,"frobnicate":1},"max_tokens":5}`
	for range 3 {
		if r := postOK(t, base, "/v1/chat/completions", body); r.Choices[0].Message.Content != "ok" {
			t.Fatalf("reply %+v", r)
		}
	}
	postOK(t, base, "/v1/completions", `{"prompt":"hi","max_tokens":2,"suffix":"x","best_of":1}`)
	logged := log.String()
	for _, f := range []string{"service_tier", "prompt_cache_key", "verbosity", "safety_identifier", "modalities", "suffix", "best_of"} {
		if n := strings.Count(logged, "field="+f+"\n"); n != 1 {
			t.Errorf("field %s logged %d times, want once:\n%s", f, n, logged)
		}
	}
	if !strings.Contains(logged, "field=stream_options.frobnicate") {
		t.Errorf("nested unknown field not logged:\n%s", logged)
	}
	for _, tc := range []struct{ body, param string }{
		{`{` + hi + `,"max_tokens":"ten"}`, "max_tokens"},
		{`{` + hi + `,"min_tokens":"5"}`, "min_tokens"},
		{`{` + hi + `,"ignore_eos":1}`, "ignore_eos"},
		{`{` + hi + `,"skip_special_tokens":"no"}`, "skip_special_tokens"},
		{`{` + hi + `,"logit_bias":{"5":"up"}}`, "logit_bias.5"},
		{`{` + hi + `,"reasoning_effort":3}`, "reasoning_effort"},
		{`{` + hi + `,"stream_options":{"continuous_usage_stats":"yes"}}`, "stream_options.continuous_usage_stats"},
		{`{` + hi + `,"guided_choice":"a"}`, "guided_choice"},
		{`{` + hi + `,"stop_token_ids":[1.5]}`, "stop_token_ids.0"},
	} {
		status, b := post(t, base, "/v1/chat/completions", tc.body)
		wantError(t, status, b, 400, tc.param, "")
	}
}

func TestLogitBiasValidation(t *testing.T) {
	_, base := startServer(t, newFakeEngine(t, constReply("ok")), Options{})
	vocab := fakeTokenizer{}.VocabSize()
	for _, lb := range []string{`{"x":1}`, `{"-1":1}`, fmt.Sprintf(`{"%d":1}`, vocab), `{"99999999999":1}`, `{"5":100.5}`, `{"5":-101}`} {
		status, b := post(t, base, "/v1/chat/completions", `{`+hi+`,"logit_bias":`+lb+`}`)
		wantError(t, status, b, 400, "logit_bias", "")
	}
	postOK(t, base, "/v1/chat/completions", fmt.Sprintf(`{%s,"logit_bias":{"5":-100,"%d":100}}`, hi, vocab-1))
}

// TestMinTokensAndStops: min_tokens holds back the end tokens and stop
// strings; include_stop_str_in_output keeps the stop string; ignore_eos
// generates past the end token, which skip_special_tokens false shows.
func TestMinTokensAndStops(t *testing.T) {
	_, base := startServer(t, newFakeEngine(t, constReply("ab ab ab")), Options{})
	for _, tc := range []struct {
		extra, text, finish string
		completion          int
	}{
		{``, "ab ab ab", "stop", 9},
		{`"stop":["b"]`, "a", "stop", 2},
		{`"stop":["b"],"include_stop_str_in_output":true`, "ab", "stop", 2},
		{`"stop":["b"],"min_tokens":3`, "ab a", "stop", 5},
		// The end token is masked until 12 tokens: the fake engine then
		// picks the lowest allowed id, byte 0.
		{`"min_tokens":12`, "ab ab ab\x00\x00\x00\x00", "stop", 13},
		{`"ignore_eos":true,"max_tokens":11`, "ab ab ab", "length", 11},
		{`"ignore_eos":true,"max_tokens":10,"skip_special_tokens":false`, "ab ab ab<|im_end|><|im_end|>", "length", 10},
		{fmt.Sprintf(`"stop_token_ids":[%d]`, ' '), "ab", "stop", 3},
	} {
		for _, route := range []string{"/v1/chat/completions", "/v1/completions"} {
			body := `{` + hi + `,` + tc.extra + `}`
			if route == "/v1/completions" {
				body = `{"prompt":"hi",` + tc.extra + `}`
			}
			body = strings.Replace(body, ",}", "}", 1)
			r := postOK(t, base, route, body)
			text := r.Choices[0].Message.Content + r.Choices[0].Text
			if text != tc.text || r.Choices[0].FinishReason != tc.finish || r.Usage.CompletionTokens != tc.completion {
				t.Errorf("%s %s: %q finish %s, %d tokens; want %q %s %d", route, tc.extra, text, r.Choices[0].FinishReason,
					r.Usage.CompletionTokens, tc.text, tc.finish, tc.completion)
			}
		}
	}
	for _, tc := range []struct{ body, param string }{
		{`{` + hi + `,"min_tokens":-1}`, "min_tokens"},
		{`{` + hi + `,"min_tokens":5,"max_tokens":4}`, "min_tokens"},
		{fmt.Sprintf(`{%s,"min_tokens":%d}`, hi, math.MaxInt64), "min_tokens"},
		{`{` + hi + `,"stop_token_ids":[99999]}`, "stop_token_ids"},
	} {
		status, b := post(t, base, "/v1/chat/completions", tc.body)
		wantError(t, status, b, 400, tc.param, "")
	}
}

// TestContinuousUsage: with include_usage and continuous_usage_stats every
// chunk carries the usage so far; include_usage alone only the last chunk.
func TestContinuousUsage(t *testing.T) {
	_, base := startServer(t, newFakeEngine(t, constReply("hello")), Options{})
	for _, route := range []string{"/v1/chat/completions", "/v1/completions"} {
		for _, continuous := range []bool{true, false} {
			body := fmt.Sprintf(`{%s,"prompt":"hi","stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":%v}}`, hi, continuous)
			if route == "/v1/completions" {
				body = strings.Replace(body, hi+",", "", 1)
			} else {
				body = strings.Replace(body, `"prompt":"hi",`, "", 1)
			}
			resp, err := http.Post(base+route, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			data := sseData(t, resp.Body)
			resp.Body.Close()
			if len(data) < 4 || data[len(data)-1] != "[DONE]" {
				t.Fatalf("%s: stream %q", route, data)
			}
			last, withUsage := -1, 0
			for i, d := range data[:len(data)-1] {
				var c struct {
					Usage *struct {
						PromptTokens        int `json:"prompt_tokens"`
						CompletionTokens    int `json:"completion_tokens"`
						TotalTokens         int `json:"total_tokens"`
						PromptTokensDetails *struct {
							CachedTokens int `json:"cached_tokens"`
						} `json:"prompt_tokens_details"`
					}
				}
				if err := json.Unmarshal([]byte(d), &c); err != nil {
					t.Fatal(err)
				}
				if c.Usage == nil {
					if continuous {
						t.Errorf("%s: chunk %d without usage: %s", route, i, d)
					}
					continue
				}
				withUsage++
				u := c.Usage
				if u.CompletionTokens < last || u.TotalTokens != u.PromptTokens+u.CompletionTokens || u.PromptTokens == 0 {
					t.Errorf("%s: chunk %d usage %+v after %d completion tokens", route, i, u, last)
				}
				last = u.CompletionTokens
				if i == len(data)-2 && (u.PromptTokensDetails == nil || u.CompletionTokens != 6) {
					t.Errorf("%s: final usage %+v", route, u)
				}
			}
			if !continuous && withUsage != 1 {
				t.Errorf("%s: %d chunks with usage without continuous_usage_stats, want 1", route, withUsage)
			}
		}
	}
}

func TestGuidedDecoding(t *testing.T) {
	_, base := startServer(t, newFakeEngine(t, constReply(`{"a": 7}`)), Options{})
	schema := `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}`
	quoted, _ := json.Marshal(schema)
	for _, g := range []string{schema, string(quoted)} {
		r := postOK(t, base, "/v1/chat/completions", `{`+hi+`,"guided_json":`+g+`}`)
		var v struct{ A int }
		if err := json.Unmarshal([]byte(r.Choices[0].Message.Content), &v); err != nil || v.A != 7 {
			t.Errorf("guided_json %s: content %q", g, r.Choices[0].Message.Content)
		}
		r = postOK(t, base, "/v1/completions", `{"prompt":"x","guided_json":`+g+`}`)
		if r.Choices[0].Text != `{"a": 7}` {
			t.Errorf("completions guided_json: %q", r.Choices[0].Text)
		}
	}
	// A schema the reply violates is enforced: the fake engine then takes
	// the lowest allowed token.
	r := postOK(t, base, "/v1/chat/completions", `{`+hi+`,"guided_json":{"type":"object","properties":{"b":{"type":"boolean"}},"required":["b"],"additionalProperties":false},"max_tokens":30}`)
	if !strings.HasPrefix(r.Choices[0].Message.Content, `{"b"`) {
		t.Errorf("guided_json not enforced: %q", r.Choices[0].Message.Content)
	}
	for _, tc := range []struct{ body, param string }{
		{`{` + hi + `,"guided_grammar":"root ::= \"a\""}`, "guided_grammar"},
		{`{` + hi + `,"structured_outputs":{"grammar":"root ::= \"a\""}}`, "structured_outputs.grammar"},
		{`{` + hi + `,"guided_json":{"type":"object","$ref":"#"}}`, "guided_json"},
		{`{` + hi + `,"guided_json":"{"}`, "guided_json"},
		{`{` + hi + `,"guided_json":` + schema + `,"response_format":{"type":"json_object"}}`, "guided_json"},
		{`{"prompt":"x","guided_grammar":"root ::= \"a\""}`, "guided_grammar"},
	} {
		path := "/v1/chat/completions"
		if strings.HasPrefix(tc.body, `{"prompt"`) {
			path = "/v1/completions"
		}
		status, b := post(t, base, path, tc.body)
		if msg := wantError(t, status, b, 400, tc.param, ""); tc.param != "guided_json" && !strings.Contains(msg, "not supported") {
			t.Errorf("%s: %q", tc.param, msg)
		}
	}
}

// TestReasoningEffort: none/minimal render Qwen3's prompt with thinking
// off (the template's empty think block), low..high with thinking on;
// chat_template_kwargs wins.
func TestReasoningEffort(t *testing.T) {
	var mu sync.Mutex
	var prompts []string
	eng := newFakeEngine(t, func(p string) string {
		mu.Lock()
		prompts = append(prompts, p)
		mu.Unlock()
		return "ok"
	})
	_, base := startServer(t, eng, Options{})
	const off = "<think>\n\n</think>"
	for _, tc := range []struct {
		extra    string
		thinking bool
	}{
		{``, true}, {`"reasoning_effort":"none"`, false}, {`"reasoning_effort":"minimal"`, false},
		{`"reasoning_effort":"low"`, true}, {`"reasoning_effort":"medium"`, true}, {`"reasoning_effort":"high"`, true},
		{`"reasoning_effort":"none","chat_template_kwargs":{"enable_thinking":true}`, true},
		{`"reasoning_effort":"high","chat_template_kwargs":{"enable_thinking":false}`, false},
		// A constrained reply has no room for thinking.
		{`"reasoning_effort":"high","response_format":{"type":"json_object"},"max_tokens":2`, false},
		{`"reasoning_effort":"high","guided_choice":["ok","no"]`, false},
		{`"reasoning_effort":"high","structured_outputs":{"regex":"o?k"}`, false},
	} {
		body := strings.Replace(`{`+hi+`,`+tc.extra+`}`, ",}", "}", 1)
		postOK(t, base, "/v1/chat/completions", body)
		mu.Lock()
		p := prompts[len(prompts)-1]
		mu.Unlock()
		if got := !strings.HasSuffix(p, off+"\n\n"); got != tc.thinking {
			t.Errorf("%s: thinking %v, want %v; prompt %q", tc.extra, got, tc.thinking, p)
		}
	}
	status, b := post(t, base, "/v1/chat/completions", `{`+hi+`,"reasoning_effort":"turbo"}`)
	wantError(t, status, b, 400, "reasoning_effort", "")
}

// TestMaxTokensLimits: client numbers at the ends of the integer range are
// 400s naming the numbers, never a panic or an overflowed check; a missing
// max_tokens is what fits.
func TestMaxTokensLimits(t *testing.T) {
	eng := newFakeEngine(t, constReply("ok"))
	eng.seq = 200
	_, base := startServer(t, eng, Options{})
	prompt := len(fakeTokenizer{}.Encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"))
	for _, param := range []string{"max_tokens", "max_completion_tokens"} {
		for _, n := range []int64{math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 - int64(prompt) + 1, 1 << 62, 200} {
			status, b := post(t, base, "/v1/chat/completions", fmt.Sprintf(`{%s,"%s":%d}`, hi, param, n))
			msg := wantError(t, status, b, 400, param, "context_length_exceeded")
			for _, num := range []string{fmt.Sprint(n), "200", fmt.Sprint(prompt)} {
				if !strings.Contains(msg, num) {
					t.Errorf("%s %d: message %q lacks %s", param, n, msg, num)
				}
			}
		}
		for _, n := range []string{"0", "-1", fmt.Sprint(int64(math.MinInt64))} {
			status, b := post(t, base, "/v1/chat/completions", fmt.Sprintf(`{%s,"%s":%s}`, hi, param, n))
			wantError(t, status, b, 400, param, "")
		}
		for _, n := range []string{"9223372036854775808", "1e30", "1.5"} {
			status, b := post(t, base, "/v1/chat/completions", fmt.Sprintf(`{%s,"%s":%s}`, hi, param, n))
			wantError(t, status, b, 400, param, "")
		}
		postOK(t, base, "/v1/chat/completions", fmt.Sprintf(`{%s,"%s":%d}`, hi, param, 200-prompt))
	}
	status, b := post(t, base, "/v1/completions", fmt.Sprintf(`{"prompt":"hi","max_tokens":%d}`, int64(math.MaxInt64)))
	wantError(t, status, b, 400, "max_tokens", "context_length_exceeded")
	status, b = post(t, base, "/v1/completions", `{"prompt":"`+strings.Repeat("a", 200)+`"}`)
	wantError(t, status, b, 400, "max_tokens", "context_length_exceeded")
	for _, body := range []string{
		fmt.Sprintf(`{%s,"top_logprobs":%d,"logprobs":true}`, hi, int64(math.MaxInt64)),
		fmt.Sprintf(`{%s,"top_k":%d}`, hi, int64(math.MinInt64)),
		fmt.Sprintf(`{%s,"n":%d}`, hi, int64(math.MaxInt64)),
	} {
		if status, b := post(t, base, "/v1/chat/completions", body); status != 400 {
			t.Errorf("%s: %d %s", body, status, b)
		}
	}
	for _, body := range []string{
		fmt.Sprintf(`{%s,"seed":%d}`, hi, int64(math.MinInt64)),
		fmt.Sprintf(`{%s,"top_k":%d}`, hi, int64(math.MaxInt64)),
	} {
		postOK(t, base, "/v1/chat/completions", body)
	}
}
