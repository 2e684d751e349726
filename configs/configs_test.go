package configs

import (
	"io/fs"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestPresetsEmbedded(t *testing.T) {
	names, err := fs.Glob(Presets, "presets/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 9 {
		t.Fatalf("embedded %d presets, want at least 9: %v", len(names), names)
	}
}

func TestExampleParses(t *testing.T) {
	var m map[string]any
	if err := yaml.Unmarshal([]byte(Example), &m); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"model-path", "threads", "dtype", "kv-dtype", "sequence-length", "batch-size", "chunk-size"} {
		if _, ok := m[key]; !ok {
			t.Errorf("example config lacks top-level key %q", key)
		}
	}
	serve, ok := m["serve"].(map[string]any)
	if !ok {
		t.Fatal("example config lacks the serve: section")
	}
	for _, key := range []string{"host", "port", "api-key", "served-model-name", "max-queue", "queue-timeout", "session-store", "session-store-max-bytes", "session-ttl"} {
		if _, ok := serve[key]; !ok {
			t.Errorf("serve: section lacks %q", key)
		}
	}
	if !strings.Contains(Example, "ELLM_") {
		t.Error("example config does not explain the environment variables")
	}
}
