// The server with speculative decoding on (speculative.method "ngram", then "draft"): the greedy story equals
// llama2.c's reference text over gRPC and over HTTP; a request may turn it off ("speculative":
// false, same text, no proposals counted); a wrong type is a 400 naming the field; the vLLM
// speculative-decoding counters on /metrics add up.
#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include <thread>

#include "kvserve.grpc.pb.h"
#include "prometheus_text.h"
#include "server_process.h"
#include "test_support.h"

namespace kvserve {
namespace {

namespace pb = kvserve::v1;
using nlohmann::json;
using testing::shared_model;

using testing::metric_value;

// 200 greedy tokens after BOS over gRPC, as text ("" if the call fails).
std::string greedy_story(pb::Inference::Stub& stub) {
  pb::GenerateRequest r;
  r.add_prompt_token_ids(1);
  r.mutable_sampling()->set_temperature(0);
  r.mutable_sampling()->set_max_new_tokens(200);
  grpc::ClientContext ctx;
  auto reader = stub.Generate(&ctx, r);
  pb::GenerateResponse resp;
  std::string text;
  while (reader->Read(&resp))
    if (resp.has_chunk()) text += resp.chunk().text();
  return reader->Finish().ok() ? text : std::string();
}

TEST(SpeculativeServer, ReferenceStoryWithAndWithoutSpeculation) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  testing::ServerProcess server({"--model", shared_model("stories260K.gguf"), "--set", "cache.num_blocks=512",
                                 "--set", "cache.block_size=8", "--set", "speculative.method=\"ngram\"",
                                 // Proposals in every step: timed adaptive lengths on a loaded
                                 // machine may rightly propose nothing, and this test counts them.
                                 "--set", "speculative.adaptive=false", "--set", "server.log_level=\"info\""});
  ASSERT_TRUE(server.started()) << server.log();
  const int port = server.written_port(".http");
  ASSERT_GT(port, 0);
  const std::string want = testing::read_text(shared_model("stories260K.expected.txt"));
  httplib::Client http("127.0.0.1", port);
  auto metrics = [&] {
    auto res = http.Get("/metrics");
    EXPECT_TRUE(res);
    return res ? res->body : std::string();
  };

  auto stub = pb::Inference::NewStub(grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  const std::string text = greedy_story(*stub);
  EXPECT_EQ(text, want);
  const std::string m1 = metrics();
  const double proposed = metric_value(m1, "vllm:spec_decode_num_draft_tokens_total");
  const double accepted = metric_value(m1, "vllm:spec_decode_num_accepted_tokens_total");
  EXPECT_GT(accepted, 0) << m1;
  EXPECT_LE(accepted, proposed);
  EXPECT_GT(metric_value(m1, "vllm:spec_decode_num_drafts_total"), 0);
  EXPECT_EQ(metric_value(m1, "kvserve:spec_decode_accepted_tokens_total"), accepted);
  EXPECT_EQ(metric_value(m1, "vllm:generation_tokens_total"), 200);

  // The same story over HTTP, speculating and not; the second proposes nothing.
  for (bool speculative : {true, false}) {
    const json body = {{"model", "stories260K"}, {"prompt", json::array({1})}, {"max_tokens", 200}, {"temperature", 0}, {"speculative", speculative}};
    auto res = http.Post("/v1/completions", body.dump(), "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(json::parse(res->body)["choices"][0]["text"], want) << "speculative " << speculative;
  }
  const std::string m2 = metrics();
  const double proposed_http = metric_value(m2, "vllm:spec_decode_num_draft_tokens_total") - proposed;
  EXPECT_GT(proposed_http, 0);
  auto res = http.Post("/v1/completions", json({{"model", "stories260K"}, {"prompt", json::array({1})}, {"max_tokens", 20}, {"speculative", false}}).dump(),
                       "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(metric_value(metrics(), "vllm:spec_decode_num_draft_tokens_total"), metric_value(m2, "vllm:spec_decode_num_draft_tokens_total"))
      << "a request with speculative: false had tokens proposed";
  res = http.Post("/v1/completions", R"({"model": "stories260K", "prompt": [1], "max_tokens": 4, "speculative": "yes"})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("speculative: expected true or false"), std::string::npos) << res->body;
  EXPECT_NE(server.log().find("speculative decoding: ngram"), std::string::npos) << server.log();
}

// With a draft model (the model's own Q4_0 file): the greedy story is still llama2.c's text,
// proposals are accepted, and GetModelInfo and the start-up log say what is configured. A draft
// with another vocabulary stops the start, naming the field.
TEST(SpeculativeServer, DraftModelReferenceStoryAndModelInfo) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("quant/stories260K-q4_0.gguf"));
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("ggml-vocab-llama-spm.gguf"));
  const std::string draft = shared_model("quant/stories260K-q4_0.gguf");
  testing::ServerProcess server({"--model", shared_model("stories260K.gguf"), "--set", "cache.num_blocks=512",
                                 "--set", "cache.block_size=8", "--set", "speculative.method=\"draft\"",
                                 "--set", "speculative.draft_model=\"" + draft + "\"", "--set",
                                 "speculative.adaptive=false", "--set", "server.log_level=\"info\""});
  ASSERT_TRUE(server.started()) << server.log();
  auto stub = pb::Inference::NewStub(grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  const std::string text = greedy_story(*stub);
  EXPECT_EQ(text, testing::read_text(shared_model("stories260K.expected.txt")));

  grpc::ClientContext info_ctx;
  pb::GetModelInfoResponse info;
  ASSERT_TRUE(stub->GetModelInfo(&info_ctx, pb::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.speculative_method(), "draft");
  EXPECT_EQ(info.speculative_num_tokens(), 4);
  EXPECT_NE(info.speculative().find(draft), std::string::npos) << info.speculative();
  EXPECT_GT(info.draft_num_blocks(), 0);
  EXPECT_GT(info.draft_kv_cache_bytes(), 0);
  EXPECT_GT(info.draft_num_params(), 0);
  EXPECT_NE(server.log().find("speculative decoding: draft " + draft), std::string::npos) << server.log();

  const int port = server.written_port(".http");
  ASSERT_GT(port, 0);
  httplib::Client http("127.0.0.1", port);
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_GT(metric_value(res->body, "vllm:spec_decode_num_accepted_tokens_total"), 0) << res->body;

  testing::ServerProcess refused({"--model", shared_model("stories260K.gguf"), "--set", "speculative.method=\"draft\"",
                                  "--set", "speculative.draft_model=\"" + shared_model("ggml-vocab-llama-spm.gguf") + "\""});
  EXPECT_FALSE(refused.started());
  EXPECT_NE(refused.log().find("speculative.draft_model: "), std::string::npos) << refused.log();
}

}  // namespace
}  // namespace kvserve
