package server

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// counterValue reads a counter of the server's registry (the metrics
// route needs the API key, which metric does not send).
func counterValue(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	mfs, err := s.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

type sessionListBody struct {
	Object string          `json:"object"`
	Data   []sessionObject `json:"data"`
}

// call sends an admin request and decodes the JSON answer into v (if not nil).
func call(t *testing.T, method, url, key string, v any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
	}
	return resp.StatusCode
}

func TestSessionAdmin(t *testing.T) {
	eng := newFakeEngine(t, agentReply)
	srv, base := startServer(t, eng, Options{APIKey: "secret"})
	c := newClient(base, option.WithAPIKey("secret"))
	runAgent(t, c, 2, option.WithHeader("X-Session-ID", "alpha"))
	_, msgs := runAgent(t, c, 2, option.WithHeader("X-Session-ID", "beta/with slash"))

	// Admin routes are behind the API key.
	for _, key := range []string{"", "wrong"} {
		if code := call(t, "GET", base+"/v1/sessions", key, nil); code != http.StatusUnauthorized {
			t.Errorf("GET /v1/sessions with key %q: %d, want 401", key, code)
		}
		if code := call(t, "DELETE", base+"/v1/sessions/alpha", key, nil); code != http.StatusUnauthorized {
			t.Errorf("DELETE with key %q: %d, want 401", key, code)
		}
	}
	var list sessionListBody
	if code := call(t, "GET", base+"/v1/sessions", "secret", &list); code != http.StatusOK || list.Object != "list" || len(list.Data) != 2 {
		t.Fatalf("list: %d %+v", code, list)
	}
	for _, s := range list.Data {
		tr, _ := eng.Transcript(s.ID)
		if s.Object != "session" || s.Tokens != len(tr.Tokens) || s.Tokens == 0 || s.LastUsed == 0 || s.Bytes != int64(4*s.Tokens) {
			t.Errorf("listed %+v, transcript %d tokens", s, len(tr.Tokens))
		}
	}
	if list.Data[0].ID != "beta/with slash" {
		t.Errorf("most recently used first: %+v", list.Data)
	}

	var errBody struct{ Error struct{ Code string } }
	for _, id := range []string{"nobody", ""} {
		if code := call(t, "DELETE", base+"/v1/sessions/"+id, "secret", &errBody); code != http.StatusNotFound || errBody.Error.Code != "session_not_found" {
			t.Errorf("DELETE unknown %q: %d %+v", id, code, errBody)
		}
	}
	eng.store.busy["alpha"] = true
	if code := call(t, "DELETE", base+"/v1/sessions/alpha", "secret", &errBody); code != http.StatusConflict || errBody.Error.Code != "session_busy" {
		t.Errorf("DELETE busy: %d %+v", code, errBody)
	}
	eng.store.busy["alpha"] = false
	var del struct {
		ID      string
		Deleted bool
	}
	if code := call(t, "DELETE", base+"/v1/sessions/beta%2Fwith%20slash", "secret", &del); code != http.StatusOK || !del.Deleted || del.ID != "beta/with slash" {
		t.Fatalf("DELETE: %d %+v", code, del)
	}
	if code := call(t, "DELETE", base+"/v1/sessions/beta%2Fwith%20slash", "secret", nil); code != http.StatusNotFound {
		t.Errorf("second DELETE: %d, want 404", code)
	}
	call(t, "GET", base+"/v1/sessions", "secret", &list)
	if len(list.Data) != 1 || list.Data[0].ID != "alpha" {
		t.Errorf("after DELETE: %+v", list.Data)
	}
	// The deleted session is gone from memory too: its next turn starts afresh.
	hits := counterValue(t, srv, "ellm_session_hits_total")
	if _, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Messages: msgs,
		Tools: []openai.ChatCompletionToolUnionParam{weatherTool}}, option.WithHeader("X-Session-ID", "beta/with slash")); err != nil {
		t.Fatal(err)
	}
	if got := counterValue(t, srv, "ellm_session_hits_total"); got != hits {
		t.Errorf("a deleted session was extended (hits %v → %v)", hits, got)
	}
}

// Without an API key the admin routes are open, as vLLM's are; the server says so at start-up.
func TestSessionAdminWithoutKeyIsOpenAndLogged(t *testing.T) {
	var logs bytes.Buffer
	_, base := startServer(t, newFakeEngine(t, agentReply), Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if code := call(t, "GET", base+"/v1/sessions", "", nil); code != http.StatusOK {
		t.Errorf("GET /v1/sessions without a key configured: %d", code)
	}
	if !strings.Contains(logs.String(), "no API key") || !strings.Contains(logs.String(), "/v1/sessions") {
		t.Errorf("start-up log does not warn about open admin routes: %s", logs.String())
	}
}

func TestSessionTTLInMemory(t *testing.T) {
	var elapsed atomic.Int64
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return start.Add(time.Duration(elapsed.Load())) }
	eng := newFakeEngine(t, agentReply)
	_, base := startServer(t, eng, Options{SessionTTL: time.Hour, Clock: clock})
	c := newClient(base)
	sess := option.WithHeader("X-Session-ID", "ttl")
	_, msgs := runAgent(t, c, 2, sess)
	params := openai.ChatCompletionNewParams{Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{weatherTool}}
	elapsed.Add(int64(59 * time.Minute))
	resp, err := c.Chat.Completions.New(context.Background(), params, sess)
	if err != nil {
		t.Fatal(err)
	}
	if hits := metric(t, base, "ellm_session_hits_total"); hits != "2" {
		t.Fatalf("within the TTL: hits %s, want 2", hits)
	}
	msgs = append(msgs, resp.Choices[0].Message.ToParam(), openai.UserMessage("later"))
	elapsed.Add(int64(61 * time.Minute))
	var list sessionListBody
	call(t, "GET", base+"/v1/sessions", "", &list)
	for _, s := range list.Data {
		if s.ID == "ttl" && s.Tokens > 0 && s.Bytes == 0 {
			t.Errorf("expired in-memory session listed: %+v", s)
		}
	}
	params.Messages = msgs
	if _, err := c.Chat.Completions.New(context.Background(), params, sess); err != nil {
		t.Fatal(err)
	}
	if hits := metric(t, base, "ellm_session_hits_total"); hits != "2" {
		t.Errorf("after the TTL: hits %s, want still 2", hits)
	}
}
