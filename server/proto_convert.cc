#include "version.h"
#include "proto_convert.h"

#include <algorithm>

#include "core/request_ids.h"
#include "core/request_input.h"

namespace kvserve {

using grpc::Status;
using grpc::StatusCode;

Status to_engine_request(const v1::GenerateRequest& in, const Tokenizer& tokenizer, Request* out) {
  const std::span<const int32_t> ids(in.prompt_token_ids().data(), in.prompt_token_ids_size());
  if (ServiceStatus st = resolve_prompt(in.prompt(), ids, tokenizer, &out->prompt); !st.ok()) return to_grpc(st);
  if (!in.request_id().empty()) {  // empty, like absent: the server assigns one
    if (std::string err = check_request_id(in.request_id()); !err.empty())
      return Status(StatusCode::INVALID_ARGUMENT, err);
    out->client_id = in.request_id();
  }
  const v1::SamplingParams& s = in.sampling();
  SamplingParams& o = out->sampling;
  if (s.has_max_new_tokens()) o.max_new_tokens = s.max_new_tokens();
  if (s.has_temperature()) o.temperature = s.temperature();
  if (s.has_top_k()) o.top_k = s.top_k();
  if (s.has_top_p()) o.top_p = s.top_p();
  if (s.has_min_p()) o.min_p = s.min_p();
  if (s.has_seed()) o.seed = s.seed();
  if (s.has_repetition_penalty()) o.repetition_penalty = s.repetition_penalty();
  if (s.has_presence_penalty()) o.presence_penalty = s.presence_penalty();
  if (s.has_frequency_penalty()) o.frequency_penalty = s.frequency_penalty();
  o.stop.assign(s.stop().begin(), s.stop().end());
  o.stop_token_ids.assign(s.stop_token_ids().begin(), s.stop_token_ids().end());
  o.ignore_eos = s.ignore_eos();
  if (s.has_speculative()) o.speculative = s.speculative();
  o.logprobs = s.logprobs();
  o.top_logprobs = s.top_logprobs();
  if (s.has_prompt_logprobs()) o.prompt_logprobs = s.prompt_logprobs();
  OutputConstraint& c = o.constraint;
  switch (s.constraint_case()) {
    case v1::SamplingParams::kJsonSchema:
      c.kind = OutputConstraint::Kind::kJsonSchema;
      c.text = s.json_schema();
      break;
    case v1::SamplingParams::kJsonObject:
      if (s.json_object()) c.kind = OutputConstraint::Kind::kJsonObject;
      break;
    case v1::SamplingParams::kRegex:
      c.kind = OutputConstraint::Kind::kRegex;
      c.text = s.regex();
      break;
    case v1::SamplingParams::kChoice:
      c.kind = OutputConstraint::Kind::kChoice;
      c.choices.assign(s.choice().choices().begin(), s.choice().choices().end());
      break;
    case v1::SamplingParams::kGrammar:
      c.kind = OutputConstraint::Kind::kGrammar;
      c.text = s.grammar();
      break;
    case v1::SamplingParams::CONSTRAINT_NOT_SET:
      break;
  }
  for (const auto& [t, b] : s.logit_bias()) o.logit_bias.emplace_back(t, b);
  std::sort(o.logit_bias.begin(), o.logit_bias.end());  // a map's order is unspecified
  return Status::OK;
}

Status to_grpc(const ServiceStatus& s) {
  switch (s.code) {
    case ServiceCode::kOk: return Status::OK;
    case ServiceCode::kInvalidArgument: return Status(StatusCode::INVALID_ARGUMENT, s.message);
    case ServiceCode::kUnauthenticated: return Status(StatusCode::UNAUTHENTICATED, s.message);
    case ServiceCode::kNotFound: return Status(StatusCode::NOT_FOUND, s.message);
    case ServiceCode::kAlreadyExists: return Status(StatusCode::ALREADY_EXISTS, s.message);
    case ServiceCode::kResourceExhausted: return Status(StatusCode::RESOURCE_EXHAUSTED, s.message);
    case ServiceCode::kUnavailable: return Status(StatusCode::UNAVAILABLE, s.message);
    case ServiceCode::kCancelled: return Status(StatusCode::CANCELLED, s.message);
    case ServiceCode::kDeadlineExceeded: return Status(StatusCode::DEADLINE_EXCEEDED, s.message);
    case ServiceCode::kInternal: return Status(StatusCode::INTERNAL, s.message);
  }
  return Status(StatusCode::INTERNAL, s.message);
}

std::vector<std::pair<std::string, std::string>> response_metadata(const std::string& request_id) {
  // Checked again here, whatever the caller did: gRPC aborts the process on an illegal value.
  if (!check_request_id(request_id).empty()) return {};
  return {{"x-request-id", request_id}};
}

v1::FinishReason to_proto(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return v1::FINISH_REASON_UNSPECIFIED;
    case FinishReason::kLength: return v1::FINISH_REASON_LENGTH;
    case FinishReason::kStop: return v1::FINISH_REASON_STOP;
    case FinishReason::kStopString: return v1::FINISH_REASON_STOP_STRING;
    case FinishReason::kCancelled: return v1::FINISH_REASON_CANCELLED;
    case FinishReason::kDeadline: return v1::FINISH_REASON_DEADLINE;
    case FinishReason::kError: return v1::FINISH_REASON_ERROR;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

void to_proto(const TokenLogprob& in, v1::TokenLogprob* out) {
  out->set_token_id(in.token);
  out->set_logprob(in.logprob);
  for (const auto& [id, lp] : in.top) {
    auto* t = out->add_top();
    t->set_token_id(id);
    t->set_logprob(lp);
  }
}

void to_proto(const Completion& c, const std::string& request_id, v1::GenerateComplete* out) {
  out->set_finish_reason(to_proto(c.reason));
  out->set_request_id(request_id);
  out->set_prompt_tokens(c.prompt_tokens);
  out->set_completion_tokens(c.completion_tokens);
  out->set_cached_prompt_tokens(c.cached_prompt_tokens);
  out->set_time_to_first_token_s(c.time_to_first_token_s);
  out->set_total_time_s(c.total_time_s);
  out->set_peak_kv_bytes(c.peak_kv_bytes);
  out->set_preemptions(c.preemptions);
  for (const TokenLogprob& t : c.prompt_logprobs) to_proto(t, out->add_prompt_logprobs());
}

void to_proto(const ModelInfo& i, const EngineOptions& o, v1::GetModelInfoResponse* out) {
  out->set_architecture(i.architecture);
  out->set_name(i.name);
  out->set_n_layers(i.n_layer);
  out->set_n_heads(i.n_head);
  out->set_n_kv_heads(i.n_head_kv);
  out->set_head_dim(i.head_dim);
  out->set_hidden_size(i.n_embd);
  out->set_ffn_size(i.n_ff);
  out->set_vocab_size(i.n_vocab);
  out->set_max_context(i.n_ctx_train);
  out->set_max_model_len(i.max_model_len);
  out->set_block_size(i.block_size);
  out->set_num_blocks(i.num_blocks);
  out->set_token_capacity(i.token_capacity);
  auto* kv = out->mutable_kv_bytes_per_token();
  kv->set_total(i.kv_bytes_per_token);
  kv->set_kv_factor(i.mla.on() ? 1 : 2);
  kv->set_n_layers(i.n_layer);
  kv->set_n_kv_heads(i.n_head_kv);
  kv->set_head_dim(i.head_dim);
  kv->set_element_bytes(i.kv_element_bytes);
  kv->set_element_size(i.kv_element_size);
  if (i.mla.on()) {
    kv->set_mla_kv_lora_rank(i.mla.kv_lora_rank);
    kv->set_mla_rope_dim(i.mla.qk_rope_dim);
    kv->set_mla_nope_dim(i.mla.qk_nope_dim);
    kv->set_mla_v_head_dim(i.mla.v_head_dim);
    kv->set_multi_head_total(i.kv_bytes_per_token_multi_head);
  }
  out->set_kv_cache_bytes(i.kv_total_bytes);
  out->set_max_concurrency(i.max_concurrency);
  out->set_weight_type(i.weight_type);
  out->set_weights_held_as(i.weights_held_as);
  out->set_weight_bytes_per_step(i.weight_bytes_per_step);
  out->set_weight_bytes(i.weight_bytes);
  out->set_kernels(i.kernels);
  out->set_sliding_window(i.sliding_window);
  out->set_kv_tokens_per_request(i.kv_tokens_per_request);
  out->set_kv_layout(i.kv_layout);
  out->set_kv_windowed_layers(i.kv_windowed_layers);
  out->set_kv_full_layers(i.kv_full_layers);
  out->set_kv_request_token_layers_windowed(i.kv_request_token_layers_windowed);
  out->set_kv_request_token_layers_full(i.kv_request_token_layers_full);
  out->set_kv_bytes_per_request(i.kv_bytes_per_request);
  out->set_speculative_method(o.speculative.method);
  out->set_speculative_num_tokens(o.speculative.method == "off" ? 0 : o.speculative.num_tokens);
  out->set_speculative(i.speculative);
  if (o.speculative.method == "draft") {
    out->set_draft_model_name(i.draft_name);
    out->set_draft_num_params(i.draft_n_params);
    out->set_draft_num_blocks(i.draft_num_blocks);
    out->set_draft_kv_cache_bytes(i.draft_kv_bytes);
  }
  out->set_server_version(kvserve::server_version());
  out->set_num_threads(i.num_threads);
  out->set_num_params(i.n_params);
  out->set_max_num_seqs(o.scheduler.max_num_seqs);
  out->set_max_num_batched_tokens(o.scheduler.max_num_batched_tokens);
  for (const auto& v : i.kv_what_if) {
    auto* w = out->add_kv_what_if();
    w->set_name(v.name);
    w->set_n_kv_heads(v.n_kv_heads);
    w->set_bytes_per_token(v.bytes_per_token);
    w->set_token_capacity(v.token_capacity);
    w->set_max_concurrency(v.max_concurrency);
  }
}

void to_proto(const EngineStats& s, v1::GetStatsResponse* out) {
  out->set_num_requests_running(s.running);
  out->set_num_requests_waiting(s.waiting);
  out->set_num_requests_waiting_background(s.waiting_background);
  out->set_num_preemptions_total(s.preemptions_total);
  out->set_blocks_total(s.blocks_total);
  out->set_blocks_used(s.blocks_used);
  out->set_blocks_free(s.blocks_free);
  out->set_tokens_cached(s.tokens_cached);
  out->set_kv_cache_usage(s.kv_usage);
  out->set_prompt_tokens_total(s.prompt_tokens_total);
  out->set_generation_tokens_total(s.generation_tokens_total);
  out->set_requests_finished_total(s.requests_finished_total);
  out->set_steps_total(s.steps_total);
  out->set_engine_busy_seconds_total(s.busy_seconds_total);
  out->set_engine_forward_seconds_total(s.forward_seconds_total);
  out->set_prefix_caching(s.prefix_caching);
  out->set_prefix_cache_hit_rate(s.prefix_cache_hit_rate);
  out->set_cached_blocks(s.cached_blocks);
  out->set_prompt_tokens_from_cache(s.prompt_tokens_admitted ? s.prompt_tokens_from_cache : 0);
  out->set_prefix_cache_evictions_total(s.evictions_total);
}

}  // namespace kvserve
