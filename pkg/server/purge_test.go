package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/pkg/engine"
)

type chatAnswer struct {
	Choices []struct {
		Message  struct{ Content string }
		Logprobs struct {
			Content []struct {
				Token   string
				Logprob float64
			}
		}
	}
	Usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	}
}

// greedyPost sends a greedy chat of a system prompt and user text, in
// session sid ("" = none), with the tokens' logprobs.
func greedyPost(t *testing.T, base, sid, system, user string) chatAnswer {
	t.Helper()
	msgs := []map[string]string{{"role": "user", "content": user}}
	if system != "" {
		msgs = append([]map[string]string{{"role": "system", "content": system}}, msgs...)
	}
	body, _ := json.Marshal(map[string]any{"messages": msgs, "max_tokens": 8, "temperature": 0, "logprobs": true})
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	if sid != "" {
		req.Header.Set("X-Session-ID", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a chatAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != http.StatusOK || len(a.Choices) != 1 {
		t.Fatalf("chat: %d %v", resp.StatusCode, err)
	}
	return a
}

type deleteAnswer struct {
	Deleted bool
	Purged  purgedObject
}

// TestRealEngineDeleteSessionPurges: with the tiny model, one slot, a
// prefix store in memory and on disk, sessions A and B sharing a system
// prompt: DELETE /v1/sessions/A removes A's own blocks and keeps the
// shared ones; A's conversation sent again is recomputed past the system
// prompt and gives the same tokens, to the bit of their logprobs. After a
// restart, deleting B (which the new server never served) deletes B's
// block files from the directory; an unknown session is a 404 that changes
// nothing; a session with a request running is a 409.
func TestRealEngineDeleteSessionPurges(t *testing.T) {
	dir := t.TempDir()
	opts := engine.Options{BatchSize: 1, PrefixBlockTokens: 16, PrefixCacheDir: dir, PrefixCacheDiskBytes: -1}
	system := strings.Repeat("You are a careful assistant who answers briefly. ", 4)
	userA := strings.Repeat("Tell me about the river Alpha and its old stone bridges. ", 10)
	userB := strings.Repeat("Tell me about the mountain Beta and its winter trails. ", 10)

	e := tinyEngine(t, opts)
	_, base := startServer(t, e, Options{})
	a := greedyPost(t, base, "A", system, userA)
	greedyPost(t, base, "B", system, userB)
	greedyPost(t, base, "", "", "Something else entirely.") // B's content leaves the slot too
	var del deleteAnswer
	if code := call(t, "DELETE", base+"/v1/sessions/A", "", &del); code != http.StatusOK || !del.Deleted {
		t.Fatalf("DELETE A: %d %+v", code, del)
	}
	p := del.Purged
	if p.PrefixBlocks == 0 || p.PrefixTokens == 0 || p.PrefixBytes == 0 || p.SharedBlocksKept == 0 {
		t.Errorf("purged %+v: want A's own blocks removed and the system prompt's kept", p)
	}
	if n := num(t, base, "ellm_prefix_store_purged_blocks_total"); n != float64(p.PrefixBlocks) {
		t.Errorf("metric: %v blocks purged, the response says %d", n, p.PrefixBlocks)
	}
	if n := num(t, base, "ellm_sessions_deleted_total"); n != 1 {
		t.Errorf("metric: %v sessions deleted", n)
	}
	again := greedyPost(t, base, "", system, userA)
	// What stays cached is the system prompt's blocks, and at most 15
	// tokens of B's first own block: not A's (its 8 reply tokens count).
	if c := again.Usage.PromptTokensDetails.CachedTokens; c == 0 || c+p.PrefixTokens > a.Usage.PromptTokens+8+15 {
		t.Errorf("A's prompt again: %d of %d tokens cached, want only the shared system prompt (A's %d purged)", c, a.Usage.PromptTokens, p.PrefixTokens)
	}
	if !slices.Equal(again.Choices[0].Logprobs.Content, a.Choices[0].Logprobs.Content) {
		t.Errorf("recomputed reply %+v, first %+v", again.Choices[0].Logprobs.Content, a.Choices[0].Logprobs.Content)
	}
	if err := e.Close(); err != nil { // writes the prefixes in memory to disk
		t.Fatal(err)
	}

	e2 := tinyEngine(t, opts)
	defer e2.Close()
	_, base2 := startServer(t, e2, Options{})
	files, _ := filepath.Glob(filepath.Join(dir, "*.pkv"))
	if code := call(t, "DELETE", base2+"/v1/sessions/B", "", &del); code != http.StatusOK || del.Purged.PrefixDiskBlocks == 0 || del.Purged.PrefixDiskBytes == 0 {
		t.Fatalf("DELETE B after a restart: %d %+v", code, del)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*.pkv"))
	if len(left) != len(files)-del.Purged.PrefixDiskBlocks {
		t.Errorf("%d block files, %d after purging %d", len(files), len(left), del.Purged.PrefixDiskBlocks)
	}
	if n := num(t, base2, "ellm_prefix_disk_purged_blocks_total"); n != float64(del.Purged.PrefixDiskBlocks) {
		t.Errorf("metric: %v files purged, the response says %d", n, del.Purged.PrefixDiskBlocks)
	}
	var eb errBody
	if code := call(t, "DELETE", base2+"/v1/sessions/nobody", "", &eb); code != http.StatusNotFound || eb.Error.Code == nil || *eb.Error.Code != "session_not_found" {
		t.Errorf("unknown session: %d %+v", code, eb)
	}
	if after, _ := filepath.Glob(filepath.Join(dir, "*.pkv")); len(after) != len(left) || num(t, base2, "ellm_sessions_deleted_total") != 1 {
		t.Errorf("deleting an unknown session changed something: %d files → %d", len(left), len(after))
	}

	// A request of session C in flight: 409, and C is intact afterwards.
	body := `{"messages":[{"role":"user","content":"Count."}],"max_tokens":1500,"ignore_eos":true,"stream":true}`
	req, _ := http.NewRequest("POST", base2+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("X-Session-ID", "C")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	dreq, _ := http.NewRequest("DELETE", base2+"/v1/sessions/C", nil)
	dresp, err := http.DefaultClient.Do(dreq)
	if err != nil {
		t.Fatal(err)
	}
	eb = errBody{}
	json.NewDecoder(dresp.Body).Decode(&eb)
	dresp.Body.Close()
	if dresp.StatusCode != http.StatusConflict || eb.Error.Code == nil || *eb.Error.Code != "session_busy" || dresp.Header.Get("Retry-After") != "1" {
		t.Errorf("DELETE while C runs: %d %+v, Retry-After %q", dresp.StatusCode, eb, dresp.Header.Get("Retry-After"))
	}
	resp.Body.Close()
}

// num reads a metric as a number.
func num(t *testing.T, base, name string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(metric(t, base, name), 64)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}
