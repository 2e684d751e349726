package toolcall

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Arguments are written as Python's json.dumps(x, ensure_ascii=False) writes
// them (as vLLM does): ", " and ": " separators, non-ASCII unescaped, ints
// and floats spelled as Python spells them, key order kept.

// object is a JSON object under construction; a repeated key keeps its first
// place and takes the last value, as a Python dict does.
type object struct {
	keys   []string
	values map[string]string // key → JSON text
}

func (o *object) set(k, v string) {
	if o.values == nil {
		o.values = map[string]string{}
	}
	if _, ok := o.values[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.values[k] = v
}

func (o *object) json() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteString(", ")
		}
		writeString(&b, k)
		b.WriteString(": ")
		b.WriteString(o.values[k])
	}
	b.WriteByte('}')
	return b.String()
}

// quote returns s as a JSON string.
func quote(s string) string {
	var b strings.Builder
	writeString(&b, s)
	return b.String()
}

func writeString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r) // an invalid byte becomes U+FFFD
			}
		}
	}
	b.WriteByte('"')
}

// normalizeJSON re-spells one JSON value as json.dumps(json.loads(raw)).
func normalizeJSON(raw string) (string, error) {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var b strings.Builder
	if err := copyValue(&b, dec); err != nil {
		return "", err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", errors.New("data after the JSON value")
	}
	return b.String(), nil
}

func copyValue(b *strings.Builder, dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok := tok.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(tok))
	case string:
		writeString(b, tok)
	case json.Number:
		b.WriteString(pyNumber(string(tok)))
	case json.Delim:
		isObject := tok == '{'
		b.WriteString(tok.String())
		for n := 0; dec.More(); n++ {
			if n > 0 {
				b.WriteString(", ")
			}
			if isObject {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				writeString(b, k.(string))
				b.WriteString(": ")
			}
			if err := copyValue(b, dec); err != nil {
				return err
			}
		}
		end, err := dec.Token()
		if err != nil {
			return err
		}
		b.WriteString(end.(json.Delim).String())
	}
	return nil
}

// pyNumber spells a JSON number literal as Python's json.loads then dumps
// would: integers exactly, floats in repr form. A float out of range keeps
// its literal (Python would write the invalid Infinity).
func pyNumber(lit string) string {
	if !strings.ContainsAny(lit, ".eE") {
		if n, ok := new(big.Int).SetString(lit, 10); ok {
			return n.String()
		}
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return lit
	}
	return pyFloat(f)
}

// pyFloat is Python's repr of a finite float: the shortest round-trip
// digits, positional for exponents -4…15 (with ".0" when integral), else
// scientific with a two-digit exponent at least.
func pyFloat(f float64) string {
	if f == 0 || math.Abs(f) >= 1e-4 && math.Abs(f) < 1e16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	return strconv.FormatFloat(f, 'e', -1, 64)
}
