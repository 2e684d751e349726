package model

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/attn"
	"github.com/ellm-dev/ellm/kernels/threads"
	"github.com/ellm-dev/ellm/kernels/tune"
	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/synth"
)

// The engine's bit-identity properties (docs/architecture.md, row
// invariance), on every kernel path this CPU runs.

// eachPath runs f for every tiny model, kernel path and KV dtype that
// quantizes (bf16, int8), a bf16 cache under both attention modes (the
// bf16 one by the Go definition where the path has no VDPBF16PS kernels):
// the properties hold for each.
func eachPath(t *testing.T, f func(t *testing.T, m *Model, kv kvcache.DType)) {
	for _, name := range tinyModels {
		t.Run(name, func(t *testing.T) {
			m := loadTiny(t, name, LoadOptions{})
			for _, p := range kernels.Available() {
				forcePath(t, p, func(t *testing.T) {
					t.Run(string(kvcache.Int8), func(t *testing.T) { f(t, m, kvcache.Int8) })
					for _, mode := range []string{"f32", "bf16"} {
						t.Run(string(kvcache.BF16)+"/attention-"+mode, func(t *testing.T) {
							if _, err := tune.ChooseAttention(mode); err != nil {
								t.Skip(err) // bf16 on a CPU without AVX512_BF16
							}
							f(t, m, kvcache.BF16)
						})
					}
				})
			}
		})
	}
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d is %v, want %v (max-abs %.3g over the row)", what, i, got[i], want[i], maxAbsDiff(got, want))
		}
	}
}

func rows(r *Runner, n int) [][]float32 {
	out := make([][]float32, n)
	for i := range out {
		out[i] = slices.Clone(r.Logits(i))
	}
	return out
}

// finalRecorder keeps the lm_head input of every row (the last traced stage):
// comparing it for all rows and the logits of the last row checks every
// position without paying for the 151,936-wide lm_head on each.
type finalRecorder struct {
	stage, width int
	rows         []float32
}

func (f *finalRecorder) Hidden(stage int, rows []Row, h []float32) {
	if stage == f.stage {
		f.rows = append(f.rows, h[:len(rows)*f.width]...)
	}
}

func (f *finalRecorder) Router(int, []Row, []float32, []int32, []float32) {}

func traceFinal(r *Runner) *finalRecorder {
	f := &finalRecorder{stage: r.m.Config.NumHiddenLayers + 1, width: r.m.Config.HiddenSize}
	r.Trace = f
	return f
}

func TestIncrementalPrefillBitIdentical(t *testing.T) {
	eachPath(t, func(t *testing.T, m *Model, kv kvcache.DType) {
		ids := i32(t, refTensors(t, m.Config.Name(), "incremental"), "token_ids")
		H := m.Config.HiddenSize
		full := newRunner(t, m, kv, 1, 128, RunnerOptions{MaxTokens: 128})
		fullRec := traceFinal(full)
		if err := full.Forward([]Segment{{Tokens: ids, Logits: LogitsLast}}); err != nil {
			t.Fatal(err)
		}
		want := slices.Clone(full.Logits(0))

		inc := newRunner(t, m, kv, 1, 128, RunnerOptions{MaxTokens: 128})
		incRec := traceFinal(inc)
		if err := inc.Forward([]Segment{{Tokens: ids[:50]}}); err != nil {
			t.Fatal(err)
		}
		if err := inc.Forward([]Segment{{Start: 50, Tokens: ids[50:], Logits: LogitsLast}}); err != nil {
			t.Fatal(err)
		}
		sameBits(t, "50 + 20: hidden states", incRec.rows, fullRec.rows[:70*H])
		sameBits(t, "50 + 20: last logits", inc.Logits(0), want)

		// --chunk-size: the same 70 tokens through passes of 16 rows.
		chunked := newRunner(t, m, kv, 1, 128, RunnerOptions{MaxTokens: 16})
		chunkRec := traceFinal(chunked)
		if err := chunked.Forward([]Segment{{Tokens: ids, Logits: LogitsLast}}); err != nil {
			t.Fatal(err)
		}
		sameBits(t, "chunks of 16: hidden states", chunkRec.rows, fullRec.rows[:70*H])
		sameBits(t, "chunks of 16: last logits", chunked.Logits(0), want)

		// The per-row steps on one thread, so the products prepare their own
		// activations (no staging in the norms' task): the same bits.
		defer func(v int) { parallelRows = v }(parallelRows)
		parallelRows = len(ids) + 1
		serial := newRunner(t, m, kv, 1, 128, RunnerOptions{MaxTokens: 128})
		serialRec := traceFinal(serial)
		if serial.staging(len(ids)) {
			t.Fatal("a pass below parallelRows stages its activations")
		}
		if err := serial.Forward([]Segment{{Tokens: ids, Logits: LogitsLast}}); err != nil {
			t.Fatal(err)
		}
		sameBits(t, "unstaged: hidden states", serialRec.rows, fullRec.rows[:70*H])
		sameBits(t, "unstaged: last logits", serial.Logits(0), want)
	})
}

func TestBatchBitIdentical(t *testing.T) {
	eachPath(t, func(t *testing.T, m *Model, kv kvcache.DType) {
		ref := refTensors(t, m.Config.Name(), "multi_batch")
		ids, lengths, offsets := i32(t, ref, "token_ids"), i32(t, ref, "lengths"), i32(t, ref, "offsets")
		segs := make([]Segment, len(lengths))
		for b := range segs {
			segs[b] = Segment{Slot: b, Tokens: ids[offsets[b] : offsets[b]+lengths[b]], Logits: LogitsLast}
		}
		alone := newRunner(t, m, kv, 1, 256, RunnerOptions{MaxTokens: 256})
		want := make([][]float32, len(segs))
		for b, s := range segs {
			s.Slot = 0
			if err := alone.Forward([]Segment{s}); err != nil {
				t.Fatal(err)
			}
			want[b] = slices.Clone(alone.Logits(0))
		}
		// All prompts in one forward, and again in passes of 50 rows that
		// cut prompts at arbitrary places.
		for _, maxTokens := range []int{256, 50} {
			batch := newRunner(t, m, kv, len(segs), 256, RunnerOptions{MaxTokens: maxTokens})
			if err := batch.Forward(segs); err != nil {
				t.Fatal(err)
			}
			for b := range segs {
				sameBits(t, "batched prompt", batch.Logits(b), want[b])
			}
		}
	})
}

// TestDecodeMatchesPrefill decodes greedily one token per step and compares
// every step's logits with one prefill of the whole transcript.
func TestDecodeMatchesPrefill(t *testing.T) {
	eachPath(t, func(t *testing.T, m *Model, kv kvcache.DType) {
		ref := refTensors(t, m.Config.Name(), "multi_batch_test")
		ids, lengths := i32(t, ref, "prompt_ids"), i32(t, ref, "prompt_lengths")
		prompt := ids[:lengths[0]]
		const steps = 16
		dec := newRunner(t, m, kv, 1, 64, RunnerOptions{MaxTokens: 64})
		seq := slices.Clone(prompt)
		var stepLogits [][]float32
		seg := []Segment{{Tokens: prompt, Logits: LogitsLast}}
		for range steps {
			if err := dec.Forward(seg); err != nil {
				t.Fatal(err)
			}
			stepLogits = append(stepLogits, slices.Clone(dec.Logits(0)))
			next := int32(dec.ops.Argmax(dec.Logits(0)))
			seg = []Segment{{Start: len(seq), Tokens: []int32{next}, Logits: LogitsLast}}
			seq = append(seq, next)
		}
		full := newRunner(t, m, kv, 1, 64, RunnerOptions{MaxTokens: 64, MaxLogits: len(seq)})
		if err := full.Forward([]Segment{{Tokens: seq[:len(seq)-1], Logits: LogitsAll}}); err != nil {
			t.Fatal(err)
		}
		for i := range steps {
			row := len(prompt) - 1 + i
			got := full.Logits(row)
			if d := maxAbsDiff(stepLogits[i], got); d != 0 {
				t.Errorf("step %d: decode vs prefill max-abs %.3g, want 0", i, d)
			}
			if a := int32(full.ops.Argmax(got)); a != seq[len(prompt)+i] {
				t.Errorf("step %d: prefill argmax %d, decode chose %d", i, a, seq[len(prompt)+i])
			}
		}
	})
}

func TestDecodeDoesNotAllocate(t *testing.T) {
	for _, name := range tinyModels {
		t.Run(name, func(t *testing.T) {
			m := loadTiny(t, name, LoadOptions{})
			for _, kv := range []kvcache.DType{kvcache.BF16, kvcache.Int8} {
				decodeAllocs(t, newRunner(t, m, kv, 2, 64, RunnerOptions{MaxTokens: 64}))
			}
		})
	}
}

// A prefill pass on the pool (norms staging the products' activations)
// allocates nothing either, with its steps timed or not.
func TestPrefillDoesNotAllocate(t *testing.T) {
	for _, name := range tinyModels {
		t.Run(name, func(t *testing.T) {
			m := loadTiny(t, name, LoadOptions{})
			r := newRunner(t, m, kvcache.BF16, 1, 64, RunnerOptions{MaxTokens: 64})
			prompt := make([]int32, 40)
			for i := range prompt {
				prompt[i] = int32(i * 101 % m.Config.VocabSize)
			}
			if !r.staging(len(prompt)) {
				t.Fatalf("a pass of %d rows does not stage", len(prompt))
			}
			segs := []Segment{{Tokens: prompt, Logits: LogitsLast}}
			// Warm up: the runtime starts the threads it hands the pool's Ps
			// to while workers block (allocations of its own) in the first passes.
			for range 5 {
				if err := r.Forward(segs); err != nil {
					t.Fatal(err)
				}
			}
			var st StepTimes
			const attempts, runs = 3, 5 // AllocsPerRun adds a warm-up run
			for _, timed := range []*StepTimes{nil, &st} {
				r.TimeSteps(timed)
				if a := leastAllocs(attempts, runs, func() {
					if err := r.Forward(segs); err != nil {
						t.Fatal(err)
					}
				}); a != 0 {
					t.Errorf("timed %v: %.1f allocations per prefill", timed != nil, a)
				}
			}
			r.TimeSteps(nil)
			if st.Passes != attempts*(runs+1) || st.Wall[StepQKV] <= 0 || st.Wall[StepAttention] <= 0 || st.Wall[StepLMHead] <= 0 {
				t.Errorf("StepTimes after %d timed passes: %d passes, wall %v", attempts*(runs+1), st.Passes, st.Wall)
			}
			for s := range NumSteps {
				if st.Idle[s] < 0 || st.Idle[s] > time.Duration(r.pool.Size())*st.Wall[s] {
					t.Errorf("%v: idle %v outside [0, %d × wall %v]", s, st.Idle[s], r.pool.Size(), st.Wall[s])
				}
			}
		})
	}
}

// leastAllocs is the fewest of attempts testing.AllocsPerRun(runs, f).
// AllocsPerRun counts the whole process's allocations, and a pass whose
// worker sleeps in a futex can let the runtime's sysmon hand that thread's
// P to a new OS thread, which the runtime allocates (runtime.newm, seen in
// about one run in twelve after the warm-up): a one-off of the runtime's,
// where an allocation of the pass's own code shows in every attempt.
func leastAllocs(attempts, runs int, f func()) float64 {
	least := testing.AllocsPerRun(runs, f)
	for range attempts - 1 {
		least = min(least, testing.AllocsPerRun(runs, f))
	}
	return least
}

// decodeAllocs fails if a decode step of two sequences, plain or screened,
// allocates: the fewest of three counts (leastAllocs), as for prefill.
func decodeAllocs(t *testing.T, r *Runner) {
	t.Helper()
	prompt := []int32{785, 3974, 13876, 38835}
	if err := r.Forward([]Segment{{Slot: 0, Tokens: prompt}, {Slot: 1, Tokens: prompt, Logits: LogitsLast}}); err != nil {
		t.Fatal(err)
	}
	segs := []Segment{
		{Slot: 0, Start: 4, Tokens: []int32{13}, Logits: LogitsLast},
		{Slot: 1, Start: 4, Tokens: []int32{198}, Logits: LogitsLast},
	}
	allocs := leastAllocs(3, 10, func() {
		if err := r.Forward(segs); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%s cache: decode step allocates %.1f times", r.cache.DType, allocs)
	}
	if r.m.lmScreen == nil {
		return
	}
	for i := range segs {
		segs[i].Screen = true
	}
	panels := []int32{0, 3}
	allocs = leastAllocs(3, 10, func() {
		if err := r.Forward(segs); err != nil {
			t.Fatal(err)
		}
		if !r.Screened() {
			t.Fatal("a decode step that asked was not screened")
		}
		r.Refine(panels)
	})
	if allocs != 0 {
		t.Errorf("%s cache: screened decode step allocates %.1f times", r.cache.DType, allocs)
	}
}

// TestFusedAttentionBitIdentical runs the same decode steps (one sequence,
// then two with a 3-token prompt piece) with q/k/v and attention fused into
// one task per kv head and unfused: the same bits, on a pool of 2 workers,
// bf16 and int8 caches, and the fused step makes one barrier fewer per layer.
func TestFusedAttentionBitIdentical(t *testing.T) {
	pool := threads.New(2, false)
	defer pool.Close()
	eachPath(t, func(t *testing.T, m *Model, kv kvcache.DType) { checkFused(t, m, kv, pool) })
}

// The same with q/k/v biases (attention_bias), which the fused path adds
// per head.
func TestFusedAttentionWithBias(t *testing.T) {
	cfg, err := modelcfg.Parse([]byte(`{"architectures":["Qwen3ForCausalLM"],"vocab_size":40000,"hidden_size":64,
		"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,
		"attention_bias":true,"rope_theta":10000,"max_position_embeddings":256}`))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := synth.Generate(cfg, dir, synth.Options{Seed: 3}); err != nil {
		t.Fatal(err)
	}
	m, err := Load(dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.layers[0].qkvBias == nil {
		t.Fatal("attention_bias: the model has no q/k/v bias")
	}
	pool := threads.New(2, false)
	defer pool.Close()
	checkFused(t, m, kvcache.BF16, pool)

	// qkvRow, head by head, against the whole row at once as the
	// projection's layout reads: bias over the row, q_norm over the queries,
	// k_norm over the keys, RoPE over all heads, Store of every kv head.
	cfg = m.Config
	r := newRunner(t, m, kvcache.BF16, 1, 16, RunnerOptions{MaxTokens: 4})
	lw := &m.layers[1]
	qd, kvd, w := cfg.QDim(), cfg.KVDim(), lw.qkv.N
	row := make([]float32, w)
	for i := range row {
		row[i] = float32(i%13)*0.3 - 1.7
	}
	copy(r.qkv, row)
	r.pos[0], r.slot[0] = 5, 0
	if err := r.qkvRow(1, lw, 0); err != nil {
		t.Fatal(err)
	}
	addBias(row, lw.qkvBias)
	q, k, v := make([]float32, qd), row[qd:qd+kvd], row[qd+kvd:]
	if err := r.ops.RMSNorm(q, row[:qd], lw.qNorm, r.eps); err != nil {
		t.Fatal(err)
	}
	if err := r.ops.HeadRMSNorm(k, lw.kNorm, r.eps); err != nil {
		t.Fatal(err)
	}
	if err := r.ops.ApplyRope(r.rope, q, cfg.NumAttentionHeads, r.pos[:1]); err != nil {
		t.Fatal(err)
	}
	if err := r.ops.ApplyRope(r.rope, k, cfg.NumKeyValueHeads, r.pos[:1]); err != nil {
		t.Fatal(err)
	}
	sameBits(t, "queries", r.q[:qd], q)
	want := attn.NewCache(1, cfg.NumKeyValueHeads, 16, cfg.HeadDim, attn.BF16)
	want.Store(0, 5, k, v)
	got := r.cache.Layer(1)
	if !slices.Equal(got.K16, want.K16) || !slices.Equal(got.V16, want.V16) {
		t.Error("qkvRow stored other K/V than the whole row gives")
	}
}

func checkFused(t *testing.T, m *Model, kv kvcache.DType, pool *threads.Pool) {
	t.Helper()
	steps := [][]Segment{
		{{Slot: 0, Tokens: []int32{785, 3974, 13876, 38835, 13, 198, 42, 7, 9, 11}, Logits: LogitsLast}},
		{{Slot: 0, Start: 10, Tokens: []int32{13}, Logits: LogitsLast}},
		{{Slot: 0, Start: 11, Tokens: []int32{77}, Logits: LogitsLast}, {Slot: 1, Tokens: []int32{5, 6, 7}, Logits: LogitsLast}},
		{{Slot: 1, Start: 3, Tokens: []int32{8}, Logits: LogitsLast}, {Slot: 0, Start: 12, Tokens: []int32{9}, Logits: LogitsLast}},
	}
	run := func(fuse int) (logits [][]float32, runs []uint64) {
		defer func(v int) { fusedRows = v }(fusedRows)
		fusedRows = fuse
		r := newRunner(t, m, kv, 2, 64, RunnerOptions{MaxTokens: 64, Pool: pool})
		for _, segs := range steps {
			before := pool.Runs()
			if err := r.Forward(segs); err != nil {
				t.Fatal(err)
			}
			runs = append(runs, pool.Runs()-before)
			logits = append(logits, rows(r, r.NumLogits())...)
		}
		return logits, runs
	}
	fused, fusedRuns := run(8)
	plain, plainRuns := run(0)
	for i := range plain {
		sameBits(t, fmt.Sprintf("logits row %d", i), fused[i], plain[i])
	}
	if m.Config.IsMoE() {
		return
	}
	// A dense decode step: per layer q/k/v+attention, o_proj, gate/up, down; then lm_head.
	layers := uint64(m.Config.NumHiddenLayers)
	for i := 1; i < len(steps); i++ {
		if want := 4*layers + 1; fusedRuns[i] != want || plainRuns[i] != want+layers {
			t.Errorf("step %d: %d barriers fused, %d unfused; want %d and %d", i, fusedRuns[i], plainRuns[i], want, want+layers)
		}
	}
}

// TestKeepLogitRowsBitIdentical runs the same Forward calls with the last
// layer going on past its K and V for the rows that give logits alone
// (keepLogitRows) and for every row: the same logits and the same cache,
// bit for bit. The prompts span two passes (a LogitsAll segment across
// them), one gives no logits, and a piece that gives none goes alone.
func TestKeepLogitRowsBitIdentical(t *testing.T) {
	for _, name := range tinyModels {
		for _, dtype := range []string{"bf16", "int8"} {
			t.Run(name+"/"+dtype, func(t *testing.T) {
				m := loadTiny(t, name, LoadOptions{DType: dtype})
				for _, kv := range []kvcache.DType{kvcache.BF16, kvcache.Int8} {
					want := keepLogitRowsRun(t, m, kv, false)
					got := keepLogitRowsRun(t, m, kv, true)
					for i := range want.logits {
						sameBits(t, fmt.Sprintf("%s cache: logits row %d", kv, i), got.logits[i], want.logits[i])
					}
					if len(got.cache) != len(want.cache) {
						t.Fatalf("%s cache: %d bytes against %d", kv, len(got.cache), len(want.cache))
					}
					for j := range want.cache {
						if got.cache[j] != want.cache[j] {
							t.Fatalf("%s cache: differs at byte %d", kv, j)
						}
					}
				}
			})
		}
	}
}

type keepLogitRowsResult struct {
	logits [][]float32
	cache  []byte // the K/V cache's memory
}

func keepLogitRowsRun(t *testing.T, m *Model, kv kvcache.DType, keep bool) keepLogitRowsResult {
	t.Helper()
	defer func(v bool) { keepLogitRowsOnly = v }(keepLogitRowsOnly)
	keepLogitRowsOnly = keep
	r := newRunner(t, m, kv, 4, 128, RunnerOptions{MaxTokens: 40, MaxLogits: 32})
	prompt := func(n, seed int) []int32 {
		ids := make([]int32, n)
		for i := range ids {
			ids[i] = int32((i*31 + seed*17 + 5) % m.Config.VocabSize)
		}
		return ids
	}
	var res keepLogitRowsResult
	// forward runs segs; kept is the attention work of the last pass's last
	// layer when it keeps the logits rows alone.
	forward := func(kept []attn.Seq, segs ...Segment) {
		if err := r.Forward(segs); err != nil {
			t.Fatal(err)
		}
		for i := range r.NumLogits() {
			res.logits = append(res.logits, slices.Clone(r.Logits(i)))
		}
		if keep && !slices.Equal(r.seqs, kept) {
			t.Fatalf("the last layer attended for %+v, want %+v", r.seqs, kept)
		}
	}
	// Passes of 40 rows: A and B's first 10 rows, then B's other 15 and C.
	forward([]attn.Seq{{Slot: 1, Start: 10, N: 15, Row: 0}},
		Segment{Slot: 0, Tokens: prompt(30, 1), Logits: LogitsLast},
		Segment{Slot: 1, Tokens: prompt(25, 2), Logits: LogitsAll},
		Segment{Slot: 2, Tokens: prompt(20, 3)},
	)
	forward(nil, Segment{Slot: 3, Tokens: prompt(24, 4)}) // no logits at all
	forward([]attn.Seq{{Slot: 3, Start: 26, N: 1, Row: 0}},
		Segment{Slot: 3, Start: 24, Tokens: prompt(3, 5), Logits: LogitsLast})
	// A decode step over every cache the prompts wrote: every row gives
	// logits (and the step's few rows take the fused path).
	step := make([]Segment, 4)
	for s, start := range []int{30, 25, 20, 27} {
		step[s] = Segment{Slot: s, Start: start, Tokens: prompt(1, 6+s), Logits: LogitsLast}
	}
	forward([]attn.Seq{{Slot: 0, Start: 30, N: 1, Row: 0}, {Slot: 1, Start: 25, N: 1, Row: 1}, {Slot: 2, Start: 20, N: 1, Row: 2}, {Slot: 3, Start: 27, N: 1, Row: 3}}, step...)
	res.cache = slices.Clone(r.cache.Memory())
	return res
}
