// Package grammar compiles JSON schemas (and tool-call formats built on
// them), and plain-text regular expressions and choices, into byte-level
// pushdown automata and turns them into token masks
// for constrained decoding: the sampler asks, before each token, which
// vocabulary entries keep the output a prefix of a document the grammar
// accepts (Mask), then advances the automaton past the chosen token
// (Accept).
//
// Layout is fixed by a Style (no whitespace runs), object keys come in the
// schema's order, and every schema keyword is either enforced, an
// annotation, or an error naming it: see docs/server.md for the subset.
package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
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
	kText    // free text up to a terminator (Qwen3-Coder parameter values)
	kSeq     // parts one after the other
	kRepeat  // items separated by a fixed text
	kRegex   // plain text matched whole by a regular expression (guided_regex)
	kKey     // internal: an object key being read
	kDone    // internal: the document is complete
)

// node is a compiled schema.
type node struct {
	kind  kind
	style *Style
	// object: keys in schema order, props[i] the schema of keys[i];
	// reqAfter[i] the first required property at or after i (len(keys) if
	// none); allKeys one bit per key.
	keys       []string
	props      []*node
	reqAfter   []int32
	allKeys    uint64
	additional *node // nil: no other keys
	// array and repeat
	items              *node
	minItems, maxItems int32 // maxItems < 0: unbounded
	sepLit             *node // repeat: the separator
	// string and text: lengths in characters (maxLen < 0: unbounded)
	minLen, maxLen int32
	re             *regex
	raw            bool   // string without quotes or escapes, ended by its first byte of term
	term           string // text: the terminator; raw string: what follows
	// number and integer: bounds (integers exactly, numbers by sign)
	bounded        bool
	minVal, maxVal int64
	// literal: sorted texts, and optionally the value that follows each
	lits []string
	next []*node
	alts []*node
	// sequence
	parts []*node
}

// endByte is the byte that ends a string's text.
func (n *node) endByte() byte {
	if n.raw {
		return n.term[0]
	}
	return '"'
}

// maxProperties bounds an object's declared properties (bit sets track
// them).
const maxProperties = 64

// Style is the layout of JSON output: its separators. Nothing else varies:
// no whitespace outside strings, one text per value.
type Style struct {
	Name            string
	ItemSep, KeySep string
	colon, space    *node
	anyObject       *node
	anyArray        *node
	anyValue        *node
}

func newStyle(name, item, key string) *Style {
	s := &Style{Name: name, ItemSep: item, KeySep: key}
	s.colon = &node{kind: kLiteral, lits: []string{key}}
	s.space = &node{kind: kLiteral, lits: []string{item[1:]}}
	s.anyValue = &node{kind: kAny, style: s}
	s.anyObject = &node{kind: kObject, style: s, additional: s.anyValue}
	s.anyArray = &node{kind: kArray, style: s, items: s.anyValue, maxItems: -1}
	return s
}

var (
	// Compact is JSON without spaces: {"a":1,"b":[1,2]}.
	Compact = newStyle("compact", ",", ":")
	// Spaced is Python's json.dumps default, which Qwen3's chat templates
	// use for tool calls: {"a": 1, "b": [1, 2]}.
	Spaced = newStyle("spaced", ", ", ": ")
)

// StyleByName returns Compact or Spaced.
func StyleByName(name string) (*Style, error) {
	switch name {
	case "compact":
		return Compact, nil
	case "spaced":
		return Spaced, nil
	}
	return nil, fmt.Errorf("unknown JSON style %q (compact or spaced)", name)
}

// afterComma continues after an item separator's comma.
func (s *Style) afterComma(a *arena, f *frame, out []*frame) []*frame {
	if s.space.lits[0] == "" {
		return append(out, f)
	}
	return append(out, a.new(frame{up: f, n: s.space, st: stLit, hi: 1}))
}

// afterColon continues after a key's closing quote.
func (s *Style) afterColon(a *arena, f *frame, out []*frame) []*frame {
	return append(out, a.new(frame{up: f, n: s.colon, st: stLit, hi: 1}))
}

var (
	stringNode  = &node{kind: kString, maxLen: -1}
	numberNode  = &node{kind: kNumber, minVal: math.MinInt64, maxVal: math.MaxInt64}
	literalNode = &node{kind: kLiteral, lits: []string{"false", "null", "true"}}
	keyNode     = &node{kind: kKey}
	doneNode    = &node{kind: kDone}
)

// Grammar is a compiled grammar. It is safe for concurrent use; it keeps
// the masks it computed for a vocabulary (see Constraint).
type Grammar struct {
	root  *node
	cache maskCache
}

func newGrammar(root *node) *Grammar { return &Grammar{root: root} }

// CompileSchema compiles a JSON schema for output in style. Errors are
// *SchemaError.
func CompileSchema(schema json.RawMessage, style *Style) (*Grammar, error) {
	n, err := compileSchemaNode(schema, style, nil)
	if err != nil {
		return nil, err
	}
	return newGrammar(n), nil
}

// CheckSchema reports whether a schema compiles (for validating tools that
// are not constrained).
func CheckSchema(schema json.RawMessage) error {
	_, err := compileSchemaNode(schema, Spaced, nil)
	return err
}

func compileSchemaNode(schema json.RawMessage, style *Style, wrap func(*compiler, any) (*node, error)) (*node, error) {
	v, err := decodeOrdered(schema)
	if err != nil {
		return nil, &SchemaError{"#", fmt.Sprintf("not JSON: %v", err)}
	}
	c := &compiler{root: v, style: style, refs: map[string]*node{}, active: map[string]int{}}
	if wrap != nil {
		return wrap(c, v)
	}
	return c.compile(v, "#")
}

// JSONObject is any JSON object (response_format json_object) in style.
func JSONObject(style *Style) *Grammar {
	return newGrammar(&node{kind: kObject, style: style, additional: style.anyValue})
}

// annotations are keywords that do not constrain a value.
var annotations = map[string]bool{
	"description": true, "title": true, "examples": true, "default": true, "$schema": true, "$id": true,
	"$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true, "$defs": true, "definitions": true,
	"contentMediaType": true, "contentEncoding": true,
}

// keywords are the keywords the compiler enforces, and the types they
// apply to ("" for all).
var keywords = map[string]string{
	"type": "", "enum": "", "const": "", "anyOf": "", "oneOf": "", "allOf": "", "$ref": "", "nullable": "",
	"properties": "object", "required": "object", "additionalProperties": "object",
	"items": "array", "minItems": "array", "maxItems": "array",
	"minLength": "string", "maxLength": "string", "pattern": "string", "format": "string",
	"minimum": "number", "maximum": "number", "exclusiveMinimum": "number", "exclusiveMaximum": "number",
}

type compiler struct {
	root  any
	style *Style
	refs  map[string]*node // compiled (or being compiled) $ref targets
	// active maps a $ref being compiled to the number of containers
	// entered when it started: reaching it again with no container in
	// between is a cycle that reads nothing.
	active     map[string]int
	containers int
}

func (c *compiler) compile(v any, path string) (*node, error) {
	switch s := v.(type) {
	case bool:
		if s {
			return c.style.anyValue, nil
		}
		return nil, &SchemaError{path, "false accepts nothing"}
	case *object:
		return c.compileObject(s, path)
	}
	return nil, &SchemaError{path, fmt.Sprintf("a schema must be an object or a boolean, not %s", jsonKind(v))}
}

func (c *compiler) compileObject(s *object, path string) (*node, error) {
	for _, k := range s.keys {
		if _, ok := keywords[k]; !ok && !annotations[k] {
			return nil, &SchemaError{path, fmt.Sprintf("keyword %q is not supported", k)}
		}
	}
	n, err := c.compileValue(s, path)
	if err != nil {
		return nil, err
	}
	if b, ok := s.get("nullable"); ok {
		if nb, isBool := b.(bool); !isBool {
			return nil, &SchemaError{path + "/nullable", "must be a boolean"}
		} else if nb {
			n = &node{kind: kUnion, alts: []*node{n, {kind: kLiteral, lits: []string{"null"}}}}
		}
	}
	return n, nil
}

func (c *compiler) compileValue(s *object, path string) (*node, error) {
	if r, ok := s.get("$ref"); ok {
		for _, k := range s.keys {
			if k != "$ref" && !annotations[k] {
				return nil, &SchemaError{path, fmt.Sprintf("keyword %q beside $ref is not supported", k)}
			}
		}
		ref, ok := r.(string)
		if !ok {
			return nil, &SchemaError{path + "/$ref", "must be a string"}
		}
		return c.ref(ref, path+"/$ref")
	}
	if a, ok := s.get("allOf"); ok {
		list, ok := a.([]any)
		if !ok || len(list) != 1 || len(s.keys) > 1+countAnnotations(s) {
			return nil, &SchemaError{path + "/allOf", "only an allOf of one schema, alone, is supported"}
		}
		return c.compile(list[0], path+"/allOf/0")
	}
	if v, ok := s.get("const"); ok {
		return c.literals([]any{v}, path+"/const")
	}
	if e, ok := s.get("enum"); ok {
		list, ok := e.([]any)
		if !ok || len(list) == 0 {
			return nil, &SchemaError{path + "/enum", "must be a non-empty array"}
		}
		return c.literals(list, path+"/enum")
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if a, ok := s.get(k); ok {
			list, ok := a.([]any)
			if !ok || len(list) == 0 {
				return nil, &SchemaError{path + "/" + k, "must be a non-empty array"}
			}
			u := &node{kind: kUnion}
			for i, sub := range list {
				n, err := c.compile(sub, fmt.Sprintf("%s/%s/%d", path, k, i))
				if err != nil {
					return nil, err
				}
				u.alts = append(u.alts, n)
			}
			if len(u.alts) == 1 {
				return u.alts[0], nil
			}
			return u, nil
		}
	}
	t, _ := s.get("type")
	switch t := t.(type) {
	case nil:
		if _, ok := s.get("properties"); ok {
			return c.compileType("object", s, path)
		}
		for _, k := range s.keys {
			if keywords[k] != "" {
				return nil, &SchemaError{path, fmt.Sprintf("keyword %q needs a \"type\"", k)}
			}
		}
		return c.style.anyValue, nil
	case string:
		return c.compileType(t, s, path)
	case []any:
		u := &node{kind: kUnion}
		for i, e := range t {
			name, ok := e.(string)
			if !ok {
				return nil, &SchemaError{fmt.Sprintf("%s/type/%d", path, i), "must be a type name"}
			}
			n, err := c.compileType(name, s, path)
			if err != nil {
				return nil, err
			}
			u.alts = append(u.alts, n)
		}
		switch len(u.alts) {
		case 0:
			return nil, &SchemaError{path + "/type", "empty list of types"}
		case 1:
			return u.alts[0], nil
		}
		return u, nil
	}
	return nil, &SchemaError{path + "/type", "must be a type name or a list of them"}
}

func countAnnotations(s *object) int {
	n := 0
	for _, k := range s.keys {
		if annotations[k] {
			n++
		}
	}
	return n
}

// ref compiles a $ref: a JSON pointer into the root schema ("#",
// "#/$defs/x", "#/definitions/x", …). Recursion is followed lazily.
func (c *compiler) ref(ref, path string) (*node, error) {
	if n, ok := c.refs[ref]; ok {
		if depth, busy := c.active[ref]; busy && depth == c.containers {
			return nil, &SchemaError{path, fmt.Sprintf("$ref %q refers to itself without reading anything", ref)}
		}
		return n, nil
	}
	target, err := c.pointer(ref)
	if err != nil {
		return nil, &SchemaError{path, err.Error()}
	}
	n := &node{}
	c.refs[ref] = n
	c.active[ref] = c.containers
	compiled, err := c.compile(target, ref)
	delete(c.active, ref)
	if err != nil {
		return nil, err
	}
	*n = *compiled
	return n, nil
}

func (c *compiler) pointer(ref string) (any, error) {
	if ref != "#" && !strings.HasPrefix(ref, "#/") {
		return nil, fmt.Errorf("$ref %q: only references inside the schema (#/…) are supported", ref)
	}
	v := c.root
	for _, tok := range strings.Split(ref, "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch o := v.(type) {
		case *object:
			next, ok := o.get(tok)
			if !ok {
				return nil, fmt.Errorf("$ref %q: no %q", ref, tok)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(o) {
				return nil, fmt.Errorf("$ref %q: no %q", ref, tok)
			}
			v = o[i]
		default:
			return nil, fmt.Errorf("$ref %q: no %q", ref, tok)
		}
	}
	return v, nil
}

// checkKeywords rejects keywords of another type than t.
func checkKeywords(t string, s *object, path string) error {
	for _, k := range s.keys {
		want := keywords[k]
		if want == "" || want == t || want == "number" && t == "integer" {
			continue
		}
		return &SchemaError{path, fmt.Sprintf("keyword %q does not apply to type %q", k, t)}
	}
	return nil
}

func (c *compiler) compileType(t string, s *object, path string) (*node, error) {
	switch t {
	case "string", "number", "integer", "boolean", "null", "array", "object":
	default:
		return nil, &SchemaError{path + "/type", fmt.Sprintf("unknown type %q", t)}
	}
	if !typeList(s) {
		if err := checkKeywords(t, s, path); err != nil {
			return nil, err
		}
	}
	switch t {
	case "string":
		return c.compileString(s, path)
	case "number", "integer":
		return compileNumber(t, s, path)
	case "boolean":
		return &node{kind: kLiteral, lits: []string{"false", "true"}}, nil
	case "null":
		return &node{kind: kLiteral, lits: []string{"null"}}, nil
	case "array":
		return c.compileArray(s, path)
	}
	return c.compileProperties(s, path)
}

// typeList reports whether "type" is a list (then each type takes the
// keywords meant for it).
func typeList(s *object) bool {
	t, _ := s.get("type")
	_, ok := t.([]any)
	return ok
}

// count reads a non-negative integer keyword; def when absent.
func count(s *object, k, path string, def int32) (int32, error) {
	v, ok := s.get(k)
	if !ok {
		return def, nil
	}
	num, isNum := v.(json.Number)
	i, err := strconv.ParseInt(string(num), 10, 32)
	if !isNum || err != nil || i < 0 {
		return 0, &SchemaError{path + "/" + k, "must be a non-negative integer"}
	}
	return int32(i), nil
}

func (c *compiler) compileString(s *object, path string) (*node, error) {
	n := &node{kind: kString}
	var err error
	if n.minLen, err = count(s, "minLength", path, 0); err != nil {
		return nil, err
	}
	if n.maxLen, err = count(s, "maxLength", path, -1); err != nil {
		return nil, err
	}
	if n.maxLen >= 0 && n.maxLen < n.minLen {
		return nil, &SchemaError{path, "maxLength is below minLength"}
	}
	pattern := ""
	if p, ok := s.get("pattern"); ok {
		if pattern, ok = p.(string); !ok {
			return nil, &SchemaError{path + "/pattern", "must be a string"}
		}
	}
	if f, ok := s.get("format"); ok {
		name, _ := f.(string)
		fp, known := formats[name]
		if !known {
			return nil, &SchemaError{path + "/format", fmt.Sprintf("format %q is not supported (%s)", name, strings.Join(formatNames(), ", "))}
		}
		if pattern != "" {
			return nil, &SchemaError{path, "pattern and format together are not supported"}
		}
		pattern = fp
	}
	if pattern != "" {
		if n.re, err = compileRegex(pattern, false); err != nil {
			return nil, &SchemaError{path + "/pattern", err.Error()}
		}
		if d := n.re.minDist(n.re.start); n.maxLen >= 0 && d > n.maxLen {
			return nil, &SchemaError{path, fmt.Sprintf("no string of at most %d characters matches the pattern (it needs %d)", n.maxLen, d)}
		}
	}
	if n.minLen == 0 && n.maxLen < 0 && n.re == nil {
		return stringNode, nil
	}
	return n, nil
}

func formatNames() []string {
	var names []string
	for k := range formats {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// compileNumber reads minimum / maximum (and the exclusive forms): exact
// bounds for integers within ±10^18, the sign for numbers.
func compileNumber(t string, s *object, path string) (*node, error) {
	n := &node{kind: kNumber, minVal: math.MinInt64, maxVal: math.MaxInt64}
	if t == "integer" {
		n.kind = kInteger
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	for _, b := range []struct {
		k    string
		dst  *float64
		up   bool // a lower bound
		excl bool
	}{{"minimum", &lo, true, false}, {"exclusiveMinimum", &lo, true, true}, {"maximum", &hi, false, false}, {"exclusiveMaximum", &hi, false, true}} {
		v, ok := s.get(b.k)
		if !ok {
			continue
		}
		num, isNum := v.(json.Number)
		f, err := num.Float64()
		if !isNum || err != nil {
			return nil, &SchemaError{path + "/" + b.k, "must be a number"}
		}
		if b.excl && n.kind == kInteger {
			// The next integer inside.
			if b.up {
				f = math.Floor(f) + 1
			} else {
				f = math.Ceil(f) - 1
			}
		}
		if b.up {
			*b.dst = math.Max(*b.dst, f)
		} else {
			*b.dst = math.Min(*b.dst, f)
		}
	}
	if lo > hi {
		return nil, &SchemaError{path, "minimum is above maximum"}
	}
	const limit = 1e18
	if n.kind == kInteger {
		lo, hi = math.Ceil(lo), math.Floor(hi)
		if lo > hi {
			return nil, &SchemaError{path, "no integer between minimum and maximum"}
		}
		// Integers are bounded in any case, by ±10^18 (int64's range,
		// rounded): a model cannot stall a generation on digits.
		n.bounded = true
		n.minVal, n.maxVal = int64(math.Max(lo, -limit)), int64(math.Min(hi, limit))
		return n, nil
	}
	if lo >= 0 {
		n.minVal = 0
	}
	switch {
	case hi < 0:
		n.maxVal = -1
	case hi == 0:
		n.maxVal = 0
	}
	return n, nil
}

func (c *compiler) compileArray(s *object, path string) (*node, error) {
	n := &node{kind: kArray, style: c.style, items: c.style.anyValue}
	if it, ok := s.get("items"); ok {
		c.containers++
		items, err := c.compile(it, path+"/items")
		c.containers--
		if err != nil {
			return nil, err
		}
		n.items = items
	}
	var err error
	if n.minItems, err = count(s, "minItems", path, 0); err != nil {
		return nil, err
	}
	if n.maxItems, err = count(s, "maxItems", path, -1); err != nil {
		return nil, err
	}
	if n.maxItems >= 0 && n.maxItems < n.minItems {
		return nil, &SchemaError{path, "maxItems is below minItems"}
	}
	return n, nil
}

func (c *compiler) compileProperties(s *object, path string) (*node, error) {
	n := &node{kind: kObject, style: c.style, additional: c.style.anyValue}
	pv, hasProps := s.get("properties")
	props, _ := pv.(*object)
	if hasProps && props == nil {
		return nil, &SchemaError{path + "/properties", fmt.Sprintf("must be an object, not %s", jsonKind(pv))}
	}
	if props != nil && len(props.keys) > maxProperties {
		return nil, &SchemaError{path + "/properties", fmt.Sprintf("%d properties: at most %d are supported", len(props.keys), maxProperties)}
	}
	c.containers++
	defer func() { c.containers-- }()
	if props != nil {
		for _, k := range props.keys {
			if !utf8.ValidString(k) || strings.ContainsAny(k, "\"\\") || strings.ContainsFunc(k, func(r rune) bool { return r < 0x20 }) {
				return nil, &SchemaError{path + "/properties", fmt.Sprintf("property name %q needs escaping: not supported", k)}
			}
			p, err := c.compile(props.vals[k], path+"/properties/"+k)
			if err != nil {
				return nil, err
			}
			n.keys = append(n.keys, k)
			n.props = append(n.props, p)
		}
	}
	n.allKeys = 1<<len(n.keys) - 1
	if len(n.keys) == 64 {
		n.allKeys = math.MaxUint64
	}
	required := make([]bool, len(n.keys))
	if r, ok := s.get("required"); ok {
		list, ok := r.([]any)
		if !ok {
			return nil, &SchemaError{path + "/required", "must be an array of property names"}
		}
		for _, e := range list {
			name, _ := e.(string)
			i := slices.Index(n.keys, name)
			if i < 0 {
				return nil, &SchemaError{path + "/required", fmt.Sprintf("%q is not a property", name)}
			}
			required[i] = true
		}
	}
	n.reqAfter = make([]int32, len(n.keys)+1)
	n.reqAfter[len(n.keys)] = int32(len(n.keys))
	for i := len(n.keys) - 1; i >= 0; i-- {
		n.reqAfter[i] = n.reqAfter[i+1]
		if required[i] {
			n.reqAfter[i] = int32(i)
		}
	}
	switch a, _ := s.get("additionalProperties"); a := a.(type) {
	case nil:
	case bool:
		if !a {
			n.additional = nil
		}
	default:
		sub, err := c.compile(a, path+"/additionalProperties")
		if err != nil {
			return nil, err
		}
		n.additional = sub
	}
	return n, nil
}

// literals compiles enum / const values to their JSON texts in the style.
func (c *compiler) literals(values []any, path string) (*node, error) {
	n := &node{kind: kLiteral}
	for _, v := range values {
		var b strings.Builder
		render(&b, v, c.style)
		n.lits = append(n.lits, b.String())
	}
	slices.Sort(n.lits)
	n.lits = slices.Compact(n.lits)
	return n, nil
}

// object is a JSON object that keeps its keys' order.
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// decodeOrdered decodes JSON with objects as *object and numbers as
// json.Number.
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("data after the value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch d := tok.(type) {
	case json.Delim:
		if d == '[' {
			list := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			_, err := dec.Token()
			return list, err
		}
		o := &object{vals: map[string]any{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			if _, dup := o.vals[k]; dup {
				return nil, fmt.Errorf("duplicate key %q", k)
			}
			o.keys = append(o.keys, k)
			o.vals[k] = v
		}
		_, err := dec.Token()
		return o, err
	}
	return tok, nil
}

// render writes v as JSON in style s (keys in their order, strings escaped
// as encoding/json does without HTML escaping).
func render(b *strings.Builder, v any, s *Style) {
	switch v := v.(type) {
	case *object:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteString(s.ItemSep)
			}
			render(b, k, s)
			b.WriteString(s.KeySep)
			render(b, v.vals[k], s)
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteString(s.ItemSep)
			}
			render(b, e, s)
		}
		b.WriteByte(']')
	case string:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v)
		b.WriteString(strings.TrimSuffix(buf.String(), "\n"))
	case json.Number:
		b.WriteString(string(v))
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case nil:
		b.WriteString("null")
	}
}

func jsonKind(v any) string {
	switch v.(type) {
	case *object:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}
