package bench

import (
	"bytes"
	"cmp"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ellm-dev/ellm/bench"
	"github.com/ellm-dev/ellm/pkg/cmdutil"
)

func TestLlamaCppPoints(t *testing.T) {
	tests := []struct {
		name                     string
		prefill, depths, batches string
		prefillDepths            string // "" is the flag's default, 0
		batched                  string
		want                     []bench.ComparePoint
		wantErr                  string
	}{
		{name: "both", prefill: "128,512", depths: "0,4096", batches: "1",
			want: []bench.ComparePoint{{Prefill: 128}, {Prefill: 512}, {Depth: 0, Batch: 1}, {Depth: 4096, Batch: 1}}},
		{name: "prefill at depths", prefill: "128,512", prefillDepths: "0,4096", depths: "",
			want: []bench.ComparePoint{{Prefill: 128}, {Prefill: 512}, {Prefill: 128, Depth: 4096}, {Prefill: 512, Depth: 4096}}},
		{name: "prefill depths garbage", prefill: "128", prefillDepths: "-1", depths: "", wantErr: "--prefill-depths"},
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
			o := &LlamaCppOptions{Prefill: tt.prefill, PrefillDepths: cmp.Or(tt.prefillDepths, "0"), Depths: tt.depths, Batches: tt.batches, LlamaBatchedBench: tt.batched}
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

// snapshots replays CPU snapshots, as two reads of /proc a window apart would.
func snapshots(t *testing.T, s ...bench.CPUSnapshot) func() (bench.CPUSnapshot, error) {
	return func() (bench.CPUSnapshot, error) {
		if len(s) == 0 {
			t.Fatal("more CPU reads than snapshots")
		}
		next := s[0]
		s = s[1:]
		return next, nil
	}
}

func TestLlamaCppIdleCheck(t *testing.T) {
	start := bench.CPUSnapshot{CPUs: 2, Total: 10000, Busy: 2000, Steal: 0, Own: 1000}
	tests := []struct {
		name        string
		after       bench.CPUSnapshot
		warn        bool
		others, stl float64
	}{
		// A second of 2 CPUs (200 ticks), the benchmark's own earlier
		// threads aside: its 150 busy ticks are all ours, so no warning
		// where a load average would have read ~1.5.
		{name: "only ours", after: bench.CPUSnapshot{CPUs: 2, Total: 10200, Busy: 2150, Own: 1150}},
		{name: "another process", after: bench.CPUSnapshot{CPUs: 2, Total: 10200, Busy: 2100, Own: 1040}, warn: true, others: 0.6},
		{name: "other guests", after: bench.CPUSnapshot{CPUs: 2, Total: 10200, Busy: 2000, Steal: 40, Own: 1000}, warn: true, stl: 0.4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errOut bytes.Buffer
			o := &LlamaCppOptions{Common: Common{IO: cmdutil.IOStreams{Out: &errOut, ErrOut: &errOut}},
				CPU: snapshots(t, start, tt.after), IdleWindow: time.Millisecond}
			idle, end, err := o.checkIdle()
			if err != nil {
				t.Fatal(err)
			}
			if end != tt.after {
				t.Errorf("the run's window starts at %+v, want the check's last snapshot", end)
			}
			if math.Abs(idle.Before.Others-tt.others) > 1e-9 || math.Abs(idle.Before.Steal-tt.stl) > 1e-9 {
				t.Errorf("load %+v, want others %v steal %v", idle.Before, tt.others, tt.stl)
			}
			if got := strings.Contains(errOut.String(), "warning: others used"); got != tt.warn {
				t.Errorf("warning %v, want %v: %q", got, tt.warn, errOut.String())
			}
		})
	}

	var errOut bytes.Buffer
	o := &LlamaCppOptions{Common: Common{IO: cmdutil.IOStreams{Out: &errOut, ErrOut: &errOut}},
		CPU: func() (bench.CPUSnapshot, error) { return bench.CPUSnapshot{}, errors.New("no /proc here") }}
	if idle, _, err := o.checkIdle(); err != nil || idle != nil || !strings.Contains(errOut.String(), "cannot check") {
		t.Errorf("without /proc: %v, %v, %q", idle, err, errOut.String())
	}
}

func TestReportPrintsIdleness(t *testing.T) {
	var out bytes.Buffer
	m := bench.Machine{CPU: "test CPU", Ceilings: &bench.Ceilings{DRAMGBps: 40},
		Idle: &bench.Idleness{Before: bench.CPULoad{Others: 0.05}, During: &bench.CPULoad{Others: 0.3, Steal: 0.1}}}
	model := &bench.Model{Name: "m", DType: "bf16", CodedWeights: true, KVDType: "int8", LoadSeconds: 6.32, WeightsMapped: true}
	if err := bench.Write(&out, bench.Report{Kind: "ellm vs llama.cpp", Machine: m, Model: model, Results: bench.CompareResults{}}, bench.FormatTable); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"model m bf16 (started in 6.3 s from the weights image, coded for decode), KV cache int8", "DRAM read 40.0 GB/s", "others' CPU: before the run 0.05 cores (steal 0.00), during it 0.30 (steal 0.10)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in\n%s", want, out.String())
		}
	}
	for rows, want := range map[int]string{1: "(logits screened for one sequence a step)", 4: "(logits screened up to 4 sequences a step)"} {
		out.Reset()
		model := &bench.Model{Name: "m", DType: "bf16", KVDType: "bf16", ScreenRows: rows}
		if err := bench.Write(&out, bench.Report{Kind: "ellm vs llama.cpp", Machine: m, Model: model, Results: bench.CompareResults{}}, bench.FormatTable); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("screen rows %d: missing %q in\n%s", rows, want, out.String())
		}
	}
}
