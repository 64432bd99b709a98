// The real server against a hostile client: request ids that gRPC could not echo (and which
// used to abort the process), ids of another tenant, guessable server ids, temperatures that
// overflow the division, health probes naming the service. After each the server still serves
// everyone else and holds no KV block.
#include <grpcpp/grpcpp.h>

#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "kvserve.grpc.pb.h"
#include "reflection_probe.h"
#include "server_process.h"
#include "test_support.h"

namespace kvserve {
namespace {

namespace pb = kvserve::v1;
using grpc::StatusCode;
using testing::shared_model;

struct Streamed {
  grpc::Status status;
  std::string text;
  std::string request_id_header;
  std::string complete_request_id;
};

class HostileClients : public ::testing::Test {
 protected:
  void SetUp() override {
    KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
    tokens_ = std::filesystem::temp_directory_path() / ("kvserve-tenants-" + std::to_string(getpid()));
    std::ofstream(tokens_) << "tenant-a-secret\ntenant-b-secret\n";
    server_ = std::make_unique<testing::ServerProcess>(std::vector<std::string>{
        "--model", shared_model("stories260K.gguf"), "--set", "cache.num_blocks=256", "--set", "scheduler.max_model_len=1024", "--set",
        "server.auth_token_file=\"" + tokens_.string() + "\""});
    ASSERT_TRUE(server_->started()) << server_->log();
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    stub_ = pb::Inference::NewStub(channel_);
  }
  void TearDown() override {
    if (HasFailure() && server_) std::printf("--- server log ---\n%s\n", server_->log().c_str());
    server_.reset();
    std::filesystem::remove(tokens_);
  }
  static pb::GenerateRequest greedy(int n) {
    pb::GenerateRequest r;
    r.set_prompt("Once upon a time");
    r.mutable_sampling()->set_temperature(0);
    r.mutable_sampling()->set_max_new_tokens(n);
    r.mutable_sampling()->set_ignore_eos(true);
    return r;
  }
  Streamed generate(const pb::GenerateRequest& req, const std::string& token, grpc::ClientContext* ctx = nullptr) {
    grpc::ClientContext own;
    if (!ctx) ctx = &own;
    ctx->AddMetadata("authorization", "Bearer " + token);
    Streamed out;
    auto reader = stub_->Generate(ctx, req);
    pb::GenerateResponse resp;
    bool first = true;
    while (reader->Read(&resp)) {
      if (first) {
        auto md = ctx->GetServerInitialMetadata();
        if (auto it = md.find("x-request-id"); it != md.end()) out.request_id_header.assign(it->second.data(), it->second.size());
        first = false;
      }
      if (resp.has_chunk()) out.text += resp.chunk().text();
      if (resp.has_complete()) out.complete_request_id = resp.complete().request_id();
    }
    out.status = reader->Finish();
    return out;
  }
  pb::AbortResponse abort(const std::string& id, const std::string& token, grpc::Status* status = nullptr) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + token);
    pb::AbortRequest req;
    req.set_request_id(id);
    pb::AbortResponse resp;
    grpc::Status st = stub_->Abort(&ctx, req, &resp);
    if (status) *status = st;
    else EXPECT_TRUE(st.ok()) << st.error_message();
    return resp;
  }
  void expect_idle_and_serving() {
    pb::GetStatsResponse s;
    for (int i = 0; i < 300; ++i) {
      grpc::ClientContext ctx;
      ctx.AddMetadata("authorization", "Bearer tenant-a-secret");
      ASSERT_TRUE(stub_->GetStats(&ctx, {}, &s).ok()) << "the server stopped answering";
      if (s.num_requests_running() == 0 && s.blocks_free() == s.blocks_total()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(s.blocks_free(), s.blocks_total());
    EXPECT_EQ(kill(server_->pid(), 0), 0) << "the server process is gone";
  }

  std::filesystem::path tokens_;
  std::unique_ptr<testing::ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Inference::Stub> stub_;
};

TEST_F(HostileClients, RequestIdsGrpcCannotEchoAreRefusedNamingTheField) {
  // A good stream runs throughout and must finish unharmed.
  Streamed good;
  std::thread t([&] { good = generate(greedy(200), "tenant-a-secret"); });
  const std::vector<std::string> bad = {"caf\xC3\xA9",   "line\nbreak", "tab\there", "del\x7f",
                                        "\xff\xfe\xfd",  "nul" + std::string(1, '\0'), std::string(129, 'r'),
                                        std::string(1 << 20, 'r')};
  for (const auto& id : bad) {
    pb::GenerateRequest req = greedy(4);
    req.set_request_id(id);
    Streamed r = generate(req, "tenant-b-secret");
    EXPECT_EQ(r.status.error_code(), StatusCode::INVALID_ARGUMENT) << r.status.error_message();
    EXPECT_EQ(r.status.error_message().rfind("request_id: ", 0), 0u) << r.status.error_message();
    EXPECT_TRUE(r.text.empty());
    grpc::Status st;
    abort(id, "tenant-b-secret", &st);
    EXPECT_EQ(st.error_code(), StatusCode::INVALID_ARGUMENT) << st.error_message();
  }
  t.join();
  ASSERT_TRUE(good.status.ok()) << good.status.error_message();
  // A legal id is echoed in the metadata and the final message.
  pb::GenerateRequest req = greedy(4);
  req.set_request_id("job 42: ~!@#$%^&*()");
  Streamed ok = generate(req, "tenant-a-secret");
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.request_id_header, "job 42: ~!@#$%^&*()");
  EXPECT_EQ(ok.complete_request_id, "job 42: ~!@#$%^&*()");
  expect_idle_and_serving();
  // Nothing of the refused ids reached the log raw.
  EXPECT_EQ(server_->log().find("line\nbreak"), std::string::npos);
}

// An id may be used again the moment its call has ended: it leaves the registry before the
// final status reaches the client (it used to leave after, and 4 of 300 reuses got ALREADY_EXISTS).
TEST_F(HostileClients, ARequestIdIsFreeAgainTheMomentItsCallEnds) {
  int refused = 0;
  for (int i = 0; i < 300; ++i) {
    pb::GenerateRequest req = greedy(1);
    req.set_request_id("reused-id");
    const Streamed r = generate(req, "tenant-a-secret");
    if (r.status.error_code() == StatusCode::ALREADY_EXISTS) ++refused;
    else ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  }
  EXPECT_EQ(refused, 0);
}

TEST_F(HostileClients, AnotherTenantCannotAbortOrCollideAndServerIdsAreRandom) {
  // A's request without an id: the server's id is random 128-bit hex.
  grpc::ClientContext a_ctx;
  Streamed a;
  std::atomic<bool> started = false;
  std::string a_id;
  std::thread t([&] {
    a_ctx.AddMetadata("authorization", "Bearer tenant-a-secret");
    auto reader = stub_->Generate(&a_ctx, greedy(1000));
    pb::GenerateResponse resp;
    while (reader->Read(&resp)) {
      if (!started) {
        auto md = a_ctx.GetServerInitialMetadata();
        a_id.assign(md.find("x-request-id")->second.data(), md.find("x-request-id")->second.size());
        started = true;
      }
      if (resp.has_chunk()) a.text += resp.chunk().text();
    }
    a.status = reader->Finish();
  });
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(std::regex_match(a_id, std::regex("kvs-[0-9a-f]{32}"))) << a_id;
  // B guesses it exactly: to B it does not exist, and B may use the same id for its own request.
  EXPECT_FALSE(abort(a_id, "tenant-b-secret").found());
  pb::GenerateRequest b_req = greedy(3);
  b_req.set_request_id(a_id);
  Streamed b = generate(b_req, "tenant-b-secret");
  EXPECT_TRUE(b.status.ok()) << b.status.error_message();
  // A itself cannot reuse its live id; then A aborts its own request.
  pb::GenerateRequest dup = greedy(3);
  dup.set_request_id(a_id);
  EXPECT_EQ(generate(dup, "tenant-a-secret").status.error_code(), StatusCode::ALREADY_EXISTS);
  EXPECT_TRUE(abort(a_id, "tenant-a-secret").found());
  t.join();
  EXPECT_EQ(a.status.error_code(), StatusCode::CANCELLED) << a.status.error_message();
  // Server ids never repeat, and a client id shaped like one collides with nothing.
  std::set<std::string> ids;
  for (int i = 0; i < 20; ++i) ids.insert(generate(greedy(1), "tenant-b-secret").request_id_header);
  EXPECT_EQ(ids.size(), 20u);
  pb::GenerateRequest shaped = greedy(2);
  shaped.set_request_id("kvs-2");
  EXPECT_TRUE(generate(shaped, "tenant-b-secret").status.ok());
  EXPECT_TRUE(generate(greedy(2), "tenant-b-secret").status.ok());
  expect_idle_and_serving();
}

TEST_F(HostileClients, TemperaturesThatOverflowTheDivisionAreGreedy) {
  const Streamed reference = generate(greedy(24), "tenant-a-secret");
  ASSERT_TRUE(reference.status.ok());
  for (float t : {1e-38f, 1e-40f, 1e-45f, 1e-7f}) {
    pb::GenerateRequest req = greedy(24);
    req.mutable_sampling()->set_temperature(t);
    req.mutable_sampling()->set_logprobs(true);
    Streamed r = generate(req, "tenant-b-secret");
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.text, reference.text) << "temperature " << t;
  }
  expect_idle_and_serving();
}

TEST_F(HostileClients, InspectAttentionDefaultReplyFitsAStandardClient) {
  // 256 tokens, 5 layers x 8 heads: 5.3 MB of float32 matrices, over every standard client's
  // 4 MiB receive limit (which this channel keeps).
  pb::InspectAttentionRequest req;
  req.add_prompt_token_ids(1);
  for (int i = 1; i < 256; ++i) req.add_prompt_token_ids(3 + (i * 37) % 500);
  auto inspect = [&](pb::Inference::Stub& stub, pb::InspectAttentionResponse* resp) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer tenant-a-secret");
    return stub.InspectAttention(&ctx, req, resp);
  };
  pb::InspectAttentionResponse compact;
  grpc::Status st = inspect(*stub_, &compact);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(compact.matrices(), "uint8");
  EXPECT_LT(compact.ByteSizeLong(), size_t{4} << 20);
  // Asked for float32 explicitly, over a channel that takes large messages: the same matrices.
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  auto big = pb::Inference::NewStub(grpc::CreateCustomChannel(server_->address(), grpc::InsecureChannelCredentials(), args));
  req.set_include_matrices(true);
  pb::InspectAttentionResponse full;
  st = inspect(*big, &full);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(full.matrices(), "float32");
  EXPECT_GT(full.ByteSizeLong(), size_t{4} << 20);
  ASSERT_EQ(full.heads_size(), 40);
  ASSERT_EQ(compact.heads_size(), 40);
  for (int h = 0; h < 40; ++h) {
    const auto& f = full.heads(h);
    const std::string& q = compact.heads(h).weights_u8();
    ASSERT_EQ(f.weights_size(), 256 * 257 / 2);
    ASSERT_EQ(q.size(), static_cast<size_t>(f.weights_size()));
    EXPECT_EQ(compact.heads(h).weights_size(), 0);
    for (int i = 0; i < f.weights_size(); ++i)
      ASSERT_NEAR(static_cast<uint8_t>(q[i]) / 255.0, f.weights(i), 1.0 / 510 + 1e-6) << "head " << h << " weight " << i;
  }
  // A short prompt keeps float32 by default.
  pb::InspectAttentionRequest small;
  small.set_prompt("Once upon a time there was");
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer tenant-a-secret");
  pb::InspectAttentionResponse r;
  ASSERT_TRUE(stub_->InspectAttention(&ctx, small, &r).ok());
  EXPECT_EQ(r.matrices(), "float32");
  EXPECT_GT(r.heads(0).weights_size(), 0);
}

TEST_F(HostileClients, ReflectionIsOffWhenTokensAreConfigured) {
  std::string reply;
  const grpc::Status st = testing::list_services_by_reflection(channel_, &reply);
  EXPECT_EQ(st.error_code(), StatusCode::UNIMPLEMENTED) << st.error_message();
  EXPECT_EQ(reply.find("kvserve.v1.Inference"), std::string::npos);
  EXPECT_NE(server_->log().find("gRPC server reflection off"), std::string::npos);
}

TEST(HostileClientsReflection, OnWithoutTokensOrWhenAskedFor) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  const auto tokens = std::filesystem::temp_directory_path() / ("kvserve-refl-" + std::to_string(getpid()));
  std::ofstream(tokens) << "t\n";
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, std::vector<std::string>{"--set", "server.reflection=\"on\"", "--set",
                                                              "server.auth_token_file=\"" + tokens.string() + "\""}}) {
    std::vector<std::string> args = {"--model", shared_model("stories260K.gguf"), "--set", "cache.num_blocks=32"};
    args.insert(args.end(), extra.begin(), extra.end());
    testing::ServerProcess server(args);
    ASSERT_TRUE(server.started()) << server.log();
    std::string reply;
    const grpc::Status st = testing::list_services_by_reflection(
        grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()), &reply);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_NE(reply.find("kvserve.v1.Inference"), std::string::npos);
  }
  std::filesystem::remove(tokens);
}

TEST_F(HostileClients, HealthAnswersForTheServiceNameToo) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  for (const char* service : {"", "kvserve.v1.Inference"}) {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    grpc::health::v1::HealthCheckResponse resp;
    grpc::Status st = health->Check(&ctx, req, &resp);
    ASSERT_TRUE(st.ok()) << "'" << service << "': " << st.error_message();
    EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }
}

}  // namespace
}  // namespace kvserve
