package bench

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/modeldir"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

// recorder answers every request with a fixed reply and records it.
type recorder struct {
	reqs        []engine.Request
	transcripts [][]int32
}

func (r *recorder) Generate(_ context.Context, req engine.Request, _ func(engine.Event) error) (engine.Result, error) {
	r.reqs = append(r.reqs, req)
	reply := make([]int32, req.MaxTokens)
	for i := range reply {
		reply[i] = int32(len(r.reqs)*100 + i)
	}
	r.transcripts = append(r.transcripts, append(slices.Clone(req.Tokens), reply...))
	return engine.Result{PromptTokens: len(req.Tokens), Tokens: r.transcripts[len(r.transcripts)-1]}, nil
}

func TestRunAgentSendsTheAgentPattern(t *testing.T) {
	opts := AgentOptions{Turns: 3, SystemTokens: 50, MemoryTokens: 30, TurnTokens: 10, ReplyTokens: 4, MemoryReplyTokens: 2, Seed: 1, Scale: 1}
	var g recorder
	res, err := RunAgent(context.Background(), &g, preset(t, "qwen3-0.6b"), opts, &Progress{})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.reqs) != 6 || len(res) != 6 {
		t.Fatalf("%d requests, %d results; want 6", len(g.reqs), len(res))
	}
	seq := AgentSequenceLength(opts)
	for i, req := range g.reqs {
		main, r := i%2 == 0, res[i]
		if want := map[bool]string{true: "main", false: "memory"}[main]; r.Kind != want || r.Turn != i/2+1 {
			t.Errorf("request %d: turn %d %s, want turn %d %s", i, r.Turn, r.Kind, i/2+1, want)
		}
		if len(req.Tokens)+req.MaxTokens > seq || req.SessionID != "" {
			t.Errorf("request %d: %d + %d tokens > sequence length %d, or session %q", i, len(req.Tokens), req.MaxTokens, seq, req.SessionID)
		}
		if i < 2 {
			continue
		}
		// A main request begins with the whole transcript of the previous
		// one (reusable but its last token, which has no KV yet), a memory
		// request with the previous one but its instruction.
		prev := g.reqs[i-2]
		shared := len(prev.Tokens) - agentInstruction
		reusable := shared
		if main {
			shared = len(prev.Tokens) + prev.MaxTokens
			reusable = shared - 1
		}
		if r.Reusable != reusable {
			t.Errorf("request %d: %d reusable tokens, want %d", i, r.Reusable, reusable)
		}
		if main && !slices.Equal(req.Tokens[:shared], g.transcripts[i-2]) ||
			!main && !slices.Equal(req.Tokens[:shared], prev.Tokens[:shared]) {
			t.Errorf("request %d does not begin with its predecessor's %d tokens", i, shared)
		}
	}
	// The two kinds share only the template's first tokens.
	a, b := g.reqs[0].Tokens, g.reqs[1].Tokens
	if !slices.Equal(a[:3], b[:3]) || a[3] == b[3] {
		t.Errorf("main and memory prompts begin %v and %v, want 3 shared tokens", a[:4], b[:4])
	}
	if rows := res.Rows(); len(rows) != 7 || rows[6][0] != "main, turns 2+" {
		t.Errorf("rows %v", rows)
	}
}

// Against the engine with the tiny model, one slot: every main turn after
// the first comes back whole from the prefix store.
func TestRunAgentOnTheEngine(t *testing.T) {
	dir := sharedtest.Path(t, "models", "tiny-qwen3-a")
	opts := AgentOptions{Turns: 3, SystemTokens: 300, MemoryTokens: 120, TurnTokens: 40, ReplyTokens: 6, MemoryReplyTokens: 3, Seed: 2, Scale: 1}
	for _, slots := range []int{1, 2} {
		t.Run(fmt.Sprint("slots=", slots), func(t *testing.T) {
			md, err := modeldir.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			e, err := engine.New(md, engine.Options{Threads: 1, BatchSize: slots, SequenceLength: AgentSequenceLength(opts), PrefixBlockTokens: 64})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			cfg := e.Info().Config
			res, err := RunAgent(context.Background(), e, cfg, opts, &Progress{})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Turn > 1 && r.CachedFraction < 0.99 {
					t.Errorf("turn %d %s: %d of %d reusable tokens cached", r.Turn, r.Kind, r.Cached, r.Reusable)
				}
				if slots == 1 && r.Turn > 1 && r.Restored == 0 {
					t.Errorf("one slot, turn %d %s: nothing restored from the prefix store", r.Turn, r.Kind)
				}
			}
		})
	}
}
