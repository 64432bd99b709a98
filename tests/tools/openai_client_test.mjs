// The official openai npm package, unmodified, against kvserve's HTTP API: lists the model, and
// completions.create gives the same greedy text as kvserve-generate, streamed and not, with
// correct usage; a chat completion, whole and streamed, agrees with itself; structured outputs
// and tool calls as the SDK parses them. Usage: node openai_client_test.mjs BASE_URL MODEL EXPECTED_TEXT PROMPT_TOKENS MAX_TOKENS
import OpenAI from "openai";
import { zodResponseFormat } from "openai/helpers/zod";
import { z } from "zod";
import assert from "node:assert/strict";

const [baseURL, model, expected, promptTokens, maxTokens] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: process.env.KVSERVE_TOKEN ?? "none" });

const models = await client.models.list();
assert.deepEqual(models.data.map((m) => m.id), [model]);

const request = { model, prompt: "Once upon a time", max_tokens: Number(maxTokens), temperature: 0 };
const whole = await client.completions.create(request);
assert.equal(whole.object, "text_completion");
assert.equal(whole.choices[0].text, expected);
assert.equal(whole.choices[0].finish_reason, "length");
assert.equal(whole.usage.prompt_tokens, Number(promptTokens));
assert.equal(whole.usage.completion_tokens, Number(maxTokens));
assert.equal(whole.usage.total_tokens, Number(promptTokens) + Number(maxTokens));

const stream = await client.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
let text = "", chunks = 0, usage = null, finish = null;
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  for (const choice of chunk.choices) {
    text += choice.text;
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  ++chunks;
}
assert.equal(text, expected);
assert.ok(chunks > 2, `only ${chunks} chunks: not streamed`);
assert.equal(finish, "length");
assert.equal(usage.completion_tokens, Number(maxTokens));

// Chat: the model's template (ChatML here: stories260K has none), whole and streamed alike;
// the prompt counted as the template renders it (kvserve's /apply-template and /tokenize).
const messages = [{ role: "system", content: "Tell stories." }, { role: "user", content: "Once upon a time" }];
const chatRequest = { model, messages, max_tokens: Number(maxTokens), temperature: 0 };
const chat = await client.chat.completions.create(chatRequest);
assert.equal(chat.object, "chat.completion");
assert.equal(chat.choices[0].message.role, "assistant");
assert.equal(chat.choices[0].finish_reason, "length");
assert.equal(chat.usage.completion_tokens, Number(maxTokens));
const root = baseURL.replace(/\/v1$/, "");
const headers = { "content-type": "application/json", authorization: `Bearer ${process.env.KVSERVE_TOKEN ?? "none"}` };
const rendered = await (await fetch(`${root}/apply-template`, { method: "POST", headers, body: JSON.stringify({ messages }) })).json();
assert.equal(rendered.prompt, "<|im_start|>system\nTell stories.<|im_end|>\n<|im_start|>user\nOnce upon a time<|im_end|>\n<|im_start|>assistant\n");
const counted = await (await fetch(`${root}/tokenize`, { method: "POST", headers, body: JSON.stringify({ prompt: rendered.prompt, add_special: false }) })).json();
assert.equal(chat.usage.prompt_tokens, counted.count);
let chatText = "", role = null, chatFinish = null;
for await (const chunk of await client.chat.completions.create({ ...chatRequest, stream: true })) {
  for (const choice of chunk.choices) {
    if (choice.delta.role) role = choice.delta.role;
    chatText += choice.delta.content ?? "";
    if (choice.finish_reason) chatFinish = choice.finish_reason;
  }
}
assert.equal(role, "assistant");
assert.equal(chatText, chat.choices[0].message.content);
assert.equal(chatFinish, "length");

// Chat log-probabilities in chat's own shape: one entry a token, each with its alternatives.
const withLp = await client.chat.completions.create({ ...chatRequest, logprobs: true, top_logprobs: 2 });
assert.equal(withLp.choices[0].logprobs.content.length, Number(maxTokens));
for (const t of withLp.choices[0].logprobs.content) {
  assert.equal(typeof t.token, "string");
  assert.ok(t.logprob <= 0);
  assert.equal(t.top_logprobs.length, 2);
  assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
}
assert.equal(withLp.choices[0].logprobs.content.map((t) => t.token).join(""), withLp.choices[0].message.content);

// Structured outputs: the SDK's own zod helper and parse; every answer that ends with "stop" is
// what zod accepts, and a streamed answer with the same seed is the same text.
const Person = z.object({ name: z.string().max(12), age: z.number().int().min(0).max(130),
                          pets: z.array(z.enum(["cat", "dog", "fish"])).max(3) });
const parse = client.chat.completions.parse
  ? (r) => client.chat.completions.parse(r) : (r) => client.beta.chat.completions.parse(r);
let parsedCount = 0;
for (const seed of [1, 2, 3, 4]) {
  const r = await parse({ model, messages, max_tokens: 300, temperature: 1, seed,
                          response_format: zodResponseFormat(Person, "person") });
  if (r.choices[0].finish_reason !== "stop") continue;
  assert.deepEqual(Person.parse(JSON.parse(r.choices[0].message.content)), r.choices[0].message.parsed);
  ++parsedCount;
}
assert.ok(parsedCount >= 3, `only ${parsedCount} of 4 structured answers finished`);
const schemaRequest = { model, messages, max_tokens: 300, temperature: 1, seed: 9,
                        response_format: zodResponseFormat(Person, "person") };
const wholeJson = await client.chat.completions.create(schemaRequest);
let streamedJson = "";
for await (const chunk of await client.chat.completions.create({ ...schemaRequest, stream: true }))
  for (const choice of chunk.choices) streamedJson += choice.delta.content ?? "";
assert.equal(streamedJson, wholeJson.choices[0].message.content);
await assert.rejects(client.chat.completions.create({ ...chatRequest, response_format: { type: "bogus" } }),
                     (e) => e.status === 400 && /response_format\.type/.test(e.message));

// Tools: tool_choice "required" and a named tool make the answer a call of a declared tool with
// arguments valid for its schema, returned as tool_calls (the SDK's own shapes), streamed and
// whole alike, with finish_reason "tool_calls"; the conversation then goes on with the result.
const tools = [
  { type: "function", function: { name: "get_weather", description: "The weather in a place.",
    parameters: { type: "object", properties: { location: { type: "string", maxLength: 16 },
                                                unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
                  required: ["location", "unit"], additionalProperties: false } } },
  { type: "function", function: { name: "get_time", parameters: { type: "object",
    properties: { timezone: { type: "string", maxLength: 16 } }, required: ["timezone"], additionalProperties: false } } }];
const checkArgs = (call) => {
  const args = JSON.parse(call.function.arguments);
  if (call.function.name === "get_weather") {
    assert.deepEqual(Object.keys(args).sort(), ["location", "unit"]);
    assert.ok(["celsius", "fahrenheit"].includes(args.unit));
  } else {
    assert.equal(call.function.name, "get_time");
    assert.deepEqual(Object.keys(args), ["timezone"]);
  }
  assert.equal(call.type, "function");
  assert.ok(call.id.length > 0);
};
const toolMessages = [{ role: "user", content: "What is the weather in Paris?" }];
let called = 0, streamedCalls = 0;
for (const seed of [1, 2, 3, 4]) {
  const toolRequest = { model, messages: toolMessages, tools, tool_choice: "required", parallel_tool_calls: false,
                        max_tokens: 200, temperature: 1, seed };
  const r = await client.chat.completions.create(toolRequest);
  if (r.choices[0].finish_reason !== "tool_calls") continue;
  const calls = r.choices[0].message.tool_calls;
  assert.equal(calls.length, 1);
  checkArgs(calls[0]);
  ++called;
  const parts = [];
  let toolFinish = null;
  for await (const chunk of await client.chat.completions.create({ ...toolRequest, stream: true })) {
    for (const choice of chunk.choices) {
      for (const d of choice.delta.tool_calls ?? []) {
        if (!parts[d.index]) parts[d.index] = { id: d.id, type: d.type, function: { name: d.function.name, arguments: "" } };
        parts[d.index].function.arguments += d.function.arguments ?? "";
      }
      if (choice.finish_reason) toolFinish = choice.finish_reason;
    }
  }
  assert.equal(toolFinish, "tool_calls");
  assert.deepEqual(parts.map((c) => c.function), calls.map((c) => c.function));
  ++streamedCalls;
  // The call and its result sent back, as agent loops do: the template renders both.
  const followUp = await client.chat.completions.create({ model, max_tokens: 8, tools, messages: [
    ...toolMessages, r.choices[0].message,
    { role: "tool", tool_call_id: calls[0].id, content: JSON.stringify({ temperature: 18 }) }] });
  assert.equal(followUp.choices[0].message.role, "assistant");
}
assert.ok(called >= 3, `only ${called} of 4 required calls finished`);
const named = await client.chat.completions.create({ model, messages: toolMessages, tools, max_tokens: 200, seed: 5,
  tool_choice: { type: "function", function: { name: "get_time" } } });
assert.equal(named.choices[0].message.tool_calls[0].function.name, "get_time");
checkArgs(named.choices[0].message.tool_calls[0]);
const auto = await client.chat.completions.create({ model, messages: toolMessages, tools, max_tokens: 8, temperature: 0 });
assert.equal(typeof auto.choices[0].message.content, "string");
await assert.rejects(client.chat.completions.create({ ...chatRequest, response_format: { type: "json_object" }, tools,
  tool_choice: "required" }), (e) => e.status === 400 && /tool_choice/.test(e.message));
await assert.rejects(client.chat.completions.create({ ...chatRequest, tools, tool_choice: { type: "function",
  function: { name: "nope" } } }), (e) => e.status === 400 && /tool_choice\.function\.name/.test(e.message));

// A bad field: the SDK raises the 400 with the field named.
await assert.rejects(client.completions.create({ ...request, top_p: 7 }), (e) => e.status === 400 && /top_p/.test(e.message));
console.log(`openai: models, completions (whole and streamed, ${chunks} chunks) as kvserve-generate, chat whole and streamed, ` +
            `structured outputs (${parsedCount}/4 parsed by zod), tool calls (${called}/4 required, ${streamedCalls} streamed alike)`);
