package openai

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

func TestReplaceKeysKeepsOrder(t *testing.T) {
	got, err := ReplaceKeys(json.RawMessage(`{"z":1,"role":"developer","a":{"b":1.0}}`), map[string]json.RawMessage{"role": json.RawMessage(`"system"`)})
	if err != nil || string(got) != `{"z":1,"role":"system","a":{"b":1.0}}` {
		t.Errorf("%s %v", got, err)
	}
	if _, err := ReplaceKeys(json.RawMessage(`[1]`), nil); err == nil {
		t.Error("accepted an array")
	}
}

func TestStops(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  bool
	}{
		{``, nil, false}, {`null`, nil, false}, {`"x"`, []string{"x"}, false}, {`""`, nil, false},
		{`["a","","b"]`, []string{"a", "b"}, false}, {`5`, nil, true}, {`[1]`, nil, true},
		{`["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]`, nil, true},
	} {
		got, err := Stops(json.RawMessage(tc.in))
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v %v", tc.in, got, err)
		}
	}
}

func TestParseToolChoice(t *testing.T) {
	tools := []Tool{{Type: "function", Function: Function{Name: "f"}}}
	for _, tc := range []struct {
		in    string
		tools []Tool
		want  ToolChoice
		err   bool
	}{
		{``, tools, ToolChoice{Mode: "auto"}, false},
		{``, nil, ToolChoice{Mode: "none"}, false},
		{`"required"`, tools, ToolChoice{Mode: "required"}, false},
		{`"required"`, nil, ToolChoice{}, true},
		{`"sometimes"`, tools, ToolChoice{}, true},
		{`{"type":"function","function":{"name":"f"}}`, tools, ToolChoice{Mode: "function", Name: "f"}, false},
		{`{"type":"function","function":{"name":"g"}}`, tools, ToolChoice{}, true},
		{`{"type":"function"}`, tools, ToolChoice{}, true},
	} {
		got, err := ParseToolChoice(json.RawMessage(tc.in), tc.tools)
		var fe *FieldError
		if (err != nil) != tc.err || got != tc.want || (err != nil && (!errors.As(err, &fe) || fe.Param != "tool_choice")) {
			t.Errorf("%s: %+v %v", tc.in, got, err)
		}
	}
}

func TestNormalizeMessages(t *testing.T) {
	for _, tc := range []struct {
		in    string
		param string
	}{
		{`[{"role":"user","content":"hi"}]`, ""},
		{`[{"role":"user","content":[{"type":"text","text":"hi"}]}]`, ""},
		{`[{"role":"assistant","content":null,"tool_calls":[]}]`, ""},
		{`[]`, "messages"},
		{`[5]`, "messages[0]"},
		{`[{"role":"robot","content":"x"}]`, "messages[0].role"},
		{`[{"role":"user","content":{"a":1}}]`, "messages[0].content"},
		{`[{"role":"user","content":[{"type":"image_url"}]}]`, "messages[0].content"},
	} {
		var raw []json.RawMessage
		if err := json.Unmarshal([]byte(tc.in), &raw); err != nil {
			t.Fatal(err)
		}
		_, err := NormalizeMessages(raw)
		var fe *FieldError
		if tc.param == "" && err != nil || tc.param != "" && (!errors.As(err, &fe) || fe.Param != tc.param) {
			t.Errorf("%s: %v, want param %q", tc.in, err, tc.param)
		}
	}
}
