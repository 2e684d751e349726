package engine

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/pkg/cpu"
	"github.com/ellm-dev/ellm/pkg/numa"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

// On a described two-node machine (this machine's CPUs split into two
// nodes), the engine plans one pinned worker per node and tries to
// interleave weights and KV over both (the kernel keeps node 0, the one it
// has), and answers exactly as without placement.
func TestEngineNUMAPlacement(t *testing.T) {
	allowed, err := cpu.SchedAffinity()
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 {
		t.Skip("needs two CPUs")
	}
	dir := sharedtest.Path(t, "models", "tiny-qwen3-a")
	twoNodes := func() ([]numa.Node, error) {
		return []numa.Node{{ID: 0, Cores: [][]int{{allowed[0]}}}, {ID: 1, Cores: [][]int{{allowed[1]}}}}, nil
	}
	var log bytes.Buffer
	images := t.TempDir()
	e := newModelEngine(t, dir, Options{Threads: 2, Topology: twoNodes, WeightsImageDir: images, WeightsImageKey: "k",
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	// Weights packed into an image would lie where they were first faulted
	// in, not interleaved: no image on several nodes.
	if files, _ := filepath.Glob(filepath.Join(images, "*")); e.Info().WeightsImage != "" || len(files) != 0 {
		t.Errorf("on two nodes: weights image %q, files %v; want none", e.Info().WeightsImage, files)
	}
	p := e.Info().NUMA
	if p == nil || !slices.Equal(p.CPUs, allowed[:2]) || !slices.Equal(p.Interleave, []int{0, 1}) || e.Info().Threads != 2 ||
		!slices.Equal(e.Info().PinnedCPUs, allowed[:2]) || !strings.Contains(e.Info().ThreadsWhy, "NUMA nodes [0 1]") {
		t.Fatalf("plan %+v, threads %d (%s) pinned %v", p, e.Info().Threads, e.Info().ThreadsWhy, e.Info().PinnedCPUs)
	}
	// The kernel keeps the online nodes of the mask (here node 0 only).
	if nodes, err := numa.Interleaved(e.be.(*modelBackend).cache.Memory()); err != nil || !slices.Contains(nodes, 0) {
		t.Errorf("KV cache interleaved over %v (%v)", nodes, err)
	}
	for _, want := range []string{"numa node", "node=1"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
	plain := newModelEngine(t, dir, Options{Threads: 2, NUMA: "off", Topology: twoNodes})
	if nodes, err := numa.Interleaved(plain.be.(*modelBackend).cache.Memory()); plain.Info().NUMA != nil || err != nil || nodes != nil {
		t.Errorf("NUMA off still placed: %+v, KV cache interleaved over %v (%v)", plain.Info().NUMA, nodes, err)
	}
	prompt := e.Model().Tokenizer.Encode("The quick brown fox")
	got, _ := collect(t, e, Request{Tokens: prompt, MaxTokens: 8, StopTokens: []int32{}})
	want, _ := collect(t, plain, Request{Tokens: prompt, MaxTokens: 8, StopTokens: []int32{}})
	if !slices.Equal(got, want) {
		t.Errorf("placed %v, unplaced %v", got, want)
	}
	if _, err := New(openModel(t, dir), Options{NUMA: "spread"}); err == nil || !strings.Contains(err.Error(), "want auto or off") {
		t.Errorf("bad --numa: %v", err)
	}
}
