package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

const personSchema = `{"type":"object","properties":{
	"name":{"type":"string"},
	"age":{"type":"integer"},
	"height":{"type":"number"},
	"tags":{"type":"array","items":{"type":"string","enum":["a","ab","b"]}},
	"role":{"anyOf":[{"type":"null"},{"const":"admin"},{"type":"object","properties":{"level":{"type":"integer"}},"required":["level"],"additionalProperties":false}]},
	"ok":{"type":"boolean"}},
	"required":["name","age"],"additionalProperties":false}`

func mustCompile(t testing.TB, schema string) *Grammar {
	t.Helper()
	g, err := CompileSchema(json.RawMessage(schema))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func matches(g *Grammar, text string) (prefix, whole bool) {
	m := g.Matcher()
	if !m.Feed([]byte(text)) {
		return false, false
	}
	return true, m.Complete()
}

func TestSchemas(t *testing.T) {
	for _, tc := range []struct {
		schema string
		text   string
		prefix bool // a prefix of an accepted document
		whole  bool // an accepted document
	}{
		{personSchema, `{"name":"Ann","age":30}`, true, true},
		{personSchema, ` { "age" : -0 , "name" : "A\"n\u00e9 ü 世" }`, true, true},
		{personSchema, `{"name":"Ann","age":30,"height":1.5e+3,"tags":["ab","a"],"role":{"level":2},"ok":true}`, true, true},
		{personSchema, `{"name":"Ann","age":30,"role":null}`, true, true},
		{personSchema, `{"name":"Ann","age":30,"role":"admin"}`, true, true},
		{personSchema, `{"name":"Ann"`, true, false},
		{personSchema, `{"name":"Ann"}`, false, false},             // age required
		{personSchema, `{"name":"Ann","name":"Bob"`, false, false}, // duplicate key
		{personSchema, `{"nam":1`, false, false},
		{personSchema, `{"name":"Ann","age":3.5}`, false, false}, // integer
		{personSchema, `{"name":"Ann","age":01}`, false, false},
		{personSchema, `{"name":"Ann","age":30,"extra":1}`, false, false},
		{personSchema, `{"name":"Ann","age":30,"tags":["c"]}`, false, false},
		{personSchema, `{"name":"Ann","age":30,"role":{}}`, false, false},
		{personSchema, "{\"name\":\"a\nb\"", false, false}, // control character
		{personSchema, "{\"name\":\"\xff\"", false, false}, // invalid UTF-8
		{personSchema, "{\"name\":\"\xed\xa0\x80\"", false, false},
		{personSchema, `{"name":"Ann","age":30}x`, false, false},
		{`{"type":"number"}`, `-12.5E-3`, true, true},
		{`{"type":"number"}`, `12.`, true, false},
		{`{"type":["string","null"]}`, `null`, true, true},
		{`{"enum":[1,12,"x",true]}`, `12`, true, true},
		{`{"enum":[1,12,"x",true]}`, `1`, true, true},
		{`{"enum":[1,12,"x",true]}`, `13`, false, false},
		{`{}`, `{"a":[1,{"b":null}],"c":"d"}`, true, true},
		{`{}`, `[1,2,]`, false, false},
		{`{"type":"object","additionalProperties":{"type":"integer"}}`, `{"x":1,"y":2}`, true, true},
		{`{"type":"object","additionalProperties":{"type":"integer"}}`, `{"x":"1"}`, false, false},
		{`{"type":"array","items":{"type":"integer"}}`, `[ ]`, true, true},
		{`{"type":"array","items":{"type":"integer"}}`, "[" + strings.Repeat(" ", MaxSpace) + "1]", true, true},
		{`{"type":"array","items":{"type":"integer"}}`, "[" + strings.Repeat(" ", MaxSpace+1), false, false},
		{`{"type":"string"}`, `"` + strings.Repeat(" ", 2*MaxSpace) + `"`, true, true},
	} {
		g := mustCompile(t, tc.schema)
		prefix, whole := matches(g, tc.text)
		if prefix != tc.prefix || whole != tc.whole {
			t.Errorf("%s on %q: prefix %v whole %v, want %v %v", tc.schema[:min(len(tc.schema), 30)], tc.text, prefix, whole, tc.prefix, tc.whole)
		}
	}
}

func TestSchemaErrors(t *testing.T) {
	for _, s := range []string{
		`{"$ref":"#/x"}`, `{"type":"strung"}`, `{"type":"object","required":["x"]}`, `{"anyOf":[]}`,
		`{"enum":[]}`, `false`, `[1]`, `{"type":"object","properties":{"a\"b":{}}}`, `{"type":"object","properties":5}`, `not json`,
	} {
		_, err := CompileSchema(json.RawMessage(s))
		var se *SchemaError
		if !errors.As(err, &se) {
			t.Errorf("%s: error %v, want a SchemaError", s, err)
		}
	}
}

func TestToolCallWrap(t *testing.T) {
	g := mustCompile(t, `{"type":"object","properties":{"name":{"const":"f"},"arguments":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"],"additionalProperties":false}},"required":["name","arguments"],"additionalProperties":false}`).
		Wrap("<tool_call>\n", "\n</tool_call>")
	for text, whole := range map[string]bool{
		"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>": true,
		"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}":               false,
	} {
		prefix, w := matches(g, text)
		if !prefix || w != whole {
			t.Errorf("%q: prefix %v whole %v", text, prefix, w)
		}
	}
	if p, _ := matches(g, "<tool_call>\n{\"name\": \"g\""); p {
		t.Error("accepted another function's name")
	}
}

// testVocab is a small vocabulary of JSON-ish pieces, single bytes and
// multi-byte characters split across tokens.
func testVocab() ([][]byte, *Vocab) {
	var toks [][]byte
	for c := range 256 {
		toks = append(toks, []byte{byte(c)})
	}
	for _, s := range []string{`{"`, `":`, `",`, `"}`, `name`, `age`, ` "`, `true`, `null`, `12`, `3.`, `e+`, "世", "\xe4\xb8", `\u00`, `"a"`, `ab`, `<end>`, `<special>`, "\n  ", "<tool_call>"} {
		toks = append(toks, []byte(s))
	}
	end := int32(len(toks) - 4)
	special := int32(len(toks) - 3)
	v := NewVocab(len(toks), func(id int32) []byte { return toks[id] }, func(id int32) bool { return id == special }, []int32{end})
	return toks, v
}

// TestMaskMatchesBruteForce checks the trie walk against feeding every
// token on its own, along an accepted document.
func TestMaskMatchesBruteForce(t *testing.T) {
	toks, v := testVocab()
	g := mustCompile(t, personSchema)
	doc := `{"name": "世 ab\"\u00e9", "age": 12, "tags": ["a"], "role": null, "height": 3.5e+1}`
	c := g.Constraint(v)
	m := g.Matcher()
	mask := make([]uint64, (len(toks)+63)/64+1)
	for i := 0; i <= len(doc); i++ {
		for j := range mask {
			mask[j] = ^uint64(0)
		}
		c.Mask(mask)
		for id := range int32(len(toks)) {
			got := mask[id/64]&(1<<(id%64)) != 0
			var want bool
			switch {
			case id == v.end[0]:
				want = m.Complete()
			case v.tokens[id] == nil:
				want = false
			default:
				probe := &Matcher{alts: m.alts, ws: m.ws}
				want = probe.Feed(toks[id])
			}
			if got != want {
				t.Fatalf("after %q: token %q allowed %v, want %v", doc[:i], toks[id], got, want)
			}
		}
		if mask[len(mask)-1] != 0 {
			t.Fatal("bits beyond the vocabulary left set")
		}
		if i == len(doc) {
			break
		}
		if err := c.Accept(int32(doc[i])); err != nil {
			t.Fatalf("accept %q after %q: %v", doc[i], doc[:i], err)
		}
		m.Feed([]byte{doc[i]})
	}
	if err := c.Accept(v.end[0]); err != nil {
		t.Fatal(err)
	}
}

// validate checks a decoded JSON value against the schema subset.
func validate(schema, v any) bool {
	s, ok := schema.(map[string]any)
	if !ok {
		return schema == true
	}
	if c, ok := s["const"]; ok {
		return reflect.DeepEqual(c, v)
	}
	if e, ok := s["enum"]; ok {
		for _, x := range e.([]any) {
			if reflect.DeepEqual(x, v) {
				return true
			}
		}
		return false
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if a, ok := s[k]; ok {
			for _, sub := range a.([]any) {
				if validate(sub, v) {
					return true
				}
			}
			return false
		}
	}
	types := []any{s["type"]}
	if list, ok := s["type"].([]any); ok {
		types = list
	}
	for _, t := range types {
		if validType(t, s, v) {
			return true
		}
	}
	return false
}

func validType(t any, s map[string]any, v any) bool {
	switch t {
	case nil:
		if _, ok := s["properties"]; !ok {
			return true
		}
		return validType("object", s, v)
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		return ok && !strings.ContainsAny(string(n), ".eE")
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "array":
		a, ok := v.([]any)
		if !ok {
			return false
		}
		for _, x := range a {
			if it, ok := s["items"]; ok && !validate(it, x) {
				return false
			}
		}
		return true
	case "object":
		o, ok := v.(map[string]any)
		if !ok {
			return false
		}
		props, _ := s["properties"].(map[string]any)
		for k, x := range o {
			if p, ok := props[k]; ok {
				if !validate(p, x) {
					return false
				}
			} else if a, ok := s["additionalProperties"]; ok && !validate(a, x) {
				return false
			}
		}
		req, _ := s["required"].([]any)
		for _, r := range req {
			if _, ok := o[r.(string)]; !ok {
				return false
			}
		}
		return true
	}
	return false
}

func decodeNumbers(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data")
	}
	return v, nil
}

var fuzzSchemas = []string{personSchema, `{}`, `{"type":["number","null"]}`, `{"type":"array","items":{"enum":[1,12,"x"]}}`,
	`{"type":"object","additionalProperties":{"type":"integer"},"properties":{"a":{"type":"string"}}}`}

// FuzzGrammar feeds arbitrary bytes: the automaton never panics, and
// whatever it accepts as a whole document is JSON valid for the schema.
func FuzzGrammar(f *testing.F) {
	for i, s := range []string{`{"name":"Ann","age":30}`, `{"a":[1,{"b":null}]}`, `null`, `[12,1,"x"]`, `{"a":"x","b":-1}`, "{\"name\":\"\\u00e9\",\"age\":0,\"role\":{\"level\":1}}"} {
		f.Add(uint8(i), []byte(s))
	}
	grams := make([]*Grammar, len(fuzzSchemas))
	schemas := make([]any, len(fuzzSchemas))
	for i, s := range fuzzSchemas {
		grams[i] = mustCompile(f, s)
		schemas[i], _ = decodeNumbers([]byte(s))
	}
	f.Fuzz(func(t *testing.T, which uint8, text []byte) {
		i := int(which) % len(grams)
		m := grams[i].Matcher()
		if !m.Feed(text) || !m.Complete() {
			return
		}
		v, err := decodeNumbers(text)
		if err != nil {
			t.Fatalf("accepted %q, which is not JSON: %v", text, err)
		}
		if !validate(schemas[i], v) {
			t.Fatalf("accepted %q, which the schema %s rejects", text, fuzzSchemas[i])
		}
	})
}

// TestRandomWalksValidate generates documents by choosing random allowed
// tokens until the end token is allowed: every one must validate.
func TestRandomWalksValidate(t *testing.T) {
	toks, v := testVocab()
	rng := rand.New(rand.NewPCG(1, 2))
	for i, s := range fuzzSchemas {
		g := mustCompile(t, s)
		schema, _ := decodeNumbers([]byte(s))
		whole := 0
		for range 30 {
			c := g.Constraint(v)
			var out []byte
			mask := make([]uint64, (len(toks)+63)/64)
			for len(out) < 400 {
				for j := range mask {
					mask[j] = ^uint64(0)
				}
				c.Mask(mask)
				var allowed []int32
				for id := range int32(len(toks)) {
					if mask[id/64]&(1<<(id%64)) != 0 {
						allowed = append(allowed, id)
					}
				}
				if len(allowed) == 0 {
					t.Fatalf("schema %d: dead end after %q", i, out)
				}
				id := allowed[rng.IntN(len(allowed))]
				if id == v.end[0] || (len(out) > 200 && c.m.Complete()) {
					break
				}
				if err := c.Accept(id); err != nil {
					t.Fatal(err)
				}
				out = append(out, toks[id]...)
			}
			if !c.Complete() {
				continue // cut short
			}
			whole++
			val, err := decodeNumbers(out)
			if err != nil || !validate(schema, val) {
				t.Fatalf("schema %d: generated %q: %v", i, out, err)
			}
		}
		if whole < 5 {
			t.Errorf("schema %d: only %d of 30 random walks ended in a whole document", i, whole)
		}
	}
}
