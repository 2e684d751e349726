package engine

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
	"github.com/ellm-dev/ellm/pkg/synth"
)

// The engine's scheduling trade-offs on a Qwen3-0.6B-shaped synthetic model
// (generated once into $ELLM_MEASURE_DIR, default a temp dir). Prefill,
// decode, batching and session-cache speed are `ellm bench`'s; these two
// measure what only the scheduler decides (docs/engine.md):
//
//	ELLM_MEASURE_DIR=/tmp/qwen3-0.6b go test -run '^$' -bench 'Stall|SessionRestore' -benchtime 1x -timeout 30m ./pkg/engine

func measureModel(b *testing.B) string {
	if testing.Short() {
		b.Skip("a 0.6B model: not in -short")
	}
	dir := os.Getenv("ELLM_MEASURE_DIR")
	if dir == "" {
		dir = filepath.Join(b.TempDir(), "qwen3-0.6b")
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		cfg, err := modelcfg.Preset("qwen3-0.6b")
		if err != nil {
			b.Fatal(err)
		}
		if err := synth.Generate(cfg, dir, synth.Options{Seed: 1, Tokenizer: sharedtest.Path(b, "qwen3-tokenizer")}); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

func measureTokens(seed uint64) func(n int) []int32 {
	r := rand.New(rand.NewPCG(seed, 2))
	return func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(r.IntN(150000))
		}
		return out
	}
}

// BenchmarkStall: a slot decodes 40 tokens; after its 5th a 768-token prompt
// arrives on the second slot. Reported: the decoding slot's median and
// longest gap between tokens, and the long prompt's time to first token.
func BenchmarkStall(b *testing.B) {
	dir := measureModel(b)
	noStop := []int32{}
	for _, stall := range []int{64, 256, 1 << 20} {
		b.Run("stall="+itoa(stall), func(b *testing.B) {
			e := newModelEngine(b, dir, Options{Threads: 2, SequenceLength: 1024, BatchSize: 2, StallTokens: stall})
			tokens := measureTokens(1)
			for b.Loop() {
				var gaps []time.Duration
				var wg sync.WaitGroup
				fifth := make(chan struct{})
				wg.Add(1)
				go func() {
					defer wg.Done()
					last, n := time.Now(), 0
					_, _ = e.Generate(context.Background(), Request{Tokens: tokens(16), MaxTokens: 40, StopTokens: noStop}, func(Event) error {
						now := time.Now()
						if n++; n > 1 {
							gaps = append(gaps, now.Sub(last))
						}
						if n == 5 {
							close(fifth)
						}
						last = now
						return nil
					})
				}()
				<-fifth
				_, res := collect(b, e, Request{Tokens: tokens(768), MaxTokens: 1, StopTokens: noStop})
				wg.Wait()
				slices.Sort(gaps)
				b.ReportMetric(ms(gaps[len(gaps)/2]), "gap-p50-ms")
				b.ReportMetric(ms(gaps[len(gaps)-1]), "gap-max-ms")
				b.ReportMetric(ms(res.TTFT), "long-ttft-ms")
			}
		})
	}
}

// BenchmarkSessionRestore: session A (600 tokens + 4) is evicted by session B
// on a one-slot engine; A's second turn (transcript + 10 tokens) is then
// restored from the session store, or recomputed without one.
func BenchmarkSessionRestore(b *testing.B) {
	dir := measureModel(b)
	noStop := []int32{}
	for _, withStore := range []bool{true, false} {
		name := "recompute"
		if withStore {
			name = "store"
		}
		b.Run(name, func(b *testing.B) {
			o := Options{Threads: 2, SequenceLength: 1024, BatchSize: 1}
			if withStore {
				o.SessionStore = b.TempDir()
			}
			e := newModelEngine(b, dir, o)
			tokens := measureTokens(2)
			for b.Loop() {
				_, a := collect(b, e, Request{Tokens: tokens(600), MaxTokens: 4, SessionID: "a", StopTokens: noStop})
				collect(b, e, Request{Tokens: tokens(20), MaxTokens: 2, SessionID: "b", StopTokens: noStop})
				turn2 := append(slices.Clone(a.Tokens), tokens(10)...)
				_, res := collect(b, e, Request{Tokens: turn2, MaxTokens: 1, SessionID: "a", StopTokens: noStop})
				if res.Restored != withStore {
					b.Fatalf("restored %v with store %v", res.Restored, withStore)
				}
				b.ReportMetric(ms(res.TTFT), "turn2-ttft-ms")
				b.ReportMetric(float64(res.Prefilled), "turn2-prefilled")
			}
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func itoa(n int) string {
	if n >= 1<<20 {
		return "unbounded"
	}
	return strconv.Itoa(n)
}
