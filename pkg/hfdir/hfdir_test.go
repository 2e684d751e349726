package hfdir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadFileFollowsLinkFiles(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "tok", "tokenizer.json"), `{"model": {}}`)
	write(t, filepath.Join(root, "model", "tokenizer.json"), "../tok/tokenizer.json\n")
	write(t, filepath.Join(root, "model", "chain.json"), "tokenizer.json")
	write(t, filepath.Join(root, "model", "plain.json"), `{"a": 1}`)
	write(t, filepath.Join(root, "model", "word.txt"), "hello")
	write(t, filepath.Join(root, "model", "loop"), "loop")

	for _, tc := range []struct{ name, want string }{
		{"tokenizer.json", `{"model": {}}`},
		{"chain.json", `{"model": {}}`},
		{"plain.json", `{"a": 1}`},
		{"word.txt", "hello"}, // looks like a path, but nothing is there
	} {
		got, err := ReadFile(filepath.Join(root, "model"), tc.name)
		if err != nil || string(got) != tc.want {
			t.Errorf("ReadFile(%s) = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := ReadFile(filepath.Join(root, "model"), "loop"); err == nil {
		t.Error("a link file pointing at itself must fail, not spin")
	}
	if _, err := ReadFile(root, "missing.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
}

func TestReadFileOnSharedModels(t *testing.T) {
	dir := sharedtest.Path(t, "models", "tiny-qwen3-a")
	b, err := ReadFile(dir, "tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 1<<20 || b[0] != '{' {
		t.Errorf("tokenizer.json of the tiny model: %d bytes starting %q, want the real tokenizer", len(b), b[:min(len(b), 20)])
	}
}
