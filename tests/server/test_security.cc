// TLS and bearer-token authentication on the real server, with a certificate the test makes
// with openssl: the right token over TLS is served; a missing or wrong token gets
// UNAUTHENTICATED on every kvserve.v1 RPC; a plaintext client cannot talk to the TLS port;
// the health service stays open for probes. Bad security configs fail at start-up.
#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <fstream>

#include "grpc/health/v1/health.grpc.pb.h"
#include "kvserve.grpc.pb.h"
#include "server_process.h"
#include "test_support.h"

namespace kvserve {
namespace {

namespace pb = kvserve::v1;
using grpc::StatusCode;
using testing::shared_model;

class Security : public ::testing::Test {
 protected:
  void SetUp() override {
    KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
    dir_ = std::filesystem::temp_directory_path() / ("kvserve-tls-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
                            "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " +
                            (dir_ / "key.pem").string() + " -out " + (dir_ / "cert.pem").string() + " 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << "openssl could not make a certificate";
    std::ofstream(dir_ / "tokens") << "# one token per line\nsecret-token-1\nsecret-token-2\n";
    server_ = std::make_unique<testing::ServerProcess>(std::vector<std::string>{
        "--model", shared_model("stories260K.gguf"), "--set", "cache.num_blocks=128", "--set",
        "server.tls_cert_file=\"" + (dir_ / "cert.pem").string() + "\"", "--set",
        "server.tls_key_file=\"" + (dir_ / "key.pem").string() + "\"", "--set",
        "server.auth_token_file=\"" + (dir_ / "tokens").string() + "\""});
    ASSERT_TRUE(server_->started()) << server_->log();
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = testing::read_text((dir_ / "cert.pem").string());
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    tls_ = grpc::CreateCustomChannel(server_->address(), grpc::SslCredentials(ssl), args);
  }
  void TearDown() override {
    server_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  grpc::Status generate(std::shared_ptr<grpc::Channel> ch, const std::string& token, std::string* text) {
    auto stub = pb::Inference::NewStub(ch);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    pb::GenerateRequest req;
    req.set_prompt("Once upon a time");
    req.mutable_sampling()->set_temperature(0);
    req.mutable_sampling()->set_max_new_tokens(8);
    auto reader = stub->Generate(&ctx, req);
    pb::GenerateResponse resp;
    while (reader->Read(&resp))
      if (resp.has_chunk()) *text += resp.chunk().text();
    return reader->Finish();
  }

  std::filesystem::path dir_;
  std::unique_ptr<testing::ServerProcess> server_;
  std::shared_ptr<grpc::Channel> tls_;
};

TEST_F(Security, RightTokenOverTlsIsServed) {
  std::string text;
  grpc::Status st = generate(tls_, "secret-token-2", &text);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(text, ", there was a little girl");
}

TEST_F(Security, MissingOrWrongTokenIsUnauthenticatedOnEveryRpc) {
  std::string text;
  EXPECT_EQ(generate(tls_, "", &text).error_code(), StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(generate(tls_, "secret-token-3", &text).error_code(), StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(generate(tls_, "secret-token-1x", &text).error_code(), StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(text.empty());
  auto stub = pb::Inference::NewStub(tls_);
  auto unary = [&](auto call) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer nope");
    return call(ctx).error_code();
  };
  EXPECT_EQ(unary([&](grpc::ClientContext& c) { pb::GetModelInfoResponse r; return stub->GetModelInfo(&c, {}, &r); }),
            StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(unary([&](grpc::ClientContext& c) { pb::GetStatsResponse r; return stub->GetStats(&c, {}, &r); }),
            StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(unary([&](grpc::ClientContext& c) { pb::TokenizeResponse r; return stub->Tokenize(&c, {}, &r); }),
            StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(unary([&](grpc::ClientContext& c) { pb::AbortResponse r; return stub->Abort(&c, {}, &r); }),
            StatusCode::UNAUTHENTICATED);
  // Probes need no token.
  auto health = grpc::health::v1::Health::NewStub(tls_);
  grpc::ClientContext ctx;
  grpc::health::v1::HealthCheckResponse h;
  ASSERT_TRUE(health->Check(&ctx, {}, &h).ok());
  EXPECT_EQ(h.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST_F(Security, PlaintextClientCannotTalkToTheTlsPort) {
  std::string text;
  grpc::Status st = generate(grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()),
                             "secret-token-1", &text);
  EXPECT_EQ(st.error_code(), StatusCode::UNAVAILABLE) << st.error_message();
}

TEST(SecurityConfig, BadSettingsFailAtStartupNamingTheField) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  testing::ServerProcess half({"--model", shared_model("stories260K.gguf"), "--set", "server.tls_cert_file=\"x.pem\""});
  EXPECT_FALSE(half.started());
  EXPECT_NE(half.log().find("server.tls_cert_file, server.tls_key_file"), std::string::npos) << half.log();
  testing::ServerProcess missing({"--model", shared_model("stories260K.gguf"), "--set",
                                  "server.auth_token_file=\"/nonexistent/tokens\""});
  EXPECT_FALSE(missing.started());
  EXPECT_NE(missing.log().find("server.auth_token_file"), std::string::npos) << missing.log();
}

}  // namespace
}  // namespace kvserve
