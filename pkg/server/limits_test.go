package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/ellm-dev/ellm/pkg/engine"
)

// waitClosed reads from c until the server closes it; it fails the test if
// that takes longer than within.
func waitClosed(t *testing.T, c net.Conn, within time.Duration) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(within))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Errorf("connection still open after %v: %v", within, err)
	}
	return string(b)
}

// TestSlowClientsAreCut: connections that send half their headers or half
// their body are closed within the read timeout, the latter with a 408.
func TestSlowClientsAreCut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	eng := newFakeEngine(t, constReply("ok"))
	s, err := New(eng, eng.model(), Options{ReadTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	base, _ := serveOn(t, s)
	addr := strings.TrimPrefix(base, "http://")
	const n = 60
	conns := make([]net.Conn, n)
	start := time.Now()
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"messages\":"
		if i%2 == 0 {
			req = req[:30] // half the headers
		}
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			got := waitClosed(t, c, timeout+10*time.Second)
			if i%2 == 1 && !strings.HasPrefix(got, "HTTP/1.1 408") {
				t.Errorf("half-sent body: %q, want a 408", got)
			}
		})
	}
	wg.Wait()
	t.Logf("%d slow connections closed after %v (read timeout %v)", n, time.Since(start), timeout)
	// The server still answers, and a whole request is not cut by the read
	// timeout however long its reply takes.
	resp, err := http.Get(base + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", err, resp)
	}
	resp.Body.Close()
}

// TestLongStreamsOutliveTimeouts: the write deadline is per write, so a
// stream that takes several write (and read) timeouts to finish completes.
func TestLongStreamsOutliveTimeouts(t *testing.T) {
	eng := newFakeEngine(t, constReply(strings.Repeat("x", 30)))
	eng.delay = 20 * time.Millisecond
	s, err := New(eng, modelOf(eng), Options{ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	base, _ := serveOn(t, s)
	start := time.Now()
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(`{`+hi+`,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	data := sseData(t, resp.Body)
	resp.Body.Close()
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("the stream took %v: too short to test the timeouts", took)
	}
	if len(data) < 30 || data[len(data)-1] != "[DONE]" || strings.Contains(strings.Join(data, ""), `"error"`) {
		t.Errorf("stream cut: %q", data)
	}
}

// TestStalledReaderIsCut: a client that stops reading a stream is
// disconnected once a write blocks for the write timeout, freeing its slot.
func TestStalledReaderIsCut(t *testing.T) {
	eng := newFakeEngine(t, constReply(strings.Repeat("y", 1<<20)))
	s, err := New(eng, modelOf(eng), Options{WriteTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	base, _ := serveOn(t, s)
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{` + hi + `,"stream":true}`
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	// Read nothing: the socket buffers fill, then the server's write blocks.
	deadline := time.Now().Add(60 * time.Second)
	for eng.Stats().SlotsBusy == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	for eng.Stats().SlotsBusy != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a client that stopped reading still holds its slot")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMaxConnections: beyond the limit a connection is not served until
// another closes.
func TestMaxConnections(t *testing.T) {
	eng := newFakeEngine(t, constReply("ok"))
	s, err := New(eng, eng.model(), Options{MaxConnections: 2})
	if err != nil {
		t.Fatal(err)
	}
	base, _ := serveOn(t, s)
	addr := strings.TrimPrefix(base, "http://")
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// A request on each proves the server accepted it.
		io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
		buf := make([]byte, 12)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "HTTP/1.1 200" {
			t.Fatalf("held connection: %q %v", buf, err)
		}
		held = append(held, c)
	}
	get := func(timeout time.Duration) error {
		cl := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := cl.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(300 * time.Millisecond); err == nil {
		t.Fatal("a third connection was served while two were open")
	}
	held[0].Close()
	if err := get(10 * time.Second); err != nil {
		t.Fatalf("after one closed: %v", err)
	}
}

// busyEngine answers the first failures requests with a full queue.
type busyEngine struct {
	*fakeEngine
	failures int
	calls    atomic.Int32
}

func (b *busyEngine) Generate(ctx context.Context, req engine.Request, fn func(engine.Event) error) (engine.Result, error) {
	if int(b.calls.Add(1)) <= b.failures {
		return engine.Result{}, fmt.Errorf("%w: 1024 requests waiting", engine.ErrQueueFull)
	}
	return b.fakeEngine.Generate(ctx, req, fn)
}

// TestQueueFullIs429: a full queue is a 429 with Retry-After, which the
// official openai-go client retries (after waiting as told).
func TestQueueFullIs429(t *testing.T) {
	eng := &busyEngine{fakeEngine: newFakeEngine(t, constReply("ok")), failures: 1}
	_, base := startServer(t, eng, Options{})
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(`{`+hi+`}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantError(t, resp.StatusCode, b, 429, "", "queue_full")
	if ra := resp.Header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After %q", ra)
	}

	eng.calls.Store(0)
	start := time.Now()
	c := newClient(base, option.WithMaxRetries(2))
	got, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	if err != nil || got.Choices[0].Message.Content != "ok" {
		t.Fatalf("openai-go after a 429: %v", err)
	}
	if n := eng.calls.Load(); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Errorf("retried after %v: Retry-After 1 not honoured", took)
	}
}

// TestDrain: on shutdown, a stream that ends within the drain timeout
// completes; one still running when it expires gets an error event in
// OpenAI's shape and [DONE], and its session transcript is saved.
func TestDrain(t *testing.T) {
	eng := newFakeEngine(t, func(p string) string {
		if strings.Contains(p, "short") {
			return strings.Repeat("b", 20) // ~0.2 s: within the drain timeout
		}
		return strings.Repeat("z", 10000)
	})
	eng.delay = 10 * time.Millisecond
	s, err := New(eng, modelOf(eng), Options{DrainTimeout: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	base, stop := serveOn(t, s)
	open := func(session, content string) *http.Response {
		req, _ := http.NewRequest("POST", base+"/v1/chat/completions",
			strings.NewReader(`{"messages":[{"role":"user","content":"`+content+`"}],"stream":true}`))
		req.Header.Set("X-Session-ID", session)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	long := open("long", "write a lot")
	defer long.Body.Close()
	buf := make([]byte, 1)
	if _, err := long.Body.Read(buf); err != nil { // the stream has begun
		t.Fatal(err)
	}
	short := open("short", "short")
	defer short.Body.Close()

	stopped := make(chan error, 1)
	start := time.Now()
	go func() { stopped <- stop() }()

	longData := sseData(t, long.Body)
	if n := len(longData); n < 3 || longData[n-1] != "[DONE]" {
		t.Fatalf("long stream ended with %q", longData[max(0, n-3):])
	}
	var e errBody
	if err := json.Unmarshal([]byte(longData[len(longData)-2]), &e); err != nil || e.Error.Code == nil || *e.Error.Code != "server_shutting_down" || e.Error.Type == "" {
		t.Errorf("last event before [DONE]: %s", longData[len(longData)-2])
	}
	if took := time.Since(start); took < 350*time.Millisecond {
		t.Errorf("stream ended %v after shutdown began, before the drain timeout", took)
	}
	shortData := sseData(t, short.Body)
	if n := len(shortData); n < 2 || shortData[n-1] != "[DONE]" || strings.Contains(strings.Join(shortData, ""), "error") {
		t.Errorf("short stream: %q", shortData)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the drain")
	}
	// Both transcripts were saved, the cut one up to where it was cut, and
	// the sessions' KV was saved once the requests were done.
	for _, id := range []string{"long", "short"} {
		if tr, ok := eng.Transcript(id); !ok || len(tr.Tokens) < 10 {
			t.Errorf("session %s not saved: %v %d tokens", id, ok, len(tr.Tokens))
		}
	}
	eng.store.mu.Lock()
	saves := eng.store.saves
	eng.store.mu.Unlock()
	if saves != 1 {
		t.Errorf("the engine saved its sessions %d times, want once", saves)
	}
	// After the drain, a request is refused.
	if _, err := http.Get(base + "/health"); err == nil {
		t.Errorf("server still listening after shutdown: %v", err)
	}
}
