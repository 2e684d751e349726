package server

import (
	"context"
	"errors"
	"time"

	"github.com/ellm-dev/ellm/pkg/chat"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/sample"
)

// Engine is what the server uses of pkg/engine. Its types are the server's
// own so that tests can run against a fake engine; NewEngine adapts the real
// one.
type Engine interface {
	Generate(ctx context.Context, req Request, fn func(Event) error) (Result, error)
	Info() Info
	Stats() Stats
	Tokenizer() Tokenizer
	ChatTemplate() *chat.Template
	GenerationDefaults() modelcfg.GenerationConfig
	// EOS are the tokens that end a reply (the default stop tokens).
	EOS() []int32

	// Transcript returns a session's stored transcript (none without a
	// session store); SaveTranscript stores one, marking the session used.
	Transcript(id string) (Transcript, bool)
	SaveTranscript(id string, t Transcript) error
	// Sessions lists the sessions the engine holds (in slots and the store).
	Sessions() ([]SessionInfo, error)
	// DeleteSession forgets a session: ErrNoSession if unknown,
	// ErrSessionBusy while a request of it runs.
	DeleteSession(id string) error
	// SaveSessions writes the sessions held in slots to the store now.
	SaveSessions() error
}

// Transcript is a session's exact tokens and the server's data about them
// (pkg/engine.Transcript).
type Transcript struct {
	Tokens []int32
	Data   []byte
}

// SessionInfo describes a session the engine holds (pkg/engine.SessionInfo).
type SessionInfo struct {
	ID       string
	Tokens   int
	KVTokens int
	Bytes    int64
	LastUsed time.Time
	InSlot   bool
}

// Tokenizer is what the server uses of pkg/tokenizer.
type Tokenizer interface {
	Encode(text string) []int32
	Decode(ids []int32) string
	TokenBytes(id int32) []byte
	IsSpecial(id int32) bool
	VocabSize() int
}

// Request is one generation (pkg/engine.Request).
type Request struct {
	Tokens      []int32
	SessionID   string
	MaxTokens   int
	Sampling    sample.Params
	StopTokens  []int32
	Constraint  sample.Constraint
	Logprobs    bool
	TopLogprobs int
}

// Event is one generated token.
type Event struct {
	Token   int32
	Logprob float32
	Top     []sample.TokenLogprob
}

// Result is a finished generation. Tokens is the transcript: the prompt and
// the generated tokens exactly as generated.
type Result struct {
	PromptTokens, CachedTokens, CompletionTokens int
	FinishReason                                 string
	Tokens                                       []int32
	TTFT, Total                                  time.Duration
}

// Info describes the loaded model and what it committed.
type Info struct {
	ModelName                          string
	Synthetic                          bool
	KernelPath                         string
	Threads, Slots, SequenceLength     int
	ThreadsWhy                         string // where Threads came from
	PinnedCPUs                         []int  // the threads' CPUs; nil = not pinned
	WeightBytes, KVBytes, ScratchBytes int64
	LoadTime                           time.Duration
}

// Stats is the engine's live state.
type Stats struct {
	SlotsBusy, Slots                       int
	KVUsed, KVCapacity                     int
	QueueDepth                             int
	PrefixHits, PrefixMisses, ReusedTokens int64
	CopiedTokens                           int64 // reused by copying from another slot
	PrefixStoreHits, PrefixStoreMisses     int64
	PrefixStoreRestored                    int64 // tokens restored from the prefix store
	PrefixStoreBytes, PrefixStoreCapacity  int64
	// The prefix store's disk tier (engine.Stats has the same names).
	PrefixDiskBytes, PrefixDiskCapacity                                       int64
	PrefixDiskBlocks                                                          int
	PrefixDiskWritten, PrefixDiskRead, PrefixDiskEvicted, PrefixDiskDiscarded int64
	SessionsStored                                                            int
	SessionStoreBytes, SessionStoreMaxBytes                                   int64
	SessionsDropped, SessionsExpired                                          int64
}

// The engine's sentinel errors, as the server sees them.
var (
	// ErrStop, returned by a Generate callback, ends generation normally.
	ErrStop = errors.New("stop")
	// ErrTooLong: prompt + max_tokens exceed the sequence length.
	ErrTooLong = errors.New("prompt too long")
	// ErrQueueFull: the request queue is full or the wait timed out.
	ErrQueueFull = errors.New("queue full")
	// ErrClosed: the engine is shutting down.
	ErrClosed = errors.New("engine closed")
	// ErrNoSession: DeleteSession of a session nobody holds.
	ErrNoSession = errors.New("no such session")
	// ErrSessionBusy: DeleteSession while a request of the session runs.
	ErrSessionBusy = errors.New("session busy")
)
