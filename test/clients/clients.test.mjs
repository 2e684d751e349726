// Real OpenAI-compatible clients against a running `ellm serve` (run.sh
// starts it on the built-in synthetic model and sets ELLM_BASE_URL,
// ELLM_API_KEY, ELLM_MODEL). The model's words are noise; what is checked is
// what the server guarantees whatever the model: the wire format every SDK
// parses, forced tool calls valid for their schema, structured output valid
// for its schema, usage with cached prompt tokens on a repeated prompt.
import { test } from "node:test";
import assert from "node:assert/strict";

import OpenAI from "openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, streamText, Output, tool, jsonSchema } from "ai";
import { ChatOpenAI } from "@langchain/openai";
import { z } from "zod";

const baseURL = process.env.ELLM_BASE_URL;
const apiKey = process.env.ELLM_API_KEY;
const model = process.env.ELLM_MODEL;
assert.ok(baseURL && apiKey && model, "run through run.sh: ELLM_BASE_URL, ELLM_API_KEY and ELLM_MODEL must be set");

// A system prompt long enough that a repeat of it is visibly cached.
const system = "You are a weather assistant. " + "Answer in one short sentence. ".repeat(20);
const weatherParams = {
  type: "object",
  properties: {
    city: { type: "string", maxLength: 12 },
    unit: { type: "string", enum: ["celsius", "fahrenheit"] },
  },
  required: ["city", "unit"],
  additionalProperties: false,
};
const personSchema = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 16 },
    age: { type: "integer", minimum: 0, maximum: 150 },
    pets: { type: "array", items: { type: "string", enum: ["cat", "dog"] }, maxItems: 3 },
  },
  required: ["name", "age", "pets"],
  additionalProperties: false,
};

function checkWeatherArgs(args) {
  assert.equal(typeof args.city, "string");
  assert.ok(args.city.length <= 12, `city ${JSON.stringify(args.city)} longer than maxLength`);
  assert.ok(["celsius", "fahrenheit"].includes(args.unit), `unit ${args.unit}`);
  assert.deepEqual(Object.keys(args).sort(), ["city", "unit"]);
}

function checkPerson(p) {
  assert.equal(typeof p.name, "string");
  assert.ok(p.name.length <= 16);
  assert.ok(Number.isInteger(p.age) && p.age >= 0 && p.age <= 150, `age ${p.age}`);
  assert.ok(Array.isArray(p.pets) && p.pets.length <= 3 && p.pets.every((x) => x === "cat" || x === "dog"), `pets ${p.pets}`);
  assert.deepEqual(Object.keys(p).sort(), ["age", "name", "pets"]);
}

test("openai SDK", async (t) => {
  const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
  const messages = [
    { role: "system", content: system },
    { role: "user", content: "What is the weather in Oslo?" },
  ];

  await t.test("chat", async () => {
    const r = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0 });
    assert.equal(r.object, "chat.completion");
    assert.equal(r.choices.length, 1);
    assert.equal(typeof r.choices[0].message.content, "string");
    assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
    assert.ok(r.usage.prompt_tokens > 200 && r.usage.completion_tokens > 0);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  });

  await t.test("streaming with usage and cached tokens", async () => {
    const stream = await client.chat.completions.create({
      model, messages, max_tokens: 16, temperature: 0, stream: true, stream_options: { include_usage: true },
    });
    let text = "", finish = null, usage = null, chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        text += c.delta.content ?? "";
        finish = c.finish_reason ?? finish;
      }
    }
    assert.ok(chunks >= 3, `${chunks} chunks`);
    assert.ok(["stop", "length"].includes(finish));
    assert.ok(usage, "no usage chunk");
    // The same system prompt and question were just computed: all but the
    // last prompt token come from the prefix cache.
    assert.ok(usage.prompt_tokens_details.cached_tokens >= usage.prompt_tokens - 1,
      `cached ${usage.prompt_tokens_details.cached_tokens} of ${usage.prompt_tokens}`);
  });

  await t.test("tool call with tool_choice required", async () => {
    const r = await client.chat.completions.create({
      model, messages, max_tokens: 200, temperature: 1, seed: 7, tool_choice: "required",
      tools: [{ type: "function", function: { name: "get_weather", description: "Weather in a city", parameters: weatherParams } }],
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, "tool_calls");
    assert.ok(c.message.tool_calls.length >= 1);
    for (const call of c.message.tool_calls) {
      assert.equal(call.type, "function");
      assert.equal(call.function.name, "get_weather");
      assert.ok(call.id);
      checkWeatherArgs(JSON.parse(call.function.arguments));
    }
  });

  await t.test("response_format json_schema", async () => {
    const r = await client.chat.completions.create({
      model, messages: [{ role: "user", content: "Describe a person." }], max_tokens: 300, temperature: 1, seed: 3,
      response_format: { type: "json_schema", json_schema: { name: "person", schema: personSchema, strict: true } },
    });
    assert.equal(r.choices[0].finish_reason, "stop");
    checkPerson(JSON.parse(r.choices[0].message.content));
  });

  await t.test("guided_json, guided_choice and guided_regex (vLLM extra body)", async () => {
    const r = await client.chat.completions.create({
      model, messages: [{ role: "user", content: "Describe a person." }], max_tokens: 300, temperature: 1, seed: 5,
      guided_json: personSchema,
    });
    checkPerson(JSON.parse(r.choices[0].message.content));
    const choice = await client.chat.completions.create({
      model, messages: [{ role: "user", content: "Sentiment?" }], max_tokens: 10, temperature: 1, seed: 5,
      guided_choice: ["positive", "negative", "neutral"],
    });
    assert.ok(["positive", "negative", "neutral"].includes(choice.choices[0].message.content));
    const re = await client.completions.create({
      model, prompt: "Phone:", max_tokens: 20, temperature: 1, seed: 5, guided_regex: "\\d{3}-\\d{4}",
    });
    assert.match(re.choices[0].text, /^\d{3}-\d{4}$/);
    assert.equal(re.choices[0].finish_reason, "stop");
  });

  await t.test("errors are typed", async () => {
    await assert.rejects(
      client.chat.completions.create({ model, messages, guided_grammar: 'root ::= "a"' }),
      (err) => err instanceof OpenAI.BadRequestError && err.param === "guided_grammar");
    await assert.rejects(
      client.chat.completions.create({ model: "no-such-model", messages }),
      (err) => err instanceof OpenAI.NotFoundError);
  });
});

test("Vercel AI SDK (@ai-sdk/openai-compatible)", async (t) => {
  const provider = createOpenAICompatible({ name: "ellm", baseURL, apiKey, includeUsage: true, supportsStructuredOutputs: true });
  const lm = provider.chatModel(model);

  await t.test("generateText and streamText with usage", async () => {
    const r = await generateText({ model: lm, system, prompt: "Weather in Rome?", maxOutputTokens: 16, temperature: 0, maxRetries: 0 });
    assert.equal(typeof r.text, "string");
    assert.ok(["stop", "length"].includes(r.finishReason));
    assert.ok(r.usage.inputTokens > 200 && r.usage.outputTokens > 0);
    const s = streamText({ model: lm, system, prompt: "Weather in Rome?", maxOutputTokens: 16, temperature: 0, maxRetries: 0 });
    let text = "";
    for await (const part of s.textStream) text += part;
    const usage = await s.usage;
    assert.equal(text, await s.text);
    assert.ok(usage.inputTokenDetails.cacheReadTokens >= usage.inputTokens - 1,
      `cached ${usage.inputTokenDetails.cacheReadTokens} of ${usage.inputTokens}`);
  });

  await t.test("tool call with toolChoice required", async () => {
    const r = await generateText({
      model: lm, system, prompt: "Weather in Rome?", maxOutputTokens: 200, temperature: 1, seed: 11, maxRetries: 0,
      toolChoice: "required",
      tools: { get_weather: tool({ description: "Weather in a city", inputSchema: jsonSchema(weatherParams) }) },
    });
    assert.ok(r.toolCalls.length >= 1, `no tool call: ${r.text}`);
    for (const call of r.toolCalls) {
      assert.equal(call.toolName, "get_weather");
      checkWeatherArgs(call.input);
    }
    assert.equal(r.finishReason, "tool-calls");
  });

  await t.test("structured output (json_schema)", async () => {
    const r = await generateText({
      model: lm, prompt: "Describe a person.", maxOutputTokens: 300, temperature: 1, seed: 13, maxRetries: 0,
      output: Output.object({ schema: jsonSchema(personSchema) }),
    });
    checkPerson(r.output);
  });
});

test("LangChain (@langchain/openai)", async (t) => {
  const llm = new ChatOpenAI({
    model, apiKey, configuration: { baseURL }, maxTokens: 16, temperature: 0, maxRetries: 0,
    streamUsage: true,
  });

  await t.test("invoke and stream with usage metadata", async () => {
    const msg = await llm.invoke([["system", system], ["user", "Weather in Paris?"]]);
    assert.equal(typeof msg.content, "string");
    assert.ok(msg.usage_metadata.input_tokens > 200 && msg.usage_metadata.output_tokens > 0);
    let acc;
    for await (const chunk of await llm.stream([["system", system], ["user", "Weather in Paris?"]])) {
      acc = acc ? acc.concat(chunk) : chunk;
    }
    assert.equal(typeof acc.content, "string");
    const u = acc.usage_metadata;
    assert.ok(u.input_token_details.cache_read >= u.input_tokens - 1, `cached ${u.input_token_details.cache_read} of ${u.input_tokens}`);
  });

  await t.test("bindTools with tool_choice required", async () => {
    const bound = new ChatOpenAI({ model, apiKey, configuration: { baseURL }, maxTokens: 200, temperature: 1, maxRetries: 0 })
      .bindTools([{ type: "function", function: { name: "get_weather", description: "Weather in a city", parameters: weatherParams } }],
        { tool_choice: "required" });
    const msg = await bound.invoke([["user", "Weather in Paris?"]]);
    assert.ok(msg.tool_calls.length >= 1, `no tool call: ${msg.content}`);
    for (const call of msg.tool_calls) {
      assert.equal(call.name, "get_weather");
      checkWeatherArgs(call.args);
    }
  });

  await t.test("withStructuredOutput (jsonSchema)", async () => {
    const Person = z.object({
      name: z.string().max(16),
      age: z.number().int().min(0).max(150),
      pets: z.array(z.enum(["cat", "dog"])).max(3),
    });
    const structured = new ChatOpenAI({ model, apiKey, configuration: { baseURL }, maxTokens: 300, temperature: 1, maxRetries: 0 })
      .withStructuredOutput(Person, { method: "jsonSchema", strict: true });
    checkPerson(await structured.invoke([["user", "Describe a person."]]));
  });
});
