// Package toolcall turns the tool calls a Qwen3 model writes into OpenAI
// tool_calls, in one pass (Parse) or incrementally while streaming (Stream).
// Text that is not a well-formed tool call is returned as content: it is
// never dropped.
package toolcall
