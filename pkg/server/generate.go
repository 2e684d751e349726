package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/ellm-dev/ellm/pkg/conversation"
	"github.com/ellm-dev/ellm/pkg/engine"
)

// generate runs req and calls onDelta with what each token adds to the
// reply (stream's pipeline: text, stop strings, reasoning, tool calls) and
// the event that produced it, then with what the stream held back (ev ==
// nil), unless the generation failed. When it fails part way, the result
// still holds the transcript so far.
func (s *Server) generate(ctx context.Context, req engine.Request, stream *conversation.Stream, onDelta func(d conversation.Delta, ev *engine.Event) error) (engine.Result, error) {
	res, err := s.eng.Generate(ctx, req, func(ev engine.Event) error {
		d, stop := stream.Token(ev.Token)
		if err := onDelta(d, &ev); err != nil {
			return err
		}
		if stop {
			return engine.ErrStop
		}
		return nil
	})
	if err != nil {
		if errors.Is(context.Cause(ctx), errDraining) {
			return res, &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "server_shutting_down",
				msg: "the server is shutting down: the request was still running when the drain timeout expired", retryAfter: retryAfter}
		}
		return res, engineError(err)
	}
	s.metrics.observe(res)
	for _, d := range stream.Flush() {
		if err := onDelta(d, nil); err != nil {
			return res, err
		}
	}
	return res, nil
}

// retryAfter is the Retry-After, in seconds, of an overloaded server's 429:
// OpenAI's SDKs honour it and retry.
const retryAfter = 1

// engineError maps the engine's errors to API errors.
func engineError(err error) error {
	switch {
	case errors.Is(err, engine.ErrTooLong):
		return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: "max_tokens", code: "context_length_exceeded", msg: err.Error()}
	case errors.Is(err, engine.ErrQueueFull):
		return &apiError{status: http.StatusTooManyRequests, typ: "server_overloaded", code: "queue_full", msg: err.Error(), retryAfter: retryAfter}
	case errors.Is(err, engine.ErrClosed):
		return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "server_shutting_down", msg: err.Error()}
	case errors.Is(err, engine.ErrInvalid):
		return invalid("", "%v", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &apiError{status: 499, typ: "cancelled", msg: "request cancelled"}
	}
	return fmt.Errorf("generate: %w", err)
}
