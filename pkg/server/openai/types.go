// Package openai holds the OpenAI / vLLM wire types ellm's server speaks and
// the pure conversions between them: no engine, no HTTP.
package openai

import "encoding/json"

// ErrorResponse is OpenAI's error body.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody names what went wrong and, for invalid input, the field (Param).
type ErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// ChatCompletionRequest is the body of POST /v1/chat/completions. Messages
// and tools stay raw so that the chat template sees the client's key order
// and number types.
type ChatCompletionRequest struct {
	Model               string            `json:"model"`
	Messages            []json.RawMessage `json:"messages"`
	Tools               json.RawMessage   `json:"tools,omitempty"`
	ToolChoice          json.RawMessage   `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool             `json:"parallel_tool_calls,omitempty"`
	MaxTokens           *int              `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int              `json:"max_completion_tokens,omitempty"`
	Sampling
	Stop               json.RawMessage `json:"stop,omitempty"`
	Logprobs           *bool           `json:"logprobs,omitempty"`
	TopLogprobs        *int            `json:"top_logprobs,omitempty"`
	Stream             bool            `json:"stream,omitempty"`
	StreamOptions      *StreamOptions  `json:"stream_options,omitempty"`
	ResponseFormat     *ResponseFormat `json:"response_format,omitempty"`
	ChatTemplateKwargs json.RawMessage `json:"chat_template_kwargs,omitempty"`
	// ReasoningEffort switches Qwen3's thinking: none and minimal turn it
	// off, low, medium, high and xhigh on.
	ReasoningEffort *string `json:"reasoning_effort,omitempty"`
	// SessionID names a transcript session (ellm extension; the
	// X-Session-ID header does the same).
	SessionID string            `json:"session_id,omitempty"`
	N         *int              `json:"n,omitempty"`
	User      string            `json:"user,omitempty"`
	Store     *bool             `json:"store,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
}

// Sampling are the sampling fields shared by chat and text completions.
type Sampling struct {
	Temperature       *float64 `json:"temperature,omitempty"`
	TopP              *float64 `json:"top_p,omitempty"`
	TopK              *int     `json:"top_k,omitempty"`
	MinP              *float64 `json:"min_p,omitempty"`
	PresencePenalty   *float64 `json:"presence_penalty,omitempty"`
	FrequencyPenalty  *float64 `json:"frequency_penalty,omitempty"`
	RepetitionPenalty *float64 `json:"repetition_penalty,omitempty"`
	Seed              *int64   `json:"seed,omitempty"`
	// LogitBias maps token ids (as strings, OpenAI's shape) to a bias in
	// [-100, 100] added to their logits.
	LogitBias map[string]float64 `json:"logit_bias,omitempty"`
	VLLMSampling
}

// VLLMSampling are vLLM's extra sampling and output fields, shared by chat
// and text completions.
type VLLMSampling struct {
	// MinTokens suppresses the end tokens and stop strings until that many
	// tokens are generated.
	MinTokens *int `json:"min_tokens,omitempty"`
	// IgnoreEOS keeps generating past the model's end tokens.
	IgnoreEOS bool `json:"ignore_eos,omitempty"`
	// StopTokenIDs end the generation like the model's end tokens.
	StopTokenIDs []int32 `json:"stop_token_ids,omitempty"`
	// SkipSpecialTokens (default true) leaves special tokens out of the text.
	SkipSpecialTokens *bool `json:"skip_special_tokens,omitempty"`
	// IncludeStopStrInOutput keeps the stop string that ended the text.
	IncludeStopStrInOutput bool `json:"include_stop_str_in_output,omitempty"`
	// GuidedJSON is a JSON schema (an object, or its text) the reply must
	// satisfy: an alias of response_format json_schema.
	GuidedJSON json.RawMessage `json:"guided_json,omitempty"`
	// GuidedRegex is a regular expression the whole reply must match.
	GuidedRegex *string `json:"guided_regex,omitempty"`
	// GuidedChoice lists the replies allowed, as bare text.
	GuidedChoice []string `json:"guided_choice,omitempty"`
	// GuidedGrammar (an EBNF grammar) and GuidedWhitespacePattern are
	// read only to be refused: ellm has no context-free grammars, and its
	// JSON layout is fixed.
	GuidedGrammar           *string `json:"guided_grammar,omitempty"`
	GuidedWhitespacePattern *string `json:"guided_whitespace_pattern,omitempty"`
	// StructuredOutputs is vLLM's newer home of the guided_* fields.
	StructuredOutputs *StructuredOutputs `json:"structured_outputs,omitempty"`
}

// StructuredOutputs is vLLM's structured_outputs (which replaced the
// guided_* fields in vLLM 0.12): one of json, regex, choice or json_object.
type StructuredOutputs struct {
	JSON              json.RawMessage `json:"json,omitempty"`
	Regex             *string         `json:"regex,omitempty"`
	Choice            []string        `json:"choice,omitempty"`
	JSONObject        *bool           `json:"json_object,omitempty"`
	Grammar           *string         `json:"grammar,omitempty"`
	WhitespacePattern *string         `json:"whitespace_pattern,omitempty"`
	StructuralTag     json.RawMessage `json:"structural_tag,omitempty"`
}

// StreamOptions are the options of a streamed response.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage,omitempty"`
	// ContinuousUsageStats (vLLM, with IncludeUsage) puts the usage so far
	// in every chunk.
	ContinuousUsageStats bool `json:"continuous_usage_stats,omitempty"`
}

// ResponseFormat asks for text, any JSON object, or JSON valid for a schema.
type ResponseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
}

// JSONSchema is response_format.json_schema.
type JSONSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// Message is the part of a request message the server itself reads; the
// message is passed to the chat template as the client sent it.
type Message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	// ReasoningContent is accepted on assistant messages (vLLM); templates
	// may render it.
	ReasoningContent *string `json:"reasoning_content,omitempty"`
}

// ContentPart is one element of a message's content given as parts.
type ContentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// Tool is one entry of tools.
type Tool struct {
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function is a tool's function definition.
type Function struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ChatCompletion is the non-streamed response.
type ChatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint,omitempty"`
	Choices           []ChatChoice `json:"choices"`
	Usage             *Usage       `json:"usage,omitempty"`
}

// ChatChoice is a choice of a non-streamed chat completion.
type ChatChoice struct {
	Index        int             `json:"index"`
	Message      ResponseMessage `json:"message"`
	Logprobs     *ChoiceLogprobs `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

// ResponseMessage is the assistant's reply.
type ResponseMessage struct {
	Role             string     `json:"role"`
	Content          *string    `json:"content"`
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// ToolCall is one call in a reply; in a stream chunk Index says which call
// a fragment extends.
type ToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is the called function; Arguments is JSON text.
type FunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// ChoiceLogprobs are a choice's token log-probabilities.
type ChoiceLogprobs struct {
	Content []TokenLogprob `json:"content"`
}

// TokenLogprob is one generated token with its alternatives.
type TokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []TopLogprob `json:"top_logprobs"`
}

// TopLogprob is one alternative of a generated token.
type TopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// Usage counts a request's tokens; PromptTokensDetails.CachedTokens are the
// prompt tokens that were not computed again (known once the request ends:
// the usage in the chunks of a stream with continuous usage leaves them out).
type Usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// PromptTokensDetails breaks down prompt tokens.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// ChatCompletionChunk is one server-sent event of a streamed chat completion.
type ChatCompletionChunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	SystemFingerprint string        `json:"system_fingerprint,omitempty"`
	Choices           []ChunkChoice `json:"choices"`
	Usage             *Usage        `json:"usage,omitempty"`
}

// ChunkChoice is a choice of a stream chunk.
type ChunkChoice struct {
	Index        int             `json:"index"`
	Delta        Delta           `json:"delta"`
	Logprobs     *ChoiceLogprobs `json:"logprobs,omitempty"`
	FinishReason *string         `json:"finish_reason"`
}

// Delta is what a chunk adds to the reply.
type Delta struct {
	Role             string     `json:"role,omitempty"`
	Content          *string    `json:"content,omitempty"`
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// CompletionRequest is the body of POST /v1/completions.
type CompletionRequest struct {
	Model     string          `json:"model"`
	Prompt    json.RawMessage `json:"prompt"`
	MaxTokens *int            `json:"max_tokens,omitempty"`
	Sampling
	Stop          json.RawMessage `json:"stop,omitempty"`
	Logprobs      *int            `json:"logprobs,omitempty"`
	Echo          bool            `json:"echo,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
	StreamOptions *StreamOptions  `json:"stream_options,omitempty"`
	N             *int            `json:"n,omitempty"`
	User          string          `json:"user,omitempty"`
}

// Completion is a text completion, streamed or not.
type Completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
}

// CompletionChoice is a choice of a text completion.
type CompletionChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	Logprobs     *CompletionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

// CompletionLogprobs are the legacy completions log-probabilities.
type CompletionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// ModelList is GET /v1/models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// Model describes the served model.
type Model struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	Root        string `json:"root,omitempty"`
	MaxModelLen int    `json:"max_model_len,omitempty"`
	// Synthetic marks ellm's built-in random-weight model.
	Synthetic bool `json:"synthetic,omitempty"`
}

// TokenizeRequest is vLLM's POST /tokenize: either a prompt or chat messages.
type TokenizeRequest struct {
	Model               string            `json:"model,omitempty"`
	Prompt              *string           `json:"prompt,omitempty"`
	Messages            []json.RawMessage `json:"messages,omitempty"`
	Tools               json.RawMessage   `json:"tools,omitempty"`
	AddSpecialTokens    *bool             `json:"add_special_tokens,omitempty"`
	AddGenerationPrompt *bool             `json:"add_generation_prompt,omitempty"`
	ChatTemplateKwargs  json.RawMessage   `json:"chat_template_kwargs,omitempty"`
	ReturnTokenStrs     bool              `json:"return_token_strs,omitempty"`
}

// TokenizeResponse is vLLM's tokenize answer.
type TokenizeResponse struct {
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Tokens      []int32  `json:"tokens"`
	TokenStrs   []string `json:"token_strs,omitempty"`
}

// DetokenizeRequest is vLLM's POST /detokenize.
type DetokenizeRequest struct {
	Model  string  `json:"model,omitempty"`
	Tokens []int32 `json:"tokens"`
}

// DetokenizeResponse is vLLM's detokenize answer.
type DetokenizeResponse struct {
	Prompt string `json:"prompt"`
}
