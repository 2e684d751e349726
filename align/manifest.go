package align

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/ellm-dev/ellm/pkg/safetensors"
)

// Manifest is a case's manifest.json (see ../shared/align/FORMAT.md).
type Manifest struct {
	Kind        string                     `json:"kind"`
	Case        string                     `json:"case"`
	Model       string                     `json:"model,omitempty"`
	ModelConfig json.RawMessage            `json:"model_config,omitempty"`
	Inputs      json.RawMessage            `json:"inputs,omitempty"`
	Tensors     map[string]TensorDesc      `json:"tensors,omitempty"`
	DTypeNotes  string                     `json:"dtype_notes,omitempty"`
	Tolerances  map[string]json.RawMessage `json:"tolerances,omitempty"`
	GeneratedBy string                     `json:"generated_by,omitempty"`
	ModelPath   string                     `json:"model_path,omitempty"`

	// The tokenizer case.
	TokenizerPath string     `json:"tokenizer_path,omitempty"`
	Strings       string     `json:"strings,omitempty"`
	Chats         []ChatFile `json:"chats,omitempty"`

	// Dir is the directory the manifest was read from; relative paths in the
	// manifest are relative to it.
	Dir string `json:"-"`
}

// TensorDesc describes one tensor of a case.
type TensorDesc struct {
	DType       string `json:"dtype"`
	Shape       []int  `json:"shape"`
	Description string `json:"description,omitempty"`
}

// ChatFile is one chat-template render file of the tokenizer case.
type ChatFile struct {
	File     string `json:"file"`
	Template string `json:"template"`
}

// ManifestName is the file that makes a directory a case.
const ManifestName = "manifest.json"

// TensorsName holds a case's tensors.
const TensorsName = "tensors.safetensors"

// ReadManifest reads dir/manifest.json.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ManifestName), err)
	}
	if m.Kind == "" {
		return nil, fmt.Errorf("%s: no kind", filepath.Join(dir, ManifestName))
	}
	if m.Case == "" {
		m.Case = filepath.Base(dir)
	}
	m.Dir = dir
	return &m, nil
}

// NormalizeKind spells a case kind as manifests do: "multi-token" → "multi_token".
func NormalizeKind(k string) string { return strings.ReplaceAll(strings.ToLower(k), "-", "_") }

// Kinds lists the case kinds ellm align knows, in the order "all" runs them.
var Kinds = []string{"rope", "silu_and_mul", "rmsnorm", "tokenizer", "one_token", "multi_token", "multi_batch", "multi_batch_test", "incremental"}

// Find returns the manifests under ref whose kind matches kind ("all" matches
// every kind). ref is a case directory, a directory of case directories, or a
// directory of those (one per model), searched two levels deep.
func Find(ref, kind string) ([]*Manifest, error) {
	kind = NormalizeKind(kind)
	if kind != "all" && !slices.Contains(Kinds, kind) {
		return nil, fmt.Errorf("unknown case %q (want one of %s, or all)", kind, strings.Join(Kinds, ", "))
	}
	var found []*Manifest
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		m, err := ReadManifest(dir)
		switch {
		case err == nil:
			if kind == "all" || NormalizeKind(m.Kind) == kind {
				found = append(found, m)
			}
			return nil
		case !errors.Is(err, os.ErrNotExist):
			return err
		case depth == 0:
			return nil
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.IsDir() {
				if err := walk(filepath.Join(dir, e.Name()), depth-1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if _, err := os.Stat(ref); err != nil {
		return nil, fmt.Errorf("reference %s: %w", ref, err)
	}
	if err := walk(ref, 2); err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("no %s case under %s", kind, ref)
	}
	order := func(m *Manifest) int { return slices.Index(Kinds, NormalizeKind(m.Kind)) }
	sort.SliceStable(found, func(i, j int) bool {
		a, b := found[i], found[j]
		if a.Model != b.Model {
			return a.Model < b.Model
		}
		if order(a) != order(b) {
			return order(a) < order(b)
		}
		return a.Case < b.Case
	})
	return found, nil
}

// path resolves a manifest-relative path.
func (m *Manifest) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(m.Dir, p)
}

// refTensors is an open tensors.safetensors of a case.
type refTensors struct {
	ck   *safetensors.Checkpoint
	file string
}

func openTensors(m *Manifest) (*refTensors, error) {
	file := filepath.Join(m.Dir, TensorsName)
	ck, err := safetensors.Open(file)
	if err != nil {
		return nil, err
	}
	return &refTensors{ck: ck, file: file}, nil
}

func (r *refTensors) close() { r.ck.Close() }

func (r *refTensors) tensor(name string, dt safetensors.DType) (*safetensors.Tensor, error) {
	t, ok := r.ck.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("%s: no tensor %q", r.file, name)
	}
	if t.DType != dt {
		return nil, fmt.Errorf("%s: tensor %q is %s, want %s", r.file, name, t.DType, dt)
	}
	return t, nil
}

// f32 returns an F32 tensor and its shape.
func (r *refTensors) f32(name string) ([]float32, []int, error) {
	t, err := r.tensor(name, safetensors.F32)
	if err != nil {
		return nil, nil, err
	}
	v, err := t.F32()
	return v, t.Shape, err
}

// i32 returns an I32 tensor and its shape.
func (r *refTensors) i32(name string) ([]int32, []int, error) {
	t, err := r.tensor(name, safetensors.I32)
	if err != nil {
		return nil, nil, err
	}
	v, err := t.I32()
	return v, t.Shape, err
}

func (r *refTensors) has(name string) bool {
	_, ok := r.ck.Tensor(name)
	return ok
}
