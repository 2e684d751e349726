package align

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"

	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/model"
)

// The kv_cache case has no reference dump: it runs one model on one long
// prompt twice, over a bf16 cache (the baseline, the engine's default) and
// over a cache of Options.KVDType (default int8), and compares the logits of
// the prompt's last kvWindow positions (teacher-forced: both runs read the
// same tokens) and kvSteps greedy decode steps after it. An f32 cache run
// the same way shows the error bf16 itself makes, for scale.
const (
	kvWindow = 64
	kvSteps  = 32
	// Thresholds: the scored positions' logits within mean cosine
	// kvCosineMin of the baseline's, and the greedy (top-1) token the same
	// at no fewer than kvTop1Min of them but for near-ties (the bf16
	// engine's margin of the reference cases). Positions whose MoE routing
	// differs from the baseline's at any layer are left out: top-k routing
	// turns a rounding into another expert now and then, a discrete change
	// that no tolerance on the cache describes; but no more than
	// kvReroutedMax of them, since a broken cache reroutes everywhere.
	// Free-running greedy decode diverges for good at the first near-tie it
	// resolves differently, so its agreement is reported, not judged.
	kvCosineMin   = 0.999
	kvTop1Min     = 0.95
	kvReroutedMax = kvWindow / 4
)

// DefaultKVPositions are the prompt lengths the kv_cache case runs.
var DefaultKVPositions = []int{4096, 32768}

// kvCaseModels are the model directories the kv_cache case runs on:
// Options.ModelPath, else every model the reference cases under Ref name.
func kvCaseModels(opts *Options) ([]string, error) {
	if opts.ModelPath != "" {
		return []string{filepath.Clean(opts.ModelPath)}, nil
	}
	cases, err := Find(opts.Ref, "all")
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, m := range cases {
		if m.ModelPath != "" {
			if d := filepath.Clean(m.path(m.ModelPath)); !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("kv_cache: no model under %s; pass --model-path", opts.Ref)
	}
	return dirs, nil
}

// kvRun is what one cache dtype produced.
type kvRun struct {
	logits [][]float32 // the prompt's last kvWindow positions
	// experts are those positions' routing, [layer][kvWindow·top_k] with
	// each position's experts sorted (a set); none for a dense model.
	experts [][]int32
	greedy  []int32 // kvSteps tokens decoded after the prompt
}

// rerouted reports whether position i took other experts than in base at any layer.
func (k *kvRun) rerouted(base *kvRun, i int) bool {
	for l, e := range k.experts {
		n := len(e) / kvWindow
		if !slices.Equal(e[i*n:(i+1)*n], base.experts[l][i*n:(i+1)*n]) {
			return true
		}
	}
	return false
}

func (s *session) kvCase(dir string, positions int) (res Result) {
	kvd := s.opts.KVDType
	if kvd == "" {
		kvd = string(kvcache.Int8)
	}
	res = Result{Model: filepath.Base(dir), Case: fmt.Sprintf("%s-vs-bf16-%d", kvd, positions), Kind: "kv_cache",
		Path: s.opts.Path.String(), Tolerances: "kv_cache", DType: s.opts.DType, KVDType: kvd}
	defer res.finish()
	err := func() error {
		if positions <= kvWindow {
			return fmt.Errorf("%d positions: want more than the %d scored", positions, kvWindow)
		}
		m, err := s.model(dir)
		if err != nil {
			return err
		}
		// A prompt of random ids (seeded: the same for both runs and every
		// invocation), as any token sequence exercises the cache.
		rng := rand.New(rand.NewPCG(uint64(positions), 14))
		prompt := make([]int32, positions)
		for i := range prompt {
			prompt[i] = int32(rng.IntN(m.Config.VocabSize))
		}
		base, err := s.kvRun(m, kvcache.BF16, prompt)
		if err != nil {
			return err
		}
		exact, err := s.kvRun(m, kvcache.F32, prompt)
		if err != nil {
			return err
		}
		got := exact
		if kvd != string(kvcache.F32) {
			if got, err = s.kvRun(m, kvcache.DType(kvd), prompt); err != nil {
				return err
			}
		}
		res.Rows = kvCompare(kvd, got, base, true)
		if kvd != string(kvcache.F32) {
			// The error bf16 itself makes, measured the same way: the scale
			// to read the rows above against.
			res.Rows = append(res.Rows, kvCompare("f32", exact, base, false)...)
		}
		return nil
	}()
	if err != nil {
		res.Error = err.Error()
	}
	return res
}

// kvRun prefills prompt in one pass but for its last kvWindow tokens, which
// a second pass scores (incremental prefill is bit-identical to a single
// pass), then decodes greedily.
func (s *session) kvRun(m *model.Model, kv kvcache.DType, prompt []int32) (kvRun, error) {
	n := len(prompt)
	r, done, err := newRunner(m, kv, s.pool, 1, n+kvSteps, n-kvWindow, kvWindow)
	if err != nil {
		return kvRun{}, err
	}
	defer done()
	if err := r.Forward([]model.Segment{{Tokens: prompt[:n-kvWindow]}}); err != nil {
		return kvRun{}, err
	}
	rec := &recorder{} // h 0: the routing only
	r.Trace = rec
	if err := r.Forward([]model.Segment{{Start: n - kvWindow, Tokens: prompt[n-kvWindow:], Logits: model.LogitsAll}}); err != nil {
		return kvRun{}, err
	}
	r.Trace = nil
	out := kvRun{experts: rec.experts}
	for _, e := range out.experts {
		n := len(e) / kvWindow
		for i := range kvWindow {
			slices.Sort(e[i*n : (i+1)*n])
		}
	}
	for i := range kvWindow {
		out.logits = append(out.logits, slices.Clone(r.Logits(i)))
	}
	next := int32(argmax(r.Logits(kvWindow - 1)))
	for pos := n; len(out.greedy) < kvSteps; pos++ {
		out.greedy = append(out.greedy, next)
		if err := r.Forward([]model.Segment{{Start: pos, Tokens: []int32{next}, Logits: model.LogitsLast}}); err != nil {
			return kvRun{}, err
		}
		next = int32(argmax(r.Logits(0)))
	}
	return out, nil
}

// kvCompare scores got (of cache dtype name) against the baseline run,
// leaving out the positions got routes differently. Judged, the rows pass
// or fail; otherwise (the f32 scale) they are INFO.
func kvCompare(name string, got, base kvRun, judge bool) []Row {
	v := len(base.logits[0])
	logits := Row{Tensor: fmt.Sprintf("%s: logits, last %d positions", name, kvWindow), Shape: []int{kvWindow, v}, Cosine: 1, Status: Pass}
	top1 := Row{Tensor: name + ": greedy token, last positions", Shape: []int{kvWindow}, Exact: true, Status: Pass}
	var cosSum float64
	judged, ties, failed, rerouted := 0, 0, 0, 0
	for i, w := range base.logits {
		s := measure(got.logits[i], w)
		logits.MaxAbs, logits.MaxRel = max(logits.MaxAbs, s.maxAbs), max(logits.MaxRel, s.rel())
		c := cosine(got.logits[i], w)
		logits.Cosine = min(logits.Cosine, c)
		if !(c >= kvCosineMin) {
			logits.Outside++
		}
		differs := argmax(got.logits[i]) != argmax(w)
		if differs {
			top1.Outside++
		}
		if got.rerouted(&base, i) {
			rerouted++
			continue
		}
		judged++
		cosSum += c
		switch {
		case differs && top2Margin(w) < greedyMarginBF16:
			ties++
		case differs:
			failed++
		}
	}
	mean := cosSum / float64(max(judged, 1))
	logits.Note = fmt.Sprintf("mean cosine %.7f over %d positions (at least %g)", mean, judged, kvCosineMin)
	if rerouted > 0 {
		logits.Note += fmt.Sprintf("; %d left out, routed to other experts (at most %d)", rerouted, kvReroutedMax)
	}
	if !(mean >= kvCosineMin) || rerouted > kvReroutedMax {
		logits.Status = Fail
	}
	agree := float64(judged-failed) / float64(max(judged, 1))
	top1.Note = fmt.Sprintf("%d of %d differ, %d of them near-ties (top-2 margin < %g): agreement %.1f%% (at least %g%%)",
		top1.Outside, kvWindow, ties, greedyMarginBF16, 100*agree, 100*kvTop1Min)
	if agree < kvTop1Min {
		top1.Status = Fail
	}
	same := 0
	for same < len(base.greedy) && got.greedy[same] == base.greedy[same] {
		same++
	}
	decode := Row{Tensor: fmt.Sprintf("%s: greedy decode, %d steps", name, kvSteps), Shape: []int{kvSteps}, Exact: true,
		Outside: kvSteps - same, Status: Info, Note: fmt.Sprintf("identical for the first %d of %d steps", same, kvSteps)}
	if !judge {
		logits.Status, top1.Status = Info, Info
	}
	return []Row{logits, top1, decode}
}
