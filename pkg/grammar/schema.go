// Package grammar compiles JSON schemas into byte-level pushdown automata
// and turns them into token masks for constrained decoding: the sampler
// asks, before each token, which vocabulary entries keep the output a prefix
// of a document the schema accepts (Mask), then advances the automaton past
// the chosen token (Accept).
//
// The schema subset: type object (properties, required, additionalProperties
// false / true / a schema), string, number, integer, boolean, null, array
// (items), a list of types, enum and const (of any JSON values), anyOf /
// oneOf, nested freely; {} or true is any JSON value. Annotations and
// validation keywords the automaton cannot express (description, format,
// minimum, pattern, minItems, …) are ignored; $ref, allOf, not, if and
// patternProperties are rejected.
package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// SchemaError is a schema the compiler rejects; Path locates it (JSON
// pointer style).
type SchemaError struct {
	Path, Msg string
}

func (e *SchemaError) Error() string { return fmt.Sprintf("schema %s: %s", e.Path, e.Msg) }

type kind uint8

const (
	kAny kind = iota
	kObject
	kArray
	kString
	kNumber
	kInteger
	kLiteral // one of a set of exact byte strings (enum, const, true, false, null)
	kUnion   // anyOf / oneOf / type lists: any alternative
	kKey     // internal: an object key being read
	kDone    // internal: the document is complete
)

// node is a compiled schema.
type node struct {
	kind kind
	// object: keys sorted, props[i] is the schema of keys[i]
	keys       []string
	props      []*node
	required   uint64
	additional *node // nil: no other keys
	items      *node // array
	lits       []string
	alts       []*node
}

// maxProperties bounds an object's declared properties (a bit set tracks
// which were seen).
const maxProperties = 64

var (
	anyNode     = &node{kind: kAny}
	anyObject   = &node{kind: kObject, additional: anyNode}
	anyArray    = &node{kind: kArray, items: anyNode}
	stringNode  = &node{kind: kString}
	numberNode  = &node{kind: kNumber}
	literalNode = &node{kind: kLiteral, lits: []string{"false", "null", "true"}}
	keyNode     = &node{kind: kKey}
	doneNode    = &node{kind: kDone}
)

// Grammar is a compiled schema, optionally wrapped in fixed text (a tool
// call's tags). It is immutable and safe for concurrent use.
type Grammar struct {
	root           *node
	prefix, suffix string
}

// CompileSchema compiles a JSON schema. Errors are *SchemaError.
func CompileSchema(schema json.RawMessage) (*Grammar, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, &SchemaError{"#", fmt.Sprintf("not JSON: %v", err)}
	}
	n, err := compile(v, "#")
	if err != nil {
		return nil, err
	}
	return &Grammar{root: n}, nil
}

// JSONObject is any JSON object (response_format json_object).
func JSONObject() *Grammar { return &Grammar{root: anyObject} }

// Wrap returns g with fixed text before and after the JSON value.
func (g *Grammar) Wrap(prefix, suffix string) *Grammar {
	return &Grammar{root: g.root, prefix: g.prefix + prefix, suffix: suffix + g.suffix}
}

var rejected = []string{"$ref", "allOf", "not", "if", "then", "else", "patternProperties", "dependentSchemas", "prefixItems", "unevaluatedProperties"}

func compile(v any, path string) (*node, error) {
	switch s := v.(type) {
	case bool:
		if s {
			return anyNode, nil
		}
		return nil, &SchemaError{path, "false accepts nothing"}
	case map[string]any:
		return compileObject(s, path)
	}
	return nil, &SchemaError{path, "a schema must be an object or a boolean"}
}

func compileObject(s map[string]any, path string) (*node, error) {
	for _, k := range rejected {
		if _, ok := s[k]; ok {
			return nil, &SchemaError{path, fmt.Sprintf("%q is not supported", k)}
		}
	}
	if c, ok := s["const"]; ok {
		return literals([]any{c}, path+"/const")
	}
	if e, ok := s["enum"]; ok {
		list, ok := e.([]any)
		if !ok || len(list) == 0 {
			return nil, &SchemaError{path + "/enum", "must be a non-empty array"}
		}
		return literals(list, path+"/enum")
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if a, ok := s[k]; ok {
			list, ok := a.([]any)
			if !ok || len(list) == 0 {
				return nil, &SchemaError{path + "/" + k, "must be a non-empty array"}
			}
			u := &node{kind: kUnion}
			for i, sub := range list {
				n, err := compile(sub, fmt.Sprintf("%s/%s/%d", path, k, i))
				if err != nil {
					return nil, err
				}
				u.alts = append(u.alts, n)
			}
			return u, nil
		}
	}
	switch t := s["type"].(type) {
	case nil:
		if _, ok := s["properties"]; ok {
			return compileType("object", s, path)
		}
		return anyNode, nil
	case string:
		return compileType(t, s, path)
	case []any:
		u := &node{kind: kUnion}
		for i, e := range t {
			name, ok := e.(string)
			if !ok {
				return nil, &SchemaError{fmt.Sprintf("%s/type/%d", path, i), "must be a type name"}
			}
			n, err := compileType(name, s, path)
			if err != nil {
				return nil, err
			}
			u.alts = append(u.alts, n)
		}
		if len(u.alts) == 0 {
			return nil, &SchemaError{path + "/type", "empty list of types"}
		}
		return u, nil
	}
	return nil, &SchemaError{path + "/type", "must be a type name or a list of them"}
}

func compileType(t string, s map[string]any, path string) (*node, error) {
	switch t {
	case "string":
		return stringNode, nil
	case "number":
		return numberNode, nil
	case "integer":
		return &node{kind: kInteger}, nil
	case "boolean":
		return &node{kind: kLiteral, lits: []string{"false", "true"}}, nil
	case "null":
		return &node{kind: kLiteral, lits: []string{"null"}}, nil
	case "array":
		items := anyNode
		if it, ok := s["items"]; ok {
			n, err := compile(it, path+"/items")
			if err != nil {
				return nil, err
			}
			items = n
		}
		return &node{kind: kArray, items: items}, nil
	case "object":
		return compileProperties(s, path)
	}
	return nil, &SchemaError{path + "/type", fmt.Sprintf("unknown type %q", t)}
}

func compileProperties(s map[string]any, path string) (*node, error) {
	n := &node{kind: kObject, additional: anyNode}
	props, _ := s["properties"].(map[string]any)
	if p, ok := s["properties"]; ok && props == nil {
		return nil, &SchemaError{path + "/properties", fmt.Sprintf("must be an object, not %T", p)}
	}
	if len(props) > maxProperties {
		return nil, &SchemaError{path + "/properties", fmt.Sprintf("%d properties: at most %d are supported", len(props), maxProperties)}
	}
	for k := range props {
		if !utf8.ValidString(k) || strings.ContainsAny(k, "\"\\") || strings.ContainsFunc(k, func(r rune) bool { return r < 0x20 }) {
			return nil, &SchemaError{path + "/properties", fmt.Sprintf("property name %q needs escaping: not supported", k)}
		}
		n.keys = append(n.keys, k)
	}
	slices.Sort(n.keys)
	for _, k := range n.keys {
		p, err := compile(props[k], path+"/properties/"+k)
		if err != nil {
			return nil, err
		}
		n.props = append(n.props, p)
	}
	if r, ok := s["required"]; ok {
		list, ok := r.([]any)
		if !ok {
			return nil, &SchemaError{path + "/required", "must be an array of property names"}
		}
		for _, e := range list {
			name, _ := e.(string)
			i, found := slices.BinarySearch(n.keys, name)
			if !found {
				return nil, &SchemaError{path + "/required", fmt.Sprintf("%q is not a property", name)}
			}
			n.required |= 1 << i
		}
	}
	switch a := s["additionalProperties"].(type) {
	case nil:
	case bool:
		if !a {
			n.additional = nil
		}
	default:
		sub, err := compile(a, path+"/additionalProperties")
		if err != nil {
			return nil, err
		}
		n.additional = sub
	}
	return n, nil
}

// literals compiles enum / const values to their compact JSON texts.
func literals(values []any, path string) (*node, error) {
	n := &node{kind: kLiteral}
	for _, v := range values {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return nil, &SchemaError{path, err.Error()}
		}
		n.lits = append(n.lits, strings.TrimSuffix(b.String(), "\n"))
	}
	slices.Sort(n.lits)
	n.lits = slices.Compact(n.lits)
	return n, nil
}
