package inspect

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/pkg/cmdutil"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/safetensors"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
	"github.com/ellm-dev/ellm/pkg/synth"
)

func run(t *testing.T, opts Options) (string, error) {
	t.Helper()
	var out bytes.Buffer
	opts.IO = cmdutil.IOStreams{Out: &out, ErrOut: &out}
	err := inspectRun(&opts)
	return out.String(), err
}

func exitCode(err error) int {
	var ee *cmdutil.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.Code
	case err != nil:
		return -1
	}
	return 0
}

func TestSharedModels(t *testing.T) {
	for _, tc := range []struct {
		model, params string
		kinds         []string
	}{
		{"tiny-qwen3-a", "9,798,016", []string{"embedding", "attention", "dense MLP", "norms"}},
		{"tiny-qwen3moe-a", "19,572,096", []string{"embedding", "attention", "experts", "router", "norms", "lm_head"}},
	} {
		t.Run(tc.model, func(t *testing.T) {
			dir := sharedtest.Path(t, "models", tc.model)
			out, err := run(t, Options{ModelPath: dir})
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !strings.Contains(out, "OK: ") || !strings.Contains(out, tc.params+" parameters") {
				t.Errorf("output lacks the OK verdict with %s parameters:\n%s", tc.params, out)
			}
			for _, k := range tc.kinds {
				if !strings.Contains(out, "│ "+k) {
					t.Errorf("summary lacks kind %q", k)
				}
			}
		})
	}
}

func TestJSONAndFilter(t *testing.T) {
	dir := sharedtest.Path(t, "models", "tiny-qwen3-a")
	out, err := run(t, Options{ModelPath: dir, JSON: true, Filter: `layers\.1\..*_proj`})
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Tensors) != 7 {
		t.Errorf("filter listed %d tensors, want layer 1's 7 projections", len(r.Tensors))
	}
	for _, tn := range r.Tensors {
		if !strings.HasPrefix(tn.Name, "model.layers.1.") || tn.Shard != "model.safetensors" || tn.DType != safetensors.BF16 {
			t.Errorf("listed %+v", tn)
		}
	}
	// Totals cover the whole checkpoint whatever the filter.
	if !r.OK || !r.Checked || r.Total.Params != 9_798_016 || r.Total.Bytes != 2*9_798_016 || r.Total.Tensors != 24 {
		t.Errorf("total %+v ok %v", r.Total, r.OK)
	}
	if _, err := run(t, Options{ModelPath: dir, Filter: "("}); err == nil || !strings.Contains(err.Error(), "--filter") {
		t.Errorf("bad regex: %v", err)
	}
}

// synthModel writes a small synthetic model and returns its directory and config.
func synthModel(t *testing.T) (string, *modelcfg.Config) {
	t.Helper()
	c := synth.DefaultConfig()
	c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = 300, 32, 48, 2
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim = 2, 1, 16
	c.TieWordEmbeddings = true
	dir := t.TempDir()
	if err := synth.Generate(c, dir, synth.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	return dir, c
}

func editConfig(t *testing.T, dir string, edit func(c *modelcfg.Config)) {
	t.Helper()
	c, err := modelcfg.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	edit(c)
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestArchitectureMismatch(t *testing.T) {
	tests := []struct {
		name string
		edit func(c *modelcfg.Config)
		want []string
	}{
		{"more layers", func(c *modelcfg.Config) { c.NumHiddenLayers = 3 }, []string{
			"model.layers.2.self_attn.q_proj.weight: missing (attention [32 32])", "11 problem(s)"}},
		{"fewer layers", func(c *modelcfg.Config) { c.NumHiddenLayers = 1 }, []string{
			"model.layers.1.mlp.down_proj.weight: unexpected"}},
		{"wrong shape", func(c *modelcfg.Config) { c.IntermediateSize = 64 }, []string{
			"model.layers.0.mlp.up_proj.weight: shape [48 32], the architecture needs [64 32]"}},
		{"untied", func(c *modelcfg.Config) { c.TieWordEmbeddings = false }, []string{
			"lm_head.weight: missing (lm_head [300 32])"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := synthModel(t)
			editConfig(t, dir, tc.edit)
			out, err := run(t, Options{ModelPath: dir})
			if exitCode(err) != 1 {
				t.Fatalf("exit %d (%v), want 1\n%s", exitCode(err), err, out)
			}
			for _, w := range append(tc.want, "FAIL: the checkpoint does not match") {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// A tied config with an lm_head in the checkpoint is a note, not a failure:
// transformers ignores the extra tensor too.
func TestTiedWithLMHead(t *testing.T) {
	dir, c := synthModel(t)
	c.TieWordEmbeddings = false
	if err := synth.Generate(c, dir, synth.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	editConfig(t, dir, func(c *modelcfg.Config) { c.TieWordEmbeddings = true })
	out, err := run(t, Options{ModelPath: dir})
	if err != nil || !strings.Contains(out, "note: lm_head.weight is present but tie_word_embeddings is true") || !strings.Contains(out, "OK: 25 tensors") {
		t.Errorf("%v\n%s", err, out)
	}
}

func TestUnsupportedDType(t *testing.T) {
	dir, c := synthModel(t)
	// Rewrite the checkpoint with one norm stored as F16.
	var entries []safetensors.Entry
	for _, s := range c.Tensors() {
		dt := safetensors.BF16
		if s.Name == "model.norm.weight" {
			dt = safetensors.F16
		}
		e := safetensors.Entry{Name: s.Name, DType: dt, Shape: s.Shape}
		e.Data = make([]byte, e.NumBytes())
		entries = append(entries, e)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, safetensors.SingleName), entries, nil); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, Options{ModelPath: dir})
	if exitCode(err) != 1 || !strings.Contains(out, "model.norm.weight: dtype F16 is not supported") {
		t.Errorf("exit %d\n%s", exitCode(err), out)
	}
}

func TestCorruptedCheckpoint(t *testing.T) {
	src := sharedtest.Path(t, "models", "tiny-qwen3-a")
	orig, err := os.ReadFile(filepath.Join(src, safetensors.SingleName))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		corrupt func([]byte) []byte
		want    string
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }, "truncated file"},
		{"bad header length", func(b []byte) []byte { b[7] = 0x7f; return b }, "header length"},
		{"bad json", func(b []byte) []byte { copy(b[8:], `{"x"`); return b }, "header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, safetensors.SingleName)
			if err := os.WriteFile(p, tc.corrupt(append([]byte(nil), orig...)), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := run(t, Options{ModelPath: dir})
			if err == nil || exitCode(err) == 0 || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %s and %q", err, p, tc.want)
			}
		})
	}
}

func TestNoConfig(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "w.safetensors")
	if err := safetensors.WriteFile(p, []safetensors.Entry{{Name: "x", DType: safetensors.I8, Shape: []int{3}, Data: []byte{1, 2, 3}}}, nil); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, Options{ModelPath: p})
	if err != nil || !strings.Contains(out, "architecture check is skipped") || !strings.Contains(out, "│ other") {
		t.Errorf("%v\n%s", err, out)
	}
	if _, err := run(t, Options{}); err == nil {
		t.Error("missing --model-path accepted")
	}
}

func TestNewCmdFlags(t *testing.T) {
	var got *Options
	cmd := NewCmdInspectWeights(&cmdutil.Factory{}, func(o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"--model-path", "m", "--filter", "q_proj", "--json"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.ModelPath != "m" || got.Filter != "q_proj" || !got.JSON {
		t.Errorf("options %+v", got)
	}
}
