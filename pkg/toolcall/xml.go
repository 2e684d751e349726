package toolcall

import (
	"strings"
)

const (
	functionPrefix  = "<function="
	functionEnd     = "</function>"
	parameterPrefix = "<parameter="
	parameterEnd    = "</parameter>"
)

// parseXML parses the body of a Qwen3-Coder block: one or more
//
//	<function=NAME>
//	<parameter=P>
//	value
//	</parameter>
//	</function>
//
// then </tool_call>, whitespace allowed between the tags. A value runs to the
// first </parameter>, less one newline on each side.
func (s *Stream) parseXML(body string, final bool) ([]Call, int, status) {
	var calls []Call
	i := 0
	for {
		i = skipSpace(body, i)
		if rest := body[i:]; len(calls) > 0 && !strings.HasPrefix(rest, functionPrefix) {
			n, st := closeBlock(body, i, final)
			if st == malformed && strings.HasPrefix(functionPrefix, rest) {
				st = needMore // "<fun" may still become another function
			}
			if st != ok {
				return nil, 0, st
			}
			return calls, n, ok
		}
		c, n, st := s.parseFunction(body[i:])
		if st != ok {
			return nil, 0, st
		}
		calls = append(calls, c)
		i += n
	}
}

// parseFunction parses one <function=NAME>…</function> at the start of t.
func (s *Stream) parseFunction(t string) (Call, int, status) {
	name, i, st := tagName(t, 0, functionPrefix)
	if st != ok {
		return Call{}, 0, st
	}
	if name == "" {
		return Call{}, 0, malformed
	}
	var args object
	for {
		i = skipSpace(t, i)
		switch expect(t[i:], functionEnd) {
		case ok:
			return Call{Name: name, Arguments: args.json()}, i + len(functionEnd), ok
		case needMore: // "", "<" or a prefix of </function>
			return Call{}, 0, needMore
		}
		p, j, st := tagName(t, i, parameterPrefix)
		if st != ok {
			return Call{}, 0, st
		}
		if p == "" {
			return Call{}, 0, malformed
		}
		end := strings.Index(t[j:], parameterEnd)
		if end < 0 {
			s.wait = parameterEnd // nothing else can end the value
			return Call{}, 0, needMore
		}
		value := strings.TrimPrefix(t[j:j+end], "\n")
		value = strings.TrimSuffix(value, "\n")
		args.set(p, s.schema.convert(name, p, value))
		i = j + end + len(parameterEnd)
	}
}

// tagName matches prefix NAME ">" at t[i:] and returns NAME, trimmed, and
// the index after ">". A name cannot span lines.
func tagName(t string, i int, prefix string) (string, int, status) {
	if st := expect(t[i:], prefix); st != ok {
		return "", 0, st
	}
	i += len(prefix)
	end := strings.IndexAny(t[i:], ">\n")
	switch {
	case end < 0:
		return "", 0, needMore
	case t[i+end] == '\n':
		return "", 0, malformed
	}
	return strings.TrimSpace(t[i : i+end]), i + end + 1, ok
}

func skipSpace(t string, i int) int {
	return len(t) - len(trimSpace(t[i:]))
}
