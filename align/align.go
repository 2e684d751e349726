// Package align runs ellm against reference tensor dumps (../shared/align,
// format in its FORMAT.md): kernel cases run the kernels on the reference
// inputs, model cases run the forward pass (pkg/model) on the reference
// prompts, the tokenizer case checks ids and chat renders. Each case yields
// a table of compared tensors with a PASS/FAIL verdict per row.
package align

import (
	"fmt"
	"math"
	"path/filepath"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ops"
	"github.com/ellm-dev/ellm/kernels/threads"
	"github.com/ellm-dev/ellm/kernels/tune"
	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/model"
)

// Options select the cases and how ellm runs them.
type Options struct {
	// Kind is the case kind to run ("multi-token", "multi_token", "all", ...).
	Kind string
	// Ref is a case directory or a directory of them.
	Ref string
	// ModelPath overrides the manifests' model_path.
	ModelPath string
	// Path is the kernel path the cases run on.
	Path kernels.Path
	// DType is the weight dtype of model cases ("bf16" default, "f32", "int8").
	DType string
	// NoCodedWeights is model.LoadOptions.NoCodedWeights.
	NoCodedWeights bool
	// KVDType is the KV cache dtype of model cases ("bf16", "f32", "int8";
	// "": f32 on f32 paths, as the reference keeps K/V, bf16 otherwise). The
	// kv_cache case compares it (default int8) against a bf16 cache.
	KVDType string
	// Positions are the prompt lengths of the kv_cache case.
	Positions []int
	// Dump, when set, is where ellm's own tensors are written in the
	// reference format (Dump/<model>/<case>/).
	Dump string
	// Threads for the kernels' pool (0: one per CPU).
	Threads int
	// Attention is the attention over a bf16 KV cache, "f32" or "bf16" (""
	// or "auto": the path's, bf16 on avx512bf16).
	Attention string
}

// Result is one case's outcome.
type Result struct {
	Model string `json:"model,omitempty"`
	Case  string `json:"case"`
	Kind  string `json:"kind"`
	Path  string `json:"kernel_path"`
	// Tolerances names the tolerance set applied: "fp32_engine",
	// "bf16_engine" or "kernel".
	Tolerances string   `json:"tolerances"`
	DType      string   `json:"dtype,omitempty"`
	KVDType    string   `json:"kv_dtype,omitempty"`
	Rows       []Row    `json:"rows"`
	Notes      []string `json:"notes,omitempty"`
	Error      string   `json:"error,omitempty"`
	Pass       bool     `json:"pass"`
}

func (r *Result) finish() {
	r.Pass = r.Error == ""
	for i := range r.Rows {
		row := &r.Rows[i]
		if row.Status == Fail {
			r.Pass = false
		}
		// NaN and Inf have no JSON spelling: a non-finite error is "huge".
		for _, v := range []*float64{&row.MaxAbs, &row.MaxRel, &row.Cosine} {
			if math.IsNaN(*v) || math.IsInf(*v, 0) {
				*v = math.MaxFloat64
			}
		}
	}
}

// Run runs every matching case. Errors of individual cases are reported in
// their Result (and fail it); the returned error is for bad options.
func Run(opts Options) ([]Result, error) {
	if opts.KVDType != "" {
		if _, err := kvcache.ParseDType(opts.KVDType); err != nil {
			return nil, err
		}
	}
	if opts.DType == "" {
		opts.DType = "bf16"
	}
	var (
		cases []*Manifest
		dirs  []string
		err   error
	)
	if kv := NormalizeKind(opts.Kind) == "kv_cache"; kv {
		if len(opts.Positions) == 0 {
			opts.Positions = DefaultKVPositions
		}
		dirs, err = kvCaseModels(&opts)
	} else {
		cases, err = Find(opts.Ref, opts.Kind)
	}
	if err != nil {
		return nil, err
	}
	prev, err := kernels.Force(opts.Path)
	if err != nil {
		return nil, err
	}
	defer kernels.Force(prev)
	// The path's own attention mode (bf16 on avx512bf16, which the
	// calibration picks where VDPBF16PS is faster), unless asked.
	if opts.Attention != "" && opts.Attention != "auto" {
		if _, err := tune.ChooseAttention(opts.Attention); err != nil {
			return nil, err
		}
	}
	pool := threads.New(opts.Threads, false)
	defer pool.Close()
	s := &session{opts: &opts, pool: pool, ops: ops.For(opts.Path), models: map[string]*model.Model{}}
	defer s.close()
	results := make([]Result, 0, len(cases))
	for _, m := range cases {
		results = append(results, s.run(m))
	}
	for _, d := range dirs {
		for _, n := range opts.Positions {
			results = append(results, s.kvCase(d, n))
		}
	}
	return results, nil
}

// session holds what cases share: the pool and the loaded models.
type session struct {
	opts   *Options
	pool   *threads.Pool
	ops    *ops.Kernels // the kernel cases' functions, as the model binds them
	models map[string]*model.Model
}

func (s *session) close() {
	for _, m := range s.models {
		m.Close()
	}
}

// bf16 reports whether the kernels round activations to bf16 or the cache
// quantizes K/V, which selects the bf16_engine tolerances.
func (s *session) bf16() bool {
	return s.opts.Path.RoundsToBF16() || s.opts.DType == "int8" || s.opts.KVDType == "bf16" || s.opts.KVDType == "int8"
}

func (s *session) run(m *Manifest) (res Result) {
	res = Result{Model: m.Model, Case: m.Case, Kind: NormalizeKind(m.Kind), Path: s.opts.Path.String()}
	defer res.finish()
	c := &caseRun{s: s, m: m, res: &res}
	if s.opts.Dump != "" {
		c.dump = newDump(m, s.opts)
	}
	var err error
	switch res.Kind {
	case "tokenizer":
		res.Tolerances = "exact"
		err = c.tokenizer()
	case "rope", "silu_and_mul", "rmsnorm":
		res.Tolerances = "kernel"
		err = c.withTensors(map[string]func() error{"rope": c.rope, "silu_and_mul": c.siluAndMul, "rmsnorm": c.rmsnorm}[res.Kind])
	case "one_token", "multi_token", "multi_batch", "multi_batch_test", "incremental":
		res.DType, res.KVDType = s.opts.DType, s.opts.KVDType
		res.Tolerances = "fp32_engine"
		if s.bf16() {
			res.Tolerances = "bf16_engine"
		}
		err = c.withTensors(func() error { return c.modelCase(res.Kind) })
	default:
		err = fmt.Errorf("case kind %q is not implemented", m.Kind)
	}
	if err == nil && c.dump != nil {
		err = c.dump.write()
	}
	if err != nil {
		res.Error = err.Error()
	}
	return res
}

// caseRun is the state of one case.
type caseRun struct {
	s    *session
	m    *Manifest
	res  *Result
	ref  *refTensors
	dump *dump
}

func (c *caseRun) withTensors(f func() error) error {
	ref, err := openTensors(c.m)
	if err != nil {
		return err
	}
	defer ref.close()
	c.ref = ref
	if err := f(); err != nil {
		return err
	}
	c.dump.copyInputs(ref)
	return nil
}

func (c *caseRun) add(r Row) { c.res.Rows = append(c.res.Rows, r) }
func (c *caseRun) note(format string, args ...any) {
	c.res.Notes = append(c.res.Notes, fmt.Sprintf(format, args...))
}

// model loads (once per session) the model of the case.
func (c *caseRun) model() (*model.Model, error) {
	dir := c.s.opts.ModelPath
	if dir == "" {
		if c.m.ModelPath == "" {
			return nil, fmt.Errorf("manifest has no model_path; pass --model-path")
		}
		dir = c.m.path(c.m.ModelPath)
	}
	return c.s.model(dir)
}

// model loads the model in dir once per session.
func (s *session) model(dir string) (*model.Model, error) {
	dir = filepath.Clean(dir)
	if m, ok := s.models[dir]; ok {
		return m, nil
	}
	// Alignment compares every logit: a logits screen would only take memory.
	m, err := model.Load(dir, model.LoadOptions{DType: s.opts.DType, NoCodedWeights: s.opts.NoCodedWeights, NoLogitScreen: true})
	if err != nil {
		return nil, err
	}
	s.models[dir] = m
	return m, nil
}

// runner makes a runner over a fresh cache: K/V of Options.KVDType, else f32
// on f32 paths (the reference keeps K/V in f32) and bf16 (the engine's
// default) otherwise.
func (c *caseRun) runner(m *model.Model, slots, seqLen, maxTokens, maxLogits int) (*model.Runner, func(), error) {
	kv := kvcache.F32
	if c.s.bf16() {
		kv = kvcache.BF16
	}
	if c.s.opts.KVDType != "" {
		kv = kvcache.DType(c.s.opts.KVDType)
	}
	return newRunner(m, kv, c.s.pool, slots, seqLen, maxTokens, maxLogits)
}

func newRunner(m *model.Model, kv kvcache.DType, pool *threads.Pool, slots, seqLen, maxTokens, maxLogits int) (*model.Runner, func(), error) {
	cache, err := kvcache.New(m.Config, slots, seqLen, kv)
	if err != nil {
		return nil, nil, err
	}
	r, err := m.NewRunner(cache, model.RunnerOptions{MaxTokens: maxTokens, MaxLogits: maxLogits, Pool: pool})
	if err != nil {
		cache.Close()
		return nil, nil, err
	}
	return r, func() { r.Close(); cache.Close() }, nil
}
