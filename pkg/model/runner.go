package model

import (
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/attn"
	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/kernels/ops"
	"github.com/ellm-dev/ellm/kernels/threads"
	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/numa"
)

// LogitsMode says which rows of a segment need logits.
type LogitsMode int

const (
	// LogitsNone computes no logits (a prefill chunk whose last token is not sampled yet).
	LogitsNone LogitsMode = iota
	// LogitsLast computes the logits of the segment's last token.
	LogitsLast
	// LogitsAll computes the logits of every token (alignment, scoring).
	LogitsAll
)

// Segment is a run of tokens of one sequence: Tokens at absolute positions
// [Start, Start+len(Tokens)) of cache slot Slot. Positions [0, Start) must
// already be in the cache.
type Segment struct {
	Slot, Start int
	Tokens      []int32
	Logits      LogitsMode
	// Screen says that the draw from this LogitsLast segment's logits
	// depends only on a few of the largest: the Forward may then screen
	// them (Runner.Screened).
	Screen bool
}

// givesLogits reports whether token i of s has its logits computed: every
// token of a LogitsAll segment, the last of a LogitsLast one.
func (s *Segment) givesLogits(i int) bool {
	return s.Logits == LogitsAll || s.Logits == LogitsLast && i == len(s.Tokens)-1
}

// RunnerOptions size a Runner.
type RunnerOptions struct {
	// MaxTokens is the most rows one pass through the layers takes (the
	// chunk size, or the sequence length for single-pass prefill). Longer
	// forwards are split into passes of MaxTokens rows: incremental prefill.
	MaxTokens int
	// MaxLogits is the most logits rows one Forward returns (default: the
	// cache's slot count, one sampled token per sequence).
	MaxLogits int
	// Pool runs the kernels; nil makes a private pool of one worker per CPU.
	Pool *threads.Pool
	// ScreenRows caps the logits rows a pass screens (0: every row the
	// pass has room for, two int8 rows each; Runner.ChooseScreen may
	// lower it).
	ScreenRows int
}

// Runner runs forward passes of one model over one KV cache. Every buffer is
// allocated by NewRunner; Forward allocates nothing. A Runner is not safe for
// concurrent use.
type Runner struct {
	// Trace, when set, sees the hidden states and MoE routing of every pass.
	Trace Tracer

	m       *Model
	cache   *kvcache.Cache
	pool    *threads.Pool
	ownPool bool
	mm      *gemm.Context
	att     *attn.Attention
	ops     *ops.Kernels // norms, RoPE, softmax, embedding: bound by NewRunner
	rope    *ops.Rope
	eps     float32

	maxM, maxLogits int

	// Activations of one pass, [rows, width] row-major. Buffers whose
	// lives do not overlap share memory (see NewRunner): a long single-pass
	// prefill is bounded by these bytes per row.
	x   []float32 // residual stream [M, H]
	xn  []float32 // normed input of the current sublayer [M, H]
	y   []float32 // sublayer output before the residual add [M, H]
	qkv []float32 // fused q/k/v projection [M, Hq·D + 2·Hkv·D]
	q   []float32 // normed, rotated queries [M, Hq·D], in h's memory
	ao  []float32 // attention output [M, Hq·D], in qkv's memory
	// aoFused is the attention output of a qkvAttention pass [fusedRows,
	// Hq·D]: its own memory, since its heads are written while other
	// workers still project theirs (ao's memory, qkv, is being read).
	aoFused []float32
	h       []float32 // MLP hidden [M, max(I, I_moe)]
	pos     []int32   // absolute position of each row
	slot    []int32   // cache slot of each row
	ids     []int32   // token of each row
	row     []Row     // which segment token each row is

	seqs []attn.Seq // attention work of a pass, one per piece

	rowTask rowTask
	qkvTask qkvAttnTask
	steps   *StepTimes // nil unless TimeSteps

	moe moeScratch

	lmIn    []float32 // final-normed rows that need logits [min(MaxLogits, M), H]
	logits  []float32 // [MaxLogits, V]
	nLogits int
	base    []int // first logits row of each segment of the current Forward

	// The logits screen (Screened): each logits row's two rows for the
	// int8 product [2·maxScreen, H], and their outputs, then the ends of
	// the logits' intervals [2·maxScreen, V]; the rows screened by the last
	// Forward (0: none), and the task that refines them.
	screenIn, screenOut []float32
	maxScreen, screened int
	intervals           intervalTask
	refine              refineTask
}

// Row identifies a row of a pass: token Index of segment Seg of the Forward call.
type Row struct{ Seg, Index int }

// NewRunner sizes a runner for m over cache.
func (m *Model) NewRunner(cache *kvcache.Cache, opts RunnerOptions) (*Runner, error) {
	cfg := m.Config
	if cache.Layers != cfg.NumHiddenLayers || cache.KVHeads != cfg.NumKeyValueHeads || cache.HeadDim != cfg.HeadDim {
		return nil, fmt.Errorf("runner: kv cache is %d layers × %d heads × %d dims, model needs %d × %d × %d",
			cache.Layers, cache.KVHeads, cache.HeadDim, cfg.NumHiddenLayers, cfg.NumKeyValueHeads, cfg.HeadDim)
	}
	if opts.MaxTokens < 1 {
		return nil, fmt.Errorf("runner: MaxTokens = %d, must be positive", opts.MaxTokens)
	}
	r := &Runner{m: m, cache: cache, pool: opts.Pool, ops: ops.For(kernels.Active()), eps: float32(cfg.RMSNormEps)}
	r.maxM, r.maxLogits = runnerRows(opts, cache.Slots, cache.SeqLen)
	y, err := yarn(cfg)
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	if r.rope, err = ops.NewRope(cfg.HeadDim, cache.SeqLen, cfg.RopeTheta, y); err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	if r.pool == nil {
		r.pool, r.ownPool = threads.New(0, false), true
	}
	M, H, qd, kvd := r.maxM, cfg.HiddenSize, cfg.QDim(), cfg.KVDim()
	inter := max(cfg.IntermediateSize, cfg.MoEIntermediateSize)
	r.mm = gemm.NewContext(r.pool, M, max(H, qd, inter))
	if r.att, err = attn.New(r.pool, M, cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim); err != nil {
		r.Close()
		return nil, fmt.Errorf("runner: %w", err)
	}
	r.x, r.xn, r.y = make([]float32, M*H), make([]float32, M*H), make([]float32, M*H)
	// The queries live from the q/k/v projection to attention, the MLP
	// hidden after it: one buffer. The attention output is written once
	// the projection's rows are consumed (queries copied out, K/V stored).
	r.qkv = make([]float32, M*(qd+2*kvd))
	r.h = make([]float32, M*max(inter, qd))
	r.q, r.ao = r.h[:M*qd], r.qkv[:M*qd]
	r.pos, r.slot, r.ids, r.row = make([]int32, M), make([]int32, M), make([]int32, M), make([]Row, M)
	r.rowTask.r = r
	r.rowTask.errs = make([]error, r.pool.Size())
	r.aoFused = make([]float32, min(M, fusedRows)*qd)
	r.qkvTask.r = r
	r.qkvTask.errs = make([]error, r.pool.Size())
	r.seqs = make([]attn.Seq, 0, min(M, cache.Slots))
	if cfg.IsMoE() {
		r.moe = newMoEScratch(M, H, cfg.NumExperts, cfg.NumExpertsPerTok)
	}
	r.lmIn = make([]float32, min(r.maxLogits, M)*H)
	r.logits = make([]float32, r.maxLogits*cfg.VocabSize)
	r.base = make([]int, 0, cache.Slots)
	if m.lmScreen != nil {
		r.sizeScreen(screenRows(M, r.maxLogits, opts.ScreenRows))
		r.intervals = intervalTask{r: r, refused: make([]bool, r.pool.Size())}
		r.refine.r = r
	}
	// Touched now, as kvcache does the cache: the memory the start-up report
	// counts is then resident, and the first request does not pay its page
	// faults (a fresh runner's first 512-token prefill of the Qwen3-0.6B
	// shape was ~12 % slower than the next ones; docs/performance.md, "Short
	// prefill").
	numa.Commit(r.x, r.xn, r.y, r.qkv, r.h, r.aoFused, r.lmIn, r.logits, r.moe.gathered, r.moe.outRows)
	return r, nil
}

// yarn converts config.json's rope_scaling for the RoPE table (nil: plain
// RoPE), following transformers' _compute_yarn_parameters.
func yarn(cfg *modelcfg.Config) (*ops.YaRN, error) {
	rs := cfg.RopeScaling
	switch rs.Kind() {
	case "default":
		return nil, nil
	case "yarn":
	default:
		return nil, fmt.Errorf("rope_scaling %q is not implemented (only yarn)", rs.Kind())
	}
	y := &ops.YaRN{Factor: rs.Factor, OriginalMaxPositionEmbeddings: rs.OriginalMaxPositionEmbeddings}
	if y.OriginalMaxPositionEmbeddings == 0 {
		y.OriginalMaxPositionEmbeddings = cfg.MaxPositionEmbeddings
	}
	if rs.BetaFast != nil {
		y.BetaFast = *rs.BetaFast
	}
	if rs.BetaSlow != nil {
		y.BetaSlow = *rs.BetaSlow
	}
	mscale := func(scale, m float64) float64 {
		if scale <= 1 {
			return 1
		}
		return float64(0.1*m*math.Log(scale)) + 1 // unfused on every CPU
	}
	switch {
	case rs.AttentionFactor != nil:
		y.AttentionFactor = *rs.AttentionFactor
	case rs.MScale != nil && rs.MScaleAllDim != nil && *rs.MScale != 0 && *rs.MScaleAllDim != 0:
		y.AttentionFactor = mscale(rs.Factor, *rs.MScale) / mscale(rs.Factor, *rs.MScaleAllDim)
	}
	return y, nil
}

// Close releases the runner's private pool, if it made one.
func (r *Runner) Close() {
	if r.ownPool {
		r.pool.Close()
	}
}

// MaxTokens is the most rows one pass takes.
func (r *Runner) MaxTokens() int { return r.maxM }

// AttentionMode is the arithmetic of attention over a bf16 KV cache
// (attn.Mode, chosen when the Runner was built).
func (r *Runner) AttentionMode() attn.Mode { return r.att.Mode() }

// ScratchBytes is the memory the runner allocated: activation buffers (q
// and ao share others' memory), row indices, the RoPE table and its
// kernels' scratch — what the function ScratchBytes predicts before
// anything is allocated.
func (r *Runner) ScratchBytes() int64 {
	n := len(r.x) + len(r.xn) + len(r.y) + len(r.qkv) + len(r.h) + len(r.aoFused) +
		len(r.lmIn) + len(r.logits) + r.moe.floats() + len(r.screenIn) + len(r.screenOut)
	rows := int64(4*(len(r.pos)+len(r.slot)+len(r.ids))) + int64(len(r.row))*int64(unsafe.Sizeof(Row{}))
	return int64(4*n) + rows + r.rope.Bytes() + r.mm.ScratchBytes() + r.att.ScratchBytes()
}

// Logits returns logits row i of the last Forward: rows are numbered in
// segment order, one per LogitsLast segment and len(Tokens) per LogitsAll
// segment. The slice is overwritten by the next Forward.
func (r *Runner) Logits(i int) []float32 {
	v := r.m.Config.VocabSize
	return r.logits[i*v : (i+1)*v]
}

// NumLogits is the number of logits rows the last Forward produced.
func (r *Runner) NumLogits() int { return r.nLogits }

// Forward runs segs through the model: their K/V go into the cache at their
// positions and the logits they ask for become available through Logits.
// The rows of all segments go through each layer together, MaxTokens rows
// at a time.
func (r *Runner) Forward(segs []Segment) error {
	if err := r.check(segs); err != nil {
		return err
	}
	seg, idx := 0, 0
	for seg < len(segs) {
		// One pass: consecutive pieces of segments, at most maxM rows.
		r.seqs = r.seqs[:0]
		rows := 0
		for seg < len(segs) && rows < r.maxM {
			s := &segs[seg]
			n := min(len(s.Tokens)-idx, r.maxM-rows)
			r.seqs = append(r.seqs, attn.Seq{Slot: s.Slot, Start: s.Start + idx, N: n, Row: rows})
			for j := range n {
				r.ids[rows+j] = s.Tokens[idx+j]
				r.pos[rows+j] = int32(s.Start + idx + j)
				r.slot[rows+j] = int32(s.Slot)
				r.row[rows+j] = Row{Seg: seg, Index: idx + j}
			}
			rows += n
			if idx += n; idx == len(s.Tokens) {
				seg, idx = seg+1, 0
			}
		}
		if err := r.pass(segs, rows); err != nil {
			return err
		}
	}
	return nil
}

func (r *Runner) check(segs []Segment) error {
	cfg := r.m.Config
	r.base = r.base[:0]
	r.nLogits, r.screened = 0, 0
	for i := range segs {
		s := &segs[i]
		switch {
		case s.Slot < 0 || s.Slot >= r.cache.Slots:
			return fmt.Errorf("forward: segment %d: slot %d outside [0, %d)", i, s.Slot, r.cache.Slots)
		case len(s.Tokens) == 0:
			return fmt.Errorf("forward: segment %d: no tokens", i)
		case s.Start < 0 || s.Start+len(s.Tokens) > r.cache.SeqLen:
			return fmt.Errorf("forward: segment %d: positions [%d, %d) exceed the sequence length %d",
				i, s.Start, s.Start+len(s.Tokens), r.cache.SeqLen)
		}
		for j := range i {
			if segs[j].Slot == s.Slot {
				return fmt.Errorf("forward: segments %d and %d both use slot %d", j, i, s.Slot)
			}
		}
		for _, t := range s.Tokens {
			if t < 0 || int(t) >= cfg.VocabSize {
				return fmt.Errorf("forward: segment %d: token id %d outside the vocabulary [0, %d)", i, t, cfg.VocabSize)
			}
		}
		if len(r.base) == cap(r.base) {
			return fmt.Errorf("forward: %d segments, the cache has %d slots", len(segs), r.cache.Slots)
		}
		r.base = append(r.base, r.nLogits)
		switch s.Logits {
		case LogitsLast:
			r.nLogits++
		case LogitsAll:
			r.nLogits += len(s.Tokens)
		}
	}
	if r.nLogits > r.maxLogits {
		return fmt.Errorf("forward: %d logits rows asked, the runner holds %d (RunnerOptions.MaxLogits)", r.nLogits, r.maxLogits)
	}
	return nil
}

// keepLogitRowsOnly: the last layer goes on past its K and V with the rows
// that give logits alone (Runner.keepLogitRows), unless a Tracer watches
// every row. A variable so that tests can compare the two.
var keepLogitRowsOnly = true

// pass runs rows [0, m) of the prepared pass through every layer.
func (r *Runner) pass(segs []Segment, m int) error {
	cfg := r.m.Config
	H := cfg.HiddenSize
	x, xn := r.x[:m*H], r.xn[:m*H]
	r.lapStart()
	// inputs_embeds = self.embed_tokens(input_ids)
	if err := r.m.embed.gather(r.ops, x, r.ids[:m]); err != nil {
		return err
	}
	r.trace(0, x, m)
	stage := r.staging(m)
	// hidden_states = self.input_layernorm(hidden_states) (layer 0; later
	// layers get theirs fused with the previous residual add)
	r.rowTask.norm = r.m.layers[0].inputNorm
	if stage {
		r.rowTask.stage = r.m.layers[0].qkv
	}
	if err := r.rows(rowNorm, 0, &r.m.layers[0], m); err != nil {
		return err
	}
	r.lap(StepEmbed)
	for l := range r.m.layers {
		lw := &r.m.layers[l]
		var keep []Segment
		if l == len(r.m.layers)-1 && keepLogitRowsOnly && r.Trace == nil {
			keep = segs
		}
		n, err := r.attention(l, lw, m, stage, keep)
		if err != nil {
			return fmt.Errorf("layer %d: %w", l, err)
		}
		if n == 0 {
			return nil // a prompt's piece that gives no logits
		}
		if n < m {
			m, x, xn = n, x[:n*H], xn[:n*H]
			stage = stage && r.staging(m)
		}
		// hidden_states = residual + hidden_states; hidden_states = self.post_attention_layernorm(hidden_states)
		r.rowTask.norm = lw.postNorm
		if stage && lw.router == nil {
			r.rowTask.stage = lw.gate
		}
		if err := r.rows(rowAddNorm, l, lw, m); err != nil {
			return err
		}
		r.lap(StepAddNorm)
		if lw.router != nil {
			r.sparseMoE(l, lw, m)
			r.lap(StepMoE)
		} else {
			r.mlp(lw, m, stage)
		}
		// hidden_states = residual + hidden_states, then the next norm: the
		// next layer's input_layernorm, or the final model.norm.
		r.rowTask.norm = r.m.finalNorm
		if l+1 < len(r.m.layers) {
			r.rowTask.norm = r.m.layers[l+1].inputNorm
			if stage {
				r.rowTask.stage = r.m.layers[l+1].qkv
			}
		}
		if err := r.rows(rowAddNorm, l, lw, m); err != nil {
			return err
		}
		r.lap(StepAddNorm)
		r.trace(l+1, x, m)
	}
	r.trace(len(r.m.layers)+1, xn, m)
	r.lmHead(segs, m)
	r.lap(StepLMHead)
	return nil
}

// lmHead computes logits = self.lm_head(hidden_states) for the rows that
// asked, or screens them (Screened) when every logits row of the Forward is
// in this pass and asked for it. Logits rows are numbered in segment order,
// so the rows of one pass that need logits fill consecutive logits rows.
func (r *Runner) lmHead(segs []Segment, m int) {
	H := r.m.Config.HiddenSize
	n, first, screen := 0, 0, r.maxScreen > 0
	for i := range m {
		rw := r.row[i]
		s := &segs[rw.Seg]
		if !s.givesLogits(rw.Index) {
			continue
		}
		out := r.base[rw.Seg]
		if s.Logits == LogitsAll {
			out, screen = out+rw.Index, false
		} else {
			screen = screen && s.Screen
		}
		if n == 0 {
			first = out
		}
		copy(r.lmIn[n*H:(n+1)*H], r.xn[i*H:(i+1)*H])
		if n++; n*H == len(r.lmIn) {
			screen = r.lmRows(first, n, screen)
			n = 0
		}
	}
	if n > 0 {
		r.lmRows(first, n, screen)
	}
}

// lmRows computes the logits of lmIn's first n rows into logits rows first…,
// or screens them when it may (every logits row of the Forward is among
// them, and all asked) and can; it reports whether it screened.
func (r *Runner) lmRows(first, n int, may bool) bool {
	if may && n == r.nLogits && r.screen(n) {
		return true
	}
	H, V := r.m.Config.HiddenSize, r.m.Config.VocabSize
	r.mm.MatMul(r.logits[first*V:], r.lmIn[:n*H], n, r.m.lmHead)
	return false
}

// screenRows is the most logits rows a pass of m rows screens: two rows of
// the int8 product each, and no more than capped (RunnerOptions.ScreenRows).
func screenRows(m, logits, capped int) int {
	if capped > 0 {
		logits = min(logits, capped)
	}
	return min(logits, m/2)
}

// screen bounds the logits of the n rows of lmIn (all the Forward's) with
// the int8 screen, or reports false when it cannot (too many rows, the
// screen dropped, or activations that are not finite).
func (r *Runner) screen(n int) bool {
	H := r.m.Config.HiddenSize
	s := r.m.lmScreen
	if n > r.maxScreen || s == nil {
		return false
	}
	round := r.mm.RoundsActivations(n, r.m.lmHead)
	for i := range n {
		s.Split(r.screenIn[2*i*H:], r.lmIn[i*H:(i+1)*H], round)
	}
	r.mm.MatMul(r.screenOut, r.screenIn[:2*n*H], 2*n, s.Weight())
	r.intervals.rows = n
	r.pool.Run(&r.intervals)
	if slices.Contains(r.intervals.refused, true) {
		clear(r.intervals.refused)
		return false
	}
	r.screened = n
	return true
}

// Screened reports whether the last Forward screened its logits instead of
// computing them: its segments all asked (Segment.Screen), and the model has
// a screen (LoadOptions.NoLogitScreen). Each logits row then has an
// interval per token that holds its logit (Interval), and Refine computes
// the logits that matter; until then Logits holds nothing of this Forward.
func (r *Runner) Screened() bool { return r.screened > 0 }

// Interval returns the lower and upper ends of logits row i's intervals
// (Screened): lo[t] ≤ logit t ≤ hi[t]. The caller may change them; they are
// overwritten by the next Forward.
func (r *Runner) Interval(i int) (lo, hi []float32) {
	if i < 0 || i >= r.screened {
		panic(fmt.Sprintf("model: Interval(%d) of %d screened rows", i, r.screened))
	}
	v := r.m.Config.VocabSize
	return r.screenOut[2*i*v : (2*i+1)*v], r.screenOut[(2*i+1)*v : (2*i+2)*v]
}

// Refine ends a screened Forward: every logits row gets the logits of the
// tokens in panels (indices of gemm.PanelWidth consecutive token ids, in
// increasing order), the same bits as an unscreened Forward computes, and
// −Inf for every other token.
func (r *Runner) Refine(panels []int32) {
	n, V := r.screened, r.m.Config.VocabSize
	if n == 0 {
		panic("model: Refine without a screened Forward")
	}
	r.screened = 0
	if len(panels) > 0 {
		r.mm.Prepare(r.logits[:n*V], r.lmIn[:n*r.m.Config.HiddenSize], n, r.m.lmHead)
	}
	r.refine.rows, r.refine.panels = n, panels
	r.refine.next.Store(0)
	r.pool.Run(&r.refine)
	r.refine.panels = nil
	if len(panels) > 0 {
		r.mm.Done()
	}
}

// fill sets every element of s to v, by doubling copies: a row of logits is
// 150 thousand of them.
func fill(s []float32, v float32) {
	if len(s) == 0 {
		return
	}
	s[0] = v
	for n := 1; n < len(s); n *= 2 {
		copy(s[n:], s[:n])
	}
}

// intervalTask turns the screen's outputs into intervals, each worker a
// range of every row's tokens: the pass streams two factors a token beside
// the outputs, a memory-bound loop that both cores shorten.
type intervalTask struct {
	r       *Runner
	rows    int
	refused []bool // per worker: a row's activations were not finite
}

func (t *intervalTask) Run(worker, workers int) {
	r := t.r
	H, V := r.m.Config.HiddenSize, r.m.Config.VocabSize
	from, to := threads.Split(V, gemm.PanelWidth, worker, workers)
	for i := range t.rows {
		if !r.m.lmScreen.Interval(r.screenOut[2*i*V:(2*i+1)*V], r.screenOut[(2*i+1)*V:(2*i+2)*V], r.screenIn[2*i*H:], from, to) {
			t.refused[worker] = true
		}
	}
}

// refineTask computes the screened logits' panels, claimed a few at a time,
// after each worker has set its range of every row's other logits to −Inf
// (four rows are 2.4 MB to write).
type refineTask struct {
	r      *Runner
	rows   int
	panels []int32
	next   atomic.Int64
}

// refineClaim is the panels a worker claims at once: a few microseconds of
// work, so that claims are cheap against it and the workers stay even.
const refineClaim = 4

func (t *refineTask) Run(worker, workers int) {
	V := t.r.m.Config.VocabSize
	from, to := threads.Split(V, gemm.PanelWidth, worker, workers)
	first, _ := slices.BinarySearch(t.panels, int32(from/gemm.PanelWidth))
	negInf := float32(math.Inf(-1))
	for i := range t.rows {
		row, at := t.r.logits[i*V:(i+1)*V], from
		for _, p := range t.panels[first:] {
			if int(p)*gemm.PanelWidth >= to {
				break
			}
			fill(row[at:int(p)*gemm.PanelWidth], negInf)
			at = int(p+1) * gemm.PanelWidth
		}
		fill(row[min(at, to):to], negInf)
	}
	for {
		i := int(t.next.Add(refineClaim)) - refineClaim
		if i >= len(t.panels) {
			return
		}
		for _, p := range t.panels[i:min(i+refineClaim, len(t.panels))] {
			lo := int(p) * gemm.PanelWidth
			t.r.mm.Outputs(worker, lo, min(lo+gemm.PanelWidth, V))
		}
	}
}

func (r *Runner) trace(stage int, h []float32, m int) {
	if r.Trace != nil {
		r.Trace.Hidden(stage, r.row[:m], h)
	}
}

// Tracer observes a forward pass (ellm align). Slices are only valid during the call.
type Tracer interface {
	// Hidden receives the hidden states [len(rows), hidden] of a pass: stage 0
	// is the embedding output, stage l+1 the residual stream after layer l,
	// stage L+1 the final norm's output (the input of lm_head).
	Hidden(stage int, rows []Row, h []float32)
	// Router receives a sparse layer's gate logits [len(rows), E], the
	// selected experts and their routing weights [len(rows), top_k] in
	// torch.topk order.
	Router(layer int, rows []Row, logits []float32, experts []int32, weights []float32)
}
