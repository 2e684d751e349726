package safetensors

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Entry is one tensor to write. Either Data holds exactly the tensor's bytes,
// or Fill writes them into dst (len(dst) is the tensor's byte size; dst holds
// stale bytes, so Fill must set every one): Fill lets a large checkpoint be
// produced one tensor at a time.
type Entry struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
	Fill  func(dst []byte) error
}

// NumBytes is the size of the entry's data as its dtype and shape require.
func (e *Entry) NumBytes() int64 {
	n := int64(e.DType.Size())
	for _, d := range e.Shape {
		n *= int64(d)
	}
	return n
}

func (e *Entry) validate() error {
	if !e.DType.Valid() {
		return fmt.Errorf("tensor %q: unknown dtype %q", e.Name, e.DType)
	}
	for _, d := range e.Shape {
		if d < 0 {
			return fmt.Errorf("tensor %q: negative dimension in shape %v", e.Name, e.Shape)
		}
	}
	if e.Fill == nil && int64(len(e.Data)) != e.NumBytes() {
		return fmt.Errorf("tensor %q: %s %v needs %d bytes, got %d", e.Name, e.DType, e.Shape, e.NumBytes(), len(e.Data))
	}
	if e.Name == "" || e.Name == MetadataKey {
		return fmt.Errorf("invalid tensor name %q", e.Name)
	}
	return nil
}

// headerAlign pads the header so the data section starts 8-byte aligned.
const headerAlign = 8

// WriteFile writes entries as one safetensors file. Entries are laid out
// largest element size first (stable otherwise), so that with the padded
// header every tensor starts aligned to its element size and every typed view
// of the file is zero-copy.
func WriteFile(path string, entries []Entry, metadata map[string]string) (err error) {
	ordered := make([]*Entry, 0, len(entries))
	for _, size := range []int{8, 4, 2, 1} {
		for i := range entries {
			if entries[i].DType.Size() == size {
				ordered = append(ordered, &entries[i])
			}
		}
	}
	seen := map[string]bool{}
	header := map[string]any{}
	if len(metadata) > 0 {
		header[MetadataKey] = metadata
	}
	var off int64
	for i := range entries {
		if err := entries[i].validate(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	for _, e := range ordered {
		if seen[e.Name] {
			return fmt.Errorf("%s: tensor %q written twice", path, e.Name)
		}
		seen[e.Name] = true
		shape := e.Shape
		if shape == nil {
			shape = []int{}
		}
		n := e.NumBytes()
		header[e.Name] = map[string]any{"dtype": e.DType, "shape": shape, "data_offsets": []int64{off, off + n}}
		off += n
	}
	hb, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("%s: header: %w", path, err)
	}
	if pad := (8 + len(hb)) % headerAlign; pad != 0 {
		hb = append(hb, strings.Repeat(" ", headerAlign-pad)...)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(hb)))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return err
	}
	if _, err := w.Write(hb); err != nil {
		return err
	}
	var buf []byte
	for _, e := range ordered {
		data := e.Data
		if e.Fill != nil {
			n := e.NumBytes()
			if int64(cap(buf)) < n {
				buf = make([]byte, n)
			}
			data = buf[:n]
			if err := e.Fill(data); err != nil {
				return fmt.Errorf("%s: tensor %q: %w", path, e.Name, err)
			}
		}
		if _, err := w.Write(data); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return w.Flush()
}

// WriteSharded writes entries into dir as a Hugging Face checkpoint: one
// model.safetensors when they fit in shardBytes (or shardBytes <= 0), else
// model-0000i-of-0000n.safetensors files of at most shardBytes each (a larger
// tensor gets a shard of its own) plus model.safetensors.index.json.
// It returns the files written, relative to dir.
func WriteSharded(dir string, entries []Entry, shardBytes int64, metadata map[string]string) ([]string, error) {
	var groups [][]Entry
	var cur []Entry
	var curBytes, total int64
	seen := map[string]bool{}
	for _, e := range entries {
		if seen[e.Name] {
			return nil, fmt.Errorf("%s: tensor %q written twice", dir, e.Name)
		}
		seen[e.Name] = true
		n := e.NumBytes()
		total += n
		if shardBytes > 0 && len(cur) > 0 && curBytes+n > shardBytes {
			groups = append(groups, cur)
			cur, curBytes = nil, 0
		}
		cur = append(cur, e)
		curBytes += n
	}
	groups = append(groups, cur)
	if len(groups) == 1 {
		if err := WriteFile(filepath.Join(dir, SingleName), entries, metadata); err != nil {
			return nil, err
		}
		return []string{SingleName}, nil
	}
	idx := Index{Metadata: map[string]any{"total_size": total}, WeightMap: map[string]string{}}
	var files []string
	for i, g := range groups {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(groups))
		if err := WriteFile(filepath.Join(dir, name), g, metadata); err != nil {
			return nil, err
		}
		for _, e := range g {
			idx.WeightMap[e.Name] = name
		}
		files = append(files, name)
	}
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, IndexName), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	return append(files, IndexName), nil
}
