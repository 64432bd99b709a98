// The official openai npm package, unmodified, against kvserve's HTTP API: lists the model, and
// completions.create gives the same greedy text as kvserve-generate, streamed and not, with
// correct usage; a chat completion, whole and streamed, agrees with itself. Usage: node openai_client_test.mjs BASE_URL MODEL EXPECTED_TEXT PROMPT_TOKENS MAX_TOKENS
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
await assert.rejects(client.chat.completions.create({ ...chatRequest, response_format: { type: "json_object" }, tools: [
  { type: "function", function: { name: "f", parameters: { type: "object" } } }] }), (e) => e.status === 400 && /tools/.test(e.message));

// A bad field: the SDK raises the 400 with the field named.
await assert.rejects(client.completions.create({ ...request, top_p: 7 }), (e) => e.status === 400 && /top_p/.test(e.message));
console.log(`openai: models, completions (whole and streamed, ${chunks} chunks) as kvserve-generate, chat whole and streamed, ` +
            `structured outputs (${parsedCount}/4 parsed by zod)`);
