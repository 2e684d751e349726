package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/ellm-dev/ellm/pkg/chat"
	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

// FromEngine adapts a pkg/engine Engine to the server's Engine.
func FromEngine(e *engine.Engine) Engine { return engineAdapter{e} }

type engineAdapter struct{ e *engine.Engine }

func (a engineAdapter) Tokenizer() Tokenizer         { return a.e.Tokenizer() }
func (a engineAdapter) ChatTemplate() *chat.Template { return a.e.ChatTemplate() }
func (a engineAdapter) GenerationDefaults() modelcfg.GenerationConfig {
	return a.e.GenerationDefaults()
}
func (a engineAdapter) EOS() []int32 { return a.e.EOS() }

func (a engineAdapter) Info() Info {
	i := a.e.Info()
	return Info{ModelName: i.ModelName, Synthetic: i.Synthetic, KernelPath: i.KernelPath, Threads: i.Threads,
		ThreadsWhy: i.ThreadsWhy, PinnedCPUs: i.PinnedCPUs,
		Slots: i.Slots, SequenceLength: i.SequenceLength, WeightBytes: i.WeightBytes, KVBytes: i.KVBytes,
		ScratchBytes: i.ScratchBytes, LoadTime: i.LoadTime}
}

func (a engineAdapter) Stats() Stats {
	s := a.e.Stats()
	return Stats{SlotsBusy: s.SlotsBusy, Slots: s.Slots, KVUsed: s.KVUsed, KVCapacity: s.KVCapacity,
		QueueDepth: s.QueueDepth, PrefixHits: s.PrefixHits, PrefixMisses: s.PrefixMisses,
		ReusedTokens: s.ReusedTokens, CopiedTokens: s.CopiedTokens, PrefixStoreHits: s.PrefixStoreHits,
		PrefixStoreMisses: s.PrefixStoreMisses, PrefixStoreRestored: s.PrefixStoreRestored,
		PrefixStoreBytes: s.PrefixStoreBytes, PrefixStoreCapacity: s.PrefixStoreCapacity,
		PrefixDiskBytes: s.PrefixDiskBytes, PrefixDiskCapacity: s.PrefixDiskCapacity, PrefixDiskBlocks: s.PrefixDiskBlocks,
		PrefixDiskWritten: s.PrefixDiskWritten, PrefixDiskRead: s.PrefixDiskRead, PrefixDiskEvicted: s.PrefixDiskEvicted,
		PrefixDiskDiscarded: s.PrefixDiskDiscarded,
		SessionsStored:      s.SessionsStored, SessionStoreBytes: s.SessionStoreBytes,
		SessionStoreMaxBytes: s.SessionStoreMaxBytes, SessionsDropped: s.SessionsDropped, SessionsExpired: s.SessionsExpired}
}

func (a engineAdapter) Transcript(id string) (Transcript, bool) {
	t, ok := a.e.Transcript(id)
	return Transcript{Tokens: t.Tokens, Data: t.Data}, ok
}

func (a engineAdapter) SaveTranscript(id string, t Transcript) error {
	return a.e.SaveTranscript(id, engine.Transcript{Tokens: t.Tokens, Data: t.Data})
}

func (a engineAdapter) Sessions() ([]SessionInfo, error) {
	list, err := a.e.Sessions()
	out := make([]SessionInfo, len(list))
	for i, s := range list {
		out[i] = SessionInfo{ID: s.ID, Tokens: s.Tokens, KVTokens: s.KVTokens, Bytes: s.Bytes, LastUsed: s.LastUsed, InSlot: s.InSlot}
	}
	return out, err
}

func (a engineAdapter) DeleteSession(id string) error {
	err := a.e.DeleteSession(id)
	switch {
	case errors.Is(err, engine.ErrNoSession):
		err = fmt.Errorf("%w: %w", ErrNoSession, err)
	case errors.Is(err, engine.ErrSessionBusy):
		err = fmt.Errorf("%w: %w", ErrSessionBusy, err)
	}
	return err
}

func (a engineAdapter) SaveSessions() error {
	err := a.e.SaveSessions()
	if errors.Is(err, engine.ErrClosed) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

func (a engineAdapter) Generate(ctx context.Context, req Request, fn func(Event) error) (Result, error) {
	res, err := a.e.Generate(ctx, engine.Request{Tokens: req.Tokens, SessionID: req.SessionID, MaxTokens: req.MaxTokens,
		Sampling: req.Sampling, StopTokens: req.StopTokens, Constraint: req.Constraint, Logprobs: req.Logprobs,
		TopLogprobs: req.TopLogprobs}, func(ev engine.Event) error {
		err := fn(Event{Token: ev.Token, Logprob: ev.Logprob, Top: ev.Top})
		if errors.Is(err, ErrStop) {
			return engine.ErrStop
		}
		return err
	})
	out := Result{PromptTokens: res.PromptTokens, CachedTokens: res.CachedTokens, CompletionTokens: res.CompletionTokens,
		FinishReason: res.FinishReason, Tokens: res.Tokens, TTFT: res.TTFT, Total: res.Total}
	switch {
	case err == nil:
	case errors.Is(err, engine.ErrTooLong):
		err = fmt.Errorf("%w: %w", ErrTooLong, err)
	case errors.Is(err, engine.ErrQueueFull):
		err = fmt.Errorf("%w: %w", ErrQueueFull, err)
	case errors.Is(err, engine.ErrClosed):
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	case errors.Is(err, engine.ErrInvalid):
		err = invalid("", "%v", err)
	}
	return out, err
}
