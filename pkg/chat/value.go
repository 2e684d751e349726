package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ardanlabs/jinja"
)

// decodeJSON converts JSON text into template values the way Python's
// json.loads builds objects: object keys in document order (a repeated key
// keeps its first place and its last value), integers as ints and numbers
// with a fraction or exponent as floats. Empty input is null.
func decodeJSON(b []byte) (jinja.Value, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return jinja.None(), nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return jinja.Value{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return jinja.Value{}, errors.New("invalid JSON: data after the value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Value{}, err
	}
	switch tok := tok.(type) {
	case nil:
		return jinja.None(), nil
	case bool:
		return jinja.NewBool(tok), nil
	case string:
		return jinja.NewString(tok), nil
	case json.Number:
		return number(tok)
	case json.Delim:
		switch tok {
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return jinja.Value{}, err
				}
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				d.AsDict().Set(k.(string), v)
			}
			_, err := dec.Token()
			return d, err
		case '[':
			items := []jinja.Value{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				items = append(items, v)
			}
			_, err := dec.Token()
			return jinja.NewList(items), err
		}
	}
	return jinja.Value{}, fmt.Errorf("unexpected JSON token %v", tok)
}

// number keeps Python's int/float split. Integers beyond int64 become floats:
// Python would keep them exact, the template engine has no big integers.
func number(n json.Number) (jinja.Value, error) {
	if !strings.ContainsAny(string(n), ".eE") {
		if i, err := n.Int64(); err == nil {
			return jinja.NewInt(i), nil
		}
	}
	f, err := n.Float64()
	if err != nil {
		return jinja.Value{}, fmt.Errorf("number %s: %w", n, err)
	}
	return jinja.NewFloat(f), nil
}
