package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzRequests posts arbitrary bodies to every POST route: bad input is
// always a 4xx in OpenAI's error shape, never a 5xx or a panic.
func FuzzRequests(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"stream":true,"max_tokens":2}`,
		`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object","properties":{"a":{"enum":[1]}}}}},"max_tokens":4}`,
		`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","max_tokens":4}`,
		`{"prompt":[1,2,3],"max_tokens":2}`, `{"prompt":"hi","stop":["i"],"max_tokens":2}`, `{"tokens":[104,105]}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{]"}}]}]}`,
		`{"messages":5}`, `{`, "\xff",
	} {
		f.Add(uint8(0), seed)
	}
	eng := newFakeEngine(f, constReply(`{"a": 1} <tool_call>`))
	eng.seq = 512
	s, err := New(eng, Options{MaxBodyBytes: 1 << 14})
	if err != nil {
		f.Fatal(err)
	}
	h := s.Handler()
	routes := []string{"/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize"}
	f.Fuzz(func(t *testing.T, route uint8, body string) {
		path := routes[int(route)%len(routes)]
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
		if rec.Code >= 500 {
			t.Fatalf("%s %q: %d %s", path, body, rec.Code, rec.Body.String())
		}
		if rec.Code >= 400 && !strings.Contains(rec.Body.String(), `"error":{"message":`) {
			t.Fatalf("%s %q: %d without an OpenAI error body: %s", path, body, rec.Code, rec.Body.String())
		}
	})
}
