#!/usr/bin/env python3
"""Renders extra chat-template cases with Python jinja2 configured as
transformers' apply_chat_template does, writing the reference file
reference.jsonl that chat's tests compare against byte for byte.

Run from the repository root: python3 pkg/chat/testdata/reference.py
(needs jinja2 and ../shared; the cases are defined here, not generated).
"""
import json
import os
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("ELLM_SHARED") or os.path.join(HERE, "..", "..", "..", "..", "shared")
TEMPLATES = {"qwen3": "qwen3-tokenizer", "qwen3-coder": "qwen3-coder-template"}


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def load(dirname):
    d = os.path.join(SHARED, dirname)
    cfg = json.load(open(os.path.join(d, "tokenizer_config.json")))
    src = cfg.get("chat_template")
    p = os.path.join(d, "chat_template.jinja")
    if os.path.exists(p):
        src = open(p).read()
    special = {k: cfg[k] for k in ("bos_token", "eos_token", "pad_token", "unk_token") if isinstance(cfg.get(k), str)}
    return src, special


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "  Weather for a city, in °C 🌤  ",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. \"Zürich\""},
        "days": {"type": "integer", "minimum": 1, "maximum": 14, "default": 3},
        "scale": {"type": "number", "multipleOf": 0.5, "examples": [1.0, 2.5, 1e-07, -0.0]},
        "units": {"type": "string", "enum": ["c", "f"]},
        "filters": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
    }, "required": ["city"], "additionalProperties": False}}}
BARE = {"name": "ping", "parameters": {"type": "object", "properties": {}}}
BIG = {"type": "function", "function": {"name": "big", "parameters": {"type": "object", "properties": {
    "n": {"type": "integer", "maximum": 9007199254740993, "minimum": -(2**62)},
    "x": {"type": "number", "maximum": 1e300, "exclusiveMinimum": 5e-324}}}}}

TOOL_CALL_STRING = [
    {"role": "user", "content": "weather?"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 2, \"scale\": 1.0}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]

# (name, messages, tools, add_generation_prompt, kwargs[, openai])
CASES = [
    ("tools, unicode and numbers in schemas", [{"role": "user", "content": "Wetter in Zürich? 🌧"}], [WEATHER, BARE, BIG], True, {}),
    ("system prompt with tools", [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hi"}], [WEATHER], True, {}),
    ("enable_thinking false with tools", [{"role": "user", "content": "hi"}], [BARE], True, {"enable_thinking": False}),
    ("unknown extra kwarg", [{"role": "user", "content": "hi"}], None, True, {"reasoning_effort": "high"}),
    ("template-looking user text", [{"role": "user", "content": "{{ messages }} {% if x %}y{% endif %} <tool_call>"}], None, True, {}),
    ("tool call arguments as a JSON string, content null", TOOL_CALL_STRING, [WEATHER], True, {}),
    ("openai: tool call arguments as a JSON string, content null", TOOL_CALL_STRING, [WEATHER], True, {}, True),
    ("openai: content parts, missing content, empty arguments", [
        {"role": "system", "content": [{"type": "text", "text": "part 1"}, {"type": "text", "text": "part 2"}]},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "ping", "arguments": ""}}]},
        {"role": "tool", "content": None}], [BARE], False, {}, True),
    ("tool call arguments as objects, content null", [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "scale": 0.5, "filters": [{"k": "v"}], "days": 2}}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}], [WEATHER], True, {}),
    ("tool call with content, arguments of every JSON type", [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "Calling now.", "tool_calls": [{"type": "function", "function": {"name": "big", "arguments": {"n": 9007199254740993, "x": 1e300, "t": True, "z": None, "f": -0.0, "s": "a\tb"}}}]},
        {"role": "tool", "content": ""}], [BIG], False, {}),
    ("reasoning_content null falls back to think tags", [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "<think>\nr\n</think>\n\na", "reasoning_content": None}], None, False, {}),
    ("reasoning after the last query kept, before dropped", [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1", "reasoning_content": "r1"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "", "reasoning_content": "r2", "tool_calls": [{"type": "function", "function": {"name": "ping", "arguments": {}}}]},
        {"role": "tool", "content": "pong"},
        {"role": "assistant", "content": "done", "reasoning_content": "r3"}], [BARE], False, {"enable_thinking": True}),
    ("extra message keys", [{"role": "user", "content": "hi", "name": "bob"}], None, True, {}),
    ("empty messages", [], None, True, {}),
    ("user content null", [{"role": "user", "content": None}], None, True, {}),
    ("only a system message", [{"role": "system", "content": "s"}], None, False, {}),
    ("tool message first", [{"role": "tool", "content": "orphan"}], None, True, {}),
]


def openai_message(m):
    """What vLLM makes of an OpenAI message before rendering (chat.Input.OpenAI)."""
    m = json.loads(json.dumps(m))
    c = m.get("content")
    if c is None:
        m["content"] = ""
    elif isinstance(c, list):
        m["content"] = "\n".join(p["text"] for p in c)
    for call in m.get("tool_calls") or []:
        args = call["function"].get("arguments")
        if not args:
            call["function"]["arguments"] = {}
        elif isinstance(args, str):
            call["function"]["arguments"] = json.loads(args)
    return m


def main():
    env = environment()
    out = open(os.path.join(HERE, "reference.jsonl"), "w")
    for tname, dirname in TEMPLATES.items():
        src, special = load(dirname)
        tmpl = env.from_string(src)
        for name, messages, tools, agp, kwargs, *openai in CASES:
            line = {"name": name, "template": tname, "messages": messages, "tools": tools,
                    "add_generation_prompt": agp, "kwargs": kwargs, "openai": bool(openai)}
            if openai:
                messages = [openai_message(m) for m in messages]
            try:
                line["rendered"] = tmpl.render(messages=messages, tools=tools, documents=None,
                                               add_generation_prompt=agp, **{**special, **kwargs})
            except Exception as e:  # the template rejects the conversation
                line["error"] = f"{type(e).__name__}: {e}"
            out.write(json.dumps(line, ensure_ascii=False) + "\n")


main()
