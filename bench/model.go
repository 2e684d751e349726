package bench

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/synth"
)

// ModelSource says what to benchmark: a checkpoint directory, or a preset
// shape instantiated with synthetic weights (so real shapes run with no download).
type ModelSource struct {
	Path   string // checkpoint directory; wins over Preset
	Preset string // a name from configs/presets
	Layers int    // with Preset: keep only the first Layers layers (0 = all)
	Seed   uint64
}

// Config is the shape Resolve serves, known without generating anything:
// what the fit check sizes before weights are written or loaded.
func (s ModelSource) Config() (cfg *modelcfg.Config, fullLayers int, err error) {
	switch {
	case s.Path != "":
		cfg, err = modelcfg.Load(s.Path)
		return cfg, 0, err
	case s.Preset == "":
		return synth.DefaultConfig(), 0, nil
	}
	if cfg, err = modelcfg.Preset(s.Preset); err != nil {
		return nil, 0, err
	}
	if s.Layers > 0 && s.Layers < cfg.NumHiddenLayers {
		fullLayers = cfg.NumHiddenLayers
		if cfg, err = cfg.Truncate(s.Layers); err != nil {
			return nil, 0, err
		}
	}
	return cfg, fullLayers, nil
}

// Resolve returns the model directory to load and its description. Synthetic
// preset models are generated once into the user cache directory.
func (s ModelSource) Resolve() (string, *Model, error) {
	if s.Path != "" {
		cfg, err := modelcfg.Load(s.Path)
		if err != nil {
			return "", nil, err
		}
		return s.Path, describe(filepath.Base(s.Path), s.Path, cfg, 0), nil
	}
	if s.Preset == "" {
		dir, err := synth.DefaultModel()
		if err != nil {
			return "", nil, err
		}
		cfg, err := modelcfg.Load(dir)
		if err != nil {
			return "", nil, err
		}
		return dir, describe("ellm-synthetic-default", "builtin", cfg, 0), nil
	}
	cfg, full, err := s.Config()
	if err != nil {
		return "", nil, err
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(append(raw, fmt.Sprint(s.Seed)...))
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", nil, fmt.Errorf("synthetic %s: %w", s.Preset, err)
	}
	dir := filepath.Join(cache, "ellm", "bench", s.Preset+"-"+hex.EncodeToString(sum[:6]))
	if _, err := os.Stat(dir); err != nil {
		// Generate beside the final name and rename, so that an interrupted
		// run never leaves a half-written model to be reused.
		tmp := fmt.Sprintf("%s.tmp-%d", dir, os.Getpid())
		_ = os.RemoveAll(tmp)
		opts := synth.Options{Seed: s.Seed, Tokenizer: synth.TokenizerBytes, Name: s.Preset + " (synthetic)"}
		if err := synth.Generate(cfg, tmp, opts); err != nil {
			_ = os.RemoveAll(tmp)
			return "", nil, fmt.Errorf("synthetic %s: %w", s.Preset, err)
		}
		if err := os.Rename(tmp, dir); err != nil {
			_ = os.RemoveAll(tmp)
			return "", nil, fmt.Errorf("synthetic %s: %w", s.Preset, err)
		}
	}
	return dir, describe(s.Preset, "preset", cfg, full), nil
}

// Scale is the factor from the measured (possibly truncated) model to the full one.
func (m *Model) Scale() float64 {
	if m.FullLayers > 0 {
		return float64(m.FullLayers) / float64(m.Layers)
	}
	return 1
}

func describe(name, source string, cfg *modelcfg.Config, fullLayers int) *Model {
	return &Model{Name: name, Source: source, Layers: cfg.NumHiddenLayers, FullLayers: fullLayers,
		Hidden: cfg.HiddenSize, Params: cfg.NumParams(), Config: cfg}
}
