// Package engine serves generation requests on one model: a fixed set of
// slots in a static KV cache, a single scheduler goroutine that batches every
// active slot into each forward pass (continuous batching), prefix reuse
// across requests, and sessions whose KV outlives a request (in their slot,
// else in an on-disk session store).
//
// The scheduler owns the model: Generate only queues a request and relays
// its tokens, so any number of goroutines may call it. See docs/engine.md for
// the scheduling policy and measurements.
package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/attn"
	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/kernels/ops"
	"github.com/ellm-dev/ellm/kernels/threads"
	"github.com/ellm-dev/ellm/pkg/cpu"
	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/model"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/modeldir"
	"github.com/ellm-dev/ellm/pkg/numa"
	"github.com/ellm-dev/ellm/pkg/sample"
)

// Options configure an Engine. Zero values take the documented defaults.
type Options struct {
	// DType of the linear weights: "bf16" (default), "int8" or "f32".
	DType string
	// NoCodedWeights skips the coded copy of the bf16 weights that decode
	// steps stream on AMX and AVX-512 (model.LoadOptions.NoCodedWeights).
	NoCodedWeights bool
	// NoLogitScreen skips the int8 copy of lm_head that screens the logits
	// of greedy and top-k draws (model.LoadOptions.NoLogitScreen).
	NoLogitScreen bool
	// LogitScreenRows caps the logits rows a step screens; 0 screens as
	// many as start-up measures faster than lm_head's own product
	// (model.Runner.ChooseScreen).
	LogitScreenRows int
	// KVDType of the cache: "bf16" (default), "int8" or "f32".
	KVDType string
	// Threads of the kernel pool; 0 = cpu.DefaultThreads: one per physical
	// core this process may use, within its cgroup CPU quota.
	Threads int
	// NoPin leaves the workers to the OS scheduler; by default each is bound
	// to its own CPU, one per physical core of the allowed set.
	NoPin bool
	// SequenceLength is the KV positions of each slot (default 4096).
	SequenceLength int
	// BatchSize is the number of slots (default 1).
	BatchSize int
	// ChunkSize > 0 prefills prompts in chunks of that many tokens even when
	// nothing else runs; 0 prefills a prompt in one pass.
	ChunkSize int
	// StallTokens bounds the prompt tokens prefilled in one scheduler step
	// while other slots are decoding (default 256): it bounds their stall.
	StallTokens int
	// SessionStore is a directory where evicted sessions' KV and their
	// clients' transcripts are kept; "" = none.
	SessionStore string
	// PrefixCacheBytes bounds the host memory of the prefix store, which
	// keeps the KV of prefixes that left the slots: 0 = the default
	// (DefaultPrefixCacheBytes), negative = no prefix store.
	PrefixCacheBytes int64
	// PrefixBlockTokens is the prefix store's block size (default 256).
	PrefixBlockTokens int
	// PrefixCacheDir adds a disk tier to the prefix store: blocks evicted
	// from its memory are kept there, across restarts; "" = none.
	// PrefixCacheDiskBytes bounds it: 0 = 10 % of the free space at
	// start-up, negative = unbounded.
	PrefixCacheDir       string
	PrefixCacheDiskBytes int64
	// SessionStoreMaxBytes bounds the session store's directory: the least
	// recently used sessions (and other files) are evicted beyond it.
	// 0 = 10 % of the free space at start-up; negative = unbounded.
	SessionStoreMaxBytes int64
	// SessionTTL deletes sessions idle for longer (in slots and in the
	// store); 0 = never.
	SessionTTL time.Duration
	// Clock is the time sessions are aged by; nil = time.Now (tests inject one).
	Clock func() time.Time
	// MaxQueue is the most requests waiting for a slot (default 1024).
	MaxQueue int
	// QueueTimeout is the longest a request waits for a slot; 0 = no limit.
	QueueTimeout time.Duration
	// Logger receives the start-up summary and warnings (default: discard).
	Logger *slog.Logger
	// AllowLongContext lets SequenceLength exceed the model's context
	// (max_position_embeddings, or its YaRN window) with a warning instead
	// of a refusal.
	AllowLongContext bool
	// Memory reports what this process may commit, for the fit check
	// before anything is allocated (default: cpu.ReadMemory of this machine).
	Memory func() (cpu.Memory, error)
	// NUMA is "auto" (default: on several nodes, spread the workers over
	// them, pinned, and interleave weights and KV cache) or "off".
	NUMA string
	// Topology describes the NUMA nodes (default: SystemTopology).
	Topology Topology
	// WeightsImageDir keeps the packed weights between starts
	// (model.LoadOptions.ImageDir; "" packs at every start), for the
	// machine and build WeightsImageKey (tune.MachineKey). Not with a
	// NUMA placement, whose weights are interleaved as they are packed.
	WeightsImageDir, WeightsImageKey string
}

// Info describes what an Engine committed at start-up.
type Info struct {
	ModelName  string
	ModelPath  string
	Synthetic  bool // the built-in random-weight model, not a trained one
	Config     *modelcfg.Config
	KernelPath string
	// Attention is the arithmetic attention runs: bf16 (VDPBF16PS) or f32;
	// f32 and int8 KV caches always take f32.
	Attention string
	DType     string
	KVDType   string

	Threads, Slots, SequenceLength, ChunkSize, StallTokens int
	// ThreadsWhy says where Threads came from (cpu.Threads.Why); PinnedCPUs
	// are the workers' CPUs in worker order (nil with NoPin).
	ThreadsWhy string
	PinnedCPUs []int

	WeightBytes, KVBytes, ScratchBytes int64
	// CodedWeightBytes is the part of WeightBytes that is the coded copy
	// decode steps stream (model.Model.CodedBytes).
	CodedWeightBytes int64
	// DecodeWeights says what decode steps read, the coded copy or the
	// pairs, as measured at start-up (model.Model.ChooseCoded); "" if no
	// copy was made.
	DecodeWeights string
	// ScreenBytes is the part of WeightBytes that is lm_head's int8 screen
	// (model.Model.ScreenBytes: 0 once the start-up's measure kept no row
	// and the copy was dropped); ScreenRows is the most logits rows a step
	// screens (model.Runner.ScreenRows), LogitScreen why: measured at
	// start-up or set (Options.LogitScreenRows); "" if there is no screen.
	ScreenBytes int64
	ScreenRows  int
	LogitScreen string
	// WeightsImage says where the packed weights came from: "mapped PATH"
	// (an image of an earlier start; WeightsMapped), "writing PATH" (packed,
	// and being written in the background for the next starts:
	// Engine.WeightsImage waits for it) or "" (packed; no image).
	WeightsImage  string
	WeightsMapped bool
	// Fit is the start-up fit check the engine passed.
	Fit *Fit
	// NUMA is the placement over several nodes (nil on one node).
	NUMA         *numa.Plan
	SessionStore string
	// SessionStoreMaxBytes is the session store's bound (see Options).
	SessionStoreMaxBytes int64
	// ModelIdentity hashes the model config and tokenizer: what a session
	// transcript's token ids are valid for.
	ModelIdentity string
	// PrefixCacheBytes is the prefix store's capacity (0: none), in blocks
	// of PrefixBlockTokens positions.
	PrefixCacheBytes  int64
	PrefixBlockTokens int
	// PrefixCacheDir is the prefix store's disk tier ("" = none) and
	// PrefixCacheDiskBytes its bound (0 = unbounded).
	PrefixCacheDir       string
	PrefixCacheDiskBytes int64
	LoadTime             time.Duration
}

// Stats is a snapshot of the engine's state and counters.
type Stats struct {
	Slots, SlotsBusy   int
	KVUsed, KVCapacity int // positions holding KV (busy and idle slots), all positions
	QueueDepth         int
	Requests           int64 // finished, successfully or not
	PrefixHits         int64 // requests that reused cached KV (in their slot, copied or restored)
	PrefixMisses       int64
	ReusedTokens       int64 // prompt tokens not recomputed thanks to reuse
	CopiedTokens       int64 // of which copied from another slot
	// The prefix store: requests that restored KV from it, requests that
	// looked in it and found nothing longer than the slots had, positions
	// restored from it and written to it, and its memory in use.
	PrefixStoreHits, PrefixStoreMisses    int64
	PrefixStoreRestored, PrefixStoreSaved int64
	PrefixStoreBytes, PrefixStoreCapacity int64
	// The prefix store's disk tier: bytes of its block files and its bound,
	// blocks on disk, blocks written (evicted from memory), read back (on a
	// hit), evicted by the bound and discarded as unusable.
	PrefixDiskBytes, PrefixDiskCapacity                                       int64
	PrefixDiskBlocks                                                          int
	PrefixDiskWritten, PrefixDiskRead, PrefixDiskEvicted, PrefixDiskDiscarded int64
	// Blocks removed because the sessions that produced them were deleted
	// (DeleteSession): from the prefix store's memory, files deleted from
	// its disk tier.
	PrefixStorePurged, PrefixDiskPurged int64
	SessionsDeleted                     int64 // DeleteSession calls that found the session
	PrefilledTokens                     int64 // prompt tokens computed
	GeneratedTokens                     int64
	Steps                               int64 // forward passes
	// Logits rows screened (Options.NoLogitScreen) and, of their
	// vocabularies, the tokens whose logits were then computed.
	ScreenedRows, ScreenedTokens int64
	Sessions                     int   // sessions held in slots
	SessionsStored               int   // sessions in the session store
	SessionStoreBytes            int64 // files in the session store's directory
	SessionStoreMaxBytes         int64
	SessionsDropped              int64 // stored sessions evicted to keep within SessionStoreMaxBytes
	SessionsExpired              int64 // sessions deleted after SessionTTL (from a slot and from the store count apart)
	SessionsEvicted              int64 // sessions moved out of a slot (to the store when there is one)
	SessionsRestored             int64 // sessions read back from the store
	SessionsRecomputed           int64 // stored sessions found unusable (corrupt, other model) and recomputed
	LastStepDuration             time.Duration
	MaxDecodeStepLatency         time.Duration // longest step that advanced a decoding slot
}

// Request is one generation.
type Request struct {
	// Tokens is the whole prompt (history included); the engine reuses any
	// prefix of it that a slot still holds.
	Tokens []int32
	// SessionID keeps this conversation's KV (in its slot, else in the
	// session store) for the next request with the same ID.
	SessionID string
	// MaxTokens bounds the generated tokens; 0 = up to the sequence length.
	MaxTokens  int
	Sampling   sample.Params
	StopTokens []int32 // nil = the model's eos ids (config and generation_config)
	Constraint sample.Constraint
	// Logprobs fills Event.Logprob, TopLogprobs (≤ MaxTopLogprobs) Event.Top.
	Logprobs    bool
	TopLogprobs int
}

// MaxTopLogprobs is the most alternatives an Event carries.
const MaxTopLogprobs = 20

// Event is one generated token. Top is only valid during the callback.
// A stop token ends the generation without an Event.
type Event struct {
	Token   int32
	Logprob float32
	Top     []sample.TokenLogprob
	// At is when the scheduler produced the token: the callback may run
	// later when the caller's goroutine waits for a CPU the kernels hold.
	At time.Time
}

// Result summarises a generation.
type Result struct {
	PromptTokens, CachedTokens, CompletionTokens int
	// FinishReason is "stop" (stop token or ErrStop) or "length".
	FinishReason string
	// Tokens is the transcript: prompt then generated tokens exactly as
	// generated (a stop token included).
	Tokens    []int32
	TTFT      time.Duration // request arrival to first token
	Total     time.Duration
	QueueTime time.Duration
	Prefilled int // prompt tokens computed (PromptTokens − CachedTokens)
	// Of CachedTokens: copied from another slot, restored from the prefix store.
	CopiedTokens, StoreTokens int
	Restored                  bool
	SessionHit                bool // the session was found in a slot or the store
}

var (
	// ErrStop, returned by Generate's callback, ends the generation normally
	// with FinishReason "stop" (this is how stop strings work).
	ErrStop = errors.New("stop")
	// ErrTooLong: prompt + max tokens exceed a slot's sequence length.
	ErrTooLong = errors.New("request too long")
	// ErrQueueFull: the queue is full, or no slot freed up within QueueTimeout.
	ErrQueueFull = errors.New("queue full")
	// ErrInvalid wraps a malformed request.
	ErrInvalid = errors.New("invalid request")
	// ErrClosed: the engine is shut down.
	ErrClosed = errors.New("engine closed")
)

// Engine runs generation requests. Create it with New.
type Engine struct {
	opts        Options
	info        Info
	log         *slog.Logger
	model       *modeldir.Model // nil in tests of the scheduler alone
	eos         []int32
	vocab       int
	be          backend
	store       *store
	prefix      *prefixStore // nil: none
	closers     []func() error
	janitorDone chan struct{} // nil: no janitor
	// imageDone is closed when the weights image written in the
	// background (nil: none) is on disk or failed; imageState is then
	// what became of it.
	imageDone  chan struct{}
	imageState string

	mu       sync.Mutex
	incoming []*job
	ctl      []func() // run by the scheduler between steps (see do)
	queued   int
	closed   bool
	stats    Stats
	wake     chan struct{}
	done     chan struct{}
	closeErr error

	// Owned by the scheduler goroutine.
	slots     []*slot
	queue     []*job
	active    []*slot
	segs      []model.Segment
	segSlot   []*slot
	tick      uint64
	rng       *rand.Rand
	prefillMx int // prompt tokens per step when nothing decodes
	masks     *maskWorker
	prep      []*sample.Sampler // the samplers handed to masks, scratch of step
	// Scratch of refine: which panels of gemm.PanelWidth tokens some
	// screened row's draw can choose from, and their list.
	panelSeen []bool
	panels    []int32
	ops       *ops.Kernels // refine's search for the panels
}

// slot is one sequence of the KV cache and what it holds.
type slot struct {
	id int
	// tokens is the slot's content; positions [0, kv) have KV. While a job
	// decodes, tokens ends with the sampled token whose KV comes next step;
	// after it, with its last sampled token, whose KV the next job that
	// continues the slot computes with its prompt, in the same pass (a pass
	// of its own would read every weight once more for one token).
	tokens  []int32
	kv      int
	session string // pinned conversation, "" = none
	// owner produced the slot's content: the session of the job that last
	// started in it, kept after the session leaves the slot ("" = a
	// request without one). The prefix store records it (pblock.owners).
	owner   string
	used    uint64 // LRU clock
	usedAt  time.Time
	job     *job
	sampler *sample.Sampler
}

type job struct {
	ctx       context.Context
	cancel    context.CancelFunc
	req       Request
	maxTokens int
	stops     []int32
	events    chan Event
	tops      []sample.TokenLogprob
	enqueued  time.Time
	generated int
	res       Result
	err       error
}

// New checks that the model md (modeldir.Open) fits with opts, loads its
// weights and commits every buffer the engine will use, then schedules
// generation requests on it.
func New(md *modeldir.Model, opts Options) (*Engine, error) {
	opts = withDefaults(opts)
	start := time.Now()
	if err := kernels.EnvError(); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	dir := md.Dir
	var closers []func() error
	fail := func(err error) (*Engine, error) {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i]()
		}
		return nil, fmt.Errorf("engine: %w", err)
	}
	kvd, err := kvcache.ParseDType(opts.KVDType)
	if err != nil {
		return fail(err)
	}
	fit, err := Fits(md.Config, opts)
	if err != nil {
		return fail(err)
	}
	opts.NoLogitScreen = opts.NoLogitScreen || fit.DroppedScreen
	opts.NoCodedWeights = opts.NoCodedWeights || fit.DroppedCoded
	lo := opts.loadOptions()
	if len(nodes(opts)) > 1 {
		lo.ImageDir = ""
	}
	m, err := md.LoadWeights(lo)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, m.Close)
	cfg := m.Config
	cache, err := kvcache.New(cfg, opts.BatchSize, opts.SequenceLength, kvd)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, cache.Close)
	pool, th, placement, numaWarns, err := startPool(opts, m, cache)
	if err != nil {
		return fail(err)
	}
	for _, n := range th.Notes {
		opts.Logger.Warn("thread count", "note", n)
	}
	closers = append(closers, func() error { pool.Close(); return nil })
	var decodeWeights string
	if c, ok := m.ChooseCoded(pool); ok {
		decodeWeights = c.String()
		if c.Kept && placement != nil {
			// The copies coded after the choice go where the rest went
			// (pages already placed stay).
			for _, w := range interleave(placement, m.WeightMemory()) {
				if !slices.Contains(numaWarns, w) {
					numaWarns = append(numaWarns, w)
				}
			}
		}
	}
	img := m.Image()
	weightsImage := ""
	switch {
	case img.Mapped:
		weightsImage = "mapped " + img.Path
	case img.Writing:
		weightsImage = "writing " + img.Path
	}
	ro := runnerOptions(opts)
	ro.Pool = pool
	runner, err := m.NewRunner(cache, ro)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() error { runner.Close(); return nil })
	logitScreen := ""
	switch {
	case runner.ScreenRows() == 0:
	case opts.LogitScreenRows > 0:
		logitScreen = model.ScreenChoice{Rows: runner.ScreenRows()}.String()
	default:
		if c, ok := runner.ChooseScreen(screenRounds); ok {
			logitScreen = c.String()
			if c.Rows == 0 {
				m.DropScreen()
			}
		}
	}

	info := Info{
		ModelName: cfg.Name(), ModelPath: dir, Synthetic: md.Synthetic, Config: cfg,
		KernelPath: kernels.Describe(), Attention: attentionOf(runner.AttentionMode(), kvd), DType: m.DType, KVDType: string(kvd),
		Threads: pool.Size(), ThreadsWhy: th.Why, PinnedCPUs: pool.CPUs(), Slots: opts.BatchSize, SequenceLength: opts.SequenceLength,
		ChunkSize: opts.ChunkSize, StallTokens: opts.StallTokens,
		WeightBytes: m.WeightBytes(), CodedWeightBytes: m.CodedBytes(), DecodeWeights: decodeWeights, ScreenBytes: m.ScreenBytes(), ScreenRows: runner.ScreenRows(), LogitScreen: logitScreen, WeightsImage: weightsImage, WeightsMapped: m.Image().Mapped,
		KVBytes: cache.Bytes(), ScratchBytes: runner.ScratchBytes(),
		Fit: fit, NUMA: placement, SessionStore: opts.SessionStore,
	}
	be := &modelBackend{runner: runner, cache: cache, pool: pool}
	info.ModelIdentity = md.Identity
	e, err := newEngine(opts, info, be, cfg.VocabSize, md.EOS, kvIdentity(dir, cfg, info))
	if err != nil {
		return fail(err)
	}
	e.model, e.closers = md, closers
	for _, s := range e.slots {
		e.info.ScratchBytes += s.sampler.Bytes()
	}
	e.info.LoadTime = time.Since(start)
	for _, w := range append(fit.Warnings, numaWarns...) {
		e.log.Warn(w)
	}
	if img.Note != "" {
		e.log.Warn("weights image", "note", img.Note)
	}
	if placement != nil {
		for _, n := range placement.Nodes {
			e.log.Info("numa node", "node", n.Node, "workers", fmt.Sprintf("%d-%d", n.FirstWorker, n.FirstWorker+n.Workers-1),
				"cpus", n.CPUs, "bytes", n.Share)
		}
	}
	e.log.Info("engine ready",
		"model", info.ModelName, "synthetic", info.Synthetic, "path", dir,
		"weights", info.DType, "weight_bytes", info.WeightBytes, "coded_weight_bytes", info.CodedWeightBytes, "decode_weights", info.DecodeWeights, "logit_screen_bytes", info.ScreenBytes, "logit_screen", info.LogitScreen, "weights_image", info.WeightsImage,
		"kv_cache", fmt.Sprintf("%d slots × %d positions %s", info.Slots, info.SequenceLength, info.KVDType),
		"kv_bytes", info.KVBytes, "scratch_bytes", e.info.ScratchBytes, "prefix_cache_bytes", e.info.PrefixCacheBytes,
		"usable_memory", fit.Memory.Usable(), "max_sequence_length", fit.MaxSequenceLength,
		"kernels", info.KernelPath, "attention", info.Attention, "threads", info.ThreadsWhy, "pinned", cpu.FormatCPUList(info.PinnedCPUs),
		"load", e.info.LoadTime.Round(time.Millisecond))
	if info.Synthetic {
		e.log.Warn("running the built-in synthetic model: random weights, output is not language")
	}
	if img.Writing {
		e.imageDone = make(chan struct{})
		go e.writeImage(m)
	}
	return e, nil
}

// Fits runs CheckFit for cfg against opts.Memory (this machine's by
// default) and returns the fit, with a *FitError when it may not start: New
// calls it before allocating anything, and so may a command before it
// prepares a model.
func Fits(cfg *modelcfg.Config, opts Options) (*Fit, error) {
	readMem := opts.Memory
	if readMem == nil {
		readMem = func() (cpu.Memory, error) { return cpu.ReadMemory("/") }
	}
	mem, err := readMem()
	if err != nil {
		return nil, err
	}
	fit, err := CheckFit(cfg, opts, mem)
	if err != nil {
		return nil, err
	}
	return fit, fit.Err()
}

// runnerOptions sizes the runner (its Pool aside): one pass takes a whole
// prompt (or a chunk), or a stall-bounded piece of one beside a decode row
// of every slot.
func runnerOptions(o Options) model.RunnerOptions {
	prefill := o.SequenceLength
	if o.ChunkSize > 0 {
		prefill = o.ChunkSize
	}
	return model.RunnerOptions{MaxTokens: max(prefill, o.StallTokens) + o.BatchSize, MaxLogits: o.BatchSize, ScreenRows: o.LogitScreenRows}
}

// screenRounds is the rounds model.Runner.ChooseScreen times each row count
// over: the fastest of three stood apart from the memory's spells on the
// AMD EPYC VMs. For Qwen3-0.6B on the Zen 3 the choice took 0.05 s at one
// slot, 0.17 s at four and 0.29 s at eight; for Qwen3-32B's lm_head (5120 ×
// 151936) 1.0 s at four slots and 1.7 s at 64 (docs/performance.md,
// "thirty-fourth pass").
const screenRounds = 3

// loadOptions are the model's load options among o.
func (o Options) loadOptions() model.LoadOptions {
	return model.LoadOptions{DType: o.DType, NoCodedWeights: o.NoCodedWeights, NoLogitScreen: o.NoLogitScreen,
		ImageDir: o.WeightsImageDir, ImageKey: o.WeightsImageKey}
}

// writeImage writes m's weights image, which its load packed, while the
// engine serves: the write (mostly the disk's) is not part of a first
// start's wait. Close waits for it, so that a short run leaves its image
// for the next; WeightsImage says what became of it.
func (e *Engine) writeImage(m *model.Model) {
	defer close(e.imageDone)
	path, start := m.Image().Path, time.Now()
	size, err := m.SaveImage()
	if err != nil {
		e.imageState = "not written: " + err.Error()
		e.log.Warn("weights image", "note", e.imageState)
		return
	}
	e.imageState = fmt.Sprintf("written %s (%.2f GB in %.1f s)", path, float64(size)/1e9, time.Since(start).Seconds())
	e.log.Info("weights image", "state", e.imageState)
}

// WeightsImage waits for the weights image a first start writes in the
// background, if any, and says what became of the engine's image: ""
// (none), "mapped PATH", "written PATH (size in time)" or "not written:
// why". Info.WeightsImage is the state at start ("writing PATH" until
// then).
func (e *Engine) WeightsImage() string {
	if e.imageDone == nil {
		return e.info.WeightsImage
	}
	<-e.imageDone
	return e.imageState
}

func withDefaults(o Options) Options {
	if o.DType == "" {
		o.DType = "bf16"
	}
	if o.KVDType == "" {
		o.KVDType = "bf16"
	}
	if o.SequenceLength <= 0 {
		o.SequenceLength = 4096
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 1
	}
	if o.StallTokens <= 0 {
		o.StallTokens = 256
	}
	if o.MaxQueue <= 0 {
		o.MaxQueue = 1024
	}
	if o.PrefixBlockTokens <= 0 {
		o.PrefixBlockTokens = 256
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o
}

// NewPool starts a kernel pool of n threads (0 = cpu.DefaultThreads), each
// bound to its CPU of cpu.Threads.PinCPUs unless noPin, and says where the
// count came from. The engine and the benchmarks' ceilings use it.
func NewPool(n int, noPin bool) (*threads.Pool, cpu.Threads) {
	th := cpu.DefaultThreads(cpu.System()).Resolve(n)
	if noPin {
		return threads.New(th.N, false), th
	}
	return threads.NewPinned(th.CPUs), th
}

// newEngine starts the scheduler over a backend; New and the tests share it.
// storeID is the KV identity; info.ModelIdentity, if set, the transcripts'.
func newEngine(opts Options, info Info, be backend, vocab int, eos []int32, storeID string) (*Engine, error) {
	e := &Engine{
		opts: opts, info: info, log: opts.Logger, be: be, vocab: vocab, eos: eos,
		wake: make(chan struct{}, 1), done: make(chan struct{}),
		segs: make([]model.Segment, 0, opts.BatchSize), segSlot: make([]*slot, 0, opts.BatchSize),
		active: make([]*slot, 0, opts.BatchSize),
		rng:    rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0)),
	}
	if _, ok := be.(screener); ok {
		panels := (vocab + gemm.PanelWidth - 1) / gemm.PanelWidth
		e.panelSeen, e.panels = make([]bool, panels), make([]int32, 0, panels)
		e.ops = ops.For(kernels.Active())
	}
	e.prefillMx = opts.SequenceLength * opts.BatchSize
	if opts.ChunkSize > 0 {
		e.prefillMx = opts.ChunkSize
	}
	for i := range opts.BatchSize {
		e.slots = append(e.slots, &slot{id: i, tokens: make([]int32, 0, opts.SequenceLength), sampler: sample.New(vocab)})
	}
	if opts.SessionStore != "" {
		tid := cmp.Or(info.ModelIdentity, storeID)
		s, err := openStore(storeConfig{dir: opts.SessionStore, tid: tid, kid: storeID, vocab: vocab,
			maxBytes: opts.SessionStoreMaxBytes, ttl: opts.SessionTTL, now: opts.Clock, log: opts.Logger})
		if err != nil {
			return nil, err
		}
		e.store = s
		e.info.SessionStoreMaxBytes = s.maxBytes
		st := s.stats()
		bound := "set"
		if opts.SessionStoreMaxBytes == 0 {
			bound = "10% of the free space"
		}
		opts.Logger.Info("session store", "dir", opts.SessionStore, "max_bytes", s.maxBytes, "max_bytes_from", bound,
			"bytes", st.bytes, "sessions", st.sessions, "ttl", opts.SessionTTL)
	}
	if size := opts.PrefixCacheBytes; size >= 0 {
		if size == 0 {
			size = DefaultPrefixCacheBytes(info.WeightBytes)
		}
		// Warm one slot's worth of positions ahead: enough for the save
		// that a new conversation's admission makes.
		reserve := int64(opts.SequenceLength) * int64(be.positionBytes())
		p, err := newPrefixStore(be, size, opts.PrefixBlockTokens, reserve)
		switch {
		case err != nil && opts.PrefixCacheBytes > 0:
			return nil, err
		case err != nil: // the default size: run without the store rather than not at all
			opts.Logger.Warn("no prefix cache", "err", err)
		}
		e.prefix = p
	}
	if e.prefix != nil {
		e.info.PrefixCacheBytes, e.info.PrefixBlockTokens = e.prefix.capacity(), opts.PrefixBlockTokens
		e.stats.PrefixStoreCapacity = e.prefix.capacity()
	}
	if err := e.openPrefixDisk(storeID); err != nil {
		e.prefix.close()
		if e.store != nil {
			e.store.close()
		}
		return nil, err
	}
	e.stats.Slots = opts.BatchSize
	e.stats.KVCapacity = opts.BatchSize * opts.SequenceLength
	go e.run()
	if opts.SessionTTL > 0 {
		e.janitorDone = make(chan struct{})
		go e.janitor(e.janitorDone)
	}
	return e, nil
}

// Close stops the scheduler (failing queued and running requests with
// ErrClosed), writes sessions held in slots to the session store, and
// releases the model and cache.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		<-e.done
		return e.closeErr
	}
	e.closed = true
	e.mu.Unlock()
	e.signal()
	<-e.done
	if e.janitorDone != nil {
		<-e.janitorDone
	}
	e.WeightsImage()
	if e.store != nil {
		e.store.close()
	}
	var errs []error
	if e.closeErr != nil {
		errs = append(errs, e.closeErr)
	}
	for i := len(e.closers) - 1; i >= 0; i-- {
		if err := e.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	e.closers = nil
	if err := e.prefix.close(); err != nil {
		errs = append(errs, err)
	}
	e.closeErr = errors.Join(errs...)
	return e.closeErr
}

// Info describes the model and what the engine committed.
func (e *Engine) Info() Info { return e.info }

// Model is the model directory the engine serves.
func (e *Engine) Model() *modeldir.Model { return e.model }

// Stats is a snapshot of the engine's counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.QueueDepth = e.queued
	if e.store != nil {
		st := e.store.stats()
		s.SessionsStored, s.SessionStoreBytes, s.SessionStoreMaxBytes = st.sessions, st.bytes, st.maxBytes
		s.SessionsDropped = st.evicted
		s.SessionsExpired += st.expired
	}
	return s
}

func (e *Engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Generate runs req and calls fn with each generated token, in order, from
// the caller's goroutine. fn returning ErrStop ends the generation normally;
// any other error ends it and is returned; fn may be nil. Cancelling ctx
// frees the slot at the next scheduler step and returns ctx's error.
func (e *Engine) Generate(ctx context.Context, req Request, fn func(Event) error) (Result, error) {
	if fn == nil {
		fn = func(Event) error { return nil }
	}
	j, err := e.newJob(ctx, req)
	if err != nil {
		return Result{}, err
	}
	defer j.cancel()
	if err := e.enqueue(j); err != nil {
		return Result{}, err
	}
	delivered := 0
	var fnErr error
	for ev := range j.events {
		if fnErr != nil {
			continue // drain: the scheduler stops at its next step
		}
		if err := fn(ev); err != nil {
			fnErr = err
			j.cancel()
		}
		delivered++
	}
	res := j.res
	if fnErr == nil {
		return res, j.err
	}
	res.CompletionTokens = delivered
	res.Tokens = res.Tokens[:res.PromptTokens+delivered]
	if errors.Is(fnErr, ErrStop) {
		res.FinishReason = "stop"
		return res, nil
	}
	return res, fnErr
}

func (e *Engine) newJob(ctx context.Context, req Request) (*job, error) {
	n, seq := len(req.Tokens), e.opts.SequenceLength
	switch {
	case n == 0:
		return nil, fmt.Errorf("%w: empty prompt", ErrInvalid)
	case req.MaxTokens < 0:
		return nil, fmt.Errorf("%w: max_tokens %d is negative", ErrInvalid, req.MaxTokens)
	case req.TopLogprobs < 0 || req.TopLogprobs > MaxTopLogprobs:
		return nil, fmt.Errorf("%w: top_logprobs %d outside [0, %d]", ErrInvalid, req.TopLogprobs, MaxTopLogprobs)
	}
	if err := req.Sampling.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	for i, t := range req.Tokens {
		if t < 0 || int(t) >= e.vocab {
			return nil, fmt.Errorf("%w: prompt token %d is id %d, outside the vocabulary [0, %d)", ErrInvalid, i, t, e.vocab)
		}
	}
	// Compared against the room left, never summed: MaxTokens comes from
	// clients and may be near the int range's end.
	maxTokens := req.MaxTokens
	if maxTokens == 0 {
		maxTokens = seq - n
	}
	if n >= seq || maxTokens > seq-n {
		return nil, fmt.Errorf("%w: %d prompt tokens + %d max tokens > sequence length %d",
			ErrTooLong, n, max(maxTokens, 1), seq)
	}
	stops := req.StopTokens
	if stops == nil {
		stops = e.eos
	}
	j := &job{req: req, maxTokens: maxTokens, stops: stops, events: make(chan Event, maxTokens), enqueued: time.Now()}
	if req.TopLogprobs > 0 {
		j.tops = make([]sample.TokenLogprob, maxTokens*req.TopLogprobs)
	}
	j.ctx, j.cancel = context.WithCancel(ctx)
	return j, nil
}

func (e *Engine) enqueue(j *job) error {
	e.mu.Lock()
	switch {
	case e.closed:
		e.mu.Unlock()
		return ErrClosed
	case e.queued >= e.opts.MaxQueue:
		n := e.queued
		e.mu.Unlock()
		return fmt.Errorf("%w: %d requests waiting", ErrQueueFull, n)
	}
	e.incoming = append(e.incoming, j)
	e.queued++
	e.mu.Unlock()
	e.signal()
	return nil
}

// attentionOf is the attention arithmetic a runner of mode m runs over a
// cache of dtype kvd: only a bf16 cache takes the bf16 mode.
func attentionOf(m attn.Mode, kvd kvcache.DType) string {
	if kvd != kvcache.BF16 {
		return attn.ModeF32.String()
	}
	return m.String()
}
