#include "inspect_calls.h"

#include <algorithm>
#include <cmath>

#include "inspect/head_scores.h"
#include "core/inspection.h"
#include "core/request_input.h"
#include "proto_convert.h"

namespace kvserve {
namespace {

constexpr int32_t kDefaultPeriod = 32;
constexpr uint64_t kProbeSeed = 20261130;
// gRPC clients refuse larger messages unless told otherwise; the default reply stays below.
constexpr size_t kDefaultReplyLimit = (size_t{4} << 20) - 1024;

}  // namespace

namespace {

// Authorization, a free inspection slot, then the prompt: what both inspection calls check first.
template <class Req>
grpc::Status admit(InferenceService& service, const grpc::CallbackServerContext* ctx, const Req& request,
                   std::vector<int32_t>* prompt, InspectionSlot* slot) {
  if (grpc::Status auth = service.authorize(ctx); !auth.ok()) return auth;
  if (ServiceStatus st = slot->take(service.state()); !st.ok()) return to_grpc(st);
  const auto& ids = request.prompt_token_ids();
  return to_grpc(inspection_prompt(service.state(), request.prompt(), std::span<const int32_t>(ids.data(), ids.size()), prompt));
}

Request inspect_request(std::vector<int32_t> prompt, const grpc::CallbackServerContext* ctx) {
  return inspection_request(std::move(prompt), deadline_ms_until(ctx->deadline()));
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
  if (ServiceStatus st = completions_status(done, service_.shutting_down()); !st.ok()) {
    finish(to_grpc(st));
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
  std::vector<int32_t> prompt;
  if (grpc::Status st = admit(service_, ctx, *request, &prompt, &slot_); !st.ok()) {
    finish(st);
    return;
  }
  const double budget = request->has_loss_budget() ? request->loss_budget() : kDefaultLossBudget;
  // Held before it starts: it may answer (and the call end) before start returns.
  auto job = std::make_shared<HeadImportanceJob>(service_.state(), inspect_request(std::move(prompt), ctx),
                                                 [this](const ServiceStatus& st, HeadImportanceResult& r) { answer(st, r); });
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = job;
  }
  job->start(budget);
}

void HeadImportanceCall::answer(const ServiceStatus& status, HeadImportanceResult& r) {
  if (!status.ok()) return finish(to_grpc(status));
  response_->set_loss_budget(r.loss_budget);
  response_->set_n_tokens(r.n_tokens);
  response_->set_baseline_mean_logprob(r.baseline_mean_logprob);
  for (const HeadDrop& h : r.heads) {
    v1::HeadImportanceScore* s = response_->add_heads();
    s->set_layer(h.layer);
    s->set_head(h.head);
    s->set_mean_logprob(h.mean_logprob);
    s->set_drop(h.drop);
  }
  for (const HeadRef& h : r.prunable) {
    v1::HeadRef* ref = response_->add_prunable();
    ref->set_layer(h.layer);
    ref->set_head(h.head);
  }
  response_->set_prunable_estimated_drop(r.prunable_estimated_drop);
  response_->set_prunable_measured_drop(r.prunable_measured_drop);
  finish(grpc::Status::OK);
}

void HeadImportanceCall::OnCancel() {
  std::shared_ptr<HeadImportanceJob> job;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job = job_;
  }
  if (job) job->cancel();
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
