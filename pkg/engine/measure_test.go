package engine

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
	"github.com/ellm-dev/ellm/pkg/synth"
)

// TestMeasure prints the measurements of docs/engine.md on a Qwen3-0.6B-shaped
// synthetic model (generated once into $ELLM_MEASURE_DIR, default a temp dir):
//
//	ELLM_ENGINE_MEASURE=1 ELLM_MEASURE_DIR=/tmp/qwen3-0.6b go test -run TestMeasure -v -timeout 30m ./pkg/engine
func TestMeasure(t *testing.T) {
	if os.Getenv("ELLM_ENGINE_MEASURE") == "" {
		t.Skip("set ELLM_ENGINE_MEASURE=1 to measure (minutes)")
	}
	dir := os.Getenv("ELLM_MEASURE_DIR")
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "qwen3-0.6b")
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		cfg, err := modelcfg.Preset("qwen3-0.6b")
		if err != nil {
			t.Fatal(err)
		}
		tok := sharedtest.Path(t, "qwen3-tokenizer")
		if err := synth.Generate(cfg, dir, synth.Options{Seed: 1, Tokenizer: tok}); err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	tokens := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(r.IntN(150000))
		}
		return out
	}
	greedy := []int32{} // no stop tokens: fixed lengths

	t.Run("speed", func(t *testing.T) {
		for _, dtype := range []string{"bf16", "int8"} {
			e := newModelEngine(t, dir, Options{DType: dtype, Threads: 2, SequenceLength: 1024, BatchSize: 2})
			best := time.Duration(1 << 62)
			for range 2 {
				_, res := collect(t, e, Request{Tokens: tokens(512), MaxTokens: 1, StopTokens: greedy})
				best = min(best, res.TTFT-res.QueueTime)
			}
			_, res := collect(t, e, Request{Tokens: tokens(16), MaxTokens: 33, StopTokens: greedy})
			dec := res.Total - res.TTFT
			t.Logf("%s weights, 2 threads, kernels %s: prefill 512 tokens %.1f tokens/s; decode %.1f tokens/s (32 tokens, batch 1)",
				dtype, e.Info().KernelPath, 512/best.Seconds(), 32/dec.Seconds())
			e.Close()
		}
	})

	// Decode stall while a 768-token prompt is admitted next to a decoding slot.
	t.Run("stall", func(t *testing.T) {
		for _, stall := range []int{64, 256, 1 << 20} {
			e := newModelEngine(t, dir, Options{Threads: 2, SequenceLength: 1024, BatchSize: 2, StallTokens: stall})
			var gaps []time.Duration
			var wg sync.WaitGroup
			tenth := make(chan struct{})
			wg.Add(1)
			go func() {
				defer wg.Done()
				last, n := time.Now(), 0
				e.Generate(context.Background(), Request{Tokens: tokens(16), MaxTokens: 40, StopTokens: greedy}, func(Event) error {
					now := time.Now()
					if n++; n > 1 {
						gaps = append(gaps, now.Sub(last))
					}
					if n == 5 {
						close(tenth)
					}
					last = now
					return nil
				})
			}()
			<-tenth
			_, res := collect(t, e, Request{Tokens: tokens(768), MaxTokens: 1, StopTokens: greedy})
			wg.Wait()
			slices.Sort(gaps)
			t.Logf("stall %7d: decode gap p50 %v max %v; the 768-token prompt's TTFT %v",
				stall, gaps[len(gaps)/2].Round(time.Millisecond), gaps[len(gaps)-1].Round(time.Millisecond), res.TTFT.Round(time.Millisecond))
			e.Close()
		}
	})

	// Session turn 2 after eviction: restored from the store vs recomputed.
	t.Run("session", func(t *testing.T) {
		for _, withStore := range []bool{true, false} {
			o := Options{Threads: 2, SequenceLength: 1024, BatchSize: 1}
			if withStore {
				o.SessionStore = t.TempDir()
			}
			e := newModelEngine(t, dir, o)
			_, a := collect(t, e, Request{Tokens: tokens(600), MaxTokens: 4, SessionID: "a", StopTokens: greedy})
			collect(t, e, Request{Tokens: tokens(20), MaxTokens: 2, SessionID: "b", StopTokens: greedy})
			turn2 := append(slices.Clone(a.Tokens), tokens(10)...)
			_, res := collect(t, e, Request{Tokens: turn2, MaxTokens: 1, SessionID: "a", StopTokens: greedy})
			st := e.Stats()
			t.Logf("session turn 2 (%d tokens, store %v): TTFT %v, prefilled %d, restored %v, store %d bytes",
				len(turn2), withStore, res.TTFT.Round(time.Millisecond), res.Prefilled, res.Restored, st.SessionStoreBytes)
			e.Close()
		}
	})

	// Continuous batching: aggregate decode throughput of n concurrent requests.
	t.Run("batch", func(t *testing.T) {
		e := newModelEngine(t, dir, Options{Threads: 2, SequenceLength: 256, BatchSize: 4})
		for _, n := range []int{1, 2, 4} {
			var wg sync.WaitGroup
			start := time.Now()
			var mu sync.Mutex
			var firstAll time.Time
			for range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, res := collect(t, e, Request{Tokens: tokens(16), MaxTokens: 17, StopTokens: greedy})
					mu.Lock()
					if f := start.Add(res.TTFT); f.After(firstAll) {
						firstAll = f
					}
					mu.Unlock()
				}()
			}
			wg.Wait()
			dec := time.Since(firstAll)
			t.Logf("%d concurrent requests: %.1f decode tokens/s in total", n, float64(16*n)/dec.Seconds())
		}
	})
}
