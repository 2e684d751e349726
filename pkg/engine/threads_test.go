package engine

import (
	"slices"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/pkg/cpu"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

// With no thread count the engine runs cpu.DefaultThreads' number, pinned
// to its CPUs; NoPin and an explicit count are honoured and said.
func TestEngineThreads(t *testing.T) {
	dir := sharedtest.Path(t, "models", "tiny-qwen3-a")
	def := cpu.DefaultThreads(cpu.System())
	tests := []struct {
		name   string
		o      Options
		n      int
		pinned []int
		why    string
	}{
		{"default", Options{}, def.N, def.CPUs, def.Why},
		{"unpinned", Options{NoPin: true}, def.N, nil, def.Why},
		{"requested", Options{Threads: def.N + 1}, def.N + 1, def.PinCPUs(def.N + 1), "requested; the default would be " + def.Why},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.SequenceLength = 64
			e, err := New(openModel(t, dir), tc.o)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			info := e.Info()
			if info.Threads != tc.n || !slices.Equal(info.PinnedCPUs, tc.pinned) || !strings.Contains(info.ThreadsWhy, tc.why) {
				t.Errorf("threads %d pinned %v why %q, want %d %v containing %q", info.Threads, info.PinnedCPUs, info.ThreadsWhy, tc.n, tc.pinned, tc.why)
			}
			// The pinned pool computes: one short generation.
			if _, err := e.Generate(t.Context(), Request{Tokens: []int32{1, 2, 3}, MaxTokens: 2}, func(Event) error { return nil }); err != nil {
				t.Fatal(err)
			}
		})
	}
}
