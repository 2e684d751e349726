package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ellm-dev/ellm/pkg/client"
)

// StreamFunc sends one streaming chat request and calls onChunk for every
// chunk that carries generated text. It returns the completion token count
// the server reported (0 if it reported none).
type StreamFunc func(ctx context.Context, messages []client.Message, maxTokens int, onChunk func()) (completionTokens int, err error)

// ClientStream is a StreamFunc over pkg/client: what `ellm bench serve` uses.
func ClientStream(c *client.Client) StreamFunc {
	return func(ctx context.Context, messages []client.Message, maxTokens int, onChunk func()) (int, error) {
		reply, err := c.StreamChat(ctx, messages, client.ChatOptions{MaxTokens: maxTokens}, func(d client.Delta) error {
			if d.Content != "" || d.Reasoning != "" {
				onChunk()
			}
			return nil
		})
		return reply.Usage.CompletionTokens, err
	}
}

// ServeOptions configure a load run against an OpenAI-compatible server.
type ServeOptions struct {
	URL         string
	Concurrency []int
	Requests    int           // per concurrency level
	MaxTokens   int           // per request
	PromptWords int           // synthetic prompts' length
	Dataset     string        // "synthetic" or a JSONL file of {"messages": [...]} or {"prompt": "..."}
	Timeout     time.Duration // per concurrency level; requests still running are cancelled
	AllowRemote bool          // load only loopback servers unless set
	Seed        uint64
}

// ServeResult is one concurrency level. Latencies are in milliseconds.
type ServeResult struct {
	Concurrency       int     `json:"concurrency"`
	Requests          int     `json:"requests"`
	Errors            int     `json:"errors"`
	Empty             int     `json:"empty_answers"` // successful, but no token streamed (not in TTFT)
	FirstError        string  `json:"first_error,omitempty"`
	TTFTms            Summary `json:"ttft_ms"`
	TPOTms            Summary `json:"tpot_ms"`
	E2Ems             Summary `json:"e2e_ms"`
	RequestsPerSecond float64 `json:"requests_per_second"`
	OutputTokensPerS  float64 `json:"output_tokens_per_second"`
	WallSeconds       float64 `json:"wall_seconds"`
}

// ServeResults print as a table.
type ServeResults []ServeResult

func (ServeResults) Header() []string {
	return []string{"conc", "ok", "err", "TTFT p50/p90/p99 ms", "TPOT p50/p90/p99 ms", "e2e p50/p90/p99 ms", "req/s", "out tok/s"}
}

func (rs ServeResults) Rows() [][]string {
	pct := func(s Summary) string { return fmt.Sprintf("%.1f / %.1f / %.1f", s.Median, s.P90, s.P99) }
	var rows [][]string
	for _, r := range rs {
		rows = append(rows, []string{strconv.Itoa(r.Concurrency), strconv.Itoa(r.Requests - r.Errors), strconv.Itoa(r.Errors),
			pct(r.TTFTms), pct(r.TPOTms), pct(r.E2Ems), fmt.Sprintf("%.2f", r.RequestsPerSecond), fmt.Sprintf("%.1f", r.OutputTokensPerS)})
	}
	return rows
}

// CheckTarget refuses non-loopback targets unless allowed: a load test is
// aimed at a server the user runs here, never at someone else's.
func CheckTarget(rawURL string, allowRemote bool) error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("--url %q: not an http(s) URL", rawURL)
	}
	if allowRemote {
		return nil
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--url %s is not a loopback address; pass --allow-remote to load a server elsewhere", rawURL)
}

// LoadDataset returns the prompts as chat message arrays.
func LoadDataset(opts ServeOptions) ([][]client.Message, error) {
	if opts.Dataset == "" || opts.Dataset == "synthetic" {
		return syntheticPrompts(opts.Requests, opts.PromptWords, opts.Seed), nil
	}
	f, err := os.Open(opts.Dataset)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	return parseDataset(f, opts.Dataset)
}

func parseDataset(r io.Reader, name string) ([][]client.Message, error) {
	var out [][]client.Message
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var rec struct {
			Messages []client.Message `json:"messages"`
			Prompt   *string          `json:"prompt"`
		}
		if err := json.Unmarshal([]byte(text), &rec); err != nil {
			return nil, fmt.Errorf("dataset %s:%d: %w", name, line, err)
		}
		switch {
		case len(rec.Messages) > 0:
			out = append(out, rec.Messages)
		case rec.Prompt != nil:
			out = append(out, userMessage(*rec.Prompt))
		default:
			return nil, fmt.Errorf("dataset %s:%d: want a \"messages\" or \"prompt\" field", name, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("dataset %s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("dataset %s: no requests", name)
	}
	return out, nil
}

func userMessage(s string) []client.Message {
	return []client.Message{{Role: "user", Content: s}}
}

var syntheticWords = strings.Fields(`the a of and to in is for on with as by at from that this it be are was
model cache token layer prefill decode session server memory thread kernel vector matrix tensor batch
agent tool call result query answer search file code test build run read write plan step context`)

func syntheticPrompts(n, words int, seed uint64) [][]client.Message {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	out := make([][]client.Message, n)
	for i := range out {
		var b strings.Builder
		fmt.Fprintf(&b, "Request %d. ", i)
		for w := 0; w < words; w++ {
			b.WriteString(syntheticWords[rng.IntN(len(syntheticWords))])
			b.WriteByte(' ')
		}
		out[i] = userMessage(b.String())
	}
	return out
}

// RunServe runs opts.Requests requests at each concurrency level.
func RunServe(ctx context.Context, opts ServeOptions, send StreamFunc, progress *Progress) (ServeResults, error) {
	if err := CheckTarget(opts.URL, opts.AllowRemote); err != nil {
		return nil, err
	}
	prompts, err := LoadDataset(opts)
	if err != nil {
		return nil, err
	}
	var results ServeResults
	for _, conc := range opts.Concurrency {
		if conc < 1 {
			return nil, fmt.Errorf("--concurrency %d: must be at least 1", conc)
		}
		results = append(results, runLevel(ctx, opts, conc, prompts, send, progress))
	}
	return results, nil
}

type sample struct {
	ttft, tpot, e2e float64
	tokens          int
	empty           bool
	err             error
}

func runLevel(ctx context.Context, opts ServeOptions, conc int, prompts [][]client.Message, send StreamFunc, progress *Progress) ServeResult {
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	samples := make([]sample, opts.Requests)
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				samples[i] = oneRequest(ctx, send, prompts[i%len(prompts)], opts.MaxTokens)
				progress.Add(1)
			}
		}()
	}
feed:
	for i := range opts.Requests {
		select {
		case next <- i:
		case <-ctx.Done():
			for j := i; j < opts.Requests; j++ {
				samples[j].err = ctx.Err()
			}
			break feed
		}
	}
	close(next)
	wg.Wait()
	wall := time.Since(start).Seconds()

	res := ServeResult{Concurrency: conc, Requests: opts.Requests, WallSeconds: wall}
	var ttft, tpot, e2e []float64
	tokens := 0
	for _, s := range samples {
		if s.err != nil {
			res.Errors++
			if res.FirstError == "" {
				res.FirstError = s.err.Error()
			}
			continue
		}
		e2e = append(e2e, s.e2e)
		if s.empty {
			res.Empty++
			continue
		}
		ttft = append(ttft, s.ttft)
		if s.tokens > 1 {
			tpot = append(tpot, s.tpot)
		}
		tokens += s.tokens
	}
	res.TTFTms, res.TPOTms, res.E2Ems = Summarize(ttft), Summarize(tpot), Summarize(e2e)
	if wall > 0 {
		res.RequestsPerSecond = float64(len(e2e)) / wall
		res.OutputTokensPerS = float64(tokens) / wall
	}
	return res
}

func oneRequest(ctx context.Context, send StreamFunc, messages []client.Message, maxTokens int) sample {
	start := time.Now()
	var first time.Time
	chunks := 0
	n, err := send(ctx, messages, maxTokens, func() {
		if chunks == 0 {
			first = time.Now()
		}
		chunks++
	})
	end := time.Now()
	if err != nil {
		return sample{err: err}
	}
	if chunks == 0 {
		// The model ended at once (an immediate end of text): a valid, empty
		// answer, with no first token to time.
		return sample{empty: true, e2e: ms(end.Sub(start))}
	}
	if n == 0 {
		n = chunks // the server sent no usage: one chunk per token is the common case
	}
	s := sample{ttft: ms(first.Sub(start)), e2e: ms(end.Sub(start)), tokens: n}
	if n > 1 {
		s.tpot = ms(end.Sub(first)) / float64(n-1)
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
