package kvcache

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

func testConfig(t *testing.T) *modelcfg.Config {
	t.Helper()
	c, err := modelcfg.Parse([]byte(`{"architectures":["Qwen3ForCausalLM"],"vocab_size":32,"hidden_size":16,
		"intermediate_size":32,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":4}`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func fill(c *Cache, slot, n int, seed float32) {
	k := make([]float32, c.KVHeads*c.HeadDim)
	v := make([]float32, len(k))
	for l := 0; l < c.Layers; l++ {
		for p := 0; p < n; p++ {
			for i := range k {
				k[i] = seed + float32(l*1000+p*10+i)
				v[i] = -k[i] / 3
			}
			c.Layer(l).Store(slot, p, k, v)
		}
	}
}

func TestExportImportRoundTrip(t *testing.T) {
	for _, dt := range []DType{BF16, F32, Int8} {
		t.Run(string(dt), func(t *testing.T) {
			cfg := testConfig(t)
			src, err := New(cfg, 2, 8, dt)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			per, err := BytesPerPosition(cfg, dt)
			if err != nil {
				t.Fatal(err)
			}
			if want := int64(2 * 2 * 2 * 2 * 8 * (4*dt.size() + dt.scaleSize())); src.Bytes() != want || src.Bytes() != 2*8*per {
				t.Fatalf("Bytes = %d, want %d (%d per position)", src.Bytes(), want, per)
			}
			fill(src, 1, 5, 0.5)
			var buf bytes.Buffer
			if err := src.Export(&buf, 1, 5); err != nil {
				t.Fatal(err)
			}
			dst, err := New(cfg, 3, 8, dt)
			if err != nil {
				t.Fatal(err)
			}
			defer dst.Close()
			n, err := dst.Import(bytes.NewReader(buf.Bytes()), 2)
			if err != nil || n != 5 {
				t.Fatalf("Import = %d, %v", n, err)
			}
			for l := 0; l < 2; l++ {
				a, b := src.Layer(l), dst.Layer(l)
				for h := 0; h < 2; h++ {
					for p := 0; p < 5; p++ {
						for i := 0; i < 4; i++ {
							oa, ob := src.offset(1, h, p)+i, dst.offset(2, h, p)+i
							if dt == F32 && (a.K32[oa] != b.K32[ob] || a.V32[oa] != b.V32[ob]) ||
								dt == BF16 && (a.K16[oa] != b.K16[ob] || a.V16[oa] != b.V16[ob]) ||
								dt == Int8 && (a.K8[oa] != b.K8[ob] || a.V8[oa] != b.V8[ob]) {
								t.Fatalf("layer %d head %d pos %d dim %d differs", l, h, p, i)
							}
							if dt == Int8 && (a.KS[oa/4] != b.KS[ob/4] || a.VS[oa/4] != b.VS[ob/4] || a.KS[oa/4] == 0) {
								t.Fatalf("layer %d head %d pos %d: scales %v/%v, imported %v/%v", l, h, p, a.KS[oa/4], a.VS[oa/4], b.KS[ob/4], b.VS[ob/4])
							}
						}
					}
				}
			}
		})
	}
}

func TestImportRejects(t *testing.T) {
	cfg := testConfig(t)
	src, _ := New(cfg, 1, 8, BF16)
	defer src.Close()
	fill(src, 0, 3, 1)
	var buf bytes.Buffer
	if err := src.Export(&buf, 0, 3); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	other := cfg.Clone()
	other.VocabSize = 33
	otherCache, _ := New(other, 1, 8, BF16)
	defer otherCache.Close()
	f32Cache, _ := New(cfg, 1, 8, F32)
	defer f32Cache.Close()
	int8Cache, _ := New(cfg, 1, 8, Int8)
	defer int8Cache.Close()
	short, _ := New(cfg, 1, 2, BF16)
	defer short.Close()

	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)-10] ^= 1
	tests := []struct {
		name     string
		dst      *Cache
		data     []byte
		mismatch bool
	}{
		{"other config", otherCache, good, true},
		{"other dtype", f32Cache, good, true},
		{"bf16 into int8", int8Cache, good, true},
		{"too many positions", short, good, true},
		{"corrupt data", src, corrupt, false},
		{"truncated", src, good[:len(good)-7], false},
		{"not a kv file", src, []byte("hello world, this is not it"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.dst.Import(bytes.NewReader(tt.data), 0)
			if err == nil {
				t.Fatal("Import succeeded")
			}
			if errors.Is(err, ErrMismatch) != tt.mismatch {
				t.Fatalf("errors.Is(ErrMismatch) = %v, want %v: %v", !tt.mismatch, tt.mismatch, err)
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	cfg := testConfig(t)
	if _, err := New(cfg, 0, 8, BF16); err == nil {
		t.Error("0 slots accepted")
	}
	if _, err := New(cfg, 1, 8, "f16"); err == nil {
		t.Error("dtype f16 accepted")
	}
	if _, err := ParseDType("int4"); err == nil {
		t.Error("ParseDType(int4) accepted")
	}
	if d, err := ParseDType("int8"); d != Int8 || err != nil {
		t.Errorf("ParseDType(int8) = %q, %v", d, err)
	}
}

// FuzzImport feeds arbitrary bytes to Import: it must fail cleanly, never
// panic, and accept only what Export wrote.
func FuzzImport(f *testing.F) {
	cfg, err := modelcfg.Parse([]byte(`{"architectures":["Qwen3ForCausalLM"],"vocab_size":32,"hidden_size":16,
		"intermediate_size":32,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":4}`))
	if err != nil {
		f.Fatal(err)
	}
	c, err := New(cfg, 1, 8, BF16)
	if err != nil {
		f.Fatal(err)
	}
	defer c.Close()
	fill(c, 0, 3, 2)
	var good bytes.Buffer
	if err := c.Export(&good, 0, 3); err != nil {
		f.Fatal(err)
	}
	f.Add(good.Bytes())
	f.Add(good.Bytes()[:40])
	f.Add([]byte("ELLMKV\x00\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := c.Import(bytes.NewReader(data), 0)
		if err == nil && (n < 0 || n > c.SeqLen) {
			t.Fatalf("Import accepted %d positions", n)
		}
		if err == nil && !bytes.Equal(data, good.Bytes()) {
			// Only a file with a valid checksum can pass: re-export and compare.
			var again bytes.Buffer
			if err := c.Export(&again, 0, n); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again.Bytes(), data[:again.Len()]) {
				t.Fatalf("Import accepted bytes that do not re-export identically")
			}
		}
	})
}

// samePositions reports whether positions [from, from+n) of slot a in c and
// of slot b in d hold the same bits in every layer.
func samePositions(c *Cache, a int, d *Cache, b, from, n int) bool {
	for l := 0; l < c.Layers; l++ {
		x, y := c.Layer(l), d.Layer(l)
		for h := 0; h < c.KVHeads; h++ {
			for p := from; p < from+n; p++ {
				for i := 0; i < c.HeadDim; i++ {
					oa, ob := c.offset(a, h, p)+i, d.offset(b, h, p)+i
					if c.DType == F32 && (x.K32[oa] != y.K32[ob] || x.V32[oa] != y.V32[ob]) ||
						c.DType == BF16 && (x.K16[oa] != y.K16[ob] || x.V16[oa] != y.V16[ob]) ||
						c.DType == Int8 && (x.K8[oa] != y.K8[ob] || x.V8[oa] != y.V8[ob]) {
						return false
					}
					if c.DType == Int8 && (x.KS[oa/c.HeadDim] != y.KS[ob/c.HeadDim] || x.VS[oa/c.HeadDim] != y.VS[ob/c.HeadDim]) {
						return false
					}
				}
			}
		}
	}
	return true
}

func TestCopyAndBufferPositions(t *testing.T) {
	for _, dt := range []DType{BF16, F32, Int8} {
		t.Run(string(dt), func(t *testing.T) {
			cfg := testConfig(t)
			c, err := New(cfg, 3, 8, dt)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			per, err := BytesPerPosition(cfg, dt)
			if err != nil {
				t.Fatal(err)
			}
			if want := 2 * 2 * 2 * (4*dt.size() + dt.scaleSize()); c.PositionBytes() != want || int64(want) != per {
				t.Fatalf("PositionBytes = %d, want %d (BytesPerPosition %d)", c.PositionBytes(), want, per)
			}
			fill(c, 0, 7, 0.25)
			fill(c, 1, 8, 9)
			if err := c.CopyPositions(1, 0, 2, 3); err != nil {
				t.Fatal(err)
			}
			if !samePositions(c, 1, c, 0, 2, 3) {
				t.Error("copied positions differ from the source")
			}
			if samePositions(c, 1, c, 0, 0, 2) || samePositions(c, 1, c, 0, 5, 1) {
				t.Error("positions outside the copied range changed")
			}

			// Positions 1..4 of slot 0 go to buffer positions 3..6 of an
			// 8-position buffer and back into slot 2.
			buf := make([]byte, c.BufferBytes(8))
			if err := c.SavePositions(buf, 8, 3, 0, 1, 4); err != nil {
				t.Fatal(err)
			}
			if err := c.LoadPositions(buf, 8, 3, 2, 1, 4); err != nil {
				t.Fatal(err)
			}
			if !samePositions(c, 2, c, 0, 1, 4) {
				t.Error("positions saved to a buffer and loaded back differ")
			}
			// A second range in the same buffer leaves the first intact.
			if err := c.SavePositions(buf, 8, 0, 1, 6, 2); err != nil {
				t.Fatal(err)
			}
			if err := c.LoadPositions(buf, 8, 3, 2, 1, 4); err != nil || !samePositions(c, 2, c, 0, 1, 4) {
				t.Errorf("buffer positions 3..6 overwritten by a save to 0..1 (%v)", err)
			}

			bad := []error{
				c.CopyPositions(3, 0, 0, 1),
				c.CopyPositions(1, 0, 6, 3),
				c.CopyPositions(1, 0, -1, 1),
				c.SavePositions(buf, 8, 6, 0, 0, 3),
				c.SavePositions(buf[:len(buf)-1], 8, 0, 0, 0, 1),
				c.LoadPositions(buf, 8, 0, 0, 7, 2),
			}
			for i, err := range bad {
				if err == nil {
					t.Errorf("out-of-range call %d accepted", i)
				}
			}
		})
	}
}

// BenchmarkPositions moves 512 positions of a Qwen3-0.6B-shaped cache (112
// KiB each with bf16): between slots, and to and from a host buffer, the
// prefix cache's three moves.
func BenchmarkPositions(b *testing.B) {
	cfg, err := modelcfg.Preset("qwen3-0.6b")
	if err != nil {
		b.Fatal(err)
	}
	const n = 512
	c, err := New(cfg, 2, n, BF16)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, c.BufferBytes(n))
	for _, bc := range []struct {
		name string
		f    func() error
	}{
		{"copy", func() error { return c.CopyPositions(1, 0, 0, n) }},
		{"save", func() error { return c.SavePositions(buf, n, 0, 0, 0, n) }},
		{"load", func() error { return c.LoadPositions(buf, n, 0, 1, 0, n) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(n * c.PositionBytes()))
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.f(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
