package model

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/safetensors"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

var tinyModels = []string{"tiny-qwen3-a", "tiny-qwen3moe-a"}

// refTensors opens a reference case's tensors.
func refTensors(t *testing.T, model, c string) *safetensors.Checkpoint {
	t.Helper()
	dir := sharedtest.Path(t, "align", model, c)
	ck, err := safetensors.Open(filepath.Join(dir, "tensors.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return ck
}

func f32(t *testing.T, ck *safetensors.Checkpoint, name string) []float32 {
	t.Helper()
	ts, ok := ck.Tensor(name)
	if !ok {
		t.Fatalf("reference has no %s", name)
	}
	v, err := ts.F32()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func i32(t *testing.T, ck *safetensors.Checkpoint, name string) []int32 {
	t.Helper()
	ts, ok := ck.Tensor(name)
	if !ok {
		t.Fatalf("reference has no %s", name)
	}
	v, err := ts.I32()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func loadTiny(t *testing.T, name string, opts LoadOptions) *Model {
	t.Helper()
	m, err := Load(sharedtest.Path(t, "models", name), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func newRunner(t *testing.T, m *Model, kv kvcache.DType, slots, seqLen int, opts RunnerOptions) *Runner {
	t.Helper()
	c, err := kvcache.New(m.Config, slots, seqLen, kv)
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.NewRunner(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); c.Close() })
	return r
}

// f32Paths are the kernel paths that compute in f32 (the reference's arithmetic).
func f32Paths() []kernels.Path {
	var ps []kernels.Path
	for _, p := range kernels.Available() {
		if !p.RoundsToBF16() {
			ps = append(ps, p)
		}
	}
	return ps
}

// forcePath runs f with kernel path p active.
func forcePath(t *testing.T, p kernels.Path, f func(t *testing.T)) {
	t.Run(p.String(), func(t *testing.T) {
		prev, err := kernels.Force(p)
		if err != nil {
			t.Fatal(err)
		}
		defer kernels.Force(prev)
		f(t)
	})
}

func maxAbsDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		m = max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

type hiddenRecorder struct {
	h, width int
	stages   [][]float32 // [stage][row·H]
}

func (h *hiddenRecorder) Hidden(stage int, rows []Row, x []float32) {
	for len(h.stages) <= stage {
		h.stages = append(h.stages, nil)
	}
	h.stages[stage] = append(h.stages[stage], x[:len(rows)*h.width]...)
}

func (h *hiddenRecorder) Router(int, []Row, []float32, []int32, []float32) {}

// TestMatchesReference checks logits and hidden states against the f32
// reference (one_token and multi_token_T64) on every f32 kernel path.
func TestMatchesReference(t *testing.T) {
	for _, name := range tinyModels {
		t.Run(name, func(t *testing.T) {
			m := loadTiny(t, name, LoadOptions{})
			for _, p := range f32Paths() {
				forcePath(t, p, func(t *testing.T) {
					for _, c := range []string{"one_token", "multi_token_T64"} {
						ref := refTensors(t, name, c)
						ids := i32(t, ref, "token_ids")
						r := newRunner(t, m, kvcache.F32, 1, 128, RunnerOptions{MaxTokens: 128, MaxLogits: len(ids)})
						rec := &hiddenRecorder{width: m.Config.HiddenSize}
						r.Trace = rec
						if err := r.Forward([]Segment{{Tokens: ids, Logits: LogitsAll}}); err != nil {
							t.Fatal(err)
						}
						V, H, T := m.Config.VocabSize, m.Config.HiddenSize, len(ids)
						var wantLogits []float32
						var rows []int32
						hiddenName := "hidden"
						if c == "one_token" {
							wantLogits, rows = f32(t, ref, "logits"), []int32{0}
						} else {
							wantLogits, rows = f32(t, ref, "logits"), i32(t, ref, "logits_positions")
							hiddenName = "hidden_all"
						}
						for i, row := range rows {
							if d := maxAbsDiff(r.Logits(int(row)), wantLogits[i*V:(i+1)*V]); d > 2e-3 {
								t.Errorf("%s: logits row %d: max-abs %.3g > 2e-3", c, row, d)
							}
						}
						want := f32(t, ref, hiddenName) // [L+2, T, H]
						if len(rec.stages) != m.Config.NumHiddenLayers+2 {
							t.Fatalf("traced %d stages, want %d", len(rec.stages), m.Config.NumHiddenLayers+2)
						}
						for s, got := range rec.stages {
							if d := maxAbsDiff(got, want[s*T*H:(s+1)*T*H]); d > 1e-3 {
								t.Errorf("%s: hidden stage %d: max-abs %.3g > 1e-3", c, s, d)
							}
						}
					}
				})
			}
		})
	}
}

func kernelsBF16() bool { return kernels.Active().RoundsToBF16() }
