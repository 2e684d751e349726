package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/ellm-dev/ellm/pkg/tokenizer"
)

// output says how generated tokens become the reply's text.
type output struct {
	stops []string
	// includeStop keeps the stop string that ended the text
	// (include_stop_str_in_output).
	includeStop bool
	// keepSpecial writes special tokens' text (skip_special_tokens false).
	keepSpecial bool
	// minTokens: stop strings are not matched before this many tokens.
	minTokens int
}

// textDecoder turns generated tokens into text without splitting a UTF-8
// character across outputs (byte-level BPE tokens may hold part of one).
// Special tokens (<|im_end|>) are not text unless keepSpecial.
type textDecoder struct {
	tok         Tokenizer
	keepSpecial bool
	text        tokenizer.UTF8Stream
}

func (d *textDecoder) add(id int32) string {
	if !d.keepSpecial && d.tok.IsSpecial(id) {
		return ""
	}
	return d.text.Write(d.tok.TokenBytes(id))
}

// flush returns what is left, invalid bytes replaced.
func (d *textDecoder) flush() string { return d.text.Flush() }

// stopper cuts the text at the first stop string. It holds back the end of
// the text that could still become a stop string, so no stop string is
// ever streamed (unless include, which keeps the one that ends the text).
// Until armed, stop strings are not matched (min_tokens).
type stopper struct {
	stops   []string
	include bool
	armed   bool
	held    string
}

// add returns the text that is safe to emit and whether a stop string was hit.
func (s *stopper) add(text string) (string, bool) {
	if len(s.stops) == 0 {
		return text, false
	}
	s.held += text
	cut, end := -1, 0
	for _, st := range s.stops {
		if !s.armed {
			break
		}
		if i := strings.Index(s.held, st); i >= 0 && (cut < 0 || i < cut) {
			cut, end = i, i+len(st)
		}
	}
	if cut >= 0 {
		if !s.include {
			end = cut
		}
		out := s.held[:end]
		s.held = ""
		return out, true
	}
	keep := 0
	for _, st := range s.stops {
		for n := min(len(st)-1, len(s.held)); n > keep; n-- {
			if strings.HasSuffix(s.held, st[:n]) {
				keep = n
				break
			}
		}
	}
	out := s.held[:len(s.held)-keep]
	s.held = s.held[len(s.held)-keep:]
	return out, false
}

func (s *stopper) flush() string {
	out := s.held
	s.held = ""
	return out
}

// generate runs req and calls onText with each piece of text as it is
// decoded (stop strings applied) and the event that produced it; a final
// call with ev == nil carries what was held back. When the generation fails
// part way, the result still holds the transcript so far.
func (s *Server) generate(ctx context.Context, req Request, out output, onText func(text string, ev *Event) error) (Result, error) {
	dec := textDecoder{tok: s.tok, keepSpecial: out.keepSpecial}
	st := stopper{stops: out.stops, include: out.includeStop}
	stopped, n := false, 0
	res, err := s.eng.Generate(ctx, req, func(ev Event) error {
		n++
		st.armed = n >= out.minTokens
		text, hit := st.add(dec.add(ev.Token))
		if err := onText(text, &ev); err != nil {
			return err
		}
		if hit {
			stopped = true
			return ErrStop
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
	if stopped {
		res.FinishReason = "stop"
		return res, nil
	}
	rest, _ := st.add(dec.flush())
	if err := onText(rest+st.flush(), nil); err != nil {
		return res, err
	}
	return res, nil
}

// retryAfter is the Retry-After, in seconds, of an overloaded server's 429:
// OpenAI's SDKs honour it and retry.
const retryAfter = 1

// engineError maps the engine's errors to API errors.
func engineError(err error) error {
	switch {
	case errors.Is(err, ErrTooLong):
		return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: "max_tokens", code: "context_length_exceeded", msg: err.Error()}
	case errors.Is(err, ErrQueueFull):
		return &apiError{status: http.StatusTooManyRequests, typ: "server_overloaded", code: "queue_full", msg: err.Error(), retryAfter: retryAfter}
	case errors.Is(err, ErrClosed):
		return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "server_shutting_down", msg: err.Error()}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &apiError{status: 499, typ: "cancelled", msg: "request cancelled"}
	}
	return fmt.Errorf("generate: %w", err)
}
