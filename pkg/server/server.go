// Package server is ellm's OpenAI/vLLM-compatible HTTP API: one routes
// table, OpenAI's error shape, server-sent events, Prometheus metrics and
// transcript sessions (see docs/server.md).
package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ellm-dev/ellm/pkg/conversation"
	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/grammar"
)

// Options configure a Server.
type Options struct {
	// ModelName is the served model name; "" uses the engine's.
	ModelName string
	// APIKey, when set, is required as "Authorization: Bearer KEY".
	APIKey string
	// MaxBodyBytes bounds a request body; 0 means 16 MiB.
	MaxBodyBytes int64
	// Version is reported by GET /version.
	Version string
	// MaxSessions bounds the transcript sessions held in memory; 0 means
	// 1024. The engine's session store, if any, keeps them all.
	MaxSessions int
	// SessionTTL forgets sessions idle for longer; 0 = never. (The engine
	// applies its own to what it keeps.)
	SessionTTL time.Duration
	// Clock ages sessions; nil = time.Now (tests inject one).
	Clock func() time.Time
	// DrainTimeout bounds how long Serve waits for in-flight requests once
	// its context is cancelled; then the requests still running end with an
	// error (a stream with an error event and [DONE]). 0 means 30s.
	DrainTimeout time.Duration
	// ReadTimeout bounds reading a request's headers, and then its body;
	// 0 means 30s.
	ReadTimeout time.Duration
	// WriteTimeout bounds each write of a response: a client that stops
	// reading (a stream included) for longer is disconnected and its slot
	// freed. It is not a bound on the whole response, so long streams are
	// never cut. 0 means 60s.
	WriteTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle that long; 0 means 120s.
	IdleTimeout time.Duration
	// MaxConnections bounds the open connections: beyond it, new ones wait
	// in the listen backlog until one closes. 0 means no limit.
	MaxConnections int
	Logger         *slog.Logger
	// JSONStyle lays out response_format JSON: "spaced" (default, as
	// Python's json.dumps) or "compact".
	JSONStyle string
}

// Server serves one engine.
type Server struct {
	eng Engine
	// chat renders prompts, resolves sampling and streams replies.
	chat     *conversation.Model
	tok      conversation.Tokenizer
	opts     Options
	model    string
	created  int64
	metrics  *metrics
	sessions *sessionStore

	vocabOnce sync.Once // the grammar vocabulary is built on first use
	vocab     *grammar.Vocab
	jsonStyle *grammar.Style
	grammars  grammarCache

	unknown fieldLog // unknown request fields already logged
	// drain is cancelled when the drain timeout expires: the generations
	// still running end with errDraining.
	drain     context.Context
	stopDrain context.CancelCauseFunc
	handlers  sync.WaitGroup // requests being handled
}

// New returns a server for eng, which serves the model whose tokenizer,
// chat template and defaults m holds.
func New(eng Engine, m *conversation.Model, opts Options) (*Server, error) {
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = 16 << 20
	}
	if opts.MaxSessions == 0 {
		opts.MaxSessions = 1024
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&opts.DrainTimeout, 30 * time.Second}, {&opts.ReadTimeout, 30 * time.Second},
		{&opts.WriteTimeout, 60 * time.Second}, {&opts.IdleTimeout, 120 * time.Second}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.JSONStyle == "" {
		opts.JSONStyle = grammar.Spaced.Name
	}
	if m == nil || m.Tokenizer == nil {
		return nil, errors.New("server: no model (tokenizer)")
	}
	style, err := grammar.StyleByName(opts.JSONStyle)
	if err != nil {
		return nil, err
	}
	s := &Server{eng: eng, chat: m, tok: m.Tokenizer, opts: opts, created: time.Now().Unix(), jsonStyle: style}
	s.model = opts.ModelName
	if s.model == "" {
		s.model = eng.Info().ModelName
	}
	s.metrics = newMetrics(eng)
	s.sessions = newSessionStore(eng, opts.MaxSessions, opts.SessionTTL, opts.Clock, opts.Logger)
	if opts.APIKey == "" {
		opts.Logger.Warn("no API key: every route, including the session admin routes (GET /v1/sessions, DELETE /v1/sessions/{id}), is open to anyone who can connect")
	}
	s.drain, s.stopDrain = context.WithCancelCause(context.Background())
	return s, nil
}

// Handler is the routes table.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, r := range []struct {
		pattern string
		h       func(http.ResponseWriter, *http.Request) error
	}{
		{"POST /v1/chat/completions", s.handleChat},
		{"POST /v1/completions", s.handleCompletions},
		{"GET /v1/models", s.handleModels},
		{"GET /v1/models/{model...}", s.handleModel},
		{"POST /tokenize", s.handleTokenize},
		{"POST /detokenize", s.handleDetokenize},
		{"GET /version", s.handleVersion},
		{"GET /v1/sessions", s.handleSessions},
		{"DELETE /v1/sessions/{id...}", s.handleDeleteSession},
	} {
		mux.Handle(r.pattern, s.authorized(s.instrument(r.pattern, r.h)))
	}
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.Handle("GET /metrics", s.authorized(s.metrics.handler()))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: http.StatusNotFound, typ: "not_found_error", msg: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)})
	})
	return mux
}

// authorized requires the API key when one is set, comparing it in
// constant time.
func (s *Server) authorized(h http.Handler) http.Handler {
	if s.opts.APIKey == "" {
		return h
	}
	want := []byte("Bearer " + s.opts.APIKey)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			writeError(w, &apiError{status: http.StatusUnauthorized, typ: "authentication_error", code: "invalid_api_key", msg: "missing or invalid API key"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// statusWriter remembers the status a handler wrote, for the metrics, and
// gives every write its own deadline: a response may take minutes to
// generate, so the connection-wide http.Server.WriteTimeout would cut long
// streams, while a client that stops reading must not hold its slot forever.
type statusWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	status  int
}

func (w *statusWriter) deadline() {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.deadline()
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	w.deadline()
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument turns a handler's error into OpenAI's error body and counts
// the request by route and status.
func (s *Server) instrument(route string, h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.handlers.Add(1)
		defer s.handlers.Done()
		sw := &statusWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: s.opts.WriteTimeout}
		if err := h(sw, r); err != nil {
			if sw.status == 0 {
				writeError(sw, err)
			}
			var ae *apiError
			if !errors.As(err, &ae) || ae.status >= 500 {
				s.opts.Logger.Error("request failed", "route", route, "err", err)
			}
		}
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		s.metrics.requests.WithLabelValues(route, fmt.Sprint(status)).Inc()
	})
}

// Serve answers requests on ln until ctx is cancelled, then stops accepting
// and waits (up to DrainTimeout) for in-flight requests to finish. Requests
// still running then end with an error (streams get an error event and
// [DONE]); Serve returns once every handler has returned and the sessions
// are saved.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.opts.MaxConnections > 0 {
		ln = limitListener(ln, s.opts.MaxConnections)
	}
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: s.opts.ReadTimeout, IdleTimeout: s.opts.IdleTimeout,
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		ErrorLog:    slog.NewLogLogger(s.opts.Logger.Handler(), slog.LevelDebug)}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.opts.Logger.Info("draining in-flight requests", "timeout", s.opts.DrainTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.DrainTimeout)
	defer cancel()
	var drainErr error
	if err := hs.Shutdown(sctx); err != nil {
		s.opts.Logger.Warn("drain timeout expired: ending the requests still running")
		s.stopDrain(errDraining)
		// Their final error chunks need a moment; a client that does not
		// read them is cut when its write deadline passes.
		gctx, gcancel := context.WithTimeout(context.Background(), s.opts.WriteTimeout)
		defer gcancel()
		if err := hs.Shutdown(gctx); err != nil {
			drainErr = fmt.Errorf("drain: %w", errors.Join(err, hs.Close()))
		}
	}
	s.handlers.Wait()
	// Transcripts are written as each request ends (a cut one included);
	// the KV the engine holds in slots is written now (a closed engine
	// wrote it as it closed).
	if err := s.SaveSessions(); err != nil && !errors.Is(err, engine.ErrClosed) {
		drainErr = errors.Join(drainErr, fmt.Errorf("save sessions: %w", err))
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return errors.Join(fmt.Errorf("serve: %w", err), drainErr)
	}
	return drainErr
}

// errDraining ends the requests still running when the drain timeout expires.
var errDraining = errors.New("the server is shutting down")

// generationContext is r's context, also cancelled (with errDraining) when
// the drain timeout expires.
func (s *Server) generationContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(r.Context())
	stop := context.AfterFunc(s.drain, func() { cancel(context.Cause(s.drain)) })
	return ctx, func() { stop(); cancel(nil) }
}

// checkModel accepts the served name, the engine's own name, or none.
func (s *Server) checkModel(name string) error {
	if name == "" || name == s.model || name == s.eng.Info().ModelName {
		return nil
	}
	return &apiError{status: http.StatusNotFound, typ: "not_found_error", param: "model", code: "model_not_found",
		msg: fmt.Sprintf("model %q does not exist; this server serves %q", name, s.model)}
}

// sessionID is the request's session: the X-Session-ID header, else the
// body's session_id.
func sessionID(r *http.Request, body string) string {
	if h := strings.TrimSpace(r.Header.Get("X-Session-ID")); h != "" {
		return h
	}
	return body
}
