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

	"github.com/ellm-dev/ellm/pkg/chat"
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
	// its context is cancelled; 0 means 30s.
	DrainTimeout time.Duration
	Logger       *slog.Logger
}

// Server serves one engine.
type Server struct {
	eng      Engine
	tok      Tokenizer
	tmpl     *chat.Template
	opts     Options
	model    string
	created  int64
	endIDs   []int32
	metrics  *metrics
	sessions *sessionStore

	vocabOnce sync.Once // the grammar vocabulary is built on first use
	vocab     *grammar.Vocab
}

// New returns a server for eng.
func New(eng Engine, opts Options) (*Server, error) {
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = 16 << 20
	}
	if opts.MaxSessions == 0 {
		opts.MaxSessions = 1024
	}
	if opts.DrainTimeout == 0 {
		opts.DrainTimeout = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	s := &Server{eng: eng, tok: eng.Tokenizer(), tmpl: eng.ChatTemplate(), opts: opts, created: time.Now().Unix()}
	s.model = opts.ModelName
	if s.model == "" {
		s.model = eng.Info().ModelName
	}
	s.endIDs = eng.EOS()
	s.metrics = newMetrics(eng)
	s.sessions = newSessionStore(eng, opts.MaxSessions, opts.SessionTTL, opts.Clock, opts.Logger)
	if opts.APIKey == "" {
		opts.Logger.Warn("no API key: every route, including the session admin routes (GET /v1/sessions, DELETE /v1/sessions/{id}), is open to anyone who can connect")
	}
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

// statusWriter remembers the status a handler wrote, for the metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
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
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// instrument turns a handler's error into OpenAI's error body and counts
// the request by route and status.
func (s *Server) instrument(route string, h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
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
// and waits (up to DrainTimeout) for in-flight requests to finish.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 5 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) }}
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
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
		return fmt.Errorf("drain: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
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
