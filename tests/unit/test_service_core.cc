// The transport-neutral service core on its own: which request ids pass the door (and that they
// are legal header values as gRPC defines them), server-assigned ids, tenant-owned ids, bearer
// tokens mapped to tenants, log escaping, and the finish-reason -> status mapping.
#include <grpc/grpc.h>
#include <grpc/slice.h>
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "core/bearer_auth.h"
#include "core/log_text.h"
#include "core/request_ids.h"
#include "core/service_status.h"

namespace kvserve {
namespace {

bool grpc_accepts_value(const std::string& v) {
  grpc_slice s = grpc_slice_from_copied_buffer(v.data(), v.size());
  const bool ok = grpc_header_nonbin_value_is_legal(s);
  grpc_slice_unref(s);
  return ok;
}

TEST(RequestIds, PrintableAsciiUpTo128BytesAndNothingElse) {
  EXPECT_EQ(check_request_id("my-req-7"), "");
  EXPECT_EQ(check_request_id(" ~ !\"#$%&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}"), "");
  EXPECT_EQ(check_request_id(std::string(128, 'x')), "");
  const std::vector<std::string> bad = {"", "caf\xC3\xA9", "a\nb", "\t", "\x7f", "\x1f", std::string("a\0b", 3),
                                        "\xff\xfe", std::string(129, 'x'), std::string(1 << 20, 'x')};
  for (const auto& id : bad) {
    const std::string err = check_request_id(id);
    EXPECT_EQ(err.rfind("request_id: ", 0), 0u) << "'" << log_escape(id) << "' -> " << err;
  }
  EXPECT_NE(check_request_id("a\nb").find("byte 1 is 0x0a"), std::string::npos);
  EXPECT_NE(check_request_id(std::string(1 << 20, 'x')).find("1048576 bytes; at most 128"), std::string::npos);
  // Every byte value on its own: what the check admits, gRPC admits as a header value.
  for (int c = 0; c < 256; ++c) {
    const std::string id(1, static_cast<char>(c));
    if (check_request_id(id).empty()) {
      EXPECT_TRUE(grpc_accepts_value(id)) << c;
    }
  }
}

TEST(RequestIds, ServerIdsAreRandom128BitHex) {
  const std::regex form("kvs-[0-9a-f]{32}");
  std::set<std::string> seen;
  for (int i = 0; i < 2000; ++i) {
    const std::string id = random_request_id();
    ASSERT_TRUE(std::regex_match(id, form)) << id;
    ASSERT_EQ(check_request_id(id), "");
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 2000u);
  // Successive ids share no structure a client could extrapolate: roughly half the bits differ.
  const std::string a = random_request_id(), b = random_request_id();
  int same = 0;
  for (size_t i = 4; i < a.size(); ++i) same += a[i] == b[i];
  EXPECT_LT(same, 12);  // 32 hex digits, 2 expected equal by chance
}

TEST(RequestRegistry, IdsBelongToTheirTenant) {
  RequestRegistry r;
  EXPECT_TRUE(r.add("token-1", "job"));
  EXPECT_FALSE(r.add("token-1", "job"));  // same tenant, still live
  EXPECT_TRUE(r.add("token-2", "job"));   // another tenant: no collision
  r.set_engine_id("token-1", "job", 7);
  r.set_engine_id("token-2", "job", 9);
  EXPECT_EQ(r.find("token-1", "job"), std::optional<uint64_t>(7));
  EXPECT_EQ(r.find("token-2", "job"), std::optional<uint64_t>(9));
  EXPECT_EQ(r.find("token-3", "job"), std::nullopt);
  r.set_engine_id("token-3", "job", 11);  // not registered: ignored
  EXPECT_EQ(r.find("token-3", "job"), std::nullopt);
  r.remove("token-1", "job");
  EXPECT_EQ(r.find("token-1", "job"), std::nullopt);
  EXPECT_EQ(r.find("token-2", "job"), std::optional<uint64_t>(9));
  EXPECT_EQ(r.size(), 1u);
}

TEST(BearerAuth, TokensMapToTenants) {
  BearerAuth off;
  EXPECT_EQ(off.tenant(std::nullopt), std::optional<std::string>(""));
  EXPECT_EQ(off.tenant("Bearer anything"), std::optional<std::string>(""));
  BearerAuth on({"alpha", "beta"});
  EXPECT_EQ(on.tenant("Bearer alpha"), std::optional<std::string>("token-1"));
  EXPECT_EQ(on.tenant("Bearer beta"), std::optional<std::string>("token-2"));
  for (const char* bad : {"Bearer alph", "Bearer alphaa", "bearer alpha", "alpha", "Bearer ", "Basic alpha"})
    EXPECT_EQ(on.tenant(std::string_view(bad)), std::nullopt) << bad;
  EXPECT_EQ(on.tenant(std::nullopt), std::nullopt);
}

TEST(LogText, ClientBytesCannotForgeOrFloodLogLines) {
  EXPECT_EQ(log_escape("plain id-1"), "plain id-1");
  EXPECT_EQ(log_escape("a\nINFO forged"), "a\\x0aINFO forged");
  EXPECT_EQ(log_escape("caf\xC3\xA9"), "caf\\xc3\\xa9");
  EXPECT_EQ(log_escape("back\\slash"), "back\\x5cslash");
  const std::string big = log_escape(std::string(1 << 20, 'x'));
  EXPECT_EQ(big, std::string(160, 'x') + "...(1048576 bytes)");
}

TEST(ServiceStatus, FinishReasonsAndRefusalsMapOnce) {
  Completion c;
  c.reason = FinishReason::kLength;
  EXPECT_TRUE(completion_status(c, false).ok());
  c.reason = FinishReason::kStopString;
  EXPECT_TRUE(completion_status(c, false).ok());
  c.reason = FinishReason::kCancelled;
  EXPECT_EQ(completion_status(c, false).code, ServiceCode::kCancelled);
  EXPECT_EQ(completion_status(c, true).code, ServiceCode::kUnavailable);
  c.reason = FinishReason::kDeadline;
  EXPECT_EQ(completion_status(c, false).code, ServiceCode::kDeadlineExceeded);
  c.reason = FinishReason::kError;
  c.error = "forward failed: x";
  EXPECT_EQ(completion_status(c, false).message, "forward failed: x");
  EXPECT_EQ(submit_status({SubmitCode::kOverloaded, 0, "overloaded"}).code, ServiceCode::kResourceExhausted);
  EXPECT_EQ(submit_status({SubmitCode::kNeverFits, 0, "x"}).code, ServiceCode::kInvalidArgument);
  EXPECT_EQ(submit_status({SubmitCode::kShuttingDown, 0, "x"}).code, ServiceCode::kUnavailable);
  EXPECT_EQ(submit_status({SubmitCode::kInvalidArgument, 0, "prompt: x"}).message, "prompt: x");
}

}  // namespace
}  // namespace kvserve
