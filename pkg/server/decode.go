package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// decode reads a JSON request body into v: at most MaxBodyBytes of valid
// UTF-8 holding exactly one JSON object. The fields v knows are typed
// strictly (a wrong type is a 400 naming the field); fields it does not know
// are ignored and logged once per name, as vLLM does, so that SDKs sending
// newer OpenAI fields keep working.
//
// The body must arrive within ReadTimeout (a slow or stalled client is cut
// with a 408); the deadline is lifted once it has, so that the server keeps
// noticing a client that goes away while its reply is generated.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) error {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.opts.ReadTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err == nil {
		_ = rc.SetReadDeadline(time.Time{})
	} else {
		// The rest of the body is not wanted: close the connection.
		w.Header().Set("Connection", "close")
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error",
				msg: fmt.Sprintf("request body exceeds %d bytes", s.opts.MaxBodyBytes)}
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return &apiError{status: http.StatusRequestTimeout, typ: "invalid_request_error", code: "request_timeout",
				msg: fmt.Sprintf("request body not received within %v", s.opts.ReadTimeout)}
		}
		return invalid("", "read request body: %v", err)
	}
	if !utf8.Valid(body) {
		return invalid("", "request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return invalid("", "request body has data after the JSON object")
	}
	s.unknown.note(s, unknownFields(body, reflect.TypeOf(v), ""))
	return nil
}

// unknownFields lists the keys of the JSON object raw that type t (a struct
// or a pointer to one) does not decode, recursing into struct-typed fields
// (dotted names). Like encoding/json, names match case-insensitively.
func unknownFields(raw []byte, t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var obj map[string]json.RawMessage
	if t.Kind() != reflect.Struct || t == reflect.TypeFor[json.RawMessage]() || json.Unmarshal(raw, &obj) != nil {
		return nil
	}
	fields := map[string]reflect.Type{}
	collectFields(t, fields)
	var out []string
	for key, val := range obj {
		ft, ok := fields[strings.ToLower(key)]
		if !ok {
			out = append(out, prefix+key)
			continue
		}
		out = append(out, unknownFields(val, ft, prefix+key+".")...)
	}
	slices.Sort(out)
	return out
}

// collectFields maps the lower-cased JSON names of t's fields (embedded
// structs flattened) to their types.
func collectFields(t reflect.Type, into map[string]reflect.Type) {
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported() && !f.Anonymous:
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			collectFields(f.Type, into)
		default:
			if name == "" {
				name = f.Name
			}
			into[strings.ToLower(name)] = f.Type
		}
	}
}

// maxLoggedFields bounds the names remembered as logged: a client sending
// random field names must not grow the server's memory.
const maxLoggedFields = 1024

// fieldLog logs each ignored field name once.
type fieldLog struct {
	mu   sync.Mutex
	seen map[string]bool
	full bool
}

func (l *fieldLog) note(s *Server, fields []string) {
	if len(fields) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	for _, f := range fields {
		switch {
		case l.seen[f] || l.full:
		case len(l.seen) == maxLoggedFields:
			l.full = true
			s.opts.Logger.Warn("too many distinct unknown request fields: no longer logging new ones")
		default:
			l.seen[f] = true
			s.opts.Logger.Warn("ignoring unknown request field (logged once per name)", "field", f)
		}
	}
}
