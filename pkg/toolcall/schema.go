package toolcall

import (
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// paramType is what a parameter's JSON schema says about its values.
type paramType struct {
	typ      string // lower-case JSON-schema (or loosely, Python) type name
	nullable bool
}

// schema maps function name → parameter name → type, from a request's tools.
type schema map[string]map[string]paramType

// parseSchema reads OpenAI tools ({"type": "function", "function": {…}}) or
// bare function definitions. Malformed tools give no types: every value is
// then a string.
func parseSchema(tools json.RawMessage) schema {
	var list []struct {
		Function *functionDef `json:"function"`
		functionDef
	}
	if json.Unmarshal(tools, &list) != nil {
		return nil
	}
	s := schema{}
	for _, t := range list {
		fn := &t.functionDef
		if t.Function != nil {
			fn = t.Function
		}
		var p struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		_ = json.Unmarshal(fn.Parameters, &p) // not an object: no types
		params := map[string]paramType{}
		for name, raw := range p.Properties {
			params[name] = typeOf(resolveRef(raw, fn.Parameters))
		}
		s[fn.Name] = params
	}
	return s
}

type functionDef struct {
	Name       string          `json:"name"`
	Parameters json.RawMessage `json:"parameters"`
}

// resolveRef follows a property's local $ref ("#/$defs/x") into the
// parameters schema root, so that a referenced object is typed as one.
func resolveRef(raw, root json.RawMessage) json.RawMessage {
	for range 8 { // a chain of references, not a cycle
		var r struct {
			Ref string `json:"$ref"`
		}
		if json.Unmarshal(raw, &r) != nil || !strings.HasPrefix(r.Ref, "#") {
			return raw
		}
		target := root
		for _, tok := range strings.Split(r.Ref, "/")[1:] {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			var m map[string]json.RawMessage
			if json.Unmarshal(target, &m) != nil || m[tok] == nil {
				return raw
			}
			target = m[tok]
		}
		raw = target
	}
	return raw
}

// typeOf reads "type" (a name or a list of names) or "anyOf"; the first
// non-null type wins, and "null" anywhere makes the parameter nullable. No
// type at all means string, as in vLLM.
func typeOf(raw json.RawMessage) paramType {
	var prop struct {
		Type  json.RawMessage   `json:"type"`
		AnyOf []json.RawMessage `json:"anyOf"`
	}
	_ = json.Unmarshal(raw, &prop) // not an object: no type
	var names []string
	var one string
	switch {
	case json.Unmarshal(prop.Type, &one) == nil:
		names = []string{one}
	case json.Unmarshal(prop.Type, &names) == nil:
	default:
		for _, opt := range prop.AnyOf {
			var o struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(opt, &o) == nil && o.Type != "" {
				names = append(names, o.Type)
			}
		}
	}
	pt := paramType{}
	for _, n := range names {
		n = strings.ToLower(strings.TrimSpace(n))
		if n == "null" {
			pt.nullable = true
		} else if pt.typ == "" {
			pt.typ = n
		}
	}
	if pt.typ == "" && !pt.nullable {
		pt.typ = "string"
	}
	return pt
}

// convert turns a Qwen3-Coder parameter value (always text) into JSON text
// by the parameter's schema type, as vLLM's qwen3coder parser does. A value
// that does not fit its type stays a string rather than being altered.
func (s schema) convert(function, param, value string) string {
	pt, known := s[function][param]
	if !known {
		return quote(value)
	}
	lower := strings.ToLower(value)
	isNull := lower == "null" || lower == "none"
	if pt.nullable && isNull {
		return "null"
	}
	switch t := pt.typ; {
	case t == "string" || t == "str" || t == "text" || t == "varchar" || t == "char" || t == "enum":
		return quote(value)
	case isNull:
		return "null"
	case hasAnyPrefix(t, "int", "uint", "long", "short", "unsigned"):
		if n, ok := new(big.Int).SetString(strings.TrimSpace(value), 10); ok {
			return n.String()
		}
	case hasAnyPrefix(t, "num", "float"):
		f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			if f == math.Trunc(f) { // vLLM: an integral float is an int
				n, _ := big.NewFloat(f).Int(nil)
				return n.String()
			}
			return pyFloat(f)
		}
	case t == "boolean" || t == "bool" || t == "binary":
		switch strings.ToLower(strings.TrimSpace(value)) {
		case "true":
			return "true"
		case "false":
			return "false"
		}
	default: // object, array and unknown types: JSON if it is JSON
		if j, err := normalizeJSON(value); err == nil {
			return j
		}
	}
	return quote(value)
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
