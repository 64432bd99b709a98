// The real server binary over gRPC on loopback: streaming equals the engine's greedy output,
// 32 concurrent streams, client cancel, deadlines, Abort, every kind of bad field (while a good
// stream runs on unaffected), health across a load, SIGTERM with requests in flight, and the
// inspection RPCs (against a float64 reference) beside ordinary traffic.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <regex>
#include <thread>

#include "gguf/gguf.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "kvserve.grpc.pb.h"
#include "model/decoder_model.h"
#include "model_runner.h"
#include "reference_decoder.h"
#include "server_process.h"
#include "test_support.h"
#include "text/tokenizer.h"

namespace kvserve {
namespace {

using grpc::StatusCode;
using testing::shared_model;
namespace pb = kvserve::v1;

struct StreamResult {
  grpc::Status status;
  std::vector<int32_t> tokens;
  std::string text;
  std::optional<pb::GenerateComplete> complete;
  int chunks = 0;
};

pb::GenerateRequest greedy(const std::string& prompt, int n) {
  pb::GenerateRequest r;
  r.set_prompt(prompt);
  r.mutable_sampling()->set_temperature(0);
  r.mutable_sampling()->set_max_new_tokens(n);
  r.mutable_sampling()->set_ignore_eos(true);
  return r;
}

StreamResult run(pb::Inference::Stub& stub, const pb::GenerateRequest& req, grpc::ClientContext* ctx = nullptr,
                 int cancel_after_chunks = -1, std::atomic<bool>* started = nullptr) {
  grpc::ClientContext own;
  if (!ctx) ctx = &own;
  StreamResult out;
  auto reader = stub.Generate(ctx, req);
  pb::GenerateResponse resp;
  while (reader->Read(&resp)) {
    if (started) *started = true;
    if (resp.has_chunk()) {
      ++out.chunks;
      out.tokens.insert(out.tokens.end(), resp.chunk().token_ids().begin(), resp.chunk().token_ids().end());
      out.text += resp.chunk().text();
      if (out.chunks == cancel_after_chunks) ctx->TryCancel();
    } else {
      out.complete = resp.complete();
    }
  }
  out.status = reader->Finish();
  return out;
}

// A Generate stream on its own thread; wait_started() returns once its first response arrived.
class BackgroundStream {
 public:
  BackgroundStream(pb::Inference::Stub& stub, pb::GenerateRequest req)
      : thread_([this, &stub, req] { result_ = run(stub, req, nullptr, -1, &started_); }) {}
  void wait_started() {
    while (!started_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  StreamResult join() {
    thread_.join();
    return result_;
  }

 private:
  std::atomic<bool> started_ = false;
  StreamResult result_;
  std::thread thread_;
};

class ServerE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
    start({});
  }
  // A failed test shows what the server printed (sanitizer reports included).
  void TearDown() override {
    if (HasFailure() && server_) std::printf("--- server log ---\n%s\n", server_->log().c_str());
  }
  void start(std::vector<std::string> extra) {
    std::vector<std::string> args = {"--model", shared_model("stories260K.gguf"), "--set", "cache.num_blocks=512",
                                     "--set", "cache.block_size=8", "--set", "scheduler.max_model_len=1024",
                                     "--set", "server.log_level=\"warn\""};
    args.insert(args.end(), extra.begin(), extra.end());
    server_ = std::make_unique<testing::ServerProcess>(args);
    ASSERT_TRUE(server_->started()) << server_->log();
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    stub_ = pb::Inference::NewStub(channel_);
    health_ = grpc::health::v1::Health::NewStub(channel_);
  }
  std::vector<int32_t> solo(const std::string& prompt, int n) {
    GgufFile file(shared_model("stories260K.gguf"));
    DecoderModel model(file);
    Tokenizer tok(file);
    testing::ModelRunner runner(model, 8, 256);
    return runner.greedy(tok.encode(prompt, true), n);
  }
  std::string health() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::health::v1::HealthCheckResponse r;
    grpc::Status s = health_->Check(&ctx, {}, &r);
    return s.ok() ? grpc::health::v1::HealthCheckResponse::ServingStatus_Name(r.status()) : "ERROR";
  }
  pb::GetStatsResponse stats() {
    grpc::ClientContext ctx;
    pb::GetStatsResponse r;
    EXPECT_TRUE(stub_->GetStats(&ctx, {}, &r).ok());
    return r;
  }
  // Blocks are freed at the engine's next step after a cancel: poll briefly.
  void expect_all_blocks_free() {
    pb::GetStatsResponse s;
    for (int i = 0; i < 200; ++i) {
      s = stats();
      if (s.num_requests_running() == 0 && s.blocks_free() == s.blocks_total()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "running " << s.num_requests_running() << ", blocks free " << s.blocks_free() << " of "
                  << s.blocks_total();
  }

  std::unique_ptr<testing::ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Inference::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

TEST_F(ServerE2E, StreamsTheReferenceStory) {
  pb::GenerateRequest r;
  r.add_prompt_token_ids(1);
  r.mutable_sampling()->set_temperature(0);
  r.mutable_sampling()->set_max_new_tokens(200);
  StreamResult out = run(*stub_, r);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.text, testing::read_text(shared_model("stories260K.expected.txt")));
  EXPECT_GE(out.chunks, 10);  // streamed as it goes (chunks coalesce while a write is in flight)
  ASSERT_TRUE(out.complete);
  EXPECT_EQ(out.complete->finish_reason(), pb::FINISH_REASON_LENGTH);
  EXPECT_EQ(out.complete->prompt_tokens(), 1);
  EXPECT_EQ(out.complete->completion_tokens(), 200);
  EXPECT_EQ(out.complete->peak_kv_bytes(), 25 * 8 * 1280);  // 200 fed tokens in 25 blocks of 8
  EXPECT_GT(out.complete->time_to_first_token_s(), 0);
  EXPECT_TRUE(std::regex_match(out.complete->request_id(), std::regex("kvs-[0-9a-f]{32}")))
      << out.complete->request_id();
}

TEST_F(ServerE2E, ModelInfoAndTokenize) {
  grpc::ClientContext ctx;
  pb::GetModelInfoResponse info;
  ASSERT_TRUE(stub_->GetModelInfo(&ctx, {}, &info).ok());
  EXPECT_EQ(info.n_layers(), 5);
  EXPECT_EQ(info.n_heads(), 8);
  EXPECT_EQ(info.n_kv_heads(), 4);
  EXPECT_EQ(info.head_dim(), 8);
  EXPECT_EQ(info.kv_bytes_per_token().total(), 1280);
  EXPECT_EQ(info.num_blocks(), 512);
  EXPECT_EQ(info.token_capacity(), 4096);
  EXPECT_DOUBLE_EQ(info.max_concurrency(), 4.0);
  // No windowed layer: one block table for all five layers, a request holding every position.
  EXPECT_EQ(info.kv_layout(), "1 group of 5 layers: 5 full");
  EXPECT_EQ(info.kv_windowed_layers(), 0);
  EXPECT_EQ(info.kv_request_token_layers_full(), int64_t{5} * info.max_model_len());
  EXPECT_EQ(info.kv_bytes_per_request(), int64_t{1280} * info.max_model_len());
  ASSERT_EQ(info.kv_what_if_size(), 6);  // as is, MHA, GQA-2, GQA-4, MQA, MLA (GQA-8 of 8 heads is MHA)
  EXPECT_EQ(info.kv_what_if(1).name(), "MHA");
  EXPECT_EQ(info.kv_what_if(1).bytes_per_token(), 2560);
  EXPECT_EQ(info.kv_what_if(4).name(), "MQA");
  EXPECT_EQ(info.kv_what_if(4).bytes_per_token(), 320);
  EXPECT_EQ(info.kv_what_if(4).token_capacity(), 4096 * 4);
  EXPECT_EQ(info.server_version().rfind("0.", 0), 0u) << info.server_version();
  EXPECT_GE(info.num_threads(), 1);
  grpc::ClientContext ctx2;
  pb::TokenizeRequest tr;
  tr.set_text("Once upon a time");
  pb::TokenizeResponse tok;
  ASSERT_TRUE(stub_->Tokenize(&ctx2, tr, &tok).ok());
  EXPECT_EQ(std::vector<int32_t>(tok.token_ids().begin(), tok.token_ids().end()),
            (std::vector<int32_t>{1, 403, 407, 261, 378}));
  grpc::ClientContext ctx3;
  tr.set_text("Once\xFF");
  grpc::Status bad = stub_->Tokenize(&ctx3, tr, &tok);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(bad.error_message(), "text: not valid UTF-8");
}

TEST_F(ServerE2E, ThirtyTwoConcurrentStreamsEqualSolo) {
  std::vector<std::string> prompts;
  for (int i = 0; i < 32; ++i)
    prompts.push_back(std::string(i % 2 ? "Tom had a " : "Lily saw a ") + std::to_string(i) + " little");
  std::vector<StreamResult> results(32);
  std::vector<std::thread> threads;
  EXPECT_EQ(health(), "SERVING");
  for (int i = 0; i < 32; ++i)
    threads.emplace_back([&, i] { results[i] = run(*stub_, greedy(prompts[i], 20 + i)); });
  EXPECT_EQ(health(), "SERVING");  // during the load
  for (auto& t : threads) t.join();
  for (int i = 0; i < 32; ++i) {
    ASSERT_TRUE(results[i].status.ok()) << results[i].status.error_message();
    EXPECT_EQ(results[i].tokens, solo(prompts[i], 20 + i)) << "stream " << i;
  }
  expect_all_blocks_free();
}

TEST_F(ServerE2E, ClientCancelFreesBlocksAndOthersAreUnaffected) {
  std::thread other;
  StreamResult good;
  other = std::thread([&] { good = run(*stub_, greedy("The dog ran", 150)); });
  grpc::ClientContext ctx;
  StreamResult cancelled = run(*stub_, greedy("Once upon a time", 900), &ctx, 5);
  other.join();
  EXPECT_EQ(cancelled.status.error_code(), StatusCode::CANCELLED);
  EXPECT_LT(cancelled.tokens.size(), 900u);
  ASSERT_TRUE(good.status.ok()) << good.status.error_message();
  EXPECT_EQ(good.tokens, solo("The dog ran", 150));
  expect_all_blocks_free();
}

TEST_F(ServerE2E, DeadlineEndsTheStreamAndFreesBlocks) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(30));
  StreamResult r = run(*stub_, greedy("Once upon a time", 1000), &ctx);
  EXPECT_EQ(r.status.error_code(), StatusCode::DEADLINE_EXCEEDED);
  expect_all_blocks_free();
}

TEST_F(ServerE2E, AbortByRequestId) {
  pb::GenerateRequest req = greedy("Once upon a time", 1000);
  req.set_request_id("my-req-7");
  BackgroundStream stream(*stub_, req);
  stream.wait_started();
  grpc::ClientContext ctx;
  pb::AbortRequest ar;
  ar.set_request_id("my-req-7");
  pb::AbortResponse resp;
  ASSERT_TRUE(stub_->Abort(&ctx, ar, &resp).ok());
  EXPECT_TRUE(resp.found());
  StreamResult r = stream.join();
  EXPECT_EQ(r.status.error_code(), StatusCode::CANCELLED);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.complete->finish_reason(), pb::FINISH_REASON_CANCELLED);
  grpc::ClientContext ctx2;
  ar.set_request_id("no-such-request");
  ASSERT_TRUE(stub_->Abort(&ctx2, ar, &resp).ok());
  EXPECT_FALSE(resp.found());
}

TEST_F(ServerE2E, BadFieldsGetTheRightStatusWhileAGoodStreamRuns) {
  StreamResult good;
  std::thread t([&] { good = run(*stub_, greedy("The cat", 120)); });
  struct Case {
    std::string name;
    std::function<void(pb::GenerateRequest&)> edit;
    StatusCode code;
    std::string field;
  };
  std::vector<Case> cases = {
      {"empty prompt", [](auto& r) { r.clear_prompt(); }, StatusCode::INVALID_ARGUMENT, "prompt"},
      {"both prompts", [](auto& r) { r.add_prompt_token_ids(1); }, StatusCode::INVALID_ARGUMENT, "prompt_token_ids"},
      {"token out of vocab",
       [](auto& r) {
         r.clear_prompt();
         r.add_prompt_token_ids(1);
         r.add_prompt_token_ids(512);
       },
       StatusCode::INVALID_ARGUMENT, "prompt_token_ids[1]"},
      {"negative token",
       [](auto& r) {
         r.clear_prompt();
         r.add_prompt_token_ids(-3);
       },
       StatusCode::INVALID_ARGUMENT, "prompt_token_ids[0]"},
      {"temperature", [](auto& r) { r.mutable_sampling()->set_temperature(-0.5f); }, StatusCode::INVALID_ARGUMENT,
       "sampling.temperature"},
      {"temperature nan", [](auto& r) { r.mutable_sampling()->set_temperature(NAN); }, StatusCode::INVALID_ARGUMENT,
       "sampling.temperature"},
      {"top_p", [](auto& r) { r.mutable_sampling()->set_top_p(1.5f); }, StatusCode::INVALID_ARGUMENT, "sampling.top_p"},
      {"top_k", [](auto& r) { r.mutable_sampling()->set_top_k(-1); }, StatusCode::INVALID_ARGUMENT, "sampling.top_k"},
      {"min_p", [](auto& r) { r.mutable_sampling()->set_min_p(2.0f); }, StatusCode::INVALID_ARGUMENT, "sampling.min_p"},
      {"repetition_penalty", [](auto& r) { r.mutable_sampling()->set_repetition_penalty(0.0f); },
       StatusCode::INVALID_ARGUMENT, "sampling.repetition_penalty"},
      {"presence_penalty", [](auto& r) { r.mutable_sampling()->set_presence_penalty(5.0f); },
       StatusCode::INVALID_ARGUMENT, "sampling.presence_penalty"},
      {"frequency_penalty", [](auto& r) { r.mutable_sampling()->set_frequency_penalty(-3.0f); },
       StatusCode::INVALID_ARGUMENT, "sampling.frequency_penalty"},
      {"max_new_tokens zero", [](auto& r) { r.mutable_sampling()->set_max_new_tokens(0); },
       StatusCode::INVALID_ARGUMENT, "sampling.max_new_tokens"},
      {"max_new_tokens absurd", [](auto& r) { r.mutable_sampling()->set_max_new_tokens(2000000000); },
       StatusCode::INVALID_ARGUMENT, "sampling.max_new_tokens"},
      {"too many stops",
       [](auto& r) {
         for (int i = 0; i < 17; ++i) r.mutable_sampling()->add_stop("s" + std::to_string(i));
       },
       StatusCode::INVALID_ARGUMENT, "sampling.stop"},
      {"stop too long", [](auto& r) { r.mutable_sampling()->add_stop(std::string(300, 'x')); },
       StatusCode::INVALID_ARGUMENT, "sampling.stop[0]"},
      {"stop not UTF-8", [](auto& r) { r.mutable_sampling()->add_stop("ok\xC3("); }, StatusCode::INVALID_ARGUMENT,
       "sampling.stop[0]"},
      {"prompt not UTF-8", [](auto& r) { r.set_prompt("caf\xE9" " au lait"); }, StatusCode::INVALID_ARGUMENT, "prompt"},
      {"prompt with a surrogate", [](auto& r) { r.set_prompt("a\xED\xA0\x80" "b"); }, StatusCode::INVALID_ARGUMENT,
       "prompt"},
      {"stop token", [](auto& r) { r.mutable_sampling()->add_stop_token_ids(99999); }, StatusCode::INVALID_ARGUMENT,
       "sampling.stop_token_ids[0]"},
      {"top_logprobs", [](auto& r) { r.mutable_sampling()->set_top_logprobs(50); }, StatusCode::INVALID_ARGUMENT,
       "sampling.top_logprobs"},
      // Never fits: the request's fault, not a load to retry (RESOURCE_EXHAUSTED invites retries).
      {"prompt beyond context", [](auto& r) { r.set_prompt(std::string(1100, 'a') + " b"); },
       StatusCode::INVALID_ARGUMENT, "max_model_len"},
      {"prompt + output beyond context", [](auto& r) { r.mutable_sampling()->set_max_new_tokens(1023); },
       StatusCode::INVALID_ARGUMENT, "max_model_len"},
      {"oversized message", [](auto& r) { r.set_prompt(std::string(5 << 20, 'a')); }, StatusCode::RESOURCE_EXHAUSTED,
       ""},
  };
  for (const auto& c : cases) {
    pb::GenerateRequest r = greedy("Hello", 5);
    c.edit(r);
    StreamResult res = run(*stub_, r);
    EXPECT_EQ(res.status.error_code(), c.code) << c.name << ": " << res.status.error_message();
    EXPECT_NE(res.status.error_message().find(c.field), std::string::npos)
        << c.name << ": '" << res.status.error_message() << "' does not name " << c.field;
  }
  t.join();
  ASSERT_TRUE(good.status.ok());
  EXPECT_EQ(good.tokens, solo("The cat", 120));
  EXPECT_EQ(health(), "SERVING");
}

TEST_F(ServerE2E, SigtermDrainsInFlightRequestsThenExits) {
  BackgroundStream stream(*stub_, greedy("Once upon a time", 300));
  stream.wait_started();
  server_->signal(SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(health(), "NOT_SERVING");
  StreamResult late = run(*stub_, greedy("Hi", 3));
  EXPECT_EQ(late.status.error_code(), StatusCode::UNAVAILABLE);
  StreamResult in_flight = stream.join();
  ASSERT_TRUE(in_flight.status.ok()) << in_flight.status.error_message();
  EXPECT_EQ(in_flight.tokens, solo("Once upon a time", 300));
  EXPECT_EQ(server_->wait_exit(std::chrono::seconds(20)), 0) << server_->log();
}

TEST_F(ServerE2E, SigtermPastTheGraceCancelsWithAFinalStatus) {
  server_.reset();
  start({"--set", "server.shutdown_grace_ms=50"});
  BackgroundStream stream(*stub_, greedy("Once upon a time", 1000));
  stream.wait_started();
  server_->signal(SIGTERM);
  StreamResult r = stream.join();
  EXPECT_EQ(r.status.error_code(), StatusCode::UNAVAILABLE) << r.status.error_message();
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.complete->finish_reason(), pb::FINISH_REASON_CANCELLED);
  EXPECT_EQ(server_->wait_exit(std::chrono::seconds(20)), 0);
}

// Inspection over gRPC, while an ordinary stream runs beside it and keeps its solo output.
TEST_F(ServerE2E, InspectAttentionAndHeadImportanceBesideNormalTraffic) {
  BackgroundStream good(*stub_, greedy("The cat", 150));
  good.wait_started();
  const std::string text = "Once upon a time, there was a little girl named Lily. She loved to play outside.";

  grpc::ClientContext ctx;
  pb::InspectAttentionRequest ir;
  ir.set_prompt(text);
  pb::InspectAttentionResponse inspect;
  ASSERT_TRUE(stub_->InspectAttention(&ctx, ir, &inspect).ok());
  GgufFile file(shared_model("stories260K.gguf"));
  Tokenizer tok(file);
  const std::vector<int32_t> ids = tok.encode(text, true);
  const int n = static_cast<int>(ids.size());
  EXPECT_EQ(std::vector<int32_t>(inspect.token_ids().begin(), inspect.token_ids().end()), ids);
  ASSERT_EQ(inspect.heads_size(), 5 * 8);
  testing::ReferenceDecoder ref(file);
  const auto want = ref.run(ids).probs;
  for (const auto& h : inspect.heads()) {
    ASSERT_EQ(h.weights_size(), n * (n + 1) / 2);
    EXPECT_FALSE(h.label().empty());
    EXPECT_GE(h.induction_score(), 0.0f);
    int k = 0;
    for (int t = 0; t < n; ++t) {
      double sum = 0.0;
      for (int u = 0; u <= t; ++u, ++k) {
        sum += h.weights(k);
        ASSERT_NEAR(h.weights(k), want[h.layer() * 8 + h.head()][t * n + u], 1e-5);
      }
      ASSERT_NEAR(sum, 1.0, 1e-5);
    }
  }

  grpc::ClientContext ctx2;
  pb::HeadImportanceRequest hr;
  hr.set_prompt(text);
  hr.set_loss_budget(0.02);
  pb::HeadImportanceResponse imp;
  ASSERT_TRUE(stub_->HeadImportance(&ctx2, hr, &imp).ok());
  EXPECT_EQ(imp.n_tokens(), n - 1);
  EXPECT_NEAR(imp.baseline_mean_logprob(), ref.run(ids).prompt_logprob_sum / (n - 1), 1e-4);
  ASSERT_EQ(imp.heads_size(), 40);
  for (int i = 1; i < imp.heads_size(); ++i) EXPECT_GE(imp.heads(i - 1).drop(), imp.heads(i).drop());
  // The top head, checked against the reference with that head zeroed.
  const auto& top = imp.heads(0);
  const double top_mean = ref.run(ids, {{top.layer(), top.head()}}).prompt_logprob_sum / (n - 1);
  EXPECT_NEAR(top.mean_logprob(), top_mean, 1e-4);
  EXPECT_GT(top.drop(), 0.0);
  EXPECT_LE(imp.prunable_measured_drop(), 0.02);

  const StreamResult r = good.join();
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.tokens, solo("The cat", 150));
  expect_all_blocks_free();
}

// An inspection slot is free again the moment its call has ended: it is given back before the
// status is sent (it used to be in OnDone, after the client saw the end, and a call made right
// after another could find every slot taken).
TEST_F(ServerE2E, AnInspectionSlotIsFreeTheMomentItsCallEnds) {
  start({"--set", "server.max_inspect_calls=1"});
  int refused = 0;
  for (int i = 0; i < 200; ++i) {
    grpc::ClientContext ctx;
    pb::InspectAttentionRequest r;
    r.set_prompt("Once upon a time");
    pb::InspectAttentionResponse out;
    const grpc::Status s = stub_->InspectAttention(&ctx, r, &out);
    if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) ++refused;
    else ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_EQ(refused, 0);
}

TEST_F(ServerE2E, InspectionRefusesBadInputNamingTheField) {
  auto inspect_status = [&](const std::function<void(pb::InspectAttentionRequest&)>& edit) {
    grpc::ClientContext ctx;
    pb::InspectAttentionRequest r;
    r.set_prompt("Once upon a time");
    edit(r);
    pb::InspectAttentionResponse out;
    return stub_->InspectAttention(&ctx, r, &out);
  };
  grpc::Status s = inspect_status([](auto& r) { r.set_prompt(std::string(2000, 'a') + " b"); });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("server.inspect_max_tokens"), std::string::npos) << s.error_message();
  s = inspect_status([](auto& r) { r.set_induction_period(1); });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("induction_period", 0), 0u) << s.error_message();
  s = inspect_status([](auto& r) { r.add_prompt_token_ids(5); });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  s = inspect_status([](auto& r) {
    r.clear_prompt();
    r.add_prompt_token_ids(1);
    r.add_prompt_token_ids(9999);
  });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("prompt_token_ids[1]", 0), 0u) << s.error_message();

  grpc::ClientContext ctx;
  pb::HeadImportanceRequest hr;
  hr.set_prompt("Once upon a time");
  hr.set_loss_budget(-1);
  pb::HeadImportanceResponse out;
  s = stub_->HeadImportance(&ctx, hr, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("loss_budget", 0), 0u) << s.error_message();
  expect_all_blocks_free();
}

}  // namespace
}  // namespace kvserve
