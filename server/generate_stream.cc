#include "generate_stream.h"

#include <spdlog/spdlog.h>

#include "core/log_text.h"
#include "core/request_input.h"
#include "proto_convert.h"

namespace kvserve {
// Owned by the engine (through the request's sink); reaches the stream only while it lives.
struct StreamLink {
  std::recursive_mutex mu;  // recursive: gRPC may run OnDone inline from a call made under it
  GenerateStream* stream = nullptr;
};

namespace {

class StreamSink : public ResultSink {
 public:
  explicit StreamSink(std::shared_ptr<StreamLink> link) : link_(std::move(link)) {}
  void on_event(Event event) override {
    std::lock_guard<std::recursive_mutex> lock(link_->mu);
    if (link_->stream) link_->stream->deliver(std::move(event));
  }

 private:
  std::shared_ptr<StreamLink> link_;
};

}  // namespace

GenerateStream::GenerateStream(InferenceService& service, grpc::CallbackServerContext* ctx,
                               const v1::GenerateRequest* request)
    : service_(service), metrics_(service.metrics()) {
  service_.stream_started();
  Engine& engine = service_.engine();
  if (grpc::Status auth = service_.authorize(ctx, &tenant_); !auth.ok()) {
    Finish(auth);
    return;
  }
  Request req;
  grpc::Status st = to_engine_request(*request, engine.tokenizer(), &req);
  if (!st.ok()) {
    Finish(st);
    return;
  }
  request_id_ = request->request_id().empty() ? random_request_id() : request->request_id();
  req.client_id = request_id_;
  req.cache_salt = tenant_;  // tenants never share prefix-cache blocks
  req.deadline_ms = deadline_ms_until(ctx->deadline());
  if (!service_.request_ids().add(tenant_, request_id_)) {
    Finish(grpc::Status(grpc::StatusCode::ALREADY_EXISTS, "request_id: '" + request_id_ + "' is already running"));
    return;
  }
  registered_ = true;
  for (const auto& [key, value] : response_metadata(request_id_)) ctx->AddInitialMetadata(key, value);

  link_ = std::make_shared<StreamLink>();
  link_->stream = this;
  static const char* const kConstraintFields[] = {"", "sampling.json_schema", "sampling.json_object", "sampling.regex",
                                                  "sampling.choice", "sampling.grammar"};
  const char* constraint_field = kConstraintFields[static_cast<int>(req.sampling.constraint.kind)];
  SubmitResult r = engine.submit(std::move(req), std::make_shared<StreamSink>(link_));
  if (!r.ok()) {
    // The engine names its own field; the caller set the oneof's member.
    if (const std::string k = "sampling.constraint"; r.message.compare(0, k.size(), k) == 0)
      r.message = constraint_field + r.message.substr(k.size());
    finish_call(submit_grpc_status(r));
    return;
  }
  engine_id_ = r.id;
  service_.request_ids().set_engine_id(tenant_, request_id_, engine_id_);
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    active_ = true;
    action = next_action_locked();
  }
  perform(action);
}

void GenerateStream::deliver(Event ev) {
  metrics_.observe(ev);
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    if (!ev.token_ids.empty() || !ev.text.empty()) {
      if (!pending_chunk_) pending_chunk_.emplace();
      for (int32_t t : ev.token_ids) pending_chunk_->add_token_ids(t);
      pending_chunk_->mutable_text()->append(ev.text);
      for (const auto& lp : ev.logprobs) to_proto(lp, pending_chunk_->add_logprobs());
    }
    if (ev.completion) {
      const Completion& c = *ev.completion;
      pending_complete_.emplace();
      to_proto(c, request_id_, &*pending_complete_);
      final_status_ = to_grpc(completion_status(c, service_.shutting_down()));
      spdlog::info("request {} done: prompt {} tokens, output {} tokens, ttft {:.3f} s, total {:.3f} s, {} ({})",
                   log_escape(request_id_), c.prompt_tokens, c.completion_tokens, c.time_to_first_token_s, c.total_time_s,
                   finish_reason_name(c.reason), final_status_.ok() ? "OK" : log_escape(final_status_.error_message()));
    }
    if (!active_ || writing_) return;
    action = next_action_locked();
  }
  perform(action);
}

GenerateStream::Action GenerateStream::next_action_locked() {
  if (finished_ || writing_) return Action::kNone;
  if (pending_chunk_) {
    in_flight_.Clear();
    *in_flight_.mutable_chunk() = std::move(*pending_chunk_);
    pending_chunk_.reset();
    writing_ = true;
    return Action::kWrite;
  }
  if (pending_complete_ && !complete_sent_) {
    in_flight_.Clear();
    *in_flight_.mutable_complete() = std::move(*pending_complete_);
    pending_complete_.reset();
    complete_sent_ = true;
    writing_ = true;
    return Action::kWrite;
  }
  if (complete_sent_) {
    finished_ = true;
    return Action::kFinish;
  }
  return Action::kNone;
}

// Called with no lock held, as the last thing its caller does: gRPC may run reactions inline.
void GenerateStream::perform(Action action) {
  if (action == Action::kWrite)
    StartWrite(&in_flight_);
  else if (action == Action::kFinish)
    finish_call(final_status_);
}

void GenerateStream::finish_call(const grpc::Status& status) {
  release_id();
  Finish(status);
}

// Before the client can see the call end, so an id may be reused the moment its call is over.
void GenerateStream::release_id() {
  if (registered_.exchange(false)) service_.request_ids().remove(tenant_, request_id_);
}

void GenerateStream::OnWriteDone(bool ok) {
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) {
      // The client is gone: stop the request and end the call.
      if (finished_) return;
      finished_ = true;
      action = Action::kFinish;
      final_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
    } else {
      action = next_action_locked();
    }
  }
  if (!ok && engine_id_) service_.engine().cancel(engine_id_);
  perform(action);
}

void GenerateStream::OnCancel() {
  if (engine_id_) service_.engine().cancel(engine_id_);
}

void GenerateStream::OnDone() {
  if (link_) {
    std::lock_guard<std::recursive_mutex> lock(link_->mu);
    link_->stream = nullptr;
  }
  release_id();
  InferenceService& service = service_;
  delete this;
  service.stream_done();
}

}  // namespace kvserve
