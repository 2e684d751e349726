package modelcfg

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/ellm-dev/ellm/configs"
)

// PresetNames lists the built-in model shapes (e.g. "qwen3-0.6b",
// "qwen3-30b-a3b"), sorted.
func PresetNames() []string {
	paths, _ := fs.Glob(configs.Presets, "presets/*.json")
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = strings.TrimSuffix(path.Base(p), ".json")
	}
	sort.Strings(names)
	return names
}

// Preset returns the config of a built-in model shape; name is matched
// case-insensitively ("Qwen3-30B-A3B" works).
func Preset(name string) (*Config, error) {
	key := strings.ToLower(strings.TrimSpace(name))
	b, err := configs.Presets.ReadFile("presets/" + key + ".json")
	if err != nil || strings.ContainsAny(key, "/\\") {
		return nil, fmt.Errorf("unknown preset %q (want one of %s)", name, strings.Join(PresetNames(), ", "))
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("preset %s: %w", key, err)
	}
	return c, nil
}
