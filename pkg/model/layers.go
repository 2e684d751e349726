package model

import (
	"github.com/ellm-dev/ellm/kernels/attn"
	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/kernels/ops"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// attention is Qwen3Attention.forward for rows [0, m): it reads r.xn (staged
// for the q/k/v product when staged) and leaves o_proj's output in r.y. With
// keep set (the last layer: the pass's segments), once every row's K and V
// are in the cache it goes on with the rows that give logits alone
// (keepLogitRows) and returns how many; otherwise it returns m.
func (r *Runner) attention(l int, lw *layer, m int, staged bool, keep []Segment) (int, error) {
	cfg := r.m.Config
	H, qd := cfg.HiddenSize, cfg.QDim()
	ao := r.ao
	if r.fusedAttention(m) {
		ao = r.aoFused
		if err := r.qkvAttention(l, lw, m, ao[:m*qd]); err != nil {
			return 0, err
		}
		r.lap(StepAttention)
		if keep != nil { // a pass of a few rows: its attention outputs
			m = r.keepLogitRows(keep, ao, qd)
		}
	} else {
		// self.q_proj, self.k_proj and self.v_proj(hidden_states), as one product
		if staged {
			r.mm.MatMulStaged(r.qkv[:m*lw.qkv.N], r.xn[:m*H], m, lw.qkv)
		} else {
			r.mm.MatMul(r.qkv[:m*lw.qkv.N], r.xn[:m*H], m, lw.qkv)
		}
		r.lap(StepQKV)
		// query_states = self.q_norm(...), key_states = self.k_norm(...),
		// apply_rotary_pos_emb, past_key_value.update(key_states, value_states):
		// per row, into r.q and the cache (see qkvRow)
		if err := r.rows(rowQKV, l, lw, m); err != nil {
			return 0, err
		}
		r.lap(StepQKVRows)
		if keep != nil { // before attention: its queries
			m = r.keepLogitRows(keep, r.q, qd)
		}
		// attn_output = softmax(q·kᵀ·scaling + causal_mask)·v, GQA: head h reads kv head h/(Hq/Hkv)
		if m > 0 {
			r.att.Forward(ao[:m*qd], r.q[:m*qd], r.cache.Layer(l), r.seqs)
		}
		r.lap(StepAttention)
	}
	if m == 0 {
		return 0, nil
	}
	// attn_output = self.o_proj(attn_output)
	r.mm.MatMul(r.y[:m*H], ao[:m*qd], m, lw.o)
	addBias(r.y[:m*H], lw.oBias)
	r.lap(StepO)
	return m, nil
}

// keepLogitRows moves the rows of the pass that give logits (those lmHead
// takes: Segment.givesLogits) to the front, with their residual, their row
// of b (width w: the queries, or the attention outputs) and place, and cuts
// the attention work down to them; it returns how many there are. After the last layer's K and V are stored
// nothing reads the other rows again, so a prompt's last layer attends,
// projects and runs its MLP for its last token alone (llama.cpp drops the
// other rows after attention). Each kept row's results are the bits it had
// among all of them: attention and the products compute a row the same way
// whatever rows share its pass.
func (r *Runner) keepLogitRows(segs []Segment, b []float32, w int) int {
	H := r.m.Config.HiddenSize
	kept := 0
	seqs := r.seqs[:0] // rewritten in place: piece j goes to an index at most j
	for _, s := range r.seqs {
		// The rows that give logits are a suffix of the piece (all of it, its
		// last row, or none): from is its first.
		seg := &segs[r.row[s.Row].Seg]
		from := s.N
		for from > 0 && seg.givesLogits(r.row[s.Row+from-1].Index) {
			from--
		}
		if from == s.N {
			continue
		}
		seqs = append(seqs, attn.Seq{Slot: s.Slot, Start: s.Start + from, N: s.N - from, Row: kept})
		for i := s.Row + from; i < s.Row+s.N; i++ {
			if i != kept {
				copy(r.x[kept*H:(kept+1)*H], r.x[i*H:(i+1)*H])
				copy(b[kept*w:(kept+1)*w], b[i*w:(i+1)*w])
				r.row[kept] = r.row[i]
			}
			kept++
		}
	}
	r.seqs = seqs
	return kept
}

// fusedRows is the pass size up to which the q/k/v projection and attention
// run as one pool task split by kv head (qkvAttention): decode steps, whose
// products are one row tile. A variable so that tests can compare the two.
var fusedRows = 8

// fusedAttention reports whether a pass of m rows takes qkvAttention: a
// head's channels must be whole weight panels, and the kv heads must split
// evenly over the workers (each head is one worker's, projection and
// attention alike, so an uneven split would idle workers for the whole task).
func (r *Runner) fusedAttention(m int) bool {
	cfg := r.m.Config
	return m <= fusedRows && cfg.HeadDim%gemm.PanelWidth == 0 && cfg.NumKeyValueHeads%r.pool.Size() == 0
}

// qkvAttention is the q/k/v projection, its per-row steps and attention as
// one pool task, without barriers between them: the worker that claims kv
// head h computes its query heads', key's and value's output channels, norms,
// rotates and stores them, then attends with them. Every channel and row
// goes through the same arithmetic as the unfused path (the kernels reduce
// each output in its own lane; per-head steps are per-head already), so the
// results are the same bits.
func (r *Runner) qkvAttention(l int, lw *layer, m int, ao []float32) error {
	cfg := r.m.Config
	H, qd := cfg.HiddenSize, cfg.QDim()
	t := &r.qkvTask
	t.l, t.lw, t.m = l, lw, m
	t.claims.Reset()
	r.mm.Prepare(r.qkv[:m*lw.qkv.N], r.xn[:m*H], m, lw.qkv)
	r.att.Begin(ao, r.q[:m*qd], r.cache.Layer(l), r.seqs)
	r.pool.Run(t)
	r.att.End()
	r.mm.Done()
	t.lw = nil
	for _, err := range t.errs {
		if err != nil {
			clear(t.errs)
			return err
		}
	}
	return nil
}

// qkvAttnTask is qkvAttention's pool task: workers claim kv heads in order.
type qkvAttnTask struct {
	r      *Runner
	l, m   int
	lw     *layer
	claims threads.Claims
	errs   []error // per worker
}

func (t *qkvAttnTask) Run(worker, _ int) {
	r := t.r
	cfg := r.m.Config
	hkv, d := cfg.NumKeyValueHeads, cfg.HeadDim
	g, qd, kvd := cfg.NumAttentionHeads/hkv*d, cfg.QDim(), cfg.KVDim()
	for {
		h, _, ok := t.claims.Next(hkv, 1)
		if !ok {
			return
		}
		r.mm.Outputs(worker, h*g, (h+1)*g)               // its query heads
		r.mm.Outputs(worker, qd+h*d, qd+(h+1)*d)         // key
		r.mm.Outputs(worker, qd+kvd+h*d, qd+kvd+(h+1)*d) // value
		for i := range t.m {
			if err := r.qkvHeads(t.l, t.lw, i, h, h+1); err != nil {
				t.errs[worker] = err
				return
			}
		}
		r.att.Head(worker, h)
	}
}

// qkvRow finishes row i of the fused projection: bias, q_norm into r.q,
// k_norm in place, RoPE on both, then K and V into the cache at the row's
// slot and position.
func (r *Runner) qkvRow(l int, lw *layer, i int) error {
	return r.qkvHeads(l, lw, i, 0, r.m.Config.NumKeyValueHeads)
}

// qkvHeads is qkvRow for kv heads [h0, h1) and their query heads, each
// step over the heads in one call (each head goes through the same
// per-head arithmetic whether alone or with others).
func (r *Runner) qkvHeads(l int, lw *layer, i, h0, h1 int) error {
	cfg := r.m.Config
	hkv, d := cfg.NumKeyValueHeads, cfg.HeadDim
	group := cfg.NumAttentionHeads / hkv
	qd, kvd, w := cfg.QDim(), cfg.KVDim(), lw.qkv.N
	n := h1 - h0
	row := r.qkv[i*w : (i+1)*w]
	qs, ks, vs := span(row, h0*group*d, n*group*d), span(row, qd+h0*d, n*d), span(row, qd+kvd+h0*d, n*d)
	if b := lw.qkvBias; b != nil {
		addBias(qs, span(b, h0*group*d, n*group*d))
		addBias(ks, span(b, qd+h0*d, n*d))
		addBias(vs, span(b, qd+kvd+h0*d, n*d))
	}
	q := span(r.q, i*qd+h0*group*d, n*group*d)
	if err := r.ops.RMSNorm(q, qs, lw.qNorm, r.eps); err != nil {
		return err
	}
	if err := r.ops.HeadRMSNorm(ks, lw.kNorm, r.eps); err != nil {
		return err
	}
	pos := r.pos[i : i+1]
	if err := r.ops.ApplyRope(r.rope, q, n*group, pos); err != nil {
		return err
	}
	if err := r.ops.ApplyRope(r.rope, ks, n, pos); err != nil {
		return err
	}
	c := r.cache.Layer(l)
	for h := h0; h < h1; h++ {
		c.StoreHead(int(r.slot[i]), int(pos[0]), h, span(ks, (h-h0)*d, d), span(vs, (h-h0)*d, d))
	}
	return nil
}

// span is s[off : off+n].
func span(s []float32, off, n int) []float32 { return s[off : off+n : off+n] }

// addBias adds b to every row of y (nn.Linear's bias); nil b is no bias.
func addBias(y, b []float32) {
	if b == nil {
		return
	}
	for o := 0; o < len(y); o += len(b) {
		row := y[o : o+len(b)]
		for i, v := range b {
			row[i] += v
		}
	}
}

// mlp is Qwen3MLP.forward: down_proj(act_fn(gate_proj(x)) * up_proj(x)),
// r.xn (staged for gate when staged) → r.y.
func (r *Runner) mlp(lw *layer, m int, staged bool) {
	cfg := r.m.Config
	h := r.h[:m*cfg.IntermediateSize]
	if staged {
		r.mm.SwiGLUStaged(h, r.xn[:m*cfg.HiddenSize], m, lw.gate, lw.up)
	} else {
		r.mm.SwiGLU(h, r.xn[:m*cfg.HiddenSize], m, lw.gate, lw.up)
	}
	r.lap(StepGateUp)
	r.mm.MatMul(r.y[:m*cfg.HiddenSize], h, m, lw.down)
	r.lap(StepDown)
}

// moeScratch is the MoE block's per-pass state.
type moeScratch struct {
	logits   []float32 // router logits [M, E]
	probs    []float32 // one row's softmax [E]
	topVal   []float32 // [M, k] routing weights
	topIdx   []int32   // [M, k] selected experts
	count    []int     // assignments per expert [E+1]
	order    []int32   // assignments (t·k + rank) grouped by expert [M·k]
	gathered []float32 // one expert's input rows [M, H]
	outRows  []float32 // one expert's output rows [M, H]
	copier   moeCopier
}

func newMoEScratch(m, h, e, k int) moeScratch {
	return moeScratch{
		logits: make([]float32, m*e), probs: make([]float32, e),
		topVal: make([]float32, m*k), topIdx: make([]int32, m*k),
		count: make([]int, e+1), order: make([]int32, m*k),
		gathered: make([]float32, m*h), outRows: make([]float32, m*h),
	}
}

// floats counts its 4-byte elements.
func (s *moeScratch) floats() int {
	return len(s.logits) + len(s.probs) + len(s.topVal) + len(s.topIdx) + len(s.order) + len(s.gathered) + len(s.outRows)
}

// sparseMoE is Qwen3MoeSparseMoeBlock.forward, r.xn → r.y.
//
// Tokens are grouped by expert so that each expert's weights are streamed
// once per pass, however many tokens chose it; experts nobody chose are not
// read at all (a decode step reads only the top-k experts of its tokens).
// Each token's k weighted expert outputs are added to its zeroed output in
// ascending expert index, as HF's loop over experts does: an order fixed by
// the token's own choice, so its result does not depend on which other
// tokens shared the pass.
func (r *Runner) sparseMoE(l int, lw *layer, m int) {
	cfg := r.m.Config
	H, E, K, I := cfg.HiddenSize, cfg.NumExperts, cfg.NumExpertsPerTok, cfg.MoEIntermediateSize
	s := &r.moe
	xn := r.xn[:m*H]
	// router_logits = self.gate(hidden_states)
	r.mm.MatMul(s.logits[:m*E], xn, m, lw.router)
	for t := range m {
		// routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
		copy(s.probs, s.logits[t*E:(t+1)*E])
		r.ops.Softmax(s.probs)
		// routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
		w, idx := s.topVal[t*K:(t+1)*K], s.topIdx[t*K:(t+1)*K]
		ops.TopK(idx, w, s.probs)
		// if self.norm_topk_prob: routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
		if cfg.NormTopkProb {
			var sum float32
			for _, v := range w {
				sum += v
			}
			for j := range w {
				w[j] /= sum
			}
		}
	}
	if r.Trace != nil {
		r.Trace.Router(l, r.row[:m], s.logits[:m*E], s.topIdx[:m*K], s.topVal[:m*K])
	}
	// Counting sort of the m·k assignments by expert: after it, expert e's
	// assignments, in token order, are order[count[e-1]:count[e]].
	clear(s.count)
	for _, e := range s.topIdx[:m*K] {
		s.count[e+1]++
	}
	for e := range E {
		s.count[e+1] += s.count[e]
	}
	for a, e := range s.topIdx[:m*K] {
		s.order[s.count[e]] = int32(a)
		s.count[e]++
	}
	// final_hidden_states = torch.zeros(...)
	y := r.y[:m*H]
	clear(y)
	start := 0
	for e := range E {
		run := s.order[start:s.count[e]]
		start = s.count[e]
		n := len(run)
		if n == 0 {
			continue
		}
		// current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
		r.moeCopy(moeGather, run, K, H)
		// current_hidden_states = expert_layer(current_state) * routing_weights[top_x, idx, None]
		ex := &lw.experts[e]
		h := r.h[:n*I]
		r.mm.SwiGLU(h, s.gathered[:n*H], n, ex.gate, ex.up)
		r.mm.MatMul(s.outRows[:n*H], h, n, ex.down)
		// final_hidden_states.index_add_(0, top_x, current_hidden_states)
		r.moeCopy(moeScatter, run, K, H)
	}
}

const (
	moeGather = iota
	moeScatter
)

// parallelCopyFloats is the size from which gathering or scattering an
// expert's rows is worth a pool barrier (a decode step's few rows are not).
// A variable so that tests can force the parallel path on tiny models.
var parallelCopyFloats = 1 << 15

// moeCopy gathers the rows of run's tokens from r.xn into s.gathered, or
// adds each of s.outRows times its routing weight to its token's row of r.y.
func (r *Runner) moeCopy(op int, run []int32, k, h int) {
	c := &r.moe.copier
	c.op, c.run, c.k, c.h = op, run, k, h
	c.xn, c.y, c.s = r.xn, r.y, &r.moe
	if len(run)*h < parallelCopyFloats {
		c.Run(0, 1)
	} else {
		r.pool.Run(c)
	}
	c.run, c.xn, c.y, c.s = nil, nil, nil, nil
}

// moeCopier is the pool task of moeCopy. Every row is one token's (an expert
// is chosen at most once per token), so workers never share an output row.
type moeCopier struct {
	op, k, h int
	run      []int32
	xn, y    []float32
	s        *moeScratch
}

func (c *moeCopier) Run(worker, workers int) {
	lo, hi := threads.Split(len(c.run), 1, worker, workers)
	h := c.h
	for i := lo; i < hi; i++ {
		a := int(c.run[i])
		t := a / c.k
		if c.op == moeGather {
			copy(c.s.gathered[i*h:(i+1)*h], c.xn[t*h:(t+1)*h])
			continue
		}
		w := c.s.topVal[a]
		yt, o := c.y[t*h:(t+1)*h], c.s.outRows[i*h:(i+1)*h]
		for j := range yt {
			yt[j] += float32(o[j] * w)
		}
	}
}
