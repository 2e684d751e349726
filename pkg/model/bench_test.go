package model

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ceiling"
	"github.com/ellm-dev/ellm/kernels/threads"
	"github.com/ellm-dev/ellm/kernels/tune"
	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/synth"
)

// benchModel generates a preset's shape with fewer layers, a smaller
// vocabulary and (MoE) fewer experts, so that the benchmark's weights fit a
// shared test machine; per-layer costs keep the real shapes.
func benchModel(b *testing.B, preset string, layers, vocab, experts int) *Model {
	b.Helper()
	cfg, err := modelcfg.Preset(preset)
	if err != nil {
		b.Fatal(err)
	}
	if cfg, err = cfg.Truncate(layers); err != nil {
		b.Fatal(err)
	}
	cfg.VocabSize = vocab
	cfg.EOSTokenID, cfg.BOSTokenID, cfg.PadTokenID = nil, nil, nil
	if experts > 0 {
		cfg.NumExperts = experts
	}
	dir := b.TempDir()
	if err := synth.Generate(cfg, dir, synth.Options{Seed: 1}); err != nil {
		b.Fatal(err)
	}
	m, err := Load(dir, LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m
}

// cliKernels takes each operation's kernel path as `ellm` does at start-up
// (kernels/tune: this machine's cached calibration, else a measurement), so
// that a whole checkpoint is measured on the kernels the CLI runs. Without
// it a test takes the active path for everything, which on the Xeon of
// docs/performance.md puts decode attention on the VDPBF16PS kernels: they
// take about a sixth more time there than the f32 ones the calibration
// picks. The paths are restored after b.
func cliKernels(b *testing.B) {
	r, err := tune.Apply(tune.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { kernels.Force(kernels.Active()) })
	b.Logf("kernel paths (%s): %s", r.Source, kernels.Describe())
}

// BenchmarkForward measures a prefill of 128 tokens and a decode step of 4
// sequences (one row each) on the active kernel path.
func BenchmarkForward(b *testing.B) {
	for _, bm := range []struct {
		preset                 string
		layers, vocab, experts int
	}{
		{"qwen3-0.6b", 2, 8192, 0},
		{"qwen3-30b-a3b", 1, 8192, 16},
	} {
		m := benchModel(b, bm.preset, bm.layers, bm.vocab, bm.experts)
		cache, err := kvcache.New(m.Config, 4, 256, kvcache.BF16)
		if err != nil {
			b.Fatal(err)
		}
		r, err := m.NewRunner(cache, RunnerOptions{MaxTokens: 128})
		if err != nil {
			b.Fatal(err)
		}
		prompt := make([]int32, 128)
		for i := range prompt {
			prompt[i] = int32(i*31) % int32(bm.vocab)
		}
		name := fmt.Sprintf("%s-%dlayers", bm.preset, bm.layers)
		b.Run(name+"/prefill128", func(b *testing.B) {
			for range b.N {
				if err := r.Forward([]Segment{{Tokens: prompt, Logits: LogitsLast}}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(prompt))/b.Elapsed().Seconds(), "tok/s")
		})
		b.Run(name+"/decode4", func(b *testing.B) {
			segs := make([]Segment, 4)
			for s := range segs {
				if err := r.Forward([]Segment{{Slot: s, Tokens: prompt[:64]}}); err != nil {
					b.Fatal(err)
				}
				segs[s] = Segment{Slot: s, Start: 64, Tokens: prompt[64+s : 65+s], Logits: LogitsLast}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := r.Forward(segs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(segs))/b.Elapsed().Seconds(), "tok/s")
		})
		r.Close()
		cache.Close()
	}
}

// BenchmarkCheckpoint measures a whole checkpoint (ELLM_BENCH_MODEL, e.g. the
// directory `ellm bench --preset qwen3-0.6b` generates under
// ~/.cache/ellm/bench) in the dtype ELLM_BENCH_DTYPE (default bf16): a
// prefill of 512 tokens in one pass and a decode step of one and of four
// sequences, on the kernel paths the CLI takes (cliKernels). Besides wall
// time it reports the process's user+sys CPU time per op, which a shared
// machine distorts less. It is what docs/performance.md profiles
// (-cpuprofile). ELLM_BENCH_TOKENS sets the prefill's length;
// prefill<N>/steps reports each step's wall and idle milliseconds per
// prefill (StepTimes), and the log the first prefill's time (page faults of
// the scratch and the KV cache included).
func BenchmarkCheckpoint(b *testing.B) {
	dir := os.Getenv("ELLM_BENCH_MODEL")
	if dir == "" {
		b.Skip("ELLM_BENCH_MODEL is not set")
	}
	cliKernels(b)
	m, err := Load(dir, LoadOptions{DType: os.Getenv("ELLM_BENCH_DTYPE")})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	b.Logf("load %v, weights %d MB, resident after load: %s", m.LoadTime, m.WeightBytes()>>20, resident())
	n := 512
	if v := os.Getenv("ELLM_BENCH_TOKENS"); v != "" {
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("ELLM_BENCH_TOKENS=%q: want a positive number", v)
		}
	}
	cache, err := kvcache.New(m.Config, 4, n+64, kvcache.BF16)
	if err != nil {
		b.Fatal(err)
	}
	defer cache.Close()
	r, err := m.NewRunner(cache, RunnerOptions{MaxTokens: n})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	prompt := make([]int32, n+1)
	for i := range prompt {
		prompt[i] = int32(i*7919) % int32(m.Config.VocabSize)
	}
	measure := func(b *testing.B, segs []Segment, tokens int) {
		before, sw := cpuTime(), switches()
		for range b.N {
			if err := r.Forward(segs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*tokens)/b.Elapsed().Seconds(), "tok/s")
		b.ReportMetric(float64((cpuTime()-before).Milliseconds())/float64(b.N), "cpu-ms/op")
		b.ReportMetric(float64(switches()-sw)/float64(b.N), "blocks/op")
	}
	prefill := []Segment{{Tokens: prompt[:n], Logits: LogitsLast}}
	start, cpu := time.Now(), cpuTime()
	if err := r.Forward(prefill); err != nil {
		b.Fatal(err)
	}
	b.Logf("first prefill of %d: %v wall, %v CPU", n, time.Since(start), cpuTime()-cpu)
	b.Run(fmt.Sprintf("prefill%d", n), func(b *testing.B) {
		measure(b, prefill, n)
	})
	b.Run(fmt.Sprintf("prefill%d/steps", n), func(b *testing.B) {
		var st StepTimes
		r.TimeSteps(&st)
		defer r.TimeSteps(nil)
		measure(b, prefill, n)
		var wall, idle time.Duration
		for s := range NumSteps {
			wall += st.Wall[s]
			idle += st.Idle[s]
			if st.Wall[s] == 0 {
				continue
			}
			name := strings.ReplaceAll(s.String(), " ", "-")
			b.ReportMetric(ms(st.Wall[s], st.Passes), name+"-ms")
			b.ReportMetric(ms(st.Idle[s], st.Passes), name+"-idle-ms")
			b.ReportMetric(float64(st.Sleeps[s])/float64(st.Passes), name+"-sleeps")
		}
		b.ReportMetric(ms(wall, st.Passes), "steps-ms")
		b.ReportMetric(ms(idle, st.Passes), "idle-ms")
	})
	// Staged (the norms prepare the next product's activations) and
	// unstaged passes alternately, each step's wall and idle milliseconds
	// per pass in the log: a side-by-side comparison that sees the same
	// moments of a shared machine.
	b.Run(fmt.Sprintf("prefill%d/staging", n), func(b *testing.B) {
		defer func(v bool) { stageActivations = v }(stageActivations)
		var st [2]StepTimes
		defer r.TimeSteps(nil)
		for range b.N {
			for i, on := range []bool{true, false} {
				stageActivations = on
				r.TimeSteps(&st[i])
				if err := r.Forward(prefill); err != nil {
					b.Fatal(err)
				}
			}
		}
		var sum [2][2]time.Duration
		for s := range NumSteps {
			for i := range st {
				sum[i][0] += st[i].Wall[s]
				sum[i][1] += st[i].Idle[s]
			}
			b.Logf("%-10v staged %8.2f ms (idle %7.2f)   unstaged %8.2f ms (idle %7.2f)", s,
				ms(st[0].Wall[s], b.N), ms(st[0].Idle[s], b.N), ms(st[1].Wall[s], b.N), ms(st[1].Idle[s], b.N))
		}
		b.Logf("%-10s staged %8.2f ms (idle %7.2f)   unstaged %8.2f ms (idle %7.2f)", "pass",
			ms(sum[0][0], b.N), ms(sum[0][1], b.N), ms(sum[1][0], b.N), ms(sum[1][1], b.N))
		b.ReportMetric(ms(sum[0][0], b.N), "staged-ms")
		b.ReportMetric(ms(sum[1][0], b.N), "unstaged-ms")
	})
	// Decode at depth 0 (position 0 recomputed): at this size a step is
	// dominated by reading the weights; `ellm bench decode --depths` covers depth.
	b.Run("decode1", func(b *testing.B) {
		measure(b, []Segment{{Tokens: prompt[:1], Logits: LogitsLast}}, 1)
	})
	// Four sequences, one token each: one pass over the weights serves all
	// of them, so a step should cost little more than decode1's.
	b.Run("decode4", func(b *testing.B) {
		segs := make([]Segment, 4)
		for s := range segs {
			segs[s] = Segment{Slot: s, Tokens: prompt[s : s+1], Logits: LogitsLast}
		}
		measure(b, segs, len(segs))
	})
}

// resident is the process's resident memory as /proc/self/status splits it:
// anonymous (the Go heap, packed weights) and file-backed (mapped checkpoint).
func resident() string {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	var fields []string
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "RssAnon:") || strings.HasPrefix(line, "RssFile:") {
			fields = append(fields, strings.Join(strings.Fields(line), " "))
		}
	}
	return strings.Join(fields, ", ")
}

// cpuTime is the user+sys CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ms is d per pass in milliseconds.
func ms(d time.Duration, passes int) float64 {
	return float64(d.Microseconds()) / 1e3 / float64(passes)
}

// switches is the process's voluntary context switches so far: the pool's
// threads blocking on their futexes (and page faults that sleep).
func switches() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Nvcsw
}

// BenchmarkDecodeVsDRAM alternates, round by round on one pinned pool and
// the CLI's kernel paths (as the engine runs it, the caller being worker 0),
// a decode step of the checkpoint in ELLM_BENCH_MODEL with bf16 weights, one
// with int8 weights, and kernels/ceiling's DRAM read loop over 1 GiB. Each round's decode rates
// (packed weight bytes per step over its wall time) are divided by the same
// round's read rate: on a shared machine or VM the absolute rates drift
// with other tenants, the ratios less, which is how docs/performance.md
// tells a spread the machine causes from one the engine does. It also
// estimates a step's fixed cost (barriers, per-row ops, attention at depth
// 0), apart from the streaming: int8 reads half of bf16's bytes, so at one
// rate fixed = 2·t(int8) − t(bf16). With -v it logs every round.
//
//	ELLM_BENCH_MODEL=DIR go test ./pkg/model -run '^$' -bench DecodeVsDRAM -benchtime 60x -v
func BenchmarkDecodeVsDRAM(b *testing.B) {
	dir := os.Getenv("ELLM_BENCH_MODEL")
	if dir == "" {
		b.Skip("ELLM_BENCH_MODEL is not set")
	}
	cliKernels(b)
	pool := threads.New(0, true)
	defer pool.Close()
	defer pool.PinCaller()()
	meter, err := ceiling.NewMeter(pool, ceiling.Options{Reps: 1, WallClock: true})
	if err != nil {
		b.Fatal(err)
	}
	defer meter.Close()
	type engine struct {
		name  string
		r     *Runner
		bytes float64
		rate  []float64 // GB/s per round
	}
	var es []*engine
	for _, dtype := range []string{"bf16", "int8"} {
		m, err := Load(dir, LoadOptions{DType: dtype})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		cache, err := kvcache.New(m.Config, 1, 64, kvcache.BF16)
		if err != nil {
			b.Fatal(err)
		}
		defer cache.Close()
		r, err := m.NewRunner(cache, RunnerOptions{MaxTokens: 1, Pool: pool})
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		e := &engine{name: dtype, r: r}
		for _, mem := range m.WeightMemory() {
			e.bytes += float64(len(mem))
		}
		es = append(es, e)
	}
	seg := []Segment{{Tokens: []int32{1}, Logits: LogitsLast}}
	var dram, single []float64
	for range b.N {
		d := meter.DRAM()
		dram, single = append(dram, d.All), append(single, d.Single)
		for _, e := range es {
			start := time.Now()
			if err := e.r.Forward(seg); err != nil {
				b.Fatal(err)
			}
			e.rate = append(e.rate, e.bytes/time.Since(start).Seconds()/1e9)
		}
	}
	// The per-round table shows whether the decode steps follow the read
	// loop when the VM's memory changes speed between rounds, which the
	// medians below cannot tell.
	if testing.Verbose() && b.N > 1 {
		for i := range dram {
			line := fmt.Sprintf("round %3d: read %5.1f GB/s (one thread %5.1f)", i, dram[i], single[i])
			for _, e := range es {
				line += fmt.Sprintf("  %s %5.1f GB/s", e.name, e.rate[i])
			}
			b.Log(line)
		}
	}
	median := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	spread := func(v []float64) float64 { return 100 * (slices.Max(v) - slices.Min(v)) / median(v) }
	b.ReportMetric(median(dram), "dram-GB/s")
	b.ReportMetric(spread(dram), "dram-spread-%")
	step := map[string]float64{}
	mid := median(dram)
	for _, e := range es {
		// The rounds whose read rate was at or above the median, and those
		// below it: on a VM whose memory switches between two speeds, the
		// decode's fraction of each says whether it keeps up in the fast one.
		var ratio, fast, slow []float64
		for i := range dram {
			r := e.rate[i] / dram[i]
			ratio = append(ratio, r)
			if dram[i] >= mid {
				fast = append(fast, r)
			} else {
				slow = append(slow, r)
			}
		}
		if len(slow) > 0 {
			b.ReportMetric(100*median(fast), e.name+"-%dram-fast")
			b.ReportMetric(100*median(slow), e.name+"-%dram-slow")
		}
		b.ReportMetric(median(e.rate), e.name+"-GB/s")
		b.ReportMetric(spread(e.rate), e.name+"-spread-%")
		b.ReportMetric(100*median(ratio), e.name+"-%dram")
		b.ReportMetric(spread(ratio), e.name+"-%dram-spread-%")
		step[e.name] = e.bytes / median(e.rate) / 1e6 // ms
	}
	b.ReportMetric(2*step["int8"]-step["bf16"], "fixed-ms/step")
}
