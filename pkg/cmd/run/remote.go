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
	last     *turnInfo
}

func newRemote(opts *Options, terminal bool) (*remote, error) {
	if opts.Raw {
		return nil, errors.New("--raw needs a local model: the server applies its chat template")
	}
	r := &remote{opts: opts, terminal: terminal, cl: &client.Client{BaseURL: opts.URL, APIKey: opts.APIKey}}
	r.chat = client.ChatOptions{MaxTokens: opts.MaxTokens}
	ov := opts.overrides()
	r.chat.Temperature, r.chat.TopP, r.chat.MinP, r.chat.RepetitionPenalty = ov.Temperature, ov.TopP, ov.MinP, ov.RepetitionPenalty
	r.chat.TopK = ov.TopK
	if opts.Seed >= 0 {
		r.chat.Seed = &opts.Seed
	}
	think := opts.thinking()
	r.chat.Think = &think
	r.reset()
	return r, nil
}

// reset starts a new conversation under a new session; the server forgets
// the old one after its --session-ttl.
func (r *remote) reset() {
	r.chat.SessionID = newSessionID()
	r.history, r.last = nil, nil
	if r.opts.System != "" {
		r.history = append(r.history, client.Message{Role: "system", Content: r.opts.System})
	}
}

func (r *remote) banner() string {
	model := "model unknown"
	if ids, err := r.cl.Models(r.opts.Ctx); err == nil && len(ids) > 0 {
		model = ids[0]
	}
	return fmt.Sprintf("%s · %s · chat, thinking %s\n%s", r.opts.URL, model,
		onOff(r.opts.thinking()), quitHint)
}

func (r *remote) saved() savedChat {
	s := savedChat{Messages: r.history}
	if ids, err := r.cl.Models(r.opts.Ctx); err == nil && len(ids) > 0 {
		s.Model = ids[0]
	}
	return s
}

func (r *remote) stats() (turnInfo, bool, string) {
	conv := fmt.Sprintf("Conversation: %d messages.", len(r.history))
	if r.last == nil {
		return turnInfo{}, false, conv
	}
	return *r.last, true, conv
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
	finish := reply.FinishReason
	if err != nil {
		if !interrupted(err, r.opts.Ctx) {
			return fmt.Errorf("%s: %w", r.opts.URL, err)
		}
		finish = "interrupted"
	}
	r.history = append(msgs, reply.Message)
	u := reply.Usage
	r.last = &turnInfo{prompt: u.PromptTokens, cached: u.CachedTokens, completion: u.CompletionTokens,
		ttft: reply.TTFT, total: time.Since(start), finish: finish}
	if r.opts.Verbose {
		r.last.print(r.opts.IO.ErrOut)
	}
	return nil
}
