// Package bench measures ellm as a user sees it — time to first token,
// time per output token, multi-turn sessions, serving load — and its kernels,
// each as a fraction of this machine's own measured ceiling.
//
// Every run produces a Report whose JSON form is a stable interface:
// {"machine": {...}, "model": {...}, "results": [...]}.
package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/klauspost/cpuid/v2"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/attn"
	"github.com/ellm-dev/ellm/kernels/ceiling"
	"github.com/ellm-dev/ellm/kernels/threads"
	"github.com/ellm-dev/ellm/pkg/cpu"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

// Machine records where a run happened, so that two JSON reports can be compared honestly.
type Machine struct {
	CPU        string   `json:"cpu"`
	Vendor     string   `json:"vendor"`
	Features   []string `json:"features"`
	Cores      int      `json:"physical_cores"`
	LogicalCPU int      `json:"logical_cpus"`
	Threads    int      `json:"threads"`
	// ThreadsWhy says where Threads came from (cpu.Threads.Why); PinnedCPUs
	// are the workers' CPUs (none when unpinned).
	ThreadsWhy string `json:"threads_source,omitempty"`
	PinnedCPUs []int  `json:"pinned_cpus,omitempty"`
	KernelPath string `json:"kernel_path"`
	// AttentionKernel is the attention over a bf16 KV cache: bf16 or f32.
	AttentionKernel string    `json:"attention_kernel"`
	GoVersion       string    `json:"go_version"`
	OS              string    `json:"os"`
	Time            time.Time `json:"time"`
	// Ceilings are this machine's peaks measured in the same process, the
	// denominators of every *_fraction field.
	Ceilings *Ceilings `json:"ceilings,omitempty"`
	// Idle is the CPU other processes and guests used around the run (nil: not checked).
	Idle *Idleness `json:"idle,omitempty"`
}

// Ceilings are measured peaks at the run's thread count.
type Ceilings struct {
	FMAGFLOPS    float64 `json:"fma_gflops"`
	FMA256GFLOPS float64 `json:"fma256_gflops"`
	BF16GFLOPS   float64 `json:"bf16_gflops"`
	VNNIGOPS     float64 `json:"vnni_gops"`
	Int8x256GOPS float64 `json:"int8x256_gops,omitempty"`
	AMXBF16      float64 `json:"amx_bf16_gflops,omitempty"`
	AMXInt8      float64 `json:"amx_int8_gops,omitempty"`
	DRAMGBps     float64 `json:"dram_gbps"`
}

// ComputePeak is the FLOP/s ceiling of the kernel path that prefill runs
// on: path is the one of dtype's products (kernels.MatMulInt8 for int8).
func (c *Ceilings) ComputePeak(path kernels.Path, dtype string) float64 {
	w := ceiling.BF16Weights
	switch dtype {
	case "int8":
		w = ceiling.Int8Weights
	case "f32":
		w = ceiling.F32Weights
	}
	return c.rate(ceiling.ProductKind(path, w, c.rate(ceiling.VNNI) > 0)) * 1e9
}

// MatMulOp is the operation class of the products with weights of dtype:
// the one whose kernel path sets their ceiling.
func MatMulOp(dtype string) kernels.Op {
	if dtype == "int8" {
		return kernels.MatMulInt8
	}
	return kernels.MatMulBF16
}

// MachineKind is the ceiling with the best rate this machine offers for
// weights of dtype, whichever kernel path reaches it: the denominator when
// engines that take different paths are compared. Without ceilings it is
// the first candidate.
func (c *Ceilings) MachineKind(dtype string) ceiling.Kind {
	var kinds []ceiling.Kind
	switch dtype {
	case "int8":
		kinds = []ceiling.Kind{ceiling.VNNI, ceiling.AMXInt8, ceiling.Int8x256}
	case "f32":
		kinds = []ceiling.Kind{ceiling.FMA, ceiling.FMA256}
	default:
		kinds = []ceiling.Kind{ceiling.BF16, ceiling.FMA, ceiling.AMXBF16, ceiling.FMA256}
	}
	best := kinds[0]
	for _, k := range kinds[1:] {
		if c.rate(k) > c.rate(best) {
			best = k
		}
	}
	return best
}

// rate is the measured rate of compute ceiling k (0 without ceilings).
func (c *Ceilings) rate(k ceiling.Kind) float64 {
	if c == nil {
		return 0
	}
	switch k {
	case ceiling.FMA:
		return c.FMAGFLOPS
	case ceiling.FMA256:
		return c.FMA256GFLOPS
	case ceiling.BF16:
		return c.BF16GFLOPS
	case ceiling.VNNI:
		return c.VNNIGOPS
	case ceiling.Int8x256:
		return c.Int8x256GOPS
	case ceiling.AMXBF16:
		return c.AMXBF16
	case ceiling.AMXInt8:
		return c.AMXInt8
	}
	return 0
}

// DescribeMachine captures the CPU and the kernel path for a run on threads threads.
func DescribeMachine(threads int) Machine {
	var feats []string
	f := kernels.CPU()
	for _, x := range []struct {
		name string
		ok   bool
	}{
		{"AVX2", f.AVX2}, {"FMA", f.FMA}, {"AVX512F", f.AVX512F}, {"AVX512BW", f.AVX512BW},
		{"AVX512VL", f.AVX512VL}, {"AVX512_BF16", f.AVX512BF16}, {"AVX512_VNNI", f.AVX512VNNI},
		{"AVX512_FP16", f.AVX512FP16}, {"AVX_VNNI", f.AVXVNNI}, {"AMX_TILE", f.AMXTile},
	} {
		if x.ok {
			feats = append(feats, x.name)
		}
	}
	return Machine{
		CPU: cpuid.CPU.BrandName, Vendor: cpuid.CPU.VendorString, Features: feats,
		Cores: cpu.DefaultThreads(cpu.System()).Cores, LogicalCPU: runtime.NumCPU(), Threads: threads,
		KernelPath: kernels.Describe(), GoVersion: runtime.Version(),
		AttentionKernel: attn.ModeFor(kernels.PathFor(kernels.Attention)).String(),
		OS:              runtime.GOOS + "/" + runtime.GOARCH, Time: time.Now().UTC(),
	}
}

// Model describes what was measured.
type Model struct {
	Name       string `json:"name"`
	Source     string `json:"source"` // "preset" or a checkpoint path
	Layers     int    `json:"layers"`
	FullLayers int    `json:"full_layers,omitempty"` // set when --layers truncated the model
	Hidden     int    `json:"hidden_size"`
	Params     int64  `json:"params"`
	DType      string `json:"dtype"`
	// CodedWeights: the bf16 weights are coded for decode. DecodeWeights is
	// the engine's measured choice between the coded copy and the pairs
	// (engine.Info.DecodeWeights). ScreenRows: lm_head's int8 screen
	// bounds the logits of decode steps of up to that many sequences
	// (engine.Info.ScreenRows, DecodeReads).
	CodedWeights  bool   `json:"coded_weights,omitempty"`
	DecodeWeights string `json:"decode_weights,omitempty"`
	ScreenRows    int    `json:"screen_rows,omitempty"`
	KVDType       string `json:"kv_dtype"`
	// LoadSeconds is how long the engine took to start (engine.Info.
	// LoadTime): the weights loaded, packed and coded, the KV cache and
	// scratch committed.
	LoadSeconds float64 `json:"load_seconds,omitempty"`
	// WeightsMapped: the engine mapped its packed weights from the image an
	// earlier start wrote (engine.Info.WeightsMapped) rather than packing.
	WeightsMapped bool `json:"weights_mapped,omitempty"`
	// Scaled is true when results were scaled from a layer-truncated model
	// to the full depth (see Scale).
	Scaled bool `json:"scaled,omitempty"`
	// Config is the measured (possibly truncated) shape.
	Config *modelcfg.Config `json:"-"`
}

// Report is one benchmark run.
type Report struct {
	Kind    string  `json:"kind"`
	Machine Machine `json:"machine"`
	Model   *Model  `json:"model,omitempty"`
	Results any     `json:"results"`
}

// Tabular is a result list that can print itself as a table or CSV.
type Tabular interface {
	Header() []string
	Rows() [][]string
}

// Format is how a report is written.
type Format string

const (
	FormatTable Format = "table"
	FormatJSON  Format = "json"
	FormatCSV   Format = "csv"
)

// Write prints r in format f. Tables and CSV need r.Results to be Tabular.
func Write(w io.Writer, r Report, f Format) error {
	if f == FormatJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	t, ok := r.Results.(Tabular)
	if !ok {
		return fmt.Errorf("%s results cannot be printed as %s", r.Kind, f)
	}
	if f == FormatCSV {
		cw := csv.NewWriter(w)
		if err := cw.Write(t.Header()); err != nil {
			return err
		}
		if err := cw.WriteAll(t.Rows()); err != nil {
			return err
		}
		cw.Flush()
		return cw.Error()
	}
	m := r.Machine
	fmt.Fprintf(w, "%s on %s", r.Kind, m.CPU)
	if m.Threads > 0 { // a load generator's own threads say nothing about the server
		why := m.ThreadsWhy
		if why == "" {
			why = fmt.Sprint(m.Threads)
		}
		fmt.Fprintf(w, " (threads %s, pinned to CPUs %s, kernels %s, attention %s)", why, cpu.FormatCPUList(m.PinnedCPUs), m.KernelPath, m.AttentionKernel)
	}
	if r.Model != nil {
		fmt.Fprintf(w, ", model %s %s", r.Model.Name, r.Model.DType)
		var notes []string
		if r.Model.LoadSeconds > 0 {
			started := fmt.Sprintf("started in %.1f s", r.Model.LoadSeconds)
			if r.Model.WeightsMapped {
				started += " from the weights image"
			}
			notes = append(notes, started)
		}
		switch {
		case r.Model.DecodeWeights != "":
			notes = append(notes, "decode reads "+r.Model.DecodeWeights)
		case r.Model.CodedWeights:
			notes = append(notes, "coded for decode")
		}
		switch n := r.Model.ScreenRows; {
		case n == 1:
			notes = append(notes, "logits screened for one sequence a step")
		case n > 1:
			notes = append(notes, fmt.Sprintf("logits screened up to %d sequences a step", n))
		}
		if len(notes) > 0 {
			fmt.Fprintf(w, " (%s)", strings.Join(notes, ", "))
		}
		if r.Model.KVDType != "" {
			fmt.Fprintf(w, ", KV cache %s", r.Model.KVDType)
		}
		if r.Model.FullLayers > 0 {
			fmt.Fprintf(w, " (%d of %d layers", r.Model.Layers, r.Model.FullLayers)
			if r.Model.Scaled {
				fmt.Fprint(w, ", times scaled to full depth")
			}
			fmt.Fprint(w, ")")
		}
	}
	fmt.Fprintln(w)
	if c := m.Ceilings; c != nil {
		fmt.Fprint(w, "ceilings:")
		for _, k := range []ceiling.Kind{ceiling.FMA, ceiling.FMA256, ceiling.BF16, ceiling.VNNI, ceiling.Int8x256, ceiling.AMXBF16, ceiling.AMXInt8} {
			if r := c.rate(k); r > 0 { // zero: the CPU lacks the instruction
				fmt.Fprintf(w, " %s %.0f G%s/s,", k, r, k.Unit())
			}
		}
		fmt.Fprintf(w, " DRAM read %.1f GB/s\n", c.DRAMGBps)
	}
	if i := m.Idle; i != nil {
		fmt.Fprintf(w, "others' CPU: before the run %.2f cores (steal %.2f)", i.Before.Others, i.Before.Steal)
		if d := i.During; d != nil {
			fmt.Fprintf(w, ", during it %.2f (steal %.2f)", d.Others, d.Steal)
		}
		fmt.Fprintln(w)
	}
	tbl := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off))
	tbl.Header(anySlice(t.Header())...)
	for _, row := range t.Rows() {
		if err := tbl.Append(anySlice(row)...); err != nil {
			return err
		}
	}
	return tbl.Render()
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// WriteFile writes r as JSON to path, for scripts that compare runs.
func WriteFile(path string, r Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := Write(f, r, FormatJSON); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// MeasureCeilings measures this machine's peaks on pool's workers.
// A peak the CPU lacks stays 0, and so do the fractions computed from it.
func MeasureCeilings(pool *threads.Pool) (*Ceilings, error) {
	c, err := ceiling.Measure(pool, ceiling.Options{WallClock: true}) // the benchmarks time by the wall clock too
	if err != nil {
		return nil, fmt.Errorf("measure ceilings: %w", err)
	}
	return &Ceilings{FMAGFLOPS: c.FMAGFLOPS.All, BF16GFLOPS: c.BF16GFLOPS.All, VNNIGOPS: c.VNNIGOPS.All, Int8x256GOPS: c.Int8x256GOPS.All,
		AMXBF16: c.AMXBF16.All, AMXInt8: c.AMXInt8.All, FMA256GFLOPS: c.FMA256GFLOPS.All, DRAMGBps: c.DRAMGBps.All}, nil
}
