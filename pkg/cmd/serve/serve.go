// Package serve implements `ellm serve`: the OpenAI/vLLM-compatible HTTP
// server (pkg/server) on an engine in this process.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/ellm-dev/ellm/pkg/cmdutil"
	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/grammar"
	"github.com/ellm-dev/ellm/pkg/modeldir"
	"github.com/ellm-dev/ellm/pkg/server"
)

// Options are the inputs of `ellm serve`.
type Options struct {
	IO      cmdutil.IOStreams
	Ctx     context.Context
	Version string

	cmdutil.EngineFlags

	Host            string
	Port            int
	ServedModelName string
	APIKey          string
	MaxQueue        int
	QueueTimeout    time.Duration
	SessionStore    string
	SessionMaxBytes cmdutil.ByteLimit
	SessionTTL      time.Duration
	MaxBodyBytes    int64
	DrainTimeout    time.Duration
	ReadTimeout     time.Duration
	WriteTimeout    time.Duration
	IdleTimeout     time.Duration
	MaxConnections  int
	Verbose         bool
	JSONStyle       string

	// Listen opens the listener (tests pass port 0 and learn the address
	// from Ready); nil is net.Listen.
	Listen func(network, address string) (net.Listener, error)
	// Listening, if set, is called with the address once the port is open
	// (answering 503 while the model loads).
	Listening func(net.Addr)
	// Ready, if set, is called with the address once the server answers
	// requests.
	Ready func(net.Addr)

	// newEngine starts the engine (engine.New; tests slow it down).
	newEngine func(*modeldir.Model, engine.Options) (*engine.Engine, error)
}

// NewCmdServe returns the cobra command; runF replaces the behaviour in tests.
func NewCmdServe(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Version: f.Version}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve an OpenAI/vLLM-compatible HTTP API",
		Long: `Serve the model over an OpenAI/vLLM-compatible HTTP API:
/v1/chat/completions, /v1/completions, /v1/models, /tokenize, /detokenize,
/health, /version and /metrics (Prometheus); GET /v1/sessions and
DELETE /v1/sessions/{id} administer sessions (behind --api-key when set).

Requests naming a session (header X-Session-ID or body field session_id)
keep their exact token transcript: the next request that extends the
conversation prefills only its new messages. With --session-store they
outlive eviction from a slot and restarts, within --session-store-max-bytes
(least recently used evicted first) and --session-ttl. See docs/server.md.

The port opens before the model loads: until it is ready, /health and
every route answer 503 (a readiness probe waits, a liveness probe passes
the TCP check). A deployment that does not fit in memory is refused before
anything is allocated (exit status 1, with the largest --sequence-length
that fits). SIGINT or SIGTERM stops accepting requests, lets those in
flight finish (up to --drain-timeout; streams still running then get an
error event and [DONE]), then exits.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Ctx = cmd.Context()
			if runF != nil {
				return runF(opts)
			}
			return serveRun(opts)
		},
	}
	fl := cmd.Flags()
	opts.EngineFlags.AddFlags(fl, 4096, "KV positions per slot: the longest prompt + reply", 4, "KV cache slots: requests generated at once")
	fl.StringVar(&opts.Host, "host", "0.0.0.0", "address to listen on")
	fl.IntVar(&opts.Port, "port", 8000, "port to listen on")
	fl.StringVar(&opts.ServedModelName, "served-model-name", "", "model name in the API (default: the model's)")
	fl.StringVar(&opts.APIKey, "api-key", "", "require Authorization: Bearer KEY")
	fl.IntVar(&opts.MaxQueue, "max-queue", 1024, "requests waiting for a slot before new ones get 429 (with Retry-After)")
	fl.DurationVar(&opts.QueueTimeout, "queue-timeout", 0, "longest wait for a slot before a 429 (0 = no limit)")
	fl.StringVar(&opts.SessionStore, "session-store", "", "directory keeping sessions (KV and transcripts) across eviction and restarts")
	cmdutil.ByteLimitVar(fl, &opts.SessionMaxBytes, "session-store-max-bytes", "unbounded", cmdutil.StoreBoundLegacy,
		"bound of --session-store, least recently used sessions evicted beyond it: a size (e.g. 20GiB), auto (10% of its file system's free space at start-up) or unbounded")
	fl.DurationVar(&opts.SessionTTL, "session-ttl", 24*time.Hour, "delete sessions idle for longer (0 = never)")
	fl.Int64Var(&opts.MaxBodyBytes, "max-body-bytes", 16<<20, "largest request body accepted (413 beyond)")
	fl.DurationVar(&opts.DrainTimeout, "drain-timeout", 30*time.Second, "on SIGINT/SIGTERM, how long in-flight requests may finish before they end with an error event")
	fl.DurationVar(&opts.ReadTimeout, "read-timeout", 30*time.Second, "longest wait for a request's headers, then for its body (408 beyond)")
	fl.DurationVar(&opts.WriteTimeout, "write-timeout", 60*time.Second, "longest a client may stop reading a response before it is disconnected (never cuts a stream that is read)")
	fl.DurationVar(&opts.IdleTimeout, "idle-timeout", 120*time.Second, "keep-alive connections idle that long are closed")
	fl.IntVar(&opts.MaxConnections, "max-connections", 4096, "open connections at most; more wait in the listen backlog (0 = no limit; keep it above --max-queue + slots)")
	fl.StringVar(&opts.JSONStyle, "json-style", "spaced", "layout of response_format JSON: spaced (as json.dumps) or compact")
	fl.BoolVarP(&opts.Verbose, "verbose", "v", false, "log every request failure and engine detail")
	return cmd
}

func serveRun(opts *Options) error {
	ctx := opts.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	level := slog.LevelInfo
	if opts.Verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(opts.IO.ErrOut, &slog.HandlerOptions{Level: level}))
	if _, err := grammar.StyleByName(opts.JSONStyle); err != nil && opts.JSONStyle != "" {
		return fmt.Errorf("--json-style: %w", err)
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return fmt.Errorf("--port %d: not a port", opts.Port)
	}
	if opts.MaxConnections < 0 {
		return fmt.Errorf("--max-connections %d: must be 0 (no limit) or positive", opts.MaxConnections)
	}
	listen := opts.Listen
	if listen == nil {
		listen = net.Listen
	}
	ln, err := listen("tcp", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// Closing the API's queue (when Serve drains) closes the real listener.
	api := newConnQueue(ln.Addr(), func() { _ = ln.Close() })
	loading := newConnQueue(ln.Addr(), nil)
	sw := newSwitcher(ln, loading)
	stopLoading := serveLoading(loading)
	log.Info("listening while the model loads", "addr", ln.Addr().String())
	if opts.Listening != nil {
		opts.Listening(ln.Addr())
	}
	fail := func(err error) error {
		stopLoading()
		_ = api.Close()
		return err
	}
	// The kernel calibration (about 100 ms when not cached) is part of loading.
	if err := cmdutil.ChooseKernels(opts.Version, opts.KernelFlags, log); err != nil {
		return fail(err)
	}
	eo := opts.EngineFlags.Options()
	opts.WeightsCache.Apply(&eo, opts.Version)
	eo.SessionStore, eo.MaxQueue, eo.QueueTimeout, eo.Logger = opts.SessionStore, opts.MaxQueue, opts.QueueTimeout, log
	eo.SessionStoreMaxBytes, eo.SessionTTL = opts.SessionMaxBytes.Bytes(), opts.SessionTTL
	newEngine := opts.newEngine
	if newEngine == nil {
		newEngine = engine.New
	}
	md, err := cmdutil.OpenModel(opts.ModelPath, log)
	if err != nil {
		return fail(err)
	}
	eng, err := newEngine(md, eo)
	if err != nil {
		return fail(err)
	}
	srv, err := server.New(eng, md.Conversation(), server.Options{
		ModelName: opts.ServedModelName, APIKey: opts.APIKey, MaxBodyBytes: opts.MaxBodyBytes, Version: opts.Version,
		SessionTTL: opts.SessionTTL, DrainTimeout: opts.DrainTimeout, ReadTimeout: opts.ReadTimeout,
		WriteTimeout: opts.WriteTimeout, IdleTimeout: opts.IdleTimeout, MaxConnections: opts.MaxConnections, Logger: log,
		JSONStyle: opts.JSONStyle,
	})
	if err != nil {
		return fail(errors.Join(err, eng.Close()))
	}
	sw.to(api)
	stopLoading()
	info := eng.Info()
	log.Info("serving", "addr", ln.Addr().String(), "model", info.ModelName, "served_as", opts.ServedModelName,
		"slots", info.Slots, "sequence_length", info.SequenceLength, "kernels", info.KernelPath, "auth", opts.APIKey != "")
	if opts.Ready != nil {
		opts.Ready(ln.Addr())
	}
	err = srv.Serve(ctx, api)
	// Closing the engine writes the sessions held in slots to the store.
	if cerr := eng.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close engine: %w", cerr))
	}
	if err == nil {
		log.Info("stopped")
	}
	return err
}
