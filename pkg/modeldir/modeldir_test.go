package modeldir

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/pkg/hfdir"
	"github.com/ellm-dev/ellm/pkg/model"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

func TestOpen(t *testing.T) {
	dir := sharedtest.Path(t, "models", "tiny-qwen3-a")
	m, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Template == nil || m.NoTemplate != nil {
		t.Fatalf("template %v: %v", m.Template, m.NoTemplate)
	}
	// generation_config's eos ids, then config.json's not already there.
	if im, eot := m.Tokenizer.Encode("<|im_end|>"), m.Tokenizer.Encode("<|endoftext|>"); !slices.Equal(m.EOS, []int32{im[0], eot[0]}) {
		t.Errorf("EOS = %v, want <|im_end|> %v then <|endoftext|> %v", m.EOS, im, eot)
	}
	if m.Generation.Temperature == nil || *m.Generation.Temperature != 0.6 || m.Generation.TopK == nil || *m.Generation.TopK != 20 {
		t.Errorf("generation config %+v", m.Generation)
	}
	if m.Synthetic != m.Config.EllmSynthetic || len(m.Identity) != 32 {
		t.Errorf("synthetic %v identity %q", m.Synthetic, m.Identity)
	}
	again, err := Open(dir)
	if err != nil || again.Identity != m.Identity {
		t.Errorf("identity %q then %q (%v): want it stable", m.Identity, again.Identity, err)
	}
	w, err := m.LoadWeights(model.LoadOptions{DType: "bf16"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Config != m.Config {
		t.Error("the weights were bound to another config than the directory's")
	}
}

// copyDir copies the small files of the tiny model into a temp directory,
// with tokenizer_config.json replaced.
func copyDir(t *testing.T, tokenizerConfig string) string {
	t.Helper()
	src, dst := sharedtest.Path(t, "models", "tiny-qwen3-a"), t.TempDir()
	for _, name := range []string{"config.json", "generation_config.json", "tokenizer.json"} {
		b, err := hfdir.ReadFile(src, name) // tokenizer.json is a link file
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dst, "tokenizer_config.json"), []byte(tokenizerConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// A broken chat template leaves a model usable for raw prompts, and says
// why; the tokenizer reads the same tokenizer_config.json.
func TestOpenWithoutTemplate(t *testing.T) {
	for _, tc := range []struct{ config, why string }{
		{`{"eos_token": "<|im_end|>"}`, "neither chat_template.jinja nor"},
		{`{"eos_token": "<|im_end|>", "chat_template": 3}`, "chat_template"},
	} {
		m, err := Open(copyDir(t, tc.config))
		if err != nil {
			t.Fatalf("%s: %v", tc.config, err)
		}
		if m.Template != nil || m.NoTemplate == nil || !strings.Contains(m.NoTemplate.Error(), tc.why) {
			t.Errorf("%s: template %v, NoTemplate %v", tc.config, m.Template, m.NoTemplate)
		}
		if m.Tokenizer.Special().EOS != "<|im_end|>" {
			t.Errorf("%s: tokenizer special tokens %+v", tc.config, m.Tokenizer.Special())
		}
	}
	if _, err := Open(copyDir(t, `{"eos_token": "<nope>"}`)); err == nil {
		t.Error("a special token outside the vocabulary: want an error")
	}
}
