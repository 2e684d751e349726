package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/ellm-dev/ellm/pkg/tokenizer"
)

// textDecoder turns generated tokens into text without splitting a UTF-8
// character across outputs (byte-level BPE tokens may hold part of one).
// Special tokens (<|im_end|>) are not text.
type textDecoder struct {
	tok  Tokenizer
	text tokenizer.UTF8Stream
}

func (d *textDecoder) add(id int32) string {
	if d.tok.IsSpecial(id) {
		return ""
	}
	return d.text.Write(d.tok.TokenBytes(id))
}

// flush returns what is left, invalid bytes replaced.
func (d *textDecoder) flush() string { return d.text.Flush() }

// stopper cuts the text at the first stop string. It holds back the end of
// the text that could still become a stop string, so no stop string is
// ever streamed.
type stopper struct {
	stops []string
	held  string
}

// add returns the text that is safe to emit and whether a stop string was hit.
func (s *stopper) add(text string) (string, bool) {
	if len(s.stops) == 0 {
		return text, false
	}
	s.held += text
	cut := -1
	for _, st := range s.stops {
		if i := strings.Index(s.held, st); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		out := s.held[:cut]
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
// call with ev == nil carries what was held back.
func (s *Server) generate(ctx context.Context, req Request, stops []string, onText func(text string, ev *Event) error) (Result, error) {
	dec := textDecoder{tok: s.tok}
	st := stopper{stops: stops}
	stopped := false
	res, err := s.eng.Generate(ctx, req, func(ev Event) error {
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

// engineError maps the engine's errors to API errors.
func engineError(err error) error {
	switch {
	case errors.Is(err, ErrTooLong):
		return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: "max_tokens", code: "context_length_exceeded", msg: err.Error()}
	case errors.Is(err, ErrQueueFull):
		return &apiError{status: http.StatusServiceUnavailable, typ: "server_overloaded", code: "queue_full", msg: err.Error()}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &apiError{status: 499, typ: "cancelled", msg: "request cancelled"}
	}
	return fmt.Errorf("generate: %w", err)
}
