package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ellm-dev/ellm/pkg/client"
)

// remote is a chat with a running OpenAI-compatible server (--url). The
// server keeps the conversation's KV under the session ID, so each turn
// prefills only the new message there too.
type remote struct {
	opts     *Options
	cl       *client.Client
	chat     client.ChatOptions
	terminal bool
	history  []client.Message
}

func newRemote(opts *Options, terminal bool) (*remote, error) {
	if opts.Raw {
		return nil, errors.New("--raw needs a local model: the server applies its chat template")
	}
	r := &remote{opts: opts, terminal: terminal, cl: &client.Client{BaseURL: opts.URL, APIKey: opts.APIKey}}
	r.chat = client.ChatOptions{MaxTokens: opts.MaxTokens, SessionID: fmt.Sprintf("ellm-run-%d", time.Now().UnixNano())}
	f64 := func(v float32) *float64 {
		if v < 0 {
			return nil
		}
		x := float64(v)
		return &x
	}
	r.chat.Temperature, r.chat.TopP, r.chat.MinP = f64(opts.Temperature), f64(opts.TopP), f64(opts.MinP)
	r.chat.RepetitionPenalty = f64(opts.RepetitionPenalty)
	if opts.TopK >= 0 {
		r.chat.TopK = &opts.TopK
	}
	if opts.Seed >= 0 {
		r.chat.Seed = &opts.Seed
	}
	think := opts.thinking()
	r.chat.Think = &think
	if opts.System != "" {
		r.history = append(r.history, client.Message{Role: "system", Content: opts.System})
	}
	return r, nil
}

func (r *remote) turn(ctx context.Context, user string) error {
	msgs := append(r.history, client.Message{Role: "user", Content: user})
	p := &printer{out: r.opts.IO.Out, terminal: r.terminal}
	start := time.Now()
	reply, err := r.cl.StreamChat(ctx, msgs, r.chat, func(d client.Delta) error {
		p.add(d.Reasoning, d.Content)
		return nil
	})
	p.finish()
	if err != nil && !interrupted(err, r.opts.Ctx) {
		return fmt.Errorf("%s: %w", r.opts.URL, err)
	}
	r.history = append(msgs, reply.Message)
	if r.opts.Verbose {
		u := reply.Usage
		turnInfo{prompt: u.PromptTokens, cached: u.CachedTokens, completion: u.CompletionTokens,
			ttft: reply.TTFT, total: time.Since(start), finish: reply.FinishReason}.print(r.opts.IO.ErrOut)
	}
	return nil
}
