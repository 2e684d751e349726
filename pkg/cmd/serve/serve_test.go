package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/ellm-dev/ellm/pkg/cmdutil"
	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/modeldir"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want func(o *Options) bool
	}{
		{nil, nil, func(o *Options) bool {
			return o.Host == "0.0.0.0" && o.Port == 8000 && o.BatchSize == 4 && o.SequenceLength == 4096 && o.APIKey == "" &&
				o.SessionMaxBytes.Bytes() == 0 && o.SessionTTL == 24*time.Hour &&
				o.DrainTimeout == 30*time.Second && o.ReadTimeout == 30*time.Second && o.WriteTimeout == time.Minute &&
				o.IdleTimeout == 2*time.Minute && o.MaxConnections == 4096
		}},
		{[]string{"--session-store-max-bytes", "1000000", "--session-ttl", "0"}, map[string]string{"ELLM_SESSION_TTL": "1h"}, func(o *Options) bool {
			return o.SessionMaxBytes.Bytes() == 1000000 && o.SessionTTL == 0
		}},
		{nil, map[string]string{"ELLM_SESSION_STORE_MAX_BYTES": "-1", "ELLM_SESSION_TTL": "90m"}, func(o *Options) bool {
			return o.SessionMaxBytes.Bytes() == -1 && o.SessionTTL == 90*time.Minute
		}},
		{nil, map[string]string{"ELLM_SESSION_STORE_MAX_BYTES": "unbounded"}, func(o *Options) bool { return o.SessionMaxBytes.Bytes() == -1 }},
		{[]string{"--session-store-max-bytes", "20GiB", "--prefix-cache-dir", "/p", "--prefix-cache-disk-bytes", "1T", "--prefix-cache-bytes", "off"}, nil,
			func(o *Options) bool {
				eo := o.EngineFlags.Options()
				return o.SessionMaxBytes.Bytes() == 20<<30 && eo.PrefixCacheDir == "/p" && eo.PrefixCacheDiskBytes == 1e12 && eo.PrefixCacheBytes == -1
			}},
		{[]string{"--drain-timeout", "5s", "--read-timeout", "1s", "--write-timeout", "2s", "--idle-timeout", "3s", "--max-connections", "7"},
			nil, func(o *Options) bool {
				return o.DrainTimeout == 5*time.Second && o.ReadTimeout == time.Second && o.WriteTimeout == 2*time.Second &&
					o.IdleTimeout == 3*time.Second && o.MaxConnections == 7
			}},
		{[]string{"--model-path", "/m", "--chunk-size", "64", "--sequence-length", "1024", "--batch-size", "8", "--port", "9000",
			"--host", "127.0.0.1", "--api-key", "k", "--served-model-name", "qwen", "--queue-timeout", "2s", "--session-store", "/s", "--dtype", "int8"},
			nil, func(o *Options) bool {
				return o.ModelPath == "/m" && o.ChunkSize == 64 && o.SequenceLength == 1024 && o.BatchSize == 8 && o.Port == 9000 &&
					o.Host == "127.0.0.1" && o.APIKey == "k" && o.ServedModelName == "qwen" && o.QueueTimeout == 2*time.Second &&
					o.SessionStore == "/s" && o.DType == "int8"
			}},
		{[]string{"--port", "1"}, map[string]string{"ELLM_PORT": "2", "ELLM_API_KEY": "env-key"}, func(o *Options) bool {
			return o.Port == 1 && o.APIKey == "env-key"
		}},
	} {
		var got *Options
		f := &cmdutil.Factory{IO: cmdutil.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard},
			Getenv: func(k string) string { return tc.env[k] }}
		cmd := NewCmdServe(f, func(o *Options) error { got = o; return nil })
		cmd.SetArgs(tc.args)
		cmd.PreRunE = func(c *cobra.Command, _ []string) error { return cmdutil.ApplyConfig(c, viper.New(), f.Getenv) }
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if !tc.want(got) {
			t.Errorf("%v %v: options %+v", tc.args, tc.env, got)
		}
	}
}

// tinyModel is the tiny dense Qwen3 of the shared data set.
func tinyModel(t *testing.T) string {
	return sharedtest.Path(t, "models", "tiny-qwen3-a")
}

// TestServeRun starts the server on the tiny model, answers a request,
// then drains and exits when the context is cancelled.
func TestServeRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log bytes.Buffer
	addr := make(chan net.Addr, 1)
	opts := &Options{IO: cmdutil.IOStreams{Out: io.Discard, ErrOut: &log}, Ctx: ctx, Version: "test",
		EngineFlags: cmdutil.EngineFlags{ModelPath: tinyModel(t), DType: "bf16", KVDType: "bf16", Threads: 1, SequenceLength: 256, BatchSize: 1},
		Host:        "127.0.0.1", Port: 0, MaxQueue: 4, MaxBodyBytes: 1 << 20, DrainTimeout: 5 * time.Second,
		Ready: func(a net.Addr) { addr <- a }}
	done := make(chan error, 1)
	go func() { done <- serveRun(opts) }()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a.String()
	case err := <-done:
		t.Fatalf("serveRun: %v\n%s", err, log.String())
	}
	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"Hello","max_tokens":3}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"completion_tokens":3`)) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serveRun: %v", err)
	}
	for _, want := range []string{"engine ready", "weight_bytes", "kv_bytes", "scratch_bytes", "kernels", "serving", "stopped"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
}

// TestServeAnswers503WhileLoading: the port opens before the model loads;
// /health and the API answer 503 until the engine is ready, then 200.
func TestServeAnswers503WhileLoading(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log bytes.Buffer
	listening, ready := make(chan net.Addr, 1), make(chan net.Addr, 1)
	release := make(chan struct{})
	opts := &Options{IO: cmdutil.IOStreams{Out: io.Discard, ErrOut: &log}, Ctx: ctx, Version: "test",
		EngineFlags: cmdutil.EngineFlags{ModelPath: tinyModel(t), DType: "bf16", KVDType: "bf16", Threads: 1, SequenceLength: 256, BatchSize: 1},
		Host:        "127.0.0.1", Port: 0, MaxQueue: 4, MaxBodyBytes: 1 << 20, DrainTimeout: 5 * time.Second,
		Listening: func(a net.Addr) { listening <- a }, Ready: func(a net.Addr) { ready <- a },
		newEngine: func(m *modeldir.Model, o engine.Options) (*engine.Engine, error) { <-release; return engine.New(m, o) }}
	done := make(chan error, 1)
	go func() { done <- serveRun(opts) }()
	base := "http://" + (<-listening).String()
	get := func(method, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(`{"prompt":"Hi","max_tokens":2}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for range 3 { // several connections, all answered by the loading server
		if code, body := get("GET", "/health"); code != 503 || !strings.Contains(body, "loading") {
			t.Fatalf("/health while loading: %d %s", code, body)
		}
	}
	if code, body := get("POST", "/v1/completions"); code != 503 || !strings.Contains(body, "model_loading") {
		t.Fatalf("completions while loading: %d %s", code, body)
	}
	close(release)
	<-ready
	if code, _ := get("GET", "/health"); code != 200 {
		t.Fatalf("/health once ready: %d", code)
	}
	if code, body := get("POST", "/v1/completions"); code != 200 {
		t.Fatalf("completions once ready: %d %s", code, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serveRun: %v\n%s", err, log.String())
	}
}

// TestServeRefusesWhatDoesNotFit: the fit check fails the command (exit 1)
// and closes the port it opened.
func TestServeRefusesWhatDoesNotFit(t *testing.T) {
	listening := make(chan net.Addr, 1)
	opts := &Options{IO: cmdutil.IOStreams{Out: io.Discard, ErrOut: io.Discard}, Ctx: context.Background(),
		EngineFlags: cmdutil.EngineFlags{ModelPath: tinyModel(t), Threads: 1, SequenceLength: 60_000_000, BatchSize: 1},
		Host:        "127.0.0.1", Port: 0, Listening: func(a net.Addr) { listening <- a }}
	err := serveRun(opts)
	var fe *engine.FitError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "the largest --sequence-length that fits") {
		t.Fatalf("60M positions: %v", err)
	}
	if c, err := net.Dial("tcp", (<-listening).String()); err == nil {
		c.Close()
		t.Error("the port is still open after the refusal")
	}
}

// startServe runs serveRun on the tiny model with a session store in dir;
// stop cancels it (SIGTERM) and returns its result. The test ends with a stop.
func startServe(t *testing.T, dir string, drain time.Duration) (base string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	opts := &Options{IO: cmdutil.IOStreams{Out: io.Discard, ErrOut: io.Discard}, Ctx: ctx, Version: "test",
		EngineFlags: cmdutil.EngineFlags{ModelPath: tinyModel(t), DType: "bf16", KVDType: "bf16", Threads: 1, SequenceLength: 4096, BatchSize: 1},
		Host:        "127.0.0.1", MaxQueue: 4, MaxBodyBytes: 1 << 20, SessionStore: dir, SessionTTL: time.Hour, DrainTimeout: drain,
		Ready: func(a net.Addr) { addr <- a }}
	done := make(chan error, 1)
	go func() { done <- serveRun(opts) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	select {
	case a := <-addr:
		return "http://" + a.String(), stop
	case err := <-done:
		t.Fatalf("serveRun: %v", err)
	}
	return "", nil
}

// TestServeDrainsStreams: SIGTERM during a long stream on the real engine
// ends it, once the drain timeout expires, with an error event and [DONE];
// the session is saved and found by the next server on the same store.
func TestServeDrainsStreams(t *testing.T) {
	dir := t.TempDir()
	base, stop := startServe(t, dir, 300*time.Millisecond)
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(
		`{"messages":[{"role":"user","content":"Tell me a long story."}],"stream":true,"ignore_eos":true,"temperature":0}`))
	req.Header.Set("X-Session-ID", "drained")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadString('\n'); err != nil { // the stream has begun
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	rest, _ := io.ReadAll(r)
	events := strings.Split(strings.TrimSpace(string(rest)), "\n\n")
	if n := len(events); n < 3 || events[n-1] != "data: [DONE]" ||
		!strings.HasPrefix(events[n-2], `data: {"error":{`) || !strings.Contains(events[n-2], `"code":"server_shutting_down"`) {
		t.Fatalf("the stream ended with %q", events[max(0, len(events)-2):])
	}
	if err := <-stopped; err != nil {
		t.Fatalf("serveRun: %v", err)
	}

	base, _ = startServe(t, dir, time.Second)
	list, err := http.Get(base + "/v1/sessions")
	if err != nil {
		t.Fatal(err)
	}
	defer list.Body.Close()
	var sessions struct {
		Data []struct {
			ID     string
			Tokens int
		}
	}
	if err := json.NewDecoder(list.Body).Decode(&sessions); err != nil {
		t.Fatal(err)
	}
	if len(sessions.Data) != 1 || sessions.Data[0].ID != "drained" || sessions.Data[0].Tokens < 20 {
		t.Errorf("sessions after the restart: %+v", sessions.Data)
	}
}
