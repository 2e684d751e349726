package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// IndexName is the file that maps tensor names to shards in a sharded checkpoint.
const IndexName = "model.safetensors.index.json"

// SingleName is the file name of an unsharded checkpoint.
const SingleName = "model.safetensors"

// Index is the content of model.safetensors.index.json.
type Index struct {
	Metadata  map[string]any    `json:"metadata,omitempty"`
	WeightMap map[string]string `json:"weight_map"`
}

// Checkpoint is a set of safetensors files seen as one name → tensor map.
type Checkpoint struct {
	files   []*File
	tensors map[string]*Tensor
	names   []string
}

// Open opens a checkpoint from a .safetensors file, an index JSON file, or a
// directory (its model.safetensors.index.json, else model.safetensors, else
// all of its *.safetensors files).
func Open(path string) (*Checkpoint, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return openDir(path)
	}
	if strings.HasSuffix(path, ".json") {
		return openIndex(path)
	}
	return openFiles([]string{path})
}

func openDir(dir string) (*Checkpoint, error) {
	if _, err := os.Stat(filepath.Join(dir, IndexName)); err == nil {
		return openIndex(filepath.Join(dir, IndexName))
	}
	if _, err := os.Stat(filepath.Join(dir, SingleName)); err == nil {
		return openFiles([]string{filepath.Join(dir, SingleName)})
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%s: no %s, %s or *.safetensors files", dir, IndexName, SingleName)
	}
	return openFiles(paths)
}

// ReadIndex reads and checks an index file: a non-empty weight map whose shard
// names stay inside the index's directory.
func ReadIndex(path string) (*Index, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var idx Index
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: empty or missing weight_map", path)
	}
	for name, shard := range idx.WeightMap {
		if shard == "" || filepath.IsAbs(shard) || !filepath.IsLocal(shard) {
			return nil, fmt.Errorf("%s: tensor %q: shard %q is not a file inside the checkpoint directory", path, name, shard)
		}
	}
	return &idx, nil
}

func openIndex(path string) (*Checkpoint, error) {
	idx, err := ReadIndex(path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	shardSet := map[string]bool{}
	for _, s := range idx.WeightMap {
		shardSet[s] = true
	}
	shards := make([]string, 0, len(shardSet))
	for s := range shardSet {
		shards = append(shards, s)
	}
	sort.Strings(shards)
	paths := make([]string, len(shards))
	for i, s := range shards {
		paths[i] = filepath.Join(dir, s)
	}
	c, err := openFiles(paths)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// The index and the shard headers must describe the same set of tensors.
	var problems []string
	for name, shard := range idx.WeightMap {
		t, ok := c.tensors[name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("tensor %q: index says %s but that shard does not hold it", name, shard))
		case t.File != filepath.Join(dir, shard):
			problems = append(problems, fmt.Sprintf("tensor %q: index says %s but it is in %s", name, shard, filepath.Base(t.File)))
		}
	}
	for _, name := range c.names {
		if _, ok := idx.WeightMap[name]; !ok {
			problems = append(problems, fmt.Sprintf("tensor %q in %s is missing from the index", name, filepath.Base(c.tensors[name].File)))
		}
	}
	if len(problems) > 0 {
		c.Close()
		sort.Strings(problems)
		return nil, fmt.Errorf("%s: index and shards disagree: %s", path, strings.Join(problems, "; "))
	}
	return c, nil
}

func openFiles(paths []string) (*Checkpoint, error) {
	c := &Checkpoint{tensors: map[string]*Tensor{}}
	for _, p := range paths {
		f, err := OpenFile(p)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.files = append(c.files, f)
		for _, t := range f.tensors() {
			if prev, ok := c.tensors[t.Name]; ok {
				c.Close()
				return nil, fmt.Errorf("tensor %q: in both %s and %s", t.Name, prev.File, t.File)
			}
			c.tensors[t.Name] = t
			c.names = append(c.names, t.Name)
		}
	}
	sort.Strings(c.names)
	return c, nil
}

// Tensor returns the tensor called name (a Hugging Face name such as
// "model.layers.0.self_attn.q_proj.weight").
func (c *Checkpoint) Tensor(name string) (*Tensor, bool) {
	t, ok := c.tensors[name]
	return t, ok
}

// Names lists every tensor name, sorted.
func (c *Checkpoint) Names() []string { return c.names }

// Files lists the mapped files in the order they were opened.
func (c *Checkpoint) Files() []*File { return c.files }

// Metadata merges every file's __metadata__ (later shards win on conflicts).
func (c *Checkpoint) Metadata() map[string]string {
	md := map[string]string{}
	for _, f := range c.files {
		for k, v := range f.Header.Metadata {
			md[k] = v
		}
	}
	return md
}

// Close unmaps every file. Views from its tensors must not be used afterwards.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, f := range c.files {
		errs = append(errs, f.Close())
	}
	c.files = nil
	return errors.Join(errs...)
}
