package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/ellm-dev/ellm/pkg/server/openai"
)

// apiError is an error with the HTTP status and OpenAI error fields it is
// reported with.
type apiError struct {
	status int
	typ    string
	param  string
	code   string
	msg    string
	// retryAfter, in seconds, is sent as Retry-After (with 409, 429 and 503).
	retryAfter int
}

func (e *apiError) Error() string { return e.msg }

// invalid is a 400 for a bad field; param names it.
func invalid(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: param, msg: fmt.Sprintf(format, args...)}
}

func asAPIError(err error) *apiError {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{status: http.StatusInternalServerError, typ: "internal_error", msg: err.Error()}
	}
	return ae
}

// errorBody is err in OpenAI's error shape.
func errorBody(err error) openai.ErrorResponse {
	ae := asAPIError(err)
	body := openai.ErrorResponse{Error: openai.ErrorBody{Message: ae.msg, Type: ae.typ}}
	if ae.param != "" {
		body.Error.Param = &ae.param
	}
	if ae.code != "" {
		body.Error.Code = &ae.code
	}
	return body
}

func writeError(w http.ResponseWriter, err error) int {
	ae := asAPIError(err)
	if ae.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ae.retryAfter))
	}
	writeJSON(w, ae.status, errorBody(err))
	return ae.status
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func jsonError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		return invalid(typeErr.Field, "%s: expected %s, got JSON %s", typeErr.Field, typeErr.Type, typeErr.Value)
	case errors.As(err, &syntaxErr):
		return invalid("", "malformed JSON at byte %d: %v", syntaxErr.Offset, err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("", "malformed JSON: unexpected end of body")
	}
	return invalid("", "invalid JSON: %v", err)
}
