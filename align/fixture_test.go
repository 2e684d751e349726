package align

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/pkg/safetensors"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

func f32Bytes(v []float32) []byte {
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))...)
}

// writeSiluCase writes a silu_and_mul case as the Python dumpers do
// (manifest.json + tensors.safetensors), its expected output computed in
// float64; scale multiplies the expected output (1 = correct).
func writeSiluCase(t *testing.T, dir string, scale float64) {
	t.Helper()
	const T, I = 3, 8
	x := make([]float32, T*2*I)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)*0.7) * 4)
	}
	out := make([]float32, T*I)
	for r := range T {
		for i := range I {
			g, u := float64(x[r*2*I+i]), float64(x[r*2*I+I+i])
			out[r*I+i] = float32(g / (1 + math.Exp(-g)) * u * scale)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	err := safetensors.WriteFile(filepath.Join(dir, TensorsName), []safetensors.Entry{
		{Name: "x", DType: safetensors.F32, Shape: []int{T, 2 * I}, Data: f32Bytes(x)},
		{Name: "out", DType: safetensors.F32, Shape: []int{T, I}, Data: f32Bytes(out)},
		{Name: "out_exact", DType: safetensors.F32, Shape: []int{T, I}, Data: f32Bytes(out)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{
		"kind": "silu_and_mul", "case": filepath.Base(dir), "model": "fixture",
		"inputs": map[string]any{"T": T, "I": I},
		"tensors": map[string]any{
			"x": map[string]any{"dtype": "F32", "shape": []int{T, 2 * I}}, "out": map[string]any{"dtype": "F32", "shape": []int{T, I}},
		},
		"tolerances": map[string]any{"out_max_rel": 1e-5},
	}
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, ManifestName), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFixtureRoundTrip reads a case written in the dumpers' format and
// checks that a wrong reference fails.
func TestFixtureRoundTrip(t *testing.T) {
	root := t.TempDir()
	writeSiluCase(t, filepath.Join(root, "good"), 1)
	writeSiluCase(t, filepath.Join(root, "bad"), 1.001)
	results, err := Run(Options{Kind: "silu-and-mul", Ref: root, Path: kernels.Active(), Dump: filepath.Join(root, "dump")})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 {
		t.Fatalf("%d results, want 2", len(results))
	}
	for _, r := range results {
		if want := r.Case == "good"; r.Pass != want {
			t.Errorf("case %s: pass = %v, want %v: %+v", r.Case, r.Pass, want, r.Rows)
		}
	}
	// The dump is itself a readable case.
	m, err := ReadManifest(filepath.Join(root, "dump", "fixture", "good"))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := openTensors(m)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.close()
	if _, shape, err := ref.f32("out"); err != nil || len(shape) != 2 || shape[1] != 8 {
		t.Fatalf("dumped out: shape %v, %v", shape, err)
	}
}

func TestFindRejects(t *testing.T) {
	root := t.TempDir()
	writeSiluCase(t, filepath.Join(root, "c"), 1)
	if _, err := Find(root, "attention"); err == nil {
		t.Error("unknown kind accepted")
	}
	if _, err := Find(root, "rope"); err == nil {
		t.Error("no matching case: want an error")
	}
	if _, err := Find(filepath.Join(root, "missing"), "all"); err == nil {
		t.Error("missing directory accepted")
	}
	got, err := Find(filepath.Join(root, "c"), "silu_and_mul")
	if err != nil || len(got) != 1 {
		t.Errorf("Find(case dir) = %d cases, %v", len(got), err)
	}
}

// TestDumpModelCase dumps a model case and reads it back.
func TestDumpModelCase(t *testing.T) {
	ref := sharedtest.Path(t, "align", "tiny-qwen3moe-a", "one_token")
	dump := t.TempDir()
	results, err := Run(Options{Kind: "one-token", Ref: ref, Path: kernels.Active(), Dump: dump})
	if err != nil {
		t.Fatal(err)
	}
	if !Passed(results) {
		t.Fatalf("one_token failed: %+v", results)
	}
	m, err := ReadManifest(filepath.Join(dump, "tiny-qwen3moe-a", "one_token"))
	if err != nil {
		t.Fatal(err)
	}
	tens, err := openTensors(m)
	if err != nil {
		t.Fatal(err)
	}
	defer tens.close()
	for name, shape := range map[string][]int{"logits": {151936}, "hidden": {4, 64}, "router_selected": {2, 1, 2}} {
		desc, ok := m.Tensors[name]
		if !ok || len(desc.Shape) != len(shape) {
			t.Errorf("dumped manifest: %s = %+v", name, desc)
		}
		if !tens.has(name) {
			t.Errorf("dumped tensors lack %s", name)
		}
	}
}

// TestDumpIsACase dumps every case of a model and aligns ellm against its
// own dump on the same kernel path: every row must be exact.
func TestDumpIsACase(t *testing.T) {
	ref := sharedtest.Path(t, "align", "tiny-qwen3moe-a")
	dump := t.TempDir()
	first, err := Run(Options{Kind: "all", Ref: ref, Path: kernels.Active(), Dump: dump})
	if err != nil {
		t.Fatal(err)
	}
	again, err := Run(Options{Kind: "all", Ref: filepath.Join(dump, "tiny-qwen3moe-a"), Path: kernels.Active()})
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != len(first) {
		t.Fatalf("%d cases from the dump, %d from the reference", len(again), len(first))
	}
	for _, r := range again {
		if !r.Pass {
			t.Errorf("%s: %s %+v", r.Case, r.Error, r.Rows)
		}
		for _, row := range r.Rows {
			if row.MaxAbs != 0 || row.Outside != 0 {
				t.Errorf("%s %s: max-abs %g, %d outside: ellm differs from its own dump", r.Case, row.Tensor, row.MaxAbs, row.Outside)
			}
		}
	}
}
