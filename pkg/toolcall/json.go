package toolcall

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// parseJSONBlock parses the body of a Qwen3 block,
// `{"name": NAME, "arguments": {…}}` then `</tool_call>`, with any whitespace
// around the object. It returns the call and the length of body consumed.
// While the object is unfinished it is only decoded again once its braces
// balance; a syntax error noticed only then yields the same result, later.
func (s *Stream) parseJSONBlock(body string, final bool) ([]Call, int, status) {
	rest := trimSpace(body)
	if rest == "" {
		return nil, 0, needMore
	}
	if rest[0] != '{' {
		return nil, 0, malformed
	}
	start := len(body) - len(rest)
	dec := json.NewDecoder(strings.NewReader(rest))
	var obj map[string]json.RawMessage
	switch err := dec.Decode(&obj); {
	case errors.Is(err, io.ErrUnexpectedEOF):
		s.object = objectEnd{active: true, pos: start}
		return nil, 0, needMore
	case err != nil:
		return nil, 0, malformed
	}
	call, good := jsonCall(obj)
	if !good {
		return nil, 0, malformed
	}
	n, st := closeBlock(body, start+int(dec.InputOffset()), final)
	if st != ok {
		return nil, 0, st
	}
	return []Call{call}, n, ok
}

// jsonCall reads the name and the arguments of a call object. Arguments may
// be missing or null (no arguments) or a string holding a JSON object.
func jsonCall(obj map[string]json.RawMessage) (Call, bool) {
	var name string
	if json.Unmarshal(obj["name"], &name) != nil || name == "" {
		return Call{}, false
	}
	args := strings.TrimSpace(string(obj["arguments"]))
	if strings.HasPrefix(args, `"`) {
		if json.Unmarshal([]byte(args), &args) != nil {
			return Call{}, false
		}
		args = strings.TrimSpace(args)
	}
	if args == "" || args == "null" {
		return Call{Name: name, Arguments: "{}"}, true
	}
	if args[0] != '{' {
		return Call{}, false
	}
	norm, err := normalizeJSON(args)
	if err != nil {
		return Call{}, false
	}
	return Call{Name: name, Arguments: norm}, true
}

// objectEnd finds where a JSON object closes, fed more text at a time, by
// counting brackets outside strings.
type objectEnd struct {
	active           bool
	pos              int // next byte of held to read; the object starts at the first
	depth            int
	inString, escape bool
}

// closed reads held from pos on and reports whether the object has closed.
func (o *objectEnd) closed(held []byte) bool {
	for ; o.pos < len(held); o.pos++ {
		c := held[o.pos]
		switch {
		case o.escape:
			o.escape = false
		case o.inString:
			o.escape = c == '\\'
			o.inString = c != '"'
		case c == '"':
			o.inString = true
		case c == '{' || c == '[':
			o.depth++
		case c == '}' || c == ']':
			o.depth--
			if o.depth == 0 {
				return true
			}
		}
	}
	return false
}
