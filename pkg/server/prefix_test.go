package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/ellm-dev/ellm/pkg/engine"
)

// TestRealEnginePrefixCacheWithoutSessions: what an agent sends (no
// X-Session-ID): a long prompt, an unrelated one, the long one again. The
// long prompt stays cached with 4 slots (in its slot) and with 1 slot (in
// the prefix store).
func TestRealEnginePrefixCacheWithoutSessions(t *testing.T) {
	for _, slots := range []int{4, 1} {
		t.Run(fmt.Sprintf("slots=%d", slots), func(t *testing.T) {
			e := tinyEngine(t, engine.Options{BatchSize: slots})
			defer e.Close()
			_, base := startServer(t, e, Options{})
			prompt, cached := agentPattern(t, base)
			if prompt[0] < 700 || cached[0] != 0 || cached[1] > 5 || cached[2] != prompt[2]-1 {
				t.Errorf("prompt tokens %v, cached %v: want 0, a few template tokens, all but the last", prompt, cached)
			}
			hits, _ := strconv.Atoi(metric(t, base, "ellm_prefix_store_hits_total"))
			stored, _ := strconv.ParseFloat(metric(t, base, "ellm_prefix_store_bytes"), 64)
			switch {
			case slots == 4 && hits != 0:
				t.Errorf("4 slots: %d prefix store hits, the prompt never left its slot", hits)
			case slots == 1 && (hits != 1 || stored == 0):
				t.Errorf("1 slot: %d prefix store hits, %v bytes stored; want the long prompt restored", hits, stored)
			}
		})
	}
}

// agentPattern sends what an agent does without session ids, greedily: a
// long prompt (~1000 tokens of system prompt), one with another system
// prompt, the long one again. It returns each request's prompt and cached
// tokens.
func agentPattern(t *testing.T, base string) (prompt, cached []int) {
	t.Helper()
	var long, other strings.Builder
	for i := range 60 {
		fmt.Fprintf(&long, "Rule %d: keep the answer short and cite file %d. ", i, i*7)
	}
	for i := range 20 {
		fmt.Fprintf(&other, "Extract memory item %d from the conversation. ", i)
	}
	l1 := greedyChat(openai.SystemMessage(long.String()), openai.UserMessage("List the files."))
	l2 := greedyChat(openai.SystemMessage(other.String()), openai.UserMessage("Go."))
	c := newClient(base)
	for _, p := range []openai.ChatCompletionNewParams{l1, l2, l1} {
		resp, err := c.Chat.Completions.New(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		cached = append(cached, int(resp.Usage.PromptTokensDetails.CachedTokens))
		prompt = append(prompt, int(resp.Usage.PromptTokens))
	}
	return prompt, cached
}
