package synth

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/pkg/chat"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/safetensors"
	"github.com/ellm-dev/ellm/pkg/tokenizer"
)

func tinyMoE(t *testing.T) *modelcfg.Config {
	t.Helper()
	c, err := modelcfg.Preset("qwen3-30b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	c.VocabSize, c.HiddenSize, c.NumHiddenLayers = 512, 64, 3
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim = 4, 2, 16
	c.IntermediateSize, c.MoEIntermediateSize, c.NumExperts, c.NumExpertsPerTok = 96, 32, 4, 2
	c.MLPOnlyLayers = []int{1}
	c.EOSTokenID = modelcfg.TokenIDs{2}
	return c
}

func bf16ToF32(u uint16) float64 { return float64(math.Float32frombits(uint32(u) << 16)) }

func stats(t *testing.T, tn *safetensors.Tensor) (mean, std float64) {
	t.Helper()
	v, err := tn.BF16()
	if err != nil {
		t.Fatal(err)
	}
	var s, s2 float64
	for _, u := range v {
		x := bf16ToF32(u)
		s += x
		s2 += x * x
	}
	n := float64(len(v))
	mean = s / n
	return mean, math.Sqrt(s2/n - mean*mean)
}

// The writer, the reader and the architecture's tensor list agree.
func TestGenerateRoundTrip(t *testing.T) {
	cfg := tinyMoE(t)
	dir := t.TempDir()
	if err := Generate(cfg, dir, Options{Seed: 7, ShardBytes: 200_000}); err != nil {
		t.Fatal(err)
	}
	got, err := modelcfg.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !got.EllmSynthetic || got.EllmName != "Qwen3-30B-A3B" || got.NumHiddenLayers != 3 {
		t.Errorf("config.json: synthetic %v name %q layers %d", got.EllmSynthetic, got.EllmName, got.NumHiddenLayers)
	}
	if _, err := os.Stat(filepath.Join(dir, safetensors.IndexName)); err != nil {
		t.Errorf("ShardBytes did not shard: %v", err)
	}
	ck, err := safetensors.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if len(ck.Files()) < 2 {
		t.Errorf("%d shards, want several", len(ck.Files()))
	}
	specs := got.Tensors()
	if len(specs) != len(ck.Names()) {
		t.Errorf("%d tensors written, architecture needs %d", len(ck.Names()), len(specs))
	}
	for _, s := range specs {
		tn, ok := ck.Tensor(s.Name)
		if !ok {
			t.Errorf("missing %s", s.Name)
			continue
		}
		if tn.DType != safetensors.BF16 || len(tn.Shape) != len(s.Shape) || tn.NumElements() != s.NumElements() {
			t.Errorf("%s: %s %v, want BF16 %v", s.Name, tn.DType, tn.Shape, s.Shape)
		}
	}

	// Scales: linear std 1/√fan_in, norms ≈ 1, router spread 2/√hidden, logits std 3/√hidden.
	for _, tc := range []struct {
		name      string
		mean, std float64
		meanTol   float64
		stdRelTol float64
	}{
		{"model.layers.0.self_attn.q_proj.weight", 0, 1 / math.Sqrt(64), 0.01, 0.05},
		{"model.layers.1.mlp.up_proj.weight", 0, 1 / math.Sqrt(64), 0.01, 0.05},
		{"model.layers.0.mlp.experts.3.down_proj.weight", 0, 1 / math.Sqrt(32) / math.Sqrt(6), 0.01, 0.05},
		{"model.layers.2.mlp.gate.weight", 0, 2 / math.Sqrt(64), 0.05, 0.15},
		{"model.embed_tokens.weight", 0, 3 / math.Sqrt(64), 0.01, 0.05},
		{"lm_head.weight", 0, 3 / math.Sqrt(64), 0.01, 0.05},
		{"model.norm.weight", 1, 0.1, 0.05, 0.3},
	} {
		tn, _ := ck.Tensor(tc.name)
		mean, std := stats(t, tn)
		if math.Abs(mean-tc.mean) > tc.meanTol || math.Abs(std-tc.std) > tc.stdRelTol*tc.std {
			t.Errorf("%s: mean %.4f std %.4f, want %.4f ± %.2f and %.4f ± %.0f%%", tc.name, mean, std, tc.mean, tc.meanTol, tc.std, 100*tc.stdRelTol)
		}
	}
}

func TestGenerateDeterministic(t *testing.T) {
	cfg := tinyMoE(t)
	read := func(seed uint64) []byte {
		dir := t.TempDir()
		if err := Generate(cfg, dir, Options{Seed: seed}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, safetensors.SingleName))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b, c := read(1), read(1), read(2)
	if !bytes.Equal(a, b) {
		t.Error("same seed, different weights")
	}
	// Tensors of the same shape get independent streams.
	entries := Entries(cfg, 1, DefaultInit)
	k, v := entries[3], entries[4]
	if !strings.HasSuffix(k.Name, "k_proj.weight") || !strings.HasSuffix(v.Name, "v_proj.weight") {
		t.Fatalf("entries 3, 4 are %s, %s", k.Name, v.Name)
	}
	kb, vb := make([]byte, k.NumBytes()), make([]byte, v.NumBytes())
	k.Fill(kb)
	v.Fill(vb)
	if bytes.Equal(kb, vb) {
		t.Error("k_proj and v_proj have identical weights")
	}
	if bytes.Equal(a, c) {
		t.Error("different seeds, same weights")
	}
}

func TestGenerateRejects(t *testing.T) {
	cfg := tinyMoE(t)
	cfg.NumExpertsPerTok = 9
	if err := Generate(cfg, t.TempDir(), Options{}); err == nil || !strings.Contains(err.Error(), "num_experts_per_tok = 9") {
		t.Errorf("invalid config: %v", err)
	}
	cfg = tinyMoE(t)
	cfg.VocabSize = 100
	cfg.EOSTokenID = nil
	if err := Generate(cfg, t.TempDir(), Options{Tokenizer: TokenizerBytes}); err == nil || !strings.Contains(err.Error(), "vocab_size >= 288") {
		t.Errorf("small vocab with byte tokenizer: %v", err)
	}
	tied := DefaultConfig()
	tied.TieWordEmbeddings = true
	in := defaultInit()
	if err := Generate(tied, t.TempDir(), Options{Init: &in}); err == nil || !strings.Contains(err.Error(), "untied embeddings") {
		t.Errorf("prior with tied embeddings: %v", err)
	}
	if err := Generate(tinyMoE(t), t.TempDir(), Options{Tokenizer: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "no tokenizer files") {
		t.Errorf("empty tokenizer dir: %v", err)
	}
}

func TestByteTokenizer(t *testing.T) {
	b, err := ByteTokenizerJSON()
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AddedTokens []addedToken `json:"added_tokens"`
		Model       struct {
			Type   string         `json:"type"`
			Vocab  map[string]int `json:"vocab"`
			Merges []string       `json:"merges"`
		} `json:"model"`
		Decoder struct{ Type string } `json:"decoder"`
	}
	if err := json.Unmarshal(b, &tok); err != nil {
		t.Fatal(err)
	}
	if tok.Model.Type != "BPE" || len(tok.Model.Vocab) != 256 || len(tok.Model.Merges) != 0 || tok.Decoder.Type != "ByteLevel" {
		t.Fatalf("model %s with %d vocab, %d merges, decoder %s", tok.Model.Type, len(tok.Model.Vocab), len(tok.Model.Merges), tok.Decoder.Type)
	}
	// GPT-2's alphabet: 'A' is itself, space is Ġ (U+0120), newline Ċ (U+010A).
	for sym, id := range map[string]int{"A": 'A', "Ġ": ' ', "Ċ": '\n', "ÿ": 0xFF, "Ā": 0} {
		if tok.Model.Vocab[sym] != id {
			t.Errorf("vocab[%q] = %d, want %d", sym, tok.Model.Vocab[sym], id)
		}
	}
	ids := map[string]int{}
	for _, a := range tok.AddedTokens {
		ids[a.Content] = a.ID
	}
	for content, want := range map[string]int{"<|endoftext|>": 256, "<|im_start|>": 257, "<|im_end|>": 258, "<tool_call>": 270, "<think>": 280, "</think>": 281, "<|reserved_5|>": 287} {
		if ids[content] != want {
			t.Errorf("%s has id %d, want %d", content, ids[content], want)
		}
	}
	if len(tok.AddedTokens) != ByteVocabSize-256 {
		t.Errorf("%d added tokens, want %d", len(tok.AddedTokens), ByteVocabSize-256)
	}
	if bytes.Contains(b, []byte(`\u003c`)) {
		t.Error("tokenizer.json escapes < as \\u003c")
	}
}

func render(t *testing.T, tmpl *chat.Template, messages, tools, kwargs string) string {
	t.Helper()
	in := chat.Input{Messages: json.RawMessage(messages), AddGenerationPrompt: true}
	if tools != "" {
		in.Tools = json.RawMessage(tools)
	}
	if kwargs != "" {
		in.Kwargs = json.RawMessage(kwargs)
	}
	out, err := tmpl.Render(in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestChatTemplate(t *testing.T) {
	tmpl, err := chat.New(ChatTemplate(), chat.SpecialTokens{EOS: "<|im_end|>", PAD: "<|endoftext|>"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, messages, tools, kwargs, want string
	}{
		{"plain", `[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]`, "", "",
			"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		{"no thinking", `[{"role":"user","content":"Hi"}]`, "", `{"enable_thinking":false}`,
			"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{"thinking on", `[{"role":"user","content":"Hi"}]`, "", `{"enable_thinking":true}`,
			"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		{"parts", `[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}]}]`, "", "",
			"<|im_start|>user\nab<|im_end|>\n<|im_start|>assistant\n"},
		{"tools", `[{"role":"user","content":"Weather?"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"get","arguments":{"city":"Oslo","n":1}}},{"type":"function","function":{"name":"get","arguments":"{\"city\": \"Rome\"}"}}]},` +
			`{"role":"tool","content":"-3C"},{"role":"tool","content":"20C"},{"role":"assistant","reasoning_content":"done","content":"Cold and warm."}]`,
			`[{"type":"function","function":{"name":"get","parameters":{"type":"object"}}}]`, "",
			"<|im_start|>system\n# Tools\n\nYou can call the functions described below. Each definition is one JSON object inside <tools></tools>:\n<tools>\n" +
				`{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}` +
				"\n</tools>\n\nTo call a function, answer with a JSON object holding its name and arguments between <tool_call> and </tool_call>, one per call:\n<tool_call>\n{\"name\": \"function_name\", \"arguments\": {\"argument\": \"value\"}}\n</tool_call><|im_end|>\n" +
				"<|im_start|>user\nWeather?<|im_end|>\n" +
				"<|im_start|>assistant\n<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\": \"Oslo\", \"n\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call><|im_end|>\n" +
				"<|im_start|>user\n<tool_response>\n-3C\n</tool_response>\n<tool_response>\n20C\n</tool_response><|im_end|>\n" +
				"<|im_start|>assistant\n<think>\ndone\n</think>\n\nCold and warm.<|im_end|>\n<|im_start|>assistant\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := render(t, tmpl, tc.messages, tc.tools, tc.kwargs); got != tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
	if _, err := tmpl.Render(chat.Input{Messages: json.RawMessage(`[{"role":"robot","content":"x"}]`)}); err == nil {
		t.Error("unknown role rendered without error")
	}
	if f := tmpl.ToolCallFormat(); f.String() == "" {
		t.Error("no tool call format")
	}
}

func TestDefaultModel(t *testing.T) {
	parent := t.TempDir()
	dir, err := defaultModelIn(parent)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(dir), "default-model-") {
		t.Errorf("default model at %s", dir)
	}
	cfg, err := modelcfg.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.EllmSynthetic || cfg.EllmName != DefaultName || cfg.VocabSize != ByteVocabSize {
		t.Errorf("config: synthetic %v name %q vocab %d", cfg.EllmSynthetic, cfg.EllmName, cfg.VocabSize)
	}
	gen, err := modelcfg.LoadGeneration(dir)
	if err != nil {
		t.Fatal(err)
	}
	if eos := modelcfg.EOSTokens(cfg, gen); len(eos) != 2 || eos[0] != 258 || eos[1] != 256 {
		t.Errorf("eos tokens %v, want [258 256] (<|im_end|>, <|endoftext|>)", eos)
	}
	var size int64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		info, _ := e.Info()
		size += info.Size()
	}
	if size > 50<<20 {
		t.Errorf("default model is %d bytes, want < 50 MB", size)
	}
	if _, err := chat.Load(dir); err != nil {
		t.Errorf("chat template of the default model: %v", err)
	}
	// Reused, not regenerated: the weights keep their modification time.
	st1, _ := os.Stat(filepath.Join(dir, safetensors.SingleName))
	dir2, err := defaultModelIn(parent)
	if err != nil || dir2 != dir {
		t.Fatalf("second call: %s, %v", dir2, err)
	}
	st2, _ := os.Stat(filepath.Join(dir, safetensors.SingleName))
	if !st1.ModTime().Equal(st2.ModTime()) {
		t.Error("default model regenerated on the second call")
	}
	if left, _ := filepath.Glob(filepath.Join(parent, ".default-model-*")); len(left) != 0 {
		t.Errorf("temporary directories left behind: %v", left)
	}
}

// The default model's logits, estimated with the residual stream taken as
// the token's own embedding (its layers are scaled down to make that nearly
// true), follow the prior and still vary with the context.
func TestDefaultLogits(t *testing.T) {
	cfg := DefaultConfig()
	in := defaultInit()
	mats := map[string][]float64{}
	for _, e := range Entries(cfg, defaultSeed, in) {
		if e.Name != "model.embed_tokens.weight" && e.Name != "lm_head.weight" {
			continue
		}
		data := make([]byte, e.NumBytes())
		if err := e.Fill(data); err != nil {
			t.Fatal(err)
		}
		m := make([]float64, len(data)/2)
		for i := range m {
			m[i] = bf16ToF32(binary.LittleEndian.Uint16(data[2*i:]))
		}
		mats[e.Name] = m
	}
	h, vocab := cfg.HiddenSize, cfg.VocabSize
	emb, head := mats["model.embed_tokens.weight"], mats["lm_head.weight"]
	logits := func(tok int) []float64 {
		x := emb[tok*h : (tok+1)*h]
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		scale := 1 / math.Sqrt(ss/float64(h))
		out := make([]float64, vocab)
		for v := range out {
			for j := 0; j < h; j++ {
				out[v] += x[j] * scale * head[v*h+j]
			}
		}
		return out
	}
	mean := make([]float64, vocab)
	contexts := []int{'a', 'e', 't', ' ', 'H', '.', '\n', 258}
	for _, c := range contexts {
		l := logits(c)
		var s, s2 float64
		for v := 0; v < 256; v++ {
			d := l[v] - float64(in.Prior[v])
			s += d
			s2 += d * d
		}
		if std := math.Sqrt(s2/256 - (s/256)*(s/256)); std < 0.7 || std > 3 {
			t.Errorf("context %d: context-dependent logit std %.2f, want about 1.2", c, std)
		}
		for v := range l {
			mean[v] += l[v] / float64(len(contexts))
		}
	}
	for _, pair := range [][2]int{{' ', 'e'}, {'e', 'z'}, {'z', 0x80}, {258, 0x80}, {'e', 259}} {
		if mean[pair[0]] <= mean[pair[1]] {
			t.Errorf("mean logit of %d (%.2f) is not above %d (%.2f)", pair[0], mean[pair[0]], pair[1], mean[pair[1]])
		}
	}
	if math.Abs(mean[' ']-float64(in.Prior[' '])) > 2 {
		t.Errorf("mean logit of space %.2f, prior %.2f", mean[' '], in.Prior[' '])
	}
}

// BenchmarkGenerate measures writing a real-shape model (1.2 GB for 0.6B):
// go test ./pkg/synth -run - -bench Generate -benchtime 1x
func BenchmarkGenerate(b *testing.B) {
	cfg, err := modelcfg.Preset("qwen3-0.6b")
	if err != nil {
		b.Fatal(err)
	}
	bf16, _ := modelcfg.WeightBytes(cfg, "bf16")
	b.SetBytes(bf16)
	for i := 0; i < b.N; i++ {
		if err := Generate(cfg, b.TempDir(), Options{Seed: uint64(i)}); err != nil {
			b.Fatal(err)
		}
	}
}

// The byte tokenizer must load in ellm's own tokenizer and behave as bytes.
func TestByteTokenizerLoads(t *testing.T) {
	dir := t.TempDir()
	if err := WriteByteTokenizer(dir); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != ByteVocabSize {
		t.Errorf("VocabSize = %d, want %d", tok.VocabSize(), ByteVocabSize)
	}
	text := "Grüße, 世界!\n<|im_start|>user<think>"
	ids := tok.Encode(text)
	want := []int32{}
	for _, b := range []byte("Grüße, 世界!\n") {
		want = append(want, int32(b))
	}
	want = append(want, 257)
	for _, b := range []byte("user") {
		want = append(want, int32(b))
	}
	want = append(want, 280)
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Errorf("Encode(%q) = %v, want %v", text, ids, want)
	}
	if got := tok.Decode(ids); got != text {
		t.Errorf("Decode = %q, want %q", got, text)
	}
	if id, ok := tok.TokenID("<|im_end|>"); !ok || id != 258 || !tok.IsSpecial(id) {
		t.Errorf("<|im_end|> = %d, %v", id, ok)
	}
	if ord := tok.EncodeOrdinary("<|im_end|>"); len(ord) != len("<|im_end|>") {
		t.Errorf("EncodeOrdinary of special text = %v, want its bytes", ord)
	}
}

func BenchmarkFillBF16(b *testing.B) {
	dst := make([]byte, 2<<20)
	b.SetBytes(int64(len(dst)))
	for i := 0; i < b.N; i++ {
		fillBF16(dst, uint64(i), 0, 0.02)
	}
}

// Processes starting at once all get the same complete model.
func TestDefaultModelConcurrent(t *testing.T) {
	parent := t.TempDir()
	const n = 3
	dirs, errs := make([]string, n), make([]error, n)
	done := make(chan int)
	for i := 0; i < n; i++ {
		go func() {
			dirs[i], errs[i] = defaultModelIn(parent)
			done <- i
		}()
	}
	for i := 0; i < n; i++ {
		<-done
	}
	for i := 0; i < n; i++ {
		if errs[i] != nil || dirs[i] != dirs[0] {
			t.Fatalf("call %d: %s, %v (first: %s)", i, dirs[i], errs[i], dirs[0])
		}
	}
	ck, err := safetensors.Open(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	ck.Close()
	if left, _ := filepath.Glob(filepath.Join(parent, ".default-model-*")); len(left) != 0 {
		t.Errorf("temporary directories left behind: %v", left)
	}
}
