package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

func f32Bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func testEntries() []Entry {
	return []Entry{
		{Name: "a.bf16", DType: BF16, Shape: []int{3}, Data: []byte{1, 0, 2, 0, 3, 0}},
		{Name: "b.f32", DType: F32, Shape: []int{2, 2}, Data: f32Bytes(1, 2, 3, 4)},
		{Name: "c.i32", DType: I32, Shape: []int{2}, Fill: func(dst []byte) error {
			binary.LittleEndian.PutUint32(dst, 7)
			binary.LittleEndian.PutUint32(dst[4:], math.MaxUint32) // -1
			return nil
		}},
		{Name: "d.bool", DType: Bool, Shape: []int{2}, Data: []byte{1, 0}},
		{Name: "e.i64", DType: I64, Shape: []int{}, Data: []byte{9, 0, 0, 0, 0, 0, 0, 0}},
		{Name: "f.empty", DType: F16, Shape: []int{0, 4}, Data: nil},
	}
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	if err := WriteFile(path, testEntries(), map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := strings.Join(c.Names(), ","); got != "a.bf16,b.f32,c.i32,d.bool,e.i64,f.empty" {
		t.Fatalf("Names() = %s", got)
	}
	if c.Metadata()["format"] != "pt" {
		t.Errorf("metadata %v", c.Metadata())
	}
	tb, _ := c.Tensor("a.bf16")
	if v, err := tb.BF16(); err != nil || len(v) != 3 || v[2] != 3 {
		t.Errorf("BF16() = %v, %v", v, err)
	}
	if _, err := tb.F32(); err == nil || !strings.Contains(err.Error(), `"a.bf16" is BF16, not F32`) {
		t.Errorf("dtype mismatch error: %v", err)
	}
	tf, _ := c.Tensor("b.f32")
	if v, err := tf.F32(); err != nil || v[3] != 4 || tf.Shape[0] != 2 {
		t.Errorf("F32() = %v, %v", v, err)
	}
	ti, _ := c.Tensor("c.i32")
	if v, err := ti.I32(); err != nil || v[0] != 7 || v[1] != -1 {
		t.Errorf("I32() = %v, %v", v, err)
	}
	tbool, _ := c.Tensor("d.bool")
	if v, err := tbool.Bool(); err != nil || !v[0] || v[1] {
		t.Errorf("Bool() = %v, %v", v, err)
	}
	ts, _ := c.Tensor("e.i64")
	if v, err := ts.I64(); err != nil || len(v) != 1 || v[0] != 9 || ts.NumElements() != 1 {
		t.Errorf("scalar I64() = %v, %v", v, err)
	}
	te, _ := c.Tensor("f.empty")
	if v, err := te.F16(); err != nil || len(v) != 0 {
		t.Errorf("empty F16() = %v, %v", v, err)
	}
	// The writer aligns every tensor, so views alias the mapping.
	for _, f := range c.Files() {
		if f.Header.DataOffset%8 != 0 {
			t.Errorf("data section at %d, not 8-byte aligned", f.Header.DataOffset)
		}
	}
}

func TestWriteRejects(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		entries []Entry
		want    string
	}{
		{"size", []Entry{{Name: "x", DType: F32, Shape: []int{2}, Data: []byte{1}}}, "needs 8 bytes, got 1"},
		{"dtype", []Entry{{Name: "x", DType: "Q4", Shape: []int{1}, Data: []byte{1}}}, `unknown dtype "Q4"`},
		{"dup", []Entry{{Name: "x", DType: U8, Shape: []int{1}, Data: []byte{1}}, {Name: "x", DType: U8, Shape: []int{1}, Data: []byte{1}}}, "written twice"},
	} {
		path := filepath.Join(dir, tc.name+".safetensors")
		err := WriteFile(path, tc.entries, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
		if _, statErr := os.Stat(path); statErr == nil {
			t.Errorf("%s: a rejected write left %s behind", tc.name, path)
		}
	}
}

func TestSharded(t *testing.T) {
	dir := t.TempDir()
	var entries []Entry
	for i := 0; i < 5; i++ {
		entries = append(entries, Entry{Name: string(rune('a'+i)) + ".w", DType: F32, Shape: []int{4}, Data: f32Bytes(float32(i), 0, 0, 0)})
	}
	files, err := WriteSharded(dir, entries, 40, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 || files[3] != IndexName {
		t.Fatalf("files %v, want 3 shards of two 16-byte tensors (limit 40) and the index", files)
	}
	for _, p := range []string{dir, filepath.Join(dir, IndexName)} {
		c, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Names()) != 5 || len(c.Files()) != 3 {
			t.Errorf("Open(%s): %d tensors in %d files", p, len(c.Names()), len(c.Files()))
		}
		w, _ := c.Tensor("e.w")
		if v, _ := w.F32(); v[0] != 4 || filepath.Base(w.File) != "model-00003-of-00003.safetensors" {
			t.Errorf("e.w = %v in %s", v, w.File)
		}
		c.Close()
	}

	// The index and the shards must agree.
	idx, err := ReadIndex(filepath.Join(dir, IndexName))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(m map[string]string)
		want string
	}{
		{"wrong shard", func(m map[string]string) { m["a.w"] = "model-00002-of-00003.safetensors" }, `tensor "a.w": index says model-00002-of-00003.safetensors but it is in model-00001-of-00003.safetensors`},
		{"unlisted", func(m map[string]string) { delete(m, "b.w") }, `tensor "b.w" in model-00001-of-00003.safetensors is missing from the index`},
		{"phantom", func(m map[string]string) { m["z.w"] = "model-00001-of-00003.safetensors" }, `tensor "z.w": index says model-00001-of-00003.safetensors but that shard does not hold it`},
		{"missing shard", func(m map[string]string) { m["a.w"] = "model-00009-of-00009.safetensors" }, "model-00009-of-00009.safetensors: no such file"},
		{"escape", func(m map[string]string) { m["a.w"] = "../x.safetensors" }, "not a file inside the checkpoint directory"},
	} {
		m := map[string]string{}
		for k, v := range idx.WeightMap {
			m[k] = v
		}
		tc.edit(m)
		b, _ := json.Marshal(Index{WeightMap: m})
		p := filepath.Join(dir, "bad.index.json")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// fileWithHeader builds a safetensors file from a raw header and data size.
func fileWithHeader(header string, data int) []byte {
	b := make([]byte, 8, 8+len(header)+data)
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, data)...)
}

func TestParseHeaderErrors(t *testing.T) {
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"short", []byte{1, 2, 3}, "too short"},
		{"huge header length", func() []byte {
			b := fileWithHeader("{}", 0)
			binary.LittleEndian.PutUint64(b, 1<<40)
			return b
		}(), "exceeds the limit"},
		{"header past end", func() []byte {
			b := fileWithHeader("{}", 0)
			binary.LittleEndian.PutUint64(b, 100)
			return b
		}(), "truncated file"},
		{"not json", fileWithHeader("hello", 0), "not a JSON object"},
		{"bad json", fileWithHeader(`{"x": {"dtype": "F32"`, 0), "header entry"},
		{"trailing", fileWithHeader(`{} {}`, 0), "unexpected bytes after the object"},
		{"unknown dtype", fileWithHeader(`{"w":{"dtype":"F4","shape":[1],"data_offsets":[0,1]}}`, 1), `tensor "w": unknown dtype "F4"`},
		{"size mismatch", fileWithHeader(`{"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}}`, 24), `tensor "w": F32 shape [2 3] needs 24 bytes but data_offsets [0, 20] span 20`},
		{"past end", fileWithHeader(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4), `tensor "w": data_offsets [0, 8] end past the 4-byte data section`},
		{"overlap", fileWithHeader(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}`, 8), `tensor "b": bytes [2, 6) overlap tensor "a" [0, 4)`},
		{"duplicate", fileWithHeader(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 2), `tensor "a": listed twice`},
		{"negative dim", fileWithHeader(`{"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}`, 0), "dimension -1"},
		{"overflow", fileWithHeader(`{"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, 0), "overflows"},
		{"reversed offsets", fileWithHeader(`{"w":{"dtype":"U8","shape":[0],"data_offsets":[4,2]}}`, 4), "not an interval"},
		{"three offsets", fileWithHeader(`{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}}`, 4), "data_offsets has 3 values"},
		{"bad metadata", fileWithHeader(`{"__metadata__":{"a":1}}`, 0), "__metadata__"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHeader(tc.file, int64(len(tc.file)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// Corrupted copies of a real checkpoint must fail to open with an error naming the file.
func TestCorruptedFiles(t *testing.T) {
	src := sharedtest.Path(t, "models", "tiny-qwen3-a", "model.safetensors")
	orig, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	hlen := int(binary.LittleEndian.Uint64(orig))
	dir := t.TempDir()
	cases := map[string][]byte{
		"truncated-data":   orig[:len(orig)-1000],
		"truncated-header": orig[:8+hlen/2],
		"empty":            {},
		"bad-json": func() []byte {
			b := append([]byte(nil), orig...)
			b[8+hlen/3] = '}'
			return b
		}(),
	}
	for name, content := range cases {
		p := filepath.Join(dir, name+".safetensors")
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(p)
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %v, want one naming %s", name, err, p)
		}
	}
	c, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n := len(c.Names()); n != 24 {
		t.Errorf("tiny-qwen3-a has %d tensors, want 24", n)
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add(fileWithHeader(`{}`, 0))
	f.Add(fileWithHeader(`{"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}}`, 8))
	f.Add(fileWithHeader(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}`, 8))
	f.Add(fileWithHeader(`{"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, 0))
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, file []byte) {
		h, err := ParseHeader(file, int64(len(file)))
		if err != nil {
			return
		}
		// Whatever parses must be safe to slice.
		var prevEnd int64
		for _, ti := range h.Tensors {
			if ti.Begin < prevEnd || h.DataOffset+ti.End > int64(len(file)) {
				t.Fatalf("accepted tensor %q at [%d, %d) in a %d-byte file", ti.Name, ti.Begin, ti.End, len(file))
			}
			if ti.NumElements()*int64(ti.DType.Size()) != ti.End-ti.Begin {
				t.Fatalf("accepted tensor %q whose size disagrees with its shape", ti.Name)
			}
			_ = file[h.DataOffset+ti.Begin : h.DataOffset+ti.End]
			prevEnd = ti.End
		}
	})
}

// Every alignment reference dump (F32 activations, I32 token ids) must open
// and give typed views of the right length.
func TestAlignDumps(t *testing.T) {
	root := sharedtest.Path(t, "align")
	paths, err := filepath.Glob(filepath.Join(root, "*", "*", "*.safetensors"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no dumps under %s: %v", root, err)
	}
	seen := map[DType]int{}
	for _, p := range paths {
		c, err := Open(p)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, name := range c.Names() {
			tn, _ := c.Tensor(name)
			seen[tn.DType]++
			var n int
			switch tn.DType {
			case F32:
				v, err := tn.F32()
				if err != nil {
					t.Fatal(err)
				}
				n = len(v)
			case I32:
				v, err := tn.I32()
				if err != nil {
					t.Fatal(err)
				}
				n = len(v)
			case I64:
				v, err := tn.I64()
				if err != nil {
					t.Fatal(err)
				}
				n = len(v)
			default:
				n = int(tn.NumElements())
			}
			if int64(n) != tn.NumElements() {
				t.Errorf("%s %s: view of %d elements, shape %v", p, name, n, tn.Shape)
			}
		}
		c.Close()
	}
	if seen[F32] == 0 {
		t.Errorf("no F32 tensors in the dumps: %v", seen)
	}
}

// Files from other writers need not align tensors: views must still be right.
func TestMisalignedView(t *testing.T) {
	header := `{"w":{"dtype":"F32","shape":[2],"data_offsets":[1,9]},"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`
	if (8+len(header)+1)%4 == 0 {
		header += " "
	}
	file := fileWithHeader(header, 0)
	file = append(file, 7)
	file = append(file, f32Bytes(1.5, -2)...)
	p := filepath.Join(t.TempDir(), "m.safetensors")
	if err := os.WriteFile(p, file, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, _ := c.Tensor("w")
	v, err := w.F32()
	if err != nil || len(v) != 2 || v[0] != 1.5 || v[1] != -2 {
		t.Errorf("misaligned F32 view = %v, %v", v, err)
	}
	b, _ := c.Tensor("b")
	if u, err := b.U8(); err != nil || u[0] != 7 {
		t.Errorf("U8 view = %v, %v", u, err)
	}
}
