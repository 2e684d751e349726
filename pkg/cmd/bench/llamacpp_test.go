package bench

import (
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/bench"
)

func TestLlamaCppPoints(t *testing.T) {
	tests := []struct {
		name                     string
		prefill, depths, batches string
		batched                  string
		want                     []bench.ComparePoint
		wantErr                  string
	}{
		{name: "both", prefill: "128,512", depths: "0,4096", batches: "1",
			want: []bench.ComparePoint{{Prefill: 128}, {Prefill: 512}, {Depth: 0, Batch: 1}, {Depth: 4096, Batch: 1}}},
		{name: "decode only, batched", prefill: "", depths: "0", batches: "1,4", batched: "llama-batched-bench",
			want: []bench.ComparePoint{{Depth: 0, Batch: 1}, {Depth: 0, Batch: 4}}},
		{name: "batch without batched-bench", prefill: "", depths: "0", batches: "4", wantErr: "--llama-batched-bench"},
		{name: "zero prompt", prefill: "0", depths: "", batches: "1", wantErr: "positive"},
		{name: "zero batch", prefill: "", depths: "0", batches: "0", wantErr: "positive"},
		{name: "nothing", prefill: " ", depths: "", batches: "1", wantErr: "nothing to measure"},
		{name: "garbage", prefill: "x", depths: "", batches: "1", wantErr: "--prefill"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &LlamaCppOptions{Prefill: tt.prefill, Depths: tt.depths, Batches: tt.batches, LlamaBatchedBench: tt.batched}
			got, err := o.comparePoints()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("point %d: %v, want %v", i, got[i], tt.want[i])
				}
			}
		})
	}
}
