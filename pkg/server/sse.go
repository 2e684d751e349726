package server

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// eventStream writes server-sent events in OpenAI's shape: each chunk is
// "data: {json}\n\n", flushed at once, and the stream ends with
// "data: [DONE]\n\n". The headers go out with the first chunk, so that
// errors found before any output still get their HTTP status.
type eventStream struct {
	w       http.ResponseWriter
	started bool
}

func newEventStream(w http.ResponseWriter) *eventStream { return &eventStream{w: w} }

func (e *eventStream) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode chunk: %w", err)
	}
	return e.raw(b)
}

func (e *eventStream) raw(b []byte) error {
	if !e.started {
		h := e.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		e.w.WriteHeader(http.StatusOK)
		e.started = true
	}
	if _, err := fmt.Fprintf(e.w, "data: %s\n\n", b); err != nil {
		return err
	}
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

func (e *eventStream) done() { _ = e.raw([]byte("[DONE]")) }

// fail reports an error that happened after the stream began, as vLLM does:
// an error event in OpenAI's error shape, then the end of the stream.
func (e *eventStream) fail(err error) {
	_ = e.send(errorBody(err))
	e.done()
}
