#include "inspect_calls.h"

#include <algorithm>
#include <cmath>

#include "inspect/head_scores.h"
#include "proto_convert.h"
#include "utf8.h"

namespace kvserve {
namespace {

constexpr int32_t kDefaultPeriod = 32;
constexpr double kDefaultLossBudget = 0.01;
constexpr uint64_t kProbeSeed = 20261130;
// gRPC clients refuse larger messages unless told otherwise; the default reply stays below.
constexpr size_t kDefaultReplyLimit = (size_t{4} << 20) - 1024;

// The prompt of an inspection call: text or ids (exactly one), 2..max_tokens tokens.
grpc::Status read_prompt(bool has_text, const std::string& text, const google::protobuf::RepeatedField<int32_t>& ids,
                         const Tokenizer& tok, int32_t max_tokens, std::vector<int32_t>* out) {
  using grpc::Status;
  using grpc::StatusCode;
  if (has_text == (ids.size() > 0))
    return Status(StatusCode::INVALID_ARGUMENT, has_text ? "prompt, prompt_token_ids: give one of them, not both"
                                                         : "prompt: empty (give prompt text or prompt_token_ids)");
  if (has_text) {
    if (!utf8_is_valid(text)) return Status(StatusCode::INVALID_ARGUMENT, "prompt: not valid UTF-8");
    *out = tok.encode(text, true);
  } else {
    out->assign(ids.begin(), ids.end());
  }
  if (out->size() < 2)
    return Status(StatusCode::INVALID_ARGUMENT, "prompt: at least 2 tokens are needed, got " + std::to_string(out->size()));
  if (static_cast<int64_t>(out->size()) > max_tokens)
    return Status(StatusCode::INVALID_ARGUMENT, "prompt: " + std::to_string(out->size()) + " tokens; inspection takes at most " +
                                                    std::to_string(max_tokens) + " (server.inspect_max_tokens)");
  return Status::OK;
}

// Authorization, a free inspection slot (taken: *slot = true), then the prompt: what both
// inspection calls check first.
template <class Req>
grpc::Status admit(InferenceService& service, const grpc::CallbackServerContext* ctx, const Req& request,
                   std::vector<int32_t>* prompt, bool* slot) {
  if (grpc::Status auth = service.authorize(ctx); !auth.ok()) return auth;
  if (!service.begin_inspection())
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "inspection: " + std::to_string(service.max_inspect_calls()) +
                            " calls already running (server.max_inspect_calls); try again later");
  *slot = true;
  return read_prompt(request.has_prompt(), request.prompt(), request.prompt_token_ids(),
                     service.engine().tokenizer(), service.inspect_max_tokens(), prompt);
}

Request inspect_request(std::vector<int32_t> prompt, const grpc::CallbackServerContext* ctx) {
  Request r;
  r.prompt = std::move(prompt);
  r.sampling.max_new_tokens = 1;
  r.sampling.temperature = 0.0f;
  r.sampling.ignore_eos = true;
  r.priority = Priority::kBackground;  // beside Generate traffic, never ahead of it
  const auto deadline = ctx->deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::system_clock::now());
    r.deadline_ms = std::max<int64_t>(1, ms.count());
  }
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
    Finish(st);
    return;
  }
  matrices_ = !request->has_include_matrices() ? Matrices::kFitting
              : request->include_matrices()    ? Matrices::kFloat
                                               : Matrices::kNone;
  period_ = request->has_induction_period() ? request->induction_period() : kDefaultPeriod;
  const int32_t max_period = std::min((service_.inspect_max_tokens() - 1) / 2, engine.model_info().n_vocab / 2);
  if (period_ < 2 || period_ > max_period) {
    Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
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
  if (!r.ok()) Finish(submit_grpc_status(r));
}

void InspectAttentionCall::answer(std::vector<Completion>& done) {
  if (grpc::Status st = completions_status(done, service_.shutting_down()); !st.ok()) {
    Finish(st);
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
  Finish(grpc::Status::OK);
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

void InspectAttentionCall::OnDone() {
  InferenceService& service = service_;
  if (slot_) service.end_inspection();
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
    Finish(st);
    return;
  }
  const double budget = request->has_loss_budget() ? request->loss_budget() : kDefaultLossBudget;
  if (!(budget >= 0.0 && budget <= 100.0)) {
    Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "loss_budget: must be between 0 and 100"));
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
  if (!r.ok()) Finish(submit_grpc_status(r));
}

void HeadImportanceCall::rank(std::vector<Completion>& done) {
  if (grpc::Status st = completions_status(done, service_.shutting_down()); !st.ok()) {
    Finish(st);
    return;
  }
  const int32_t n_head = service_.engine().model_info().n_head;
  const double baseline = mean_logprob(done[0]);
  response_->set_n_tokens(done[0].prompt_logprob_count);
  response_->set_baseline_mean_logprob(baseline);
  std::vector<v1::HeadImportanceScore> heads;
  for (size_t i = 1; i < done.size(); ++i) {
    v1::HeadImportanceScore s;
    s.set_layer(static_cast<int32_t>((i - 1) / n_head));
    s.set_head(static_cast<int32_t>((i - 1) % n_head));
    s.set_mean_logprob(mean_logprob(done[i]));
    s.set_drop(baseline - s.mean_logprob());
    heads.push_back(s);
  }
  std::stable_sort(heads.begin(), heads.end(), [](const auto& a, const auto& b) { return a.drop() > b.drop(); });
  for (const auto& s : heads) *response_->add_heads() = s;

  // Which heads can go together: single-head drops need not add up, so the candidates (least
  // important first) are measured as prefixes, each zeroed all at once, in one more batch.
  order_.clear();
  for (auto it = heads.rbegin(); it != heads.rend(); ++it) order_.push_back({it->layer(), it->head(), it->drop()});
  const double budget = response_->loss_budget();
  size_t k_max = 0;
  for (double sum = 0.0; k_max < order_.size(); ++k_max) {
    sum += std::max(0.0, order_[k_max].drop);
    if (sum > 4 * budget + 1e-12) break;
  }
  k_max = std::min(order_.size(), k_max + 1);
  std::vector<Request> prefixes;
  for (size_t k = 1; k <= k_max; ++k) {
    prefixes.push_back(base_);
    for (size_t i = 0; i < k; ++i) prefixes.back().inspect.ablate_heads.push_back({order_[i].layer, order_[i].head});
  }
  auto fan_out = std::make_shared<EngineFanOut>(service_.engine());
  {
    std::lock_guard<std::mutex> lock(mu_);
    fan_out_ = fan_out;
  }
  // Runs on the engine loop thread: submit only queues, so this cannot deadlock.
  SubmitResult r = fan_out->start(std::move(prefixes), [this](std::vector<Completion>& d) { measure_joint(d); });
  if (!r.ok()) Finish(submit_grpc_status(r));
}

void HeadImportanceCall::measure_joint(std::vector<Completion>& done) {
  if (grpc::Status st = completions_status(done, service_.shutting_down()); !st.ok()) return Finish(st);
  // The longest prefix whose measured drop fits the budget.
  const double baseline = response_->baseline_mean_logprob();
  size_t best = 0;
  for (size_t k = done.size(); k >= 1 && best == 0; --k)
    if (baseline - mean_logprob(done[k - 1]) <= response_->loss_budget()) best = k;
  double estimated = 0.0;
  for (size_t i = 0; i < best; ++i) {
    v1::HeadRef* ref = response_->add_prunable();
    ref->set_layer(order_[i].layer);
    ref->set_head(order_[i].head);
    estimated += order_[i].drop;
  }
  response_->set_prunable_estimated_drop(estimated);
  response_->set_prunable_measured_drop(best ? baseline - mean_logprob(done[best - 1]) : 0.0);
  Finish(grpc::Status::OK);
}

void HeadImportanceCall::OnCancel() {
  std::shared_ptr<EngineFanOut> fan_out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fan_out = fan_out_;
  }
  if (fan_out) fan_out->cancel();
}

void HeadImportanceCall::OnDone() {
  InferenceService& service = service_;
  if (slot_) service.end_inspection();
  delete this;
  service.stream_done();
}

}  // namespace kvserve
