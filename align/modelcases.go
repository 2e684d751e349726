package align

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/ellm-dev/ellm/pkg/model"
)

// modelTol is one tolerance set of a model case (fp32_engine or bf16_engine).
// Nil bounds are not checked.
type modelTol struct {
	LogitsMaxAbs     *float64 `json:"logits_max_abs"`
	LogitsCosineMin  *float64 `json:"logits_cosine_min"`
	LogitsMeanAbsMax *float64 `json:"logits_mean_abs_max"`
	ArgmaxMustMatch  bool     `json:"argmax_must_match"`
	HiddenMaxAbs     *float64 `json:"hidden_max_abs"`
	FracCosine999Min *float64 `json:"frac_positions_cosine_ge_0.999_min"`
	// ArgmaxAgreeFracMin was computed over all positions, not the few rows a
	// case keeps: FORMAT.md makes it informative, so it is reported, never judged.
	ArgmaxAgreeFracMin *float64 `json:"argmax_agree_frac_min"`

	// argmaxMargin is the reference top-2 margin from which argmax must
	// agree (when ArgmaxMustMatch); FORMAT.md states it in prose.
	argmaxMargin float64
}

// withRules adds FORMAT.md's prose rules to a manifest's tolerance set:
// with bf16 activations, argmax must agree wherever the reference margin
// is at least greedyMarginBF16, whatever argmax_must_match says.
func (t modelTol) withRules(set string) modelTol {
	t.argmaxMargin = argmaxMarginFP32
	if set == "bf16_engine" {
		t.ArgmaxMustMatch, t.argmaxMargin = true, greedyMarginBF16
	}
	return t
}

// fp32 tolerances of FORMAT.md that manifests state only in prose.
const (
	argmaxMarginFP32 = 2e-3 // argmax may differ where the reference top-2 margin is below this
	greedyMarginFP32 = 2e-3
	greedyMarginBF16 = 0.1
	routerGapFP32    = 1e-4 // expert choice may differ where the top-k probability gap is below this
)

func (c *caseRun) modelCase(kind string) error {
	set := c.res.Tolerances
	raw, ok := c.m.Tolerances[set]
	if !ok {
		return fmt.Errorf("manifest has no %s tolerances", set)
	}
	var tol modelTol
	if err := unmarshalJSON(raw, &tol); err != nil {
		return fmt.Errorf("%s tolerances: %w", set, err)
	}
	tol = tol.withRules(set)
	m, err := c.model()
	if err != nil {
		return err
	}
	switch kind {
	case "one_token", "multi_token":
		return c.prefillCase(m, tol)
	case "multi_batch":
		return c.multiBatch(m, tol)
	case "multi_batch_test":
		return c.greedyBatch(m)
	}
	return c.incremental(m, tol)
}

// recorder keeps what the runner's tracer shows, for a single-segment forward.
type recorder struct {
	hidden  [][]float32 // [stage][T·H]
	rlogits [][]float32 // [layer][T·E]
	experts [][]int32   // [layer][T·k]
	weights [][]float32 // [layer][T·k]
	h       int
}

func (r *recorder) Hidden(stage int, rows []model.Row, x []float32) {
	for len(r.hidden) <= stage {
		r.hidden = append(r.hidden, nil)
	}
	r.hidden[stage] = append(r.hidden[stage], x[:len(rows)*r.h]...)
}

func (r *recorder) Router(layer int, rows []model.Row, logits []float32, experts []int32, weights []float32) {
	for len(r.rlogits) <= layer {
		r.rlogits, r.experts, r.weights = append(r.rlogits, nil), append(r.experts, nil), append(r.weights, nil)
	}
	r.rlogits[layer] = append(r.rlogits[layer], logits...)
	r.experts[layer] = append(r.experts[layer], experts...)
	r.weights[layer] = append(r.weights[layer], weights...)
}

// prefillCase is one_token and multi_token: one prefill of token_ids with
// every row's logits, hidden states and routing traced.
func (c *caseRun) prefillCase(m *model.Model, tol modelTol) error {
	cfg := m.Config
	H, L := cfg.HiddenSize, cfg.NumHiddenLayers
	ids, _, err := c.ref.i32("token_ids")
	if err != nil {
		return err
	}
	T := len(ids)
	r, done, err := c.runner(m, 1, T, T, T)
	if err != nil {
		return err
	}
	defer done()
	rec := &recorder{h: H}
	r.Trace = rec
	if err := r.Forward([]model.Segment{{Tokens: ids, Logits: model.LogitsAll}}); err != nil {
		return err
	}
	// Logits: one_token has [V]; multi_token keeps rows logits_positions.
	positions := []int32{0}
	if c.ref.has("logits_positions") {
		if positions, _, err = c.ref.i32("logits_positions"); err != nil {
			return err
		}
	}
	want, wshape, err := c.ref.f32("logits")
	if err != nil {
		return err
	}
	var margins []float32
	if c.ref.has("logits_top2_margin") {
		all, _, err := c.ref.f32("logits_top2_margin")
		if err != nil {
			return err
		}
		for _, p := range positions {
			margins = append(margins, all[p])
		}
	}
	got := make([][]float32, len(positions))
	for i, p := range positions {
		got[i] = r.Logits(int(p))
	}
	c.add(logitsRow("logits", wshape, got, want, margins, tol))
	c.dump.f32("logits", wshape, flatten(got))
	c.dump.i32("logits_positions", []int{len(positions)}, positions)
	if c.dump != nil && c.ref.has("logits_top2_margin") {
		ours := make([]float32, T)
		for i := range ours {
			ours[i] = top2Margin(r.Logits(i))
		}
		c.dump.f32("logits_top2_margin", []int{T}, ours)
	}

	// Hidden states: [L+2, H] (one_token "hidden", multi_token "hidden_last")
	// and [L+2, T, H] (multi_token "hidden_all").
	last := make([]float32, 0, (L+2)*H)
	for _, st := range rec.hidden {
		last = append(last, st[(T-1)*H:T*H]...)
	}
	for _, name := range []string{"hidden", "hidden_last", "hidden_all"} {
		if !c.ref.has(name) {
			continue
		}
		w, shape, err := c.ref.f32(name)
		if err != nil {
			return err
		}
		g := last
		if name == "hidden_all" {
			g = flatten(rec.hidden)
		}
		if len(g) != len(w) {
			return fmt.Errorf("%s: ellm traced %d values, reference has %v", name, len(g), shape)
		}
		c.add(hiddenRow(name, shape, g, w, L, tol))
		c.dump.f32(name, shape, g)
	}
	switch {
	case !cfg.IsMoE():
	case !c.ref.has("router_logits"):
		c.note("the reference has no router tensors: MoE routing not compared")
	default:
		return c.routerRows(rec, T, cfg.NumExperts, cfg.NumExpertsPerTok, tol)
	}
	return nil
}

// routerRows compares the MoE routing of every layer and position.
func (c *caseRun) routerRows(rec *recorder, T, E, K int, tol modelTol) error {
	L := len(rec.rlogits)
	wantLogits, lshape, err := c.ref.f32("router_logits")
	if err != nil {
		return err
	}
	wantSel, sshape, err := c.ref.i32("router_selected")
	if err != nil {
		return err
	}
	wantW, wshape, err := c.ref.f32("router_weights")
	if err != nil {
		return err
	}
	gotLogits, gotSel, gotW := flatten(rec.rlogits), flattenI(rec.experts), flatten(rec.weights)
	if len(gotLogits) != len(wantLogits) || len(gotSel) != len(wantSel) {
		return fmt.Errorf("router: ellm traced %d logits of %d layers, reference has %v", len(gotLogits), L, lshape)
	}
	c.dump.f32("router_logits", lshape, gotLogits)
	c.dump.i32("router_selected", sshape, gotSel)
	c.dump.f32("router_weights", wshape, gotW)

	row := Row{Tensor: "router_logits", Shape: lshape, Status: Info}
	s := measure(gotLogits, wantLogits)
	row.MaxAbs, row.MaxRel, row.Cosine = s.maxAbs, s.rel(), cosine(gotLogits, wantLogits)
	if tol.HiddenMaxAbs != nil {
		row = compareElems("router_logits", lshape, gotLogits, wantLogits, *tol.HiddenMaxAbs, 0)
	}
	c.add(row)

	// Expert choice per (layer, position), as sets; the gap of the reference's
	// own probabilities says how fragile each choice is.
	type flip struct {
		layer, pos int
		gap        float64
	}
	var flips []flip
	minGap := make([]float64, T) // per position, over layers
	for p := range minGap {
		minGap[p] = math.Inf(1)
	}
	for l := range L {
		for p := range T {
			o := (l*T + p) * K
			gap := topKGap(wantLogits[(l*T+p)*E:(l*T+p+1)*E], K)
			minGap[p] = min(minGap[p], gap)
			a, b := slices.Clone(gotSel[o:o+K]), slices.Clone(wantSel[o:o+K])
			slices.Sort(a)
			slices.Sort(b)
			if !slices.Equal(a, b) {
				flips = append(flips, flip{l, p, gap})
			}
		}
	}
	sel := Row{Tensor: "router_selected", Shape: sshape, Status: Pass, Cosine: 1, Outside: len(flips), Exact: true}
	if len(flips) > 0 {
		sort.Slice(flips, func(i, j int) bool { return flips[i].pos < flips[j].pos })
		var desc []string
		for _, f := range flips[:min(len(flips), 6)] {
			desc = append(desc, fmt.Sprintf("pos %d layer %d (gap %.2g)", f.pos, f.layer, f.gap))
		}
		sel.Note = fmt.Sprintf("routes differ at %d (layer, position) pairs: %s", len(flips), strings.Join(desc, ", "))
		// f32 engines: a flip is legitimate only where the reference itself
		// is on a knife's edge, or after such a position (it changes the
		// context of the later ones).
		switch {
		case c.res.Tolerances == "bf16_engine":
			sel.Status = Info
		case minGap[flips[0].pos] >= routerGapFP32:
			sel.Status = Fail
			sel.Note += fmt.Sprintf("; first at a position whose top-k gap %.2g ≥ %g", minGap[flips[0].pos], routerGapFP32)
		default:
			sel.Status = Info
		}
	}
	c.add(sel)

	// Routing weights where the choice agrees.
	var g, w []float32
	for l := range L {
		for p := range T {
			o := (l*T + p) * K
			if slices.Equal(gotSel[o:o+K], wantSel[o:o+K]) {
				g, w = append(g, gotW[o:o+K]...), append(w, wantW[o:o+K]...)
			}
		}
	}
	wr := Row{Tensor: "router_weights", Shape: wshape, Status: Info, Note: "where the choice agrees"}
	s = measure(g, w)
	wr.MaxAbs, wr.MaxRel, wr.Cosine = s.maxAbs, s.rel(), cosine(g, w)
	if tol.HiddenMaxAbs != nil {
		wr = compareElems("router_weights", wshape, g, w, *tol.HiddenMaxAbs, 0)
		wr.Note = "where the choice agrees"
	}
	c.add(wr)
	return nil
}

// topKGap is p_(k) − p_(k+1) of softmax(logits): how close the k-th choice is to losing.
func topKGap(logits []float32, k int) float64 {
	p := make([]float64, len(logits))
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = max(mx, float64(v))
	}
	var sum float64
	for i, v := range logits {
		p[i] = math.Exp(float64(v) - mx)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	slices.SortFunc(p, func(a, b float64) int { return -cmpF(a, b) })
	if k >= len(p) {
		return math.Inf(1)
	}
	return p[k-1] - p[k]
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// multiBatch runs every prompt in one forward (one slot each) and alone.
func (c *caseRun) multiBatch(m *model.Model, tol modelTol) error {
	ids, _, err := c.ref.i32("token_ids")
	if err != nil {
		return err
	}
	lengths, _, err := c.ref.i32("lengths")
	if err != nil {
		return err
	}
	offsets, _, err := c.ref.i32("offsets")
	if err != nil {
		return err
	}
	want, wshape, err := c.ref.f32("last_logits")
	if err != nil {
		return err
	}
	B, maxLen := len(lengths), int(slices.Max(lengths))
	segs := make([]model.Segment, B)
	for b := range segs {
		segs[b] = model.Segment{Slot: b, Tokens: ids[offsets[b] : offsets[b]+lengths[b]], Logits: model.LogitsLast}
	}
	r, done, err := c.runner(m, B, maxLen, len(ids), B)
	if err != nil {
		return err
	}
	defer done()
	if err := r.Forward(segs); err != nil {
		return err
	}
	batched := make([][]float32, B)
	for b := range batched {
		batched[b] = slices.Clone(r.Logits(b))
	}
	c.add(logitsRow("last_logits", wshape, batched, want, nil, tol))
	c.dump.f32("last_logits", wshape, flatten(batched))
	// Engine identity: a prompt in a batch is bit-identical to the prompt alone.
	alone := make([][]float32, B)
	for b, s := range segs {
		s.Slot = 0
		if err := r.Forward([]model.Segment{s}); err != nil {
			return err
		}
		alone[b] = slices.Clone(r.Logits(0))
	}
	c.add(identityRow("batched_vs_alone", wshape, batched, alone))
	return nil
}

// incremental prefills 50 tokens, appends 20, and compares with one prefill of 70.
func (c *caseRun) incremental(m *model.Model, tol modelTol) error {
	ids, _, err := c.ref.i32("token_ids")
	if err != nil {
		return err
	}
	var in struct{ A, B int }
	if err := unmarshalJSON(c.m.Inputs, &in); err != nil {
		return err
	}
	T := len(ids)
	if in.A <= 0 || in.A >= T {
		return fmt.Errorf("inputs: A = %d for %d tokens", in.A, T)
	}
	r, done, err := c.runner(m, 1, T, T, T)
	if err != nil {
		return err
	}
	defer done()
	if err := r.Forward([]model.Segment{{Tokens: ids[:in.A], Logits: model.LogitsLast}}); err != nil {
		return err
	}
	if err := c.compareLogits("logits_prefill_A_last", [][]float32{r.Logits(0)}, tol); err != nil {
		return err
	}
	if err := r.Forward([]model.Segment{{Start: in.A, Tokens: ids[in.A:], Logits: model.LogitsAll}}); err != nil {
		return err
	}
	inc := make([][]float32, T-in.A)
	for i := range inc {
		inc[i] = slices.Clone(r.Logits(i))
	}
	if err := r.Forward([]model.Segment{{Tokens: ids, Logits: model.LogitsAll}}); err != nil {
		return err
	}
	full := make([][]float32, T-in.A)
	for i := range full {
		full[i] = slices.Clone(r.Logits(in.A + i))
	}
	for _, t := range []struct {
		name string
		rows [][]float32
	}{{"logits_incremental", inc}, {"logits_full", full}} {
		pos, _, err := c.ref.i32(t.name + "_positions")
		if err != nil {
			return err
		}
		kept := make([][]float32, len(pos))
		for i, p := range pos {
			kept[i] = t.rows[p]
		}
		if err := c.compareLogits(t.name, kept, tol); err != nil {
			return err
		}
		c.dump.i32(t.name+"_positions", []int{len(pos)}, pos)
	}
	if err := c.compareLogits("last_logits_incremental", inc[len(inc)-1:], tol); err != nil {
		return err
	}
	if err := c.compareLogits("last_logits_full", full[len(full)-1:], tol); err != nil {
		return err
	}
	c.add(identityRow("incremental_vs_full", []int{T - in.A, m.Config.VocabSize}, inc, full))
	return nil
}

// compareLogits compares rows with the reference tensor name (and dumps them).
func (c *caseRun) compareLogits(name string, rows [][]float32, tol modelTol) error {
	want, shape, err := c.ref.f32(name)
	if err != nil {
		return err
	}
	c.add(logitsRow(name, shape, rows, want, nil, tol))
	c.dump.f32(name, shape, flatten(rows))
	return nil
}

// identityRow requires got to equal want bit for bit (an engine identity).
func identityRow(name string, shape []int, got, want [][]float32) Row {
	g, w := flatten(got), flatten(want)
	s := measure(g, w)
	r := Row{Tensor: name, Shape: shape, MaxAbs: s.maxAbs, MaxRel: s.rel(), Cosine: cosine(g, w), Status: Pass,
		Note: "engine identity: must be bit-identical"}
	for i := range w {
		if math.Float32bits(g[i]) != math.Float32bits(w[i]) {
			r.Outside++
		}
	}
	if r.Outside > 0 {
		r.Status = Fail
	}
	return r
}

// logitsRow checks logits rows (positions) against want [len(got), V] with
// the case's tolerance set; margins are the reference top-2 margins per row
// (computed from want when nil). Outside counts failing positions.
func logitsRow(name string, shape []int, got [][]float32, want []float32, margins []float32, tol modelTol) Row {
	V := len(want) / len(got)
	r := Row{Tensor: name, Shape: shape, Cosine: 1, Status: Pass}
	var reasons []string
	var meanAbs float64
	cos999, agree := 0, 0
	var flips []string // argmax differences the margin rule allows
	for i, g := range got {
		w := want[i*V : (i+1)*V]
		s := measure(g, w)
		cs := cosine(g, w)
		r.MaxAbs = max(r.MaxAbs, s.maxAbs)
		r.MaxRel = max(r.MaxRel, s.rel())
		r.Cosine = min(r.Cosine, cs)
		meanAbs += s.meanAbs / float64(len(got))
		if cs >= 0.999 {
			cos999++
		}
		margin := top2Margin(w)
		if margins != nil {
			margin = margins[i]
		}
		sameArgmax := argmax(g) == argmax(w)
		if sameArgmax {
			agree++
		}
		bad := ""
		switch {
		case tol.LogitsMaxAbs != nil && !(s.maxAbs <= *tol.LogitsMaxAbs):
			bad = fmt.Sprintf("row %d max-abs %.3g > %.3g", i, s.maxAbs, *tol.LogitsMaxAbs)
		case tol.LogitsCosineMin != nil && !(cs >= *tol.LogitsCosineMin):
			bad = fmt.Sprintf("row %d cosine %.7f < %.7f", i, cs, *tol.LogitsCosineMin)
		case tol.ArgmaxMustMatch && !sameArgmax && float64(margin) >= tol.argmaxMargin:
			bad = fmt.Sprintf("row %d argmax %d ≠ %d (margin %.3g)", i, argmax(g), argmax(w), margin)
		case !sameArgmax:
			flips = append(flips, fmt.Sprintf("row %d at margin %.3g", i, margin))
		}
		if bad != "" {
			r.Outside++
			reasons = append(reasons, bad)
		}
	}
	n := float64(len(got))
	if tol.LogitsMeanAbsMax != nil && !(meanAbs <= *tol.LogitsMeanAbsMax) {
		reasons = append(reasons, fmt.Sprintf("mean-abs %.3g > %.3g", meanAbs, *tol.LogitsMeanAbsMax))
	}
	if tol.FracCosine999Min != nil && !(float64(cos999)/n >= *tol.FracCosine999Min) {
		reasons = append(reasons, fmt.Sprintf("%.2f of positions with cosine ≥ 0.999 < %.2f", float64(cos999)/n, *tol.FracCosine999Min))
	}
	if len(reasons) > 0 {
		r.Status = Fail
		r.Note = strings.Join(reasons[:min(3, len(reasons))], "; ")
	} else {
		r.Note = fmt.Sprintf("mean-abs %.3g, argmax agrees %d/%d", meanAbs, agree, len(got))
		if len(flips) > 0 {
			r.Note += "; flipped below the margin rule: " + strings.Join(flips, ", ")
		}
		if tol.ArgmaxAgreeFracMin != nil {
			r.Note += fmt.Sprintf(" (manifest's all-position agreement figure %.2f: informative)", *tol.ArgmaxAgreeFracMin)
		}
	}
	return r
}

// hiddenRow compares per-layer hidden states got and want, [stages, ..., H]
// flattened, and names the first stage outside tolerance. Without a hidden
// tolerance (bf16 engines) the row is informational and the first stage
// whose cosine drops below 0.999 is named.
func hiddenRow(name string, shape []int, got, want []float32, layers int, tol modelTol) Row {
	stages := layers + 2
	per := len(want) / stages
	s := measure(got, want)
	r := Row{Tensor: name, Shape: shape, MaxAbs: s.maxAbs, MaxRel: s.rel(), Cosine: 1, Status: Info}
	for st := range stages {
		g, w := got[st*per:(st+1)*per], want[st*per:(st+1)*per]
		cs := cosine(g, w)
		r.Cosine = min(r.Cosine, cs)
		diverges := cs < 0.999
		if tol.HiddenMaxAbs != nil {
			diverges = false
			for i := range w {
				if !(diff(g[i], w[i]) <= *tol.HiddenMaxAbs) {
					r.Outside++
					diverges = true
				}
			}
		}
		if diverges && r.FirstDiverging == "" {
			r.FirstDiverging = stageName(st, layers)
		}
	}
	if tol.HiddenMaxAbs != nil {
		r.Status = Pass
		if r.Outside > 0 {
			r.Status = Fail
			r.Note = fmt.Sprintf("max-abs tolerance %.3g", *tol.HiddenMaxAbs)
		}
	} else {
		r.Note = "no tolerance for this engine; first diverging = first stage with cosine < 0.999"
	}
	return r
}

func flatten(rows [][]float32) []float32 {
	var out []float32
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

func flattenI(rows [][]int32) []int32 {
	var out []int32
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}
