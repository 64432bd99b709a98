// libFuzzer target for request validation: the bytes are a kvserve.v1.GenerateRequest on the
// wire, taken through the same path as the server's Generate handler (parse, convert, validate,
// build the response metadata, log). A refused request must name a field; an accepted one must
// satisfy every limit, its metadata must be what gRPC accepts as header values (gRPC aborts the
// process on any other), its log line one printable line, and its stop strings must never leak
// into the streamed text.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include <grpc/grpc.h>
#include <grpc/slice.h>

#include "core/log_text.h"
#include "core/request_ids.h"
#include "gguf/gguf.h"
#include "kvserve.pb.h"
#include "model/synthetic.h"
#include "text/output_text.h"
#include "proto_convert.h"
#include "runtime/request_validation.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace {

constexpr int32_t kMaxModelLen = 512;

struct Vocab {
  std::unique_ptr<kvserve::GgufFile> file;
  std::unique_ptr<kvserve::Tokenizer> tok;
};

const Vocab& vocab() {
  static Vocab v = [] {
    std::string path = std::string(KVSERVE_SHARED_DIR) + "/models/stories260K.gguf";
    if (!std::filesystem::exists(path)) {  // no ../shared: a synthetic SentencePiece-style vocab
      path = "/tmp/kvserve-fuzz-request-vocab.gguf";
      kvserve::write_synthetic_model({.dim = 8, .layers = 1, .heads = 2, .kv_heads = 1, .ffn = 8, .vocab = 600}, path);
    }
    Vocab out;
    out.file = std::make_unique<kvserve::GgufFile>(path);
    out.tok = std::make_unique<kvserve::Tokenizer>(*out.file);
    return out;
  }();
  return v;
}

bool names_a_field(const std::string& message) {
  for (const char* field : {"prompt", "prompt_token_ids", "sampling.", "deadline_ms", "request_id"})
    if (message.rfind(field, 0) == 0) return true;
  return false;
}

void check(bool ok) {
  if (!ok) std::abort();
}

// What gRPC core itself checks before it sends a metadata element.
bool legal_header(const std::string& key, const std::string& value) {
  grpc_slice k = grpc_slice_from_copied_buffer(key.data(), key.size());
  grpc_slice v = grpc_slice_from_copied_buffer(value.data(), value.size());
  const bool ok = grpc_header_key_is_legal(k) && grpc_header_nonbin_value_is_legal(v);
  grpc_slice_unref(k);
  grpc_slice_unref(v);
  return ok;
}

bool printable_line(const std::string& s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) return false;
  return true;
}

}  // namespace

// A debug-built protobuf logs every invalid UTF-8 string it parses; the check after it is ours.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvserve::v1::GenerateRequest in;
  if (!in.ParseFromArray(data, static_cast<int>(size))) return 0;
  const kvserve::Tokenizer& tok = *vocab().tok;

  kvserve::Request request;
  const grpc::Status status = kvserve::to_engine_request(in, tok, &request);
  if (!status.ok()) {
    check(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT && names_a_field(status.error_message()));
    return 0;
  }
  const std::string error =
      kvserve::validate_request(request, {.vocab_size = tok.vocab_size(), .max_model_len = kMaxModelLen});
  if (!error.empty()) {
    check(names_a_field(error));
    return 0;
  }

  // Accepted: the id (the client's or one the server assigns) reaches metadata and the log safely.
  const std::string id = in.request_id().empty() ? kvserve::random_request_id() : in.request_id();
  const auto metadata = kvserve::response_metadata(id);
  check(metadata.size() == 1);
  for (const auto& [key, value] : metadata) check(legal_header(key, value));
  check(printable_line(kvserve::log_escape(id)) && printable_line(kvserve::log_escape(in.prompt())));

  // Every limit holds.
  const kvserve::SamplingParams& s = request.sampling;
  check(!request.prompt.empty());
  for (int32_t id : request.prompt) check(id >= 0 && id < tok.vocab_size());
  check(s.max_new_tokens >= 1 && s.max_new_tokens <= kMaxModelLen);
  check(std::isfinite(s.temperature) && s.temperature >= 0.0f);
  check(s.top_p > 0.0f && s.top_p <= 1.0f && s.min_p >= 0.0f && s.min_p <= 1.0f);
  check(s.stop.size() <= kvserve::kMaxStopStrings && s.stop_token_ids.size() <= kvserve::kMaxStopTokens);
  for (const auto& stop : s.stop) check(!stop.empty() && stop.size() <= kvserve::kMaxStopBytes);
  for (int32_t id : s.stop_token_ids) check(id >= 0 && id < tok.vocab_size());

  // Stream the prompt's own tokens back as if generated: chunks are whole characters and the
  // text sent never contains a stop string.
  kvserve::OutputText text(tok, {}, s.stop);
  std::string sent;
  const size_t n = std::min<size_t>(request.prompt.size(), 256);
  for (size_t i = 0; i < n && !text.stopped(); ++i) {
    const std::string chunk = text.push(request.prompt[i]);
    check(kvserve::utf8_is_valid(chunk));
    sent += chunk;
  }
  sent += text.finish();
  for (const auto& stop : s.stop) check(sent.find(stop) == std::string::npos);
  return 0;
}
