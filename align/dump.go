package align

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"github.com/ellm-dev/ellm/pkg/safetensors"
)

// dump collects ellm's own tensors of a case and writes them in the
// reference format: <Dump>/<model>/<case>/manifest.json + tensors.safetensors.
// A nil *dump ignores everything, so cases call it unconditionally.
type dump struct {
	dir      string
	manifest Manifest
	entries  []safetensors.Entry
}

func newDump(m *Manifest, opts *Options) *dump {
	d := &dump{dir: filepath.Join(opts.Dump, m.Model, m.Case), manifest: *m}
	d.manifest.Tensors = map[string]TensorDesc{}
	if m.ModelPath != "" || opts.ModelPath != "" {
		mp := opts.ModelPath
		if mp == "" {
			mp = m.path(m.ModelPath)
		}
		if abs, err := filepath.Abs(mp); err == nil {
			mp = abs
		}
		d.manifest.ModelPath = mp
	}
	d.manifest.GeneratedBy = fmt.Sprintf("ellm align --dump (kernel path %s, weights %s)", opts.Path, opts.DType)
	return d
}

func (d *dump) add(name string, dt safetensors.DType, shape []int, data []byte) {
	if d == nil {
		return
	}
	d.entries = append(d.entries, safetensors.Entry{Name: name, DType: dt, Shape: shape, Data: data})
	d.manifest.Tensors[name] = TensorDesc{DType: string(dt), Shape: shape, Description: "ellm"}
}

// f32 records a float32 tensor (copied: callers pass scratch buffers).
func (d *dump) f32(name string, shape []int, v []float32) {
	if d == nil {
		return
	}
	b := make([]byte, 4*len(v))
	copy(b, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(b)))
	d.add(name, safetensors.F32, shape, b)
}

// i32 records an int32 tensor.
func (d *dump) i32(name string, shape []int, v []int32) {
	if d == nil {
		return
	}
	b := make([]byte, 4*len(v))
	copy(b, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(b)))
	d.add(name, safetensors.I32, shape, b)
}

// inputNames are the reference tensors a case reads as inputs. The dump
// carries them over, so that it is itself a case: ellm on one kernel path
// can be aligned against ellm's dump from another.
var inputNames = []string{
	"positions", "q", "k", "x", "weight", "fused_x", "fused_residual_in", "head_x", "head_weight",
	"token_ids", "lengths", "offsets", "prompt_ids", "prompt_lengths", "prompt_offsets",
}

// copyInputs adds the input tensors of ref that the case has not dumped.
func (d *dump) copyInputs(ref *refTensors) {
	if d == nil {
		return
	}
	for _, name := range inputNames {
		if _, done := d.manifest.Tensors[name]; done || !ref.has(name) {
			continue
		}
		t, _ := ref.ck.Tensor(name)
		d.add(name, t.DType, t.Shape, append([]byte(nil), t.Bytes()...))
	}
}

func (d *dump) write() error {
	if d == nil || len(d.entries) == 0 {
		return nil
	}
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	if err := safetensors.WriteFile(filepath.Join(d.dir, TensorsName), d.entries, nil); err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	b, err := json.MarshalIndent(&d.manifest, "", " ")
	if err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	if err := os.WriteFile(filepath.Join(d.dir, ManifestName), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	return nil
}
