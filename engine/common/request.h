// What a caller hands the engine (a Request and a sink) and what comes back (Events).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvserve {

// What the generated text must be, enforced token by token (grammar/constraint.h).
struct OutputConstraint {
  enum class Kind { kNone, kJsonSchema, kJsonObject, kRegex, kChoice, kGrammar, kToolCalls };
  Kind kind = Kind::kNone;
  // kJsonSchema: the schema as JSON text; kRegex; kGrammar: GBNF; kToolCalls: the calls a chat
  // format allows, as JSON: {"calls": [{"open", "schema"?, "close"}], "max", "separator"}, each
  // call its open text, arguments valid for the schema (free text up to close without one),
  // and its close text; 1 to max calls (-1: any number) between separators; with "lazy_marker",
  // free text without that marker first, the calls optional after it; with "optional_prefix":
  // {"open", "close"}, a message of free text between them may come first.
  std::string text;
  std::vector<std::string> choices;  // kChoice: the text is exactly one of these
  // A reasoning model's <think> block comes first and is free: -1 none; 0 the answer may open
  // one; 1 the prompt opened one. The constraint applies after </think>.
  int32_t reasoning = -1;
  bool active() const { return kind != Kind::kNone; }
};

struct SamplingParams {
  int32_t max_new_tokens = 256;     // tokens to generate at most
  float temperature = 1.0f;         // 0 (or anything below 1e-5) = greedy (argmax)
  int32_t top_k = 0;                // keep the k most likely tokens; 0 = all
  float top_p = 1.0f;               // keep the smallest set with this much probability; 1 = all
  float min_p = 0.0f;               // drop tokens below min_p · (probability of the best); 0 = off
  float repetition_penalty = 1.0f;  // >1 discourages tokens already in prompt or output (CTRL-style)
  float presence_penalty = 0.0f;    // subtracted once from tokens already generated
  float frequency_penalty = 0.0f;   // subtracted per occurrence in the generated tokens
  std::optional<uint64_t> seed;     // same seed, same tokens, whatever else is in the batch
  std::vector<std::string> stop;    // stop strings; the text ends before the first one found
  std::vector<int32_t> stop_token_ids;  // tokens that end generation (as EOS does)
  bool ignore_eos = false;          // keep going past EOS
  bool logprobs = false;            // report the sampled token's log-probability
  int32_t top_logprobs = 0;         // and this many most likely alternatives (0-20)
  // -1 = off; 0-20: the log-probability of every prompt token after the first given those
  // before it, with this many alternatives (Completion::prompt_logprobs).
  int32_t prompt_logprobs = -1;
  OutputConstraint constraint;      // none by default
  // Control tokens (other than those ending generation) written into the text as their
  // spelling: for a chat format that marks calls or channels with them (gpt-oss, Mistral,
  // DeepSeek, Llama 3's <|python_tag|>), whose parser reads the markers.
  bool special_text = false;
  // Added to a token's logit before anything else (OpenAI's logit_bias; -100 bans, 100 forces).
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Speculative decoding for this request when the server has it on (speculative.method); the
  // output is the same either way (greedy: the same tokens; sampled: the same distribution).
  bool speculative = true;
};

// A head of the model: layer and query head, both from 0.
struct HeadRef {
  int32_t layer = 0;
  int32_t head = 0;
};

// Looking inside the model for this request alone. Any of these keeps the request's KV out of
// the prefix cache (in both directions), so it neither borrows nor lends cached blocks.
struct InspectOptions {
  bool capture_attention = false;     // record every layer's and head's attention over the prompt
  bool score_prompt = false;          // sum log p(prompt[i] | prompt[<i]) over the prompt
  std::vector<HeadRef> ablate_heads;  // heads whose output is zeroed before the output projection

  bool active() const { return capture_attention || score_prompt || !ablate_heads.empty(); }
};

// Attention probabilities over a prompt of n_tokens: probs[((layer·n_head + head)·n + row)·n + col],
// zero above the diagonal.
struct AttentionCapture {
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_tokens = 0;
  std::vector<float> probs;

  const float* row(int32_t layer, int32_t head, int32_t r) const {
    return probs.data() + ((static_cast<int64_t>(layer) * n_head + head) * n_tokens + r) * n_tokens;
  }
};

// Interactive requests (Generate) come first; background ones (the inspection calls' many
// sub-requests) take what is left of a step, within scheduler.background_tokens_per_step, never
// while an interactive prompt is being processed, and do not count against max_waiting.
enum class Priority { kInteractive, kBackground };

struct Request {
  std::vector<int32_t> prompt;  // token ids, BOS included if wanted
  SamplingParams sampling;
  InspectOptions inspect;
  std::string client_id;        // the caller's own id, echoed in logs
  // Prefix-cache partition: requests share cached blocks only with requests of the same salt,
  // so one tenant cannot learn another's prompts from how fast its own are answered ("" = the
  // common partition). Front ends put the tenant in it.
  std::string cache_salt;
  // Abort on its own once this much time has passed since submit (0 = no deadline).
  int64_t deadline_ms = 0;
  Priority priority = Priority::kInteractive;
};

enum class FinishReason { kNone, kLength, kStop /* EOS or a stop token */, kStopString, kCancelled,
                          kDeadline, kError };
const char* finish_reason_name(FinishReason r);

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // most likely alternatives, best first
};

struct Completion {
  FinishReason reason = FinishReason::kNone;
  std::string error;                // for kError
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_prompt_tokens = 0; // prompt tokens whose K/V were reused, not computed
  int32_t preemptions = 0;
  double time_to_first_token_s = 0.0;
  double total_time_s = 0.0;
  int64_t peak_kv_bytes = 0;        // KV memory the request held at its peak
  // With inspect.score_prompt: the sum of log p(prompt[i] | prompt[<i]) over i = 1..n-1, and n-1.
  double prompt_logprob_sum = 0.0;
  int32_t prompt_logprob_count = 0;
  // With sampling.prompt_logprobs: entry i-1 for prompt token i, i = 1..n-1.
  std::vector<TokenLogprob> prompt_logprobs;
  // With inspect.capture_attention: the prompt's attention, every layer and head.
  std::shared_ptr<const AttentionCapture> attention;
};

// One step's news for one request: new tokens and text, and at the end its completion.
struct Event {
  uint64_t id = 0;
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<TokenLogprob> logprobs;
  std::optional<Completion> completion;  // set on the last event, and only there
};

// Receives a request's events on the engine loop thread. Must return quickly and never block:
// implementations queue the event and hand it to another thread.
class ResultSink {
 public:
  virtual ~ResultSink() = default;
  virtual void on_event(Event event) = 0;
};

enum class SubmitCode { kOk, kInvalidArgument, kNeverFits, kOverloaded, kShuttingDown };

struct SubmitResult {
  SubmitCode code = SubmitCode::kOk;
  uint64_t id = 0;
  std::string message;  // names the offending field for kInvalidArgument
  bool ok() const { return code == SubmitCode::kOk; }
};

}  // namespace kvserve
