package server

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/ellm-dev/ellm/pkg/engine"
)

// TestGuidedText: guided_regex and guided_choice (and structured_outputs'
// regex and choice) constrain the bare text of chat and text completions;
// a reply that would violate them is forced back (the fake engine then
// takes the lowest allowed token).
func TestGuidedText(t *testing.T) {
	_, base := startServer(t, newFakeEngine(t, constReply("negative")), Options{})
	for _, tc := range []struct{ extra, want string }{
		{`"guided_choice":["positive","negative"]`, "negative"},
		{`"structured_outputs":{"choice":["positive","negative"]}`, "negative"},
		{`"guided_choice":["yes","no"]`, "no"},          // 'n' is allowed, then only "o"
		{`"guided_choice":["a","b"]`, "a"},              // nothing of the reply fits: the lowest token
		{`"guided_regex":"neg[a-z]{0,3}"`, "negati"},    // cut where the regex ends
		{`"guided_regex":"(?i)NEGATIVE|x"`, "negative"}, // case folds
		{`"structured_outputs":{"regex":"[0-9]{2}"}`, "00"},
		{`"structured_outputs":{"json_object":true},"max_tokens":40`, ""},
	} {
		for _, route := range []string{"/v1/chat/completions", "/v1/completions"} {
			body := `{` + hi + `,` + tc.extra + `}`
			if route == "/v1/completions" {
				body = `{"prompt":"x",` + tc.extra + `}`
			}
			r := postOK(t, base, route, body)
			got := r.Choices[0].Message.Content + r.Choices[0].Text
			if tc.want == "" { // json_object: the fake's lowest tokens run out of max_tokens inside the object
				if !strings.HasPrefix(got, `{"`) || r.Choices[0].FinishReason != "length" {
					t.Errorf("%s %s: %q (finish %s) does not begin an object", route, tc.extra, got, r.Choices[0].FinishReason)
				}
				continue
			}
			if got != tc.want || r.Choices[0].FinishReason != "stop" {
				t.Errorf("%s %s: %q (finish %s), want %q", route, tc.extra, got, r.Choices[0].FinishReason, tc.want)
			}
		}
	}
	for _, tc := range []struct{ body, param, msg string }{
		{`"guided_regex":"(?=a)b"`, "guided_regex", "(?="},
		{`"guided_regex":"\\bword"`, "guided_regex", `\b and \B are not supported`},
		{`"guided_regex":"[a-z]{200}"`, "guided_regex", "at most 128"},
		{`"guided_regex":"a$b"`, "guided_regex", "matches no text"},
		{`"structured_outputs":{"regex":"(a)\\1"}`, "structured_outputs.regex", `\1`},
		{`"guided_choice":[]`, "guided_choice", "no choices"},
		{`"guided_choice":["a",""]`, "guided_choice", "choice 1 is empty"},
		{`"guided_choice":["a"],"guided_regex":"a"`, "guided_choice", "not both guided_regex and guided_choice"},
		{`"guided_choice":["a"],"structured_outputs":{"choice":["a"]}`, "structured_outputs.choice", "not both"},
		{`"guided_choice":["a"],"response_format":{"type":"json_object"}`, "guided_choice", "either response_format or guided_choice"},
		{`"guided_regex":"a","tool_choice":"required","tools":[{"type":"function","function":{"name":"f"}}]`, "guided_regex", "tool_choice"},
		{`"guided_whitespace_pattern":" *"`, "guided_whitespace_pattern", "not supported"},
		{`"structured_outputs":{"structural_tag":{"x":1}}`, "structured_outputs.structural_tag", "not supported"},
		{`"guided_regex":1`, "guided_regex", ""},
		{`"structured_outputs":{"choice":"a"}`, "structured_outputs.choice", ""},
	} {
		status, b := post(t, base, "/v1/chat/completions", `{`+hi+`,`+tc.body+`}`)
		if msg := wantError(t, status, b, 400, tc.param, ""); !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: message %q, want it to contain %q", tc.body, msg, tc.msg)
		}
	}
}

// TestRealEngineGuidedText: the tiny model samples random tokens at
// temperature 1, yet with guided_regex every reply matches the regex as a
// whole and with guided_choice every reply is one of the choices, and
// each ends because the model chose an end token (finish_reason stop), in
// chat (streamed and not) and text completions.
func TestRealEngineGuidedText(t *testing.T) {
	e := tinyEngine(t, engine.Options{BatchSize: 2, SequenceLength: 1024})
	defer e.Close()
	_, base := startServer(t, e, Options{})
	c := newClient(base)
	choices := []string{"positive", "negative", "neutral", "pos", "n/a", "très bien"}
	cases := []struct {
		name  string
		field string
		value any
		ok    func(string) bool
	}{
		{"choice", "guided_choice", choices, func(s string) bool { return slices.Contains(choices, s) }},
	}
	for _, p := range []string{
		`\d{3}-\d{4}`,
		`[a-z]{1,8}@example\.(com|org)`,
		`(yes|no|maybe)( because [a-z ]{1,20})?\.`,
		`-?(0|[1-9][0-9]{0,5})(\.[0-9]{1,3})?`,
		`(?i)answer: [A-E]`,
		`[^\n]{1,16}\n[0-9]{1,3}`,
	} {
		re := regexp.MustCompile(`^(?:` + p + `)$`)
		cases = append(cases, struct {
			name  string
			field string
			value any
			ok    func(string) bool
		}{p, "guided_regex", p, re.MatchString})
	}
	const seeds = 6
	for _, tc := range cases {
		for seed := range int64(seeds) {
			var text, finish string
			extra := option.WithJSONSet(tc.field, tc.value)
			switch seed % 3 {
			case 0:
				resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
					Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Answer.")},
					MaxTokens: openai.Int(200), Seed: openai.Int(seed), Temperature: openai.Float(1)}, extra)
				if err != nil {
					t.Fatal(err)
				}
				text, finish = resp.Choices[0].Message.Content, string(resp.Choices[0].FinishReason)
			case 1:
				stream := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
					Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Answer.")},
					MaxTokens: openai.Int(200), Seed: openai.Int(seed), Temperature: openai.Float(1)}, extra)
				acc := openai.ChatCompletionAccumulator{}
				for stream.Next() {
					acc.AddChunk(stream.Current())
				}
				if err := stream.Err(); err != nil {
					t.Fatal(err)
				}
				text, finish = acc.Choices[0].Message.Content, string(acc.Choices[0].FinishReason)
			default:
				resp, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
					Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Answer:")},
					MaxTokens: openai.Int(200), Seed: openai.Int(seed), Temperature: openai.Float(1)}, extra)
				if err != nil {
					t.Fatal(err)
				}
				text, finish = resp.Choices[0].Text, string(resp.Choices[0].FinishReason)
			}
			t.Logf("%s seed %d: %q", tc.name, seed, text)
			if !tc.ok(text) || finish != "stop" {
				t.Errorf("%s %s seed %d: %q (finish %s)", tc.field, tc.name, seed, text, finish)
			}
		}
	}
}
