#include "inspect_calls.h"

#include <algorithm>
#include <cmath>

#include "inspect/head_pruning.h"
#include "inspect/head_scores.h"
#include "core/request_input.h"
#include "proto_convert.h"

namespace kvserve {
namespace {

constexpr int32_t kDefaultPeriod = 32;
constexpr double kDefaultLossBudget = 0.01;
constexpr uint64_t kProbeSeed = 20261130;
// gRPC clients refuse larger messages unless told otherwise; the default reply stays below.
constexpr size_t kDefaultReplyLimit = (size_t{4} << 20) - 1024;

// The prompt of an inspection call: text or ids (exactly one), 2..max_tokens tokens.
grpc::Status read_prompt(const std::string& text, const google::protobuf::RepeatedField<int32_t>& ids,
                         const Tokenizer& tok, int32_t max_tokens, std::vector<int32_t>* out) {
  using grpc::Status;
  using grpc::StatusCode;
  if (ServiceStatus st = resolve_prompt(text, std::span<const int32_t>(ids.data(), ids.size()), tok, out); !st.ok())
    return to_grpc(st);
  if (out->size() < 2)
    return Status(StatusCode::INVALID_ARGUMENT, "prompt: at least 2 tokens are needed, got " + std::to_string(out->size()));
  if (static_cast<int64_t>(out->size()) > max_tokens)
    return Status(StatusCode::INVALID_ARGUMENT, "prompt: " + std::to_string(out->size()) + " tokens; inspection takes at most " +
                                                    std::to_string(max_tokens) + " (server.inspect_max_tokens)");
  return Status::OK;
}

}  // namespace

bool InspectionSlot::take(InferenceService& service) {
  if (!service.begin_inspection()) return false;
  service_ = &service;
  held_ = true;
  return true;
}

void InspectionSlot::release() {
  if (held_.exchange(false)) service_->end_inspection();
}

namespace {

// Authorization, a free inspection slot, then the prompt: what both inspection calls check first.
template <class Req>
grpc::Status admit(InferenceService& service, const grpc::CallbackServerContext* ctx, const Req& request,
                   std::vector<int32_t>* prompt, InspectionSlot* slot) {
  if (grpc::Status auth = service.authorize(ctx); !auth.ok()) return auth;
  if (!slot->take(service))
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "inspection: " + std::to_string(service.max_inspect_calls()) +
                            " calls already running (server.max_inspect_calls); try again later");
  return read_prompt(request.prompt(), request.prompt_token_ids(),
                     service.engine().tokenizer(), service.inspect_max_tokens(), prompt);
}

Request inspect_request(std::vector<int32_t> prompt, const grpc::CallbackServerContext* ctx) {
  Request r;
  r.prompt = std::move(prompt);
  r.sampling.max_new_tokens = 1;
  r.sampling.temperature = 0.0f;
  r.sampling.ignore_eos = true;
  r.priority = Priority::kBackground;  // beside Generate traffic, never ahead of it
  r.deadline_ms = deadline_ms_until(ctx->deadline());
  return r;
}

// OK when every request ran to its end; otherwise the status of the first that did not.
grpc::Status completions_status(const std::vector<Completion>& done, bool shutting_down) {
  for (const Completion& c : done)
    if (ServiceStatus s = completion_status(c, shutting_down); !s.ok()) return to_grpc(s);
  return grpc::Status::OK;
}

double mean_logprob(const Completion& c) {
  return c.prompt_logprob_count ? c.prompt_logprob_sum / c.prompt_logprob_count : 0.0;
}

}  // namespace

InspectAttentionCall::InspectAttentionCall(InferenceService& service, grpc::CallbackServerContext* ctx,
                                           const v1::InspectAttentionRequest* request,
                                           v1::InspectAttentionResponse* response)
    : service_(service), response_(response) {
  service_.stream_started();
  Engine& engine = service_.engine();
  std::vector<int32_t> prompt;
  if (grpc::Status st = admit(service_, ctx, *request, &prompt, &slot_); !st.ok()) {
    finish(st);
    return;
  }
  matrices_ = !request->has_include_matrices() ? Matrices::kFitting
              : request->include_matrices()    ? Matrices::kFloat
                                               : Matrices::kNone;
  period_ = request->has_induction_period() ? request->induction_period() : kDefaultPeriod;
  const int32_t max_period = std::min((service_.inspect_max_tokens() - 1) / 2, engine.model_info().n_vocab / 2);
  if (period_ < 2 || period_ > max_period) {
    finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "induction_period: must be between 2 and " + std::to_string(max_period)));
    return;
  }

  prompt_ids_ = prompt;
  Request main = inspect_request(std::move(prompt), ctx);
  main.inspect.capture_attention = true;
  // Random ids from past the specials (ids below 3 are unk, BOS and EOS in both vocab styles).
  Request probe = inspect_request(
      induction_probe(engine.tokenizer().bos_id(), 3, engine.model_info().n_vocab, period_, kProbeSeed), ctx);
  probe.inspect.capture_attention = true;
  fan_out_ = std::make_shared<EngineFanOut>(engine);
  SubmitResult r = fan_out_->start({std::move(main), std::move(probe)},
                                   [this](std::vector<Completion>& done) { answer(done); });
  if (!r.ok()) finish(submit_grpc_status(r));
}

void InspectAttentionCall::answer(std::vector<Completion>& done) {
  if (grpc::Status st = completions_status(done, service_.shutting_down()); !st.ok()) {
    finish(st);
    return;
  }
  const AttentionCapture& a = *done[0].attention;
  const std::vector<HeadScores> scores = score_heads(a, done[1].attention.get(), period_);
  const Tokenizer& tok = service_.engine().tokenizer();
  response_->set_n_layers(a.n_layer);
  response_->set_n_heads(a.n_head);
  response_->set_induction_period(period_);
  for (int32_t id : prompt_ids_) {
    response_->add_token_ids(id);
    response_->add_tokens(tok.token_text(id));
  }
  for (const HeadScores& s : scores) {
    v1::HeadAttention* h = response_->add_heads();
    h->set_layer(s.layer);
    h->set_head(s.head);
    h->set_previous_token_score(static_cast<float>(s.previous_token));
    h->set_sink_score(static_cast<float>(s.sink));
    h->set_local_score(static_cast<float>(s.local));
    h->set_entropy(static_cast<float>(s.entropy));
    h->set_induction_score(static_cast<float>(s.induction));
    h->set_label(s.label);
  }
  add_matrices(a);
  finish(grpc::Status::OK);
}

void InspectAttentionCall::add_matrices(const AttentionCapture& a) {
  response_->set_matrices("none");
  if (matrices_ == Matrices::kNone) return;
  for (v1::HeadAttention& h : *response_->mutable_heads())
    for (int32_t t = 0; t < a.n_tokens; ++t) {
      const float* row = a.row(h.layer(), h.head(), t);
      h.mutable_weights()->Add(row, row + t + 1);
    }
  response_->set_matrices("float32");
  if (matrices_ == Matrices::kFloat || response_->ByteSizeLong() <= kDefaultReplyLimit) return;
  for (v1::HeadAttention& h : *response_->mutable_heads()) {
    std::string& bytes = *h.mutable_weights_u8();
    bytes.resize(h.weights_size());
    for (int i = 0; i < h.weights_size(); ++i)
      bytes[i] = static_cast<char>(static_cast<uint8_t>(std::lround(std::clamp(h.weights(i), 0.0f, 1.0f) * 255.0f)));
    h.clear_weights();
  }
  response_->set_matrices("uint8");
  if (response_->ByteSizeLong() <= kDefaultReplyLimit) return;
  for (v1::HeadAttention& h : *response_->mutable_heads()) h.clear_weights_u8();
  response_->set_matrices("none");
}

void InspectAttentionCall::OnCancel() {
  if (fan_out_) fan_out_->cancel();
}

void InspectAttentionCall::finish(const grpc::Status& status) {
  slot_.release();
  Finish(status);
}

void InspectAttentionCall::OnDone() {
  InferenceService& service = service_;
  slot_.release();
  delete this;
  service.stream_done();
}

HeadImportanceCall::HeadImportanceCall(InferenceService& service, grpc::CallbackServerContext* ctx,
                                       const v1::HeadImportanceRequest* request,
                                       v1::HeadImportanceResponse* response)
    : service_(service), response_(response) {
  service_.stream_started();
  Engine& engine = service_.engine();
  std::vector<int32_t> prompt;
  if (grpc::Status st = admit(service_, ctx, *request, &prompt, &slot_); !st.ok()) {
    finish(st);
    return;
  }
  const double budget = request->has_loss_budget() ? request->loss_budget() : kDefaultLossBudget;
  if (!(budget >= 0.0 && budget <= 100.0)) {
    finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "loss_budget: must be between 0 and 100"));
    return;
  }
  response_->set_loss_budget(budget);

  base_ = inspect_request(std::move(prompt), ctx);
  base_.inspect.score_prompt = true;
  // The baseline, then every head zeroed on its own.
  const ModelInfo& info = engine.model_info();
  std::vector<Request> requests{base_};
  for (int32_t l = 0; l < info.n_layer; ++l) {
    for (int32_t h = 0; h < info.n_head; ++h) {
      requests.push_back(base_);
      requests.back().inspect.ablate_heads = {{l, h}};
    }
  }
  auto fan_out = std::make_shared<EngineFanOut>(engine);
  {
    std::lock_guard<std::mutex> lock(mu_);
    fan_out_ = fan_out;
  }
  SubmitResult r = fan_out->start(std::move(requests), [this](std::vector<Completion>& done) { rank(done); });
  if (!r.ok()) finish(submit_grpc_status(r));
}

void HeadImportanceCall::rank(std::vector<Completion>& done) {
  if (grpc::Status st = completions_status(done, service_.shutting_down()); !st.ok()) {
    finish(st);
    return;
  }
  const double baseline = mean_logprob(done[0]);
  response_->set_n_tokens(done[0].prompt_logprob_count);
  response_->set_baseline_mean_logprob(baseline);
  std::vector<double> single;
  for (size_t i = 1; i < done.size(); ++i) single.push_back(mean_logprob(done[i]));
  const std::vector<HeadDrop> ranked = rank_heads(baseline, single, service_.engine().model_info().n_head);
  for (const HeadDrop& h : ranked) {
    v1::HeadImportanceScore* s = response_->add_heads();
    s->set_layer(h.layer);
    s->set_head(h.head);
    s->set_mean_logprob(h.mean_logprob);
    s->set_drop(h.drop);
  }
  // Which heads can go together, measured in one more batch.
  prefixes_ = pruning_prefixes(ranked, response_->loss_budget());
  estimated_.clear();
  double sum = 0;
  for (auto it = ranked.rbegin(); it != ranked.rend() && estimated_.size() < prefixes_.size(); ++it)
    estimated_.push_back(sum += it->drop);
  std::vector<Request> requests;
  for (const auto& heads : prefixes_) {
    requests.push_back(base_);
    requests.back().inspect.ablate_heads = heads;
  }
  auto fan_out = std::make_shared<EngineFanOut>(service_.engine());
  {
    std::lock_guard<std::mutex> lock(mu_);
    fan_out_ = fan_out;
  }
  // Runs on the engine loop thread: submit only queues, so this cannot deadlock.
  SubmitResult r = fan_out->start(std::move(requests), [this](std::vector<Completion>& d) { measure_joint(d); });
  if (!r.ok()) finish(submit_grpc_status(r));
}

void HeadImportanceCall::measure_joint(std::vector<Completion>& done) {
  if (grpc::Status st = completions_status(done, service_.shutting_down()); !st.ok()) return finish(st);
  const double baseline = response_->baseline_mean_logprob();
  std::vector<double> measured;
  for (const Completion& c : done) measured.push_back(baseline - mean_logprob(c));
  const size_t best = prunable_count(measured, response_->loss_budget());
  if (best > 0)
    for (const HeadRef& h : prefixes_[best - 1]) {
      v1::HeadRef* ref = response_->add_prunable();
      ref->set_layer(h.layer);
      ref->set_head(h.head);
    }
  response_->set_prunable_estimated_drop(best ? estimated_[best - 1] : 0.0);
  response_->set_prunable_measured_drop(best ? measured[best - 1] : 0.0);
  finish(grpc::Status::OK);
}

void HeadImportanceCall::OnCancel() {
  std::shared_ptr<EngineFanOut> fan_out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fan_out = fan_out_;
  }
  if (fan_out) fan_out->cancel();
}

void HeadImportanceCall::finish(const grpc::Status& status) {
  slot_.release();
  Finish(status);
}

void HeadImportanceCall::OnDone() {
  InferenceService& service = service_;
  slot_.release();
  delete this;
  service.stream_done();
}

}  // namespace kvserve
