package server

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

// syncBuffer is a log sink several goroutines write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// storeServer serves a tiny shared model with a session store in dir.
func storeServer(t *testing.T, model, dir string, maxBytes int64, logs *syncBuffer) (*engine.Engine, string) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(logs, nil))
	e, err := engine.New(openModel(t, sharedtest.Path(t, "models", model)), engine.Options{Threads: 1, SequenceLength: 1024,
		BatchSize: 1, SessionStore: dir, SessionStoreMaxBytes: maxBytes, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	_, base := startServer(t, e, Options{Logger: log})
	return e, base
}

// TestRealEngineTranscriptTiedToModel: a session's transcript is only ever
// used by the model (and tokenizer) that wrote it, and never when corrupt.
func TestRealEngineTranscriptTiedToModel(t *testing.T) {
	dir := t.TempDir()
	sess := option.WithHeader("X-Session-ID", "switch")
	var logs syncBuffer
	dense, base := storeServer(t, "tiny-qwen3-a", dir, -1, &logs)
	usages, _, msgs := userTurns(t, newClient(base), 2, sess)
	last := usages[len(usages)-1]
	held := last.prompt + last.completion - 1 // the reply's last token has no KV yet
	if err := dense.Close(); err != nil {
		t.Fatal(err)
	}
	next := greedyChat(append(msgs, openai.UserMessage("And now?"))...)
	ask := func(base string) (hits string, cached int) {
		t.Helper()
		c := newClient(base)
		resp, err := c.Chat.Completions.New(context.Background(), next, sess)
		if err != nil {
			t.Fatal(err)
		}
		return metric(t, base, "ellm_session_hits_total"), int(resp.Usage.PromptTokensDetails.CachedTokens)
	}

	// The MoE model on the same directory neither sees nor lists the dense
	// model's session: same tokenizer, another model.
	moe, base := storeServer(t, "tiny-qwen3moe-a", dir, -1, &logs)
	var list sessionListBody
	call(t, "GET", base+"/v1/sessions", "", &list)
	if len(list.Data) != 0 {
		t.Errorf("the MoE model lists %+v", list.Data)
	}
	if hits, cached := ask(base); hits != "0" || cached != 0 {
		t.Errorf("MoE model used the dense model's session: hits %s, cached %d", hits, cached)
	}
	if err := moe.Close(); err != nil {
		t.Fatal(err)
	}

	// Back on the dense model, its session is intact.
	dense, base = storeServer(t, "tiny-qwen3-a", dir, -1, &logs)
	if hits, cached := ask(base); hits != "1" || cached != held {
		t.Errorf("dense model after the switch: hits %s, cached %d, want 1 and %d", hits, cached, held)
	}
	if err := dense.Close(); err != nil {
		t.Fatal(err)
	}

	// An edited transcript (a token id changed, as the issue did) is
	// discarded with a log line, never used.
	files, _ := filepath.Glob(filepath.Join(dir, "*.transcript"))
	var edited int
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if i := bytes.Index(b, []byte(`"tokens":[151644,`)); i >= 0 {
			b[i+len(`"tokens":[15164`)] = '5' // <|im_start|> → <|im_end|>
			os.WriteFile(f, b, 0o644)
			edited++
		}
	}
	if edited == 0 {
		t.Fatalf("no transcript starting with <|im_start|> among %v", files)
	}
	_, base = storeServer(t, "tiny-qwen3-a", dir, -1, &logs)
	if hits, _ := ask(base); hits != "0" {
		t.Errorf("an edited transcript was used (hits %s)", hits)
	}
	if !strings.Contains(logs.String(), "transcript unusable") {
		t.Errorf("no log line for the edited transcript:\n%s", logs.String())
	}
}

// TestRealEngineStoreBound: many sessions through a small store stay
// within its bound, across a restart, and the latest session survives.
func TestRealEngineStoreBound(t *testing.T) {
	dir := t.TempDir()
	var logs syncBuffer
	// The tiny model's KV is 2 layers × 2 heads × 16 × bf16 × 2 = 256 B a position.
	const bound = 40 << 10
	e, base := storeServer(t, "tiny-qwen3-a", dir, bound, &logs)
	c := newClient(base)
	for i := range 8 {
		userTurns(t, c, 1, option.WithHeader("X-Session-ID", "s"+string(rune('0'+i))))
	}
	var list sessionListBody
	call(t, "GET", base+"/v1/sessions", "", &list)
	if len(list.Data) == 0 || list.Data[0].ID != "s7" {
		t.Fatalf("sessions %+v, want s7 first", list.Data)
	}
	stored := metric(t, base, "ellm_session_store_bytes")
	if max := metric(t, base, "ellm_session_store_max_bytes"); max != "40960" {
		t.Errorf("max bytes metric %s", max)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if n := dirSize(t, dir); n > bound {
		t.Errorf("%d bytes on disk after 8 sessions (metric said %s), bound %d", n, stored, bound)
	}
	if evicted := strings.Count(logs.String(), "evicting the least recently used session"); evicted == 0 {
		t.Error("nothing was evicted")
	}

	// Restarted with half the room: still within it, the latest session kept.
	e, base = storeServer(t, "tiny-qwen3-a", dir, bound/2, &logs)
	if n := dirSize(t, dir); n > bound/2 {
		t.Errorf("%d bytes on disk after a restart with bound %d", n, bound/2)
	}
	call(t, "GET", base+"/v1/sessions", "", &list)
	if len(list.Data) == 0 || list.Data[0].ID != "s7" || list.Data[0].Bytes == 0 {
		t.Errorf("after restart %+v, want s7 kept", list.Data)
	}
	e.Close()
}

// dirSize is what the session files take (not the index and lock).
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && !strings.HasPrefix(info.Name(), "sessions-") {
			n += info.Size()
		}
		return nil
	})
	return n
}
