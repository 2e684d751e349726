// Package synth instantiates any Qwen3 / Qwen3-MoE config with deterministic
// random weights and writes it as a Hugging Face model directory, and provides
// the small built-in model ellm uses when no --model-path is given.
//
// The weights are random but scaled so the model behaves like a trained one
// numerically: linear layers keep activations near unit scale (std ∝ 1/√fan-in),
// norm weights are ≈ 1 with a little noise, the router's logits are spread out
// so that top-k routing is decisive, and the output logits have a standard
// deviation of a few units so they are not flat. That makes speed benchmarks
// and numerical tests meaningful without downloading a model.
package synth

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/safetensors"
)

// Options control Generate.
type Options struct {
	// Seed makes the weights reproducible: the same config and seed give the
	// same bytes, whatever the machine or thread count.
	Seed uint64
	// Tokenizer chooses the tokenizer files written beside the weights:
	// TokenizerNone, TokenizerBytes (the built-in byte-level tokenizer, which
	// needs vocab_size >= ByteVocabSize) or a directory whose tokenizer.json,
	// tokenizer_config.json, vocab.json, merges.txt and chat_template.jinja
	// (those present) are copied.
	Tokenizer string
	// ShardBytes > 0 splits the weights into shards of at most this many bytes
	// with a model.safetensors.index.json.
	ShardBytes int64
	// Name is written as ellm_name in config.json (default: the config's name).
	Name string
	// Init sets the weight scales (nil = DefaultInit).
	Init *Init
}

// Tokenizer choices besides a directory path.
const (
	TokenizerNone  = ""
	TokenizerBytes = "bytes"
)

// Init controls the random weights.
type Init struct {
	Gain        float64 // linear weights: std = Gain / √fan_in
	RouterGain  float64 // router (mlp.gate) weights: std = RouterGain / √hidden
	LogitStd    float64 // embeddings and lm_head: std = LogitStd / √hidden (logit spread for unit-RMS input)
	NormNoise   float64 // norm weights: 1 + uniform noise of this std
	OutputScale float64 // o_proj and down_proj are further scaled by OutputScale / √(2·layers) to keep the residual stream bounded
	// Prior, if set (one value per vocabulary id), is a unigram prior added
	// to the logits: every embedding carries a constant in hidden channel 0,
	// which survives the residual stream and the final norm as a roughly
	// constant positive value, and lm_head's column 0 turns it into
	// Prior[v] for token v. Random weights then produce text-like output
	// that ends, rather than arbitrary bytes. Needs untied embeddings.
	Prior []float32
}

// priorEmbed is the constant every embedding carries in the prior channel.
const priorEmbed = 1.0

// priorNormalized estimates the prior channel's value after the final
// RMSNorm, assuming the residual stream is still mostly the token's embedding
// (true when OutputScale is small): priorEmbed over the embedding row's RMS.
func priorNormalized(hidden int, in Init) float32 {
	h := float64(hidden)
	sigma := in.LogitStd / math.Sqrt(h)
	return float32(priorEmbed / math.Sqrt((priorEmbed*priorEmbed+float64((h-1)*sigma*sigma))/h))
}

// DefaultInit is what Generate uses when Options.Init is nil.
var DefaultInit = Init{Gain: 1.0, RouterGain: 2.0, LogitStd: 3.0, NormNoise: 0.1, OutputScale: 1.0}

// Generate writes cfg with random bf16 weights into dir (created if needed):
// config.json, generation_config.json, the safetensors weights and the
// tokenizer files Options.Tokenizer asks for.
func Generate(cfg *modelcfg.Config, dir string, opts Options) error {
	cfg = cfg.Clone()
	cfg.EllmSynthetic = true
	if opts.Name != "" {
		cfg.EllmName = opts.Name
	}
	if cfg.EllmName == "" {
		cfg.EllmName = cfg.Name()
	}
	cfg.TorchDType = "bfloat16"
	if opts.Tokenizer == TokenizerBytes {
		if cfg.VocabSize < ByteVocabSize {
			return fmt.Errorf("synth: the byte tokenizer needs vocab_size >= %d, config has %d", ByteVocabSize, cfg.VocabSize)
		}
		cfg.EOSTokenID = modelcfg.TokenIDs{byteTokenID("<|im_end|>")}
		bos := byteTokenID("<|endoftext|>")
		cfg.BOSTokenID = &bos
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	in := DefaultInit
	if opts.Init != nil {
		in = *opts.Init
	}
	if in.Prior != nil && (len(in.Prior) != cfg.VocabSize || cfg.TieWordEmbeddings) {
		return fmt.Errorf("synth: a logit prior needs untied embeddings and %d values, got tie_word_embeddings=%v and %d values",
			cfg.VocabSize, cfg.TieWordEmbeddings, len(in.Prior))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, "config.json"), cfg); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, "generation_config.json"), generationConfig(cfg)); err != nil {
		return err
	}
	switch opts.Tokenizer {
	case TokenizerNone:
	case TokenizerBytes:
		if err := WriteByteTokenizer(dir); err != nil {
			return err
		}
	default:
		if err := copyTokenizer(opts.Tokenizer, dir); err != nil {
			return err
		}
	}
	entries := Entries(cfg, opts.Seed, in)
	meta := map[string]string{"format": "pt", "ellm_synthetic": "true", "ellm_seed": strconv.FormatUint(opts.Seed, 10)}
	if _, err := safetensors.WriteSharded(dir, entries, opts.ShardBytes, meta); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}

// generationConfig mirrors Qwen3's sampling defaults; the eos list adds
// <|endoftext|> to config.json's <|im_end|> as Qwen3's generation_config does.
func generationConfig(cfg *modelcfg.Config) *modelcfg.GenerationConfig {
	temp, topP, topK := 0.6, 0.95, 20
	doSample := true
	g := &modelcfg.GenerationConfig{DoSample: &doSample, Temperature: &temp, TopP: &topP, TopK: &topK}
	g.EOSTokenID = append(modelcfg.TokenIDs(nil), cfg.EOSTokenID...)
	if cfg.BOSTokenID != nil {
		g.BOSTokenID = cfg.BOSTokenID
		g.PadTokenID = cfg.BOSTokenID
		if !containsInt(g.EOSTokenID, *cfg.BOSTokenID) {
			g.EOSTokenID = append(g.EOSTokenID, *cfg.BOSTokenID)
		}
	}
	return g
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func writeJSON(path string, v any) error {
	b, err := marshalJSON(v)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return writeFile(path, b)
}

// marshalJSON indents like Hugging Face files and keeps "<" and ">" readable
// in token strings instead of escaping them as \u003c.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeFile(path string, b []byte) error {
	return os.WriteFile(path, b, 0o644)
}

func copyTokenizer(src, dst string) error {
	copied := 0
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "chat_template.jinja"} {
		in, err := os.Open(filepath.Join(src, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return err
		}
		err = func() error {
			defer in.Close()
			out, err := os.Create(filepath.Join(dst, name))
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, in); err != nil {
				out.Close()
				return err
			}
			return out.Close()
		}()
		if err != nil {
			return fmt.Errorf("copy tokenizer %s: %w", name, err)
		}
		copied++
	}
	if copied == 0 {
		return fmt.Errorf("synth: tokenizer directory %s has no tokenizer files", src)
	}
	return nil
}

// Entries returns the checkpoint's tensors, each filled on demand so a large
// model is produced one tensor at a time.
func Entries(cfg *modelcfg.Config, seed uint64, in Init) []safetensors.Entry {
	h := float64(cfg.HiddenSize)
	outScale := in.OutputScale / math.Sqrt(2*float64(cfg.NumHiddenLayers))
	var entries []safetensors.Entry
	for _, spec := range cfg.Tensors() {
		var center, std float64
		fanIn := float64(spec.Shape[len(spec.Shape)-1])
		switch spec.Kind {
		case modelcfg.KindNorm:
			center, std = 1, in.NormNoise
		case modelcfg.KindEmbedding, modelcfg.KindLMHead:
			std = in.LogitStd / math.Sqrt(h)
		case modelcfg.KindRouter:
			std = in.RouterGain / math.Sqrt(h)
		default:
			std = in.Gain / math.Sqrt(fanIn)
			if isOutputProj(spec.Name) {
				std *= outScale
			}
		}
		if len(spec.Shape) == 1 && spec.Kind == modelcfg.KindAttention { // biases
			center, std = 0, 0.02
		}
		stream := seed ^ nameHash(spec.Name)
		kind := spec.Kind
		entries = append(entries, safetensors.Entry{
			Name: spec.Name, DType: safetensors.BF16, Shape: spec.Shape,
			Fill: func(dst []byte) error {
				fillBF16(dst, stream, float32(center), float32(std))
				if in.Prior != nil {
					applyPrior(dst, kind, cfg.HiddenSize, in.Prior, priorNormalized(cfg.HiddenSize, in))
				}
				return nil
			},
		})
	}
	return entries
}

// applyPrior writes the prior channel (see Init.Prior) into a filled
// embedding or lm_head matrix [vocab, hidden].
func applyPrior(dst []byte, kind modelcfg.Kind, hidden int, prior []float32, normalized float32) {
	for v, p := range prior {
		off := 2 * v * hidden
		switch kind {
		case modelcfg.KindEmbedding:
			binary.LittleEndian.PutUint16(dst[off:], toBF16(priorEmbed))
		case modelcfg.KindLMHead:
			binary.LittleEndian.PutUint16(dst[off:], toBF16(p/normalized))
		}
	}
}

func isOutputProj(name string) bool {
	return strings.HasSuffix(name, ".o_proj.weight") || strings.HasSuffix(name, ".down_proj.weight")
}

func nameHash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// chunk is the unit of parallel work; each chunk has its own PRNG stream
// derived from its index, so output does not depend on the thread count.
const chunk = 1 << 16

// fillBF16 fills dst (bf16 little-endian) with center + uniform noise of
// standard deviation std. Uniform rather than Gaussian: it is several times
// cheaper and only the scale matters for the activations.
func fillBF16(dst []byte, stream uint64, center, std float32) {
	n := len(dst) / 2
	chunks := (n + chunk - 1) / chunk
	workers := min(runtime.GOMAXPROCS(0), chunks)
	var wg sync.WaitGroup
	var next sync.Mutex
	c := 0
	half := std * float32(math.Sqrt(3)) // uniform on [-a, a] has std a/√3
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				i := c
				c++
				next.Unlock()
				if i >= chunks {
					return
				}
				lo, hi := i*chunk, min((i+1)*chunk, n)
				s := splitmix{state: stream ^ (uint64(i)+1)*0x9E3779B97F4A7C15}
				// Two 24-bit uniforms per 64-bit draw, stored as one 32-bit word.
				j := lo
				for ; j+1 < hi; j += 2 {
					r := s.next()
					u0 := float32(uint32(r)>>8)*(2.0/(1<<24)) - 1
					u1 := float32(r>>40)*(2.0/(1<<24)) - 1
					binary.LittleEndian.PutUint32(dst[2*j:], uint32(toBF16(center+float32(half*u0)))|uint32(toBF16(center+float32(half*u1)))<<16)
				}
				if j < hi {
					u0 := float32(uint32(s.next())>>8)*(2.0/(1<<24)) - 1
					binary.LittleEndian.PutUint16(dst[2*j:], toBF16(center+float32(half*u0)))
				}
			}
		}()
	}
	wg.Wait()
}

type splitmix struct{ state uint64 }

func (s *splitmix) next() uint64 {
	s.state += 0x9E3779B97F4A7C15
	z := s.state
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// toBF16 rounds to nearest even (the values are finite by construction).
func toBF16(f float32) uint16 {
	b := math.Float32bits(f)
	return uint16((b + 0x7FFF + (b>>16)&1) >> 16)
}
