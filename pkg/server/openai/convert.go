package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Roles a chat message may have.
var roles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

// FieldError is invalid input in a named request field.
type FieldError struct {
	Param string
	Msg   string
}

func (e *FieldError) Error() string { return e.Param + ": " + e.Msg }

// NormalizeMessages checks each message (role, content as a string, null or
// text parts) and returns it as the chat template should see it: the
// developer role becomes system, and everything else keeps its place and
// value (pkg/chat's OpenAI mode joins text parts and decodes tool-call
// arguments when rendering).
func NormalizeMessages(raw []json.RawMessage) ([]json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, &FieldError{"messages", "must hold at least one message"}
	}
	out := make([]json.RawMessage, len(raw))
	for i, m := range raw {
		param := fmt.Sprintf("messages[%d]", i)
		var msg Message
		if err := json.Unmarshal(m, &msg); err != nil {
			return nil, &FieldError{param, fmt.Sprintf("not a valid message: %v", err)}
		}
		if !roles[msg.Role] {
			return nil, &FieldError{param + ".role", fmt.Sprintf("unknown role %q", msg.Role)}
		}
		if err := checkContent(msg.Content); err != nil {
			return nil, &FieldError{param + ".content", err.Error()}
		}
		out[i] = m
		if msg.Role == "developer" {
			n, err := ReplaceKeys(m, map[string]json.RawMessage{"role": json.RawMessage(`"system"`)})
			if err != nil {
				return nil, &FieldError{param, err.Error()}
			}
			out[i] = n
		}
	}
	return out, nil
}

// checkContent accepts content given as a string, null or text parts.
func checkContent(raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] == '"' || string(raw) == "null" {
		return nil
	}
	if raw[0] != '[' {
		return fmt.Errorf("must be a string, null or an array of content parts")
	}
	var parts []ContentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return fmt.Errorf("content parts: %v", err)
	}
	for i, p := range parts {
		if p.Type != "text" {
			return fmt.Errorf("content part %d has type %q: only text is supported", i, p.Type)
		}
	}
	return nil
}

// ReplaceKeys returns the JSON object obj with the values of the keys in set
// replaced (keys not present are appended), keeping every key's position.
func ReplaceKeys(obj json.RawMessage, set map[string]json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	done := map[string]bool{}
	first := true
	write := func(k string, v json.RawMessage) {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(v)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if nv, ok := set[k]; ok {
			v = nv
			done[k] = true
		}
		write(k, v)
	}
	for k, v := range set {
		if !done[k] {
			write(k, v)
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// Stops reads stop as a string, an array of strings or null.
func Stops(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, &FieldError{"stop", "must be a string or an array of strings"}
	}
	out := many[:0]
	for _, s := range many {
		if s != "" {
			out = append(out, s)
		}
	}
	if len(out) > 16 {
		return nil, &FieldError{"stop", "at most 16 stop strings"}
	}
	return out, nil
}

// ToolChoice is the decoded tool_choice.
type ToolChoice struct {
	Mode string // "auto", "none", "required" or "function"
	Name string // the named function when Mode is "function"
}

// ParseToolChoice reads tool_choice: "auto" / "none" / "required" or
// {"type":"function","function":{"name":…}}. Absent means auto with tools,
// none without.
func ParseToolChoice(raw json.RawMessage, tools []Tool) (ToolChoice, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		if len(tools) == 0 {
			return ToolChoice{Mode: "none"}, nil
		}
		return ToolChoice{Mode: "auto"}, nil
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case "auto", "none", "required":
		default:
			return ToolChoice{}, &FieldError{"tool_choice", fmt.Sprintf("unknown value %q (auto, none, required or a named function)", mode)}
		}
		if mode != "none" && len(tools) == 0 {
			return ToolChoice{}, &FieldError{"tool_choice", fmt.Sprintf("%q needs tools", mode)}
		}
		return ToolChoice{Mode: mode}, nil
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || named.Type != "function" || named.Function.Name == "" {
		return ToolChoice{}, &FieldError{"tool_choice", `must be "auto", "none", "required" or {"type":"function","function":{"name":…}}`}
	}
	for _, t := range tools {
		if t.Function.Name == named.Function.Name {
			return ToolChoice{Mode: "function", Name: named.Function.Name}, nil
		}
	}
	return ToolChoice{}, &FieldError{"tool_choice", fmt.Sprintf("names function %q, which is not in tools", named.Function.Name)}
}

// ParseTools checks tools: each a function with a name.
func ParseTools(raw json.RawMessage) ([]Tool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var tools []Tool
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, &FieldError{"tools", fmt.Sprintf("must be an array of tools: %v", err)}
	}
	for i, t := range tools {
		if t.Type != "function" {
			return nil, &FieldError{fmt.Sprintf("tools[%d].type", i), fmt.Sprintf("%q: only function tools are supported", t.Type)}
		}
		if t.Function.Name == "" {
			return nil, &FieldError{fmt.Sprintf("tools[%d].function.name", i), "missing"}
		}
	}
	return tools, nil
}
