// The official openai npm package, unmodified, against kvserve's HTTP API: lists the model, and
// completions.create gives the same greedy text as kvserve-generate, streamed and not, with
// correct usage. Usage: node openai_client_test.mjs BASE_URL MODEL EXPECTED_TEXT PROMPT_TOKENS MAX_TOKENS
import OpenAI from "openai";
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

// A bad field: the SDK raises the 400 with the field named.
await assert.rejects(client.completions.create({ ...request, top_p: 7 }), (e) => e.status === 400 && /top_p/.test(e.message));
console.log(`openai ${OpenAI.VERSION ?? ""}: models, completions (whole and streamed, ${chunks} chunks) as kvserve-generate`);
