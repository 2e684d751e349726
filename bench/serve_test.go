package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ellm-dev/ellm/pkg/client"
)

func TestCheckTargetAllowsOnlyLoopbackByDefault(t *testing.T) {
	for _, tc := range []struct {
		url    string
		remote bool
		ok     bool
	}{
		{"http://127.0.0.1:8000", false, true},
		{"http://localhost:8000/v1", false, true},
		{"http://[::1]:8000", false, true},
		{"http://10.0.0.5:8000", false, false},
		{"http://example.com", false, false},
		{"http://example.com", true, true},
		{"not a url", false, false},
	} {
		err := CheckTarget(tc.url, tc.remote)
		if (err == nil) != tc.ok {
			t.Errorf("CheckTarget(%q, %v) = %v, want ok=%v", tc.url, tc.remote, err, tc.ok)
		}
	}
}

func TestParseDataset(t *testing.T) {
	in := `{"prompt": "hello"}

{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}
`
	got, err := parseDataset(strings.NewReader(in), "d.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %d requests", len(got))
	}
	if m := got[0]; len(m) != 1 || m[0].Content != "hello" || m[0].Role != "user" {
		t.Errorf("prompt line became %+v", m)
	}
	if m := got[1]; len(m) != 2 || m[0].Role != "system" || m[1].Content != "u" {
		t.Errorf("messages line became %+v", m)
	}
	for _, bad := range []string{`{"x": 1}`, `{`, ``} {
		if _, err := parseDataset(strings.NewReader(bad), "bad.jsonl"); err == nil {
			t.Errorf("dataset %q: no error", bad)
		}
	}
}

func TestRunServeMeasuresEveryRequest(t *testing.T) {
	var inFlight, peak atomic.Int32
	var calls atomic.Int32
	send := func(ctx context.Context, msgs []client.Message, maxTokens int, onChunk func()) (int, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		if calls.Add(1) == 3 {
			return 0, errors.New("boom")
		}
		time.Sleep(5 * time.Millisecond) // time to first token
		for range maxTokens {
			onChunk()
			time.Sleep(time.Millisecond)
		}
		return maxTokens, nil
	}
	opts := ServeOptions{URL: "http://127.0.0.1:1", Concurrency: []int{2}, Requests: 10, MaxTokens: 4, PromptWords: 8}
	rs, err := RunServe(context.Background(), opts, send, &Progress{})
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	if r.Requests != 10 || r.Errors != 1 || r.FirstError != "boom" {
		t.Errorf("requests %d errors %d (%q)", r.Requests, r.Errors, r.FirstError)
	}
	if r.TTFTms.N != 9 || r.TTFTms.Median < 5 {
		t.Errorf("TTFT %+v: want 9 samples of at least 5 ms", r.TTFTms)
	}
	if r.TPOTms.Median < 1 {
		t.Errorf("TPOT %+v: want at least 1 ms", r.TPOTms)
	}
	if p := peak.Load(); p != 2 {
		t.Errorf("peak concurrency %d, want 2", p)
	}
	if r.OutputTokensPerS <= 0 || r.RequestsPerSecond <= 0 {
		t.Errorf("throughput %+v", r)
	}
}

func TestRunServeTimeoutCancelsRemaining(t *testing.T) {
	send := func(ctx context.Context, _ []client.Message, _ int, onChunk func()) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	opts := ServeOptions{URL: "http://127.0.0.1:1", Concurrency: []int{1}, Requests: 5, MaxTokens: 1, Timeout: 20 * time.Millisecond}
	rs, err := RunServe(context.Background(), opts, send, &Progress{})
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Errors != 5 {
		t.Errorf("errors %d, want all 5 after the timeout", rs[0].Errors)
	}
}

func TestClientStreamCountsContentChunks(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, chunk := range []string{
			`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
			`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"a"}}]}`,
			`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":"b"}}]}`,
			`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"c"},"finish_reason":"length"}]}`,
			`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", chunk)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	chunks := 0
	n, err := ClientStream(&client.Client{BaseURL: srv.URL})(context.Background(), userMessage("hi"), 3, func() { chunks++ })
	if err != nil {
		t.Fatal(err)
	}
	if chunks != 3 || n != 3 {
		t.Errorf("%d chunks, %d completion tokens; want 3 and 3", chunks, n)
	}
}

func TestRunServeCountsEmptyAnswersAsSuccess(t *testing.T) {
	send := func(ctx context.Context, _ []client.Message, _ int, onChunk func()) (int, error) { return 0, nil }
	opts := ServeOptions{URL: "http://127.0.0.1:1", Concurrency: []int{1}, Requests: 3, MaxTokens: 4}
	rs, err := RunServe(context.Background(), opts, send, &Progress{})
	if err != nil {
		t.Fatal(err)
	}
	if r := rs[0]; r.Errors != 0 || r.Empty != 3 || r.TTFTms.N != 0 || r.E2Ems.N != 3 {
		t.Errorf("result %+v", r)
	}
}
