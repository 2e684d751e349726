// Package configs embeds the files that ship inside the ellm binary: the model
// shape presets (config.json of each published Qwen3 model, for synthetic
// weights and sizing) and the annotated example configuration.
package configs

import "embed"

// Presets holds presets/<name>.json, one Hugging Face config.json per model shape.
//
//go:embed presets/*.json
var Presets embed.FS

// Example is the annotated example configuration file (ellm.example.yaml).
//
//go:embed ellm.example.yaml
var Example string
