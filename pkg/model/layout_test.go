package model

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/kernels/threads"
	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/safetensors"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

// TestCheckpointLayouts rewrites the dense tiny model's checkpoint two ways
// that change how its fused weights are packed. With every bf16 tensor two
// bytes off a word boundary (a one-element tensor first, so that packing
// takes the element loop rather than word loads), a prompt's logits must be
// the original's bit for bit; with layer 0's k_proj stored as f32 (widened
// exactly), q/k/v must be packed as one f32 weight of the three in order.
func TestCheckpointLayouts(t *testing.T) {
	dir := sharedtest.Path(t, "models", "tiny-qwen3-a")
	cfg, err := modelcfg.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	ref := refTensors(t, "tiny-qwen3-a", "one_token")
	ids := i32(t, ref, "token_ids")
	logits := func(t *testing.T, m *Model) []float32 {
		r := newRunner(t, m, kvcache.F32, 1, 8, RunnerOptions{MaxTokens: 8})
		if err := r.Forward([]Segment{{Tokens: ids, Logits: LogitsLast}}); err != nil {
			t.Fatal(err)
		}
		return r.Logits(0)
	}
	want := logits(t, loadTiny(t, "tiny-qwen3-a", LoadOptions{}))

	// rewrite writes the checkpoint with extra tensors first and change
	// applied to each, and loads it.
	rewrite := func(t *testing.T, extra []safetensors.Entry, change func(name string, e *safetensors.Entry)) (*Model, string) {
		entries := extra
		for _, name := range ck.Names() {
			tn, _ := ck.Tensor(name)
			e := safetensors.Entry{Name: name, DType: tn.DType, Shape: tn.Shape, Data: tn.Bytes()}
			change(name, &e)
			entries = append(entries, e)
		}
		out := t.TempDir()
		if err := safetensors.WriteFile(filepath.Join(out, "model.safetensors"), entries, nil); err != nil {
			t.Fatal(err)
		}
		m, err := LoadWith(cfg, out, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m, out
	}

	t.Run("unaligned", func(t *testing.T) {
		pad := safetensors.Entry{Name: "a.pad", DType: safetensors.BF16, Shape: []int{1}, Data: make([]byte, 2)}
		m, out := rewrite(t, []safetensors.Entry{pad}, func(string, *safetensors.Entry) {})
		moved, err := safetensors.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer moved.Close()
		q, _ := moved.Tensor("model.layers.0.self_attn.q_proj.weight")
		if at := uintptr(unsafe.Pointer(unsafe.SliceData(q.Bytes()))); at%4 != 2 {
			t.Fatalf("q_proj at %#x: the pad did not move the tensors off word boundaries", at)
		}
		sameBits(t, "logits of the unaligned checkpoint", logits(t, m), want)
	})

	t.Run("f32 part", func(t *testing.T) {
		m, _ := rewrite(t, nil, func(name string, e *safetensors.Entry) {
			if name != "model.layers.0.self_attn.k_proj.weight" {
				return
			}
			f := make([]byte, 2*len(e.Data))
			for i := 0; i < len(e.Data); i += 2 {
				binary.LittleEndian.PutUint32(f[2*i:], uint32(binary.LittleEndian.Uint16(e.Data[i:]))<<16)
			}
			e.DType, e.Data = safetensors.F32, f
		})
		// The fused weight must be q, k and v widened, in that order: its
		// product equals that of the three packed as one f32 matrix here.
		var all []float32
		for _, part := range []string{"q_proj", "k_proj", "v_proj"} {
			tn, _ := ck.Tensor("model.layers.0.self_attn." + part + ".weight")
			bf, err := tn.BF16()
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bf {
				all = append(all, math.Float32frombits(uint32(b)<<16))
			}
		}
		w := m.layers[0].qkv
		pool := threads.New(1, false)
		defer pool.Close()
		c := gemm.NewContext(pool, 1, w.K)
		x := make([]float32, w.K)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		got, want := make([]float32, w.N), make([]float32, w.N)
		c.MatMul(got, x, 1, w)
		c.MatMul(want, x, 1, gemm.FromF32(all, w.N, w.K))
		sameBits(t, "layer 0's q/k/v product", got, want)
	})
}
