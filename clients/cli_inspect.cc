#include "cli_inspect.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "attention_report.h"
#include "cli_status.h"
#include "google/protobuf/util/json_util.h"

namespace kvserve {
namespace {

bool write_file(const std::string& path, const std::string& body) {
  std::ofstream out(path, std::ios::binary);
  out << body;
  if (!out) std::fprintf(stderr, "kvserve-cli: cannot write %s\n", path.c_str());
  return static_cast<bool>(out);
}

}  // namespace

int cli_inspect(v1::Inference::Stub& stub, const ContextFactory& context, const InspectOptions& o) {
  const bool matrices = !o.html_path.empty() || !o.json_path.empty();
  v1::InspectAttentionRequest req;
  req.set_prompt(o.prompt);
  req.set_include_matrices(matrices);
  v1::InspectAttentionResponse r;
  grpc::Status st = stub.InspectAttention(context().get(), req, &r);
  if (!st.ok()) return cli_fail(st, "");
  std::printf("%d tokens, %d layers x %d heads (induction probe: %d random tokens, twice)\n", r.token_ids_size(),
              r.n_layers(), r.n_heads(), r.induction_period());
  std::printf("%5s %4s  %-14s %6s %6s %6s %7s %9s\n", "layer", "head", "label", "prev", "sink", "local", "entropy",
              "induction");
  for (const auto& h : r.heads())
    std::printf("%5d %4d  %-14s %6.3f %6.3f %6.3f %7.3f %9.3f\n", h.layer(), h.head(), h.label().c_str(),
                h.previous_token_score(), h.sink_score(), h.local_score(), h.entropy(), h.induction_score());
  if (!o.json_path.empty()) {
    std::string json;
    google::protobuf::util::JsonPrintOptions print;
    print.preserve_proto_field_names = true;
    if (!google::protobuf::util::MessageToJsonString(r, &json, print).ok() || !write_file(o.json_path, json)) return 2;
    std::printf("json: %s\n", o.json_path.c_str());
  }
  if (o.html_path.empty()) return 0;
  v1::GetModelInfoResponse info;
  st = stub.GetModelInfo(context().get(), {}, &info);
  if (!st.ok()) return cli_fail(st, "");
  v1::HeadImportanceResponse importance;
  if (o.importance) {
    v1::HeadImportanceRequest ireq;
    ireq.set_prompt(o.prompt);
    ireq.set_loss_budget(o.loss_budget);
    st = stub.HeadImportance(context().get(), ireq, &importance);
    if (!st.ok()) return cli_fail(st, "");
  }
  AttentionReportInput page;
  page.attention = &r;
  page.importance = o.importance ? &importance : nullptr;
  page.model = &info;
  size_t cut = std::min<size_t>(o.prompt.size(), 60);
  while (cut > 0 && cut < o.prompt.size() && (static_cast<unsigned char>(o.prompt[cut]) & 0xC0) == 0x80) --cut;
  std::string excerpt = o.prompt.substr(0, cut);  // whole UTF-8 characters
  if (cut < o.prompt.size()) excerpt += "...";
  page.title = "Head atlas: \u201c" + excerpt + "\u201d";
  if (!write_file(o.html_path, attention_report_html(page))) return 2;
  std::printf("report: %s\n", o.html_path.c_str());
  return 0;
}

int cli_head_importance(v1::Inference::Stub& stub, grpc::ClientContext& ctx, const std::string& text,
                        double loss_budget, int top) {
  v1::HeadImportanceRequest req;
  req.set_prompt(text);
  req.set_loss_budget(loss_budget);
  v1::HeadImportanceResponse r;
  grpc::Status st = stub.HeadImportance(&ctx, req, &r);
  if (!st.ok()) return cli_fail(st, "");
  std::printf("%d tokens scored, baseline mean log-likelihood %.5f nats/token\n", r.n_tokens(),
              r.baseline_mean_logprob());
  std::printf("%4s %5s %4s %14s %10s\n", "rank", "layer", "head", "mean logprob", "drop");
  for (int i = 0; i < r.heads_size() && (top <= 0 || i < top); ++i) {
    const auto& h = r.heads(i);
    std::printf("%4d %5d %4d %14.5f %10.5f\n", i + 1, h.layer(), h.head(), h.mean_logprob(), h.drop());
  }
  std::printf("prunable within a budget of %.4f nats/token: %d heads (measured together %.5f; their single drops sum to %.5f)\n",
              r.loss_budget(), r.prunable_size(), r.prunable_measured_drop(), r.prunable_estimated_drop());
  for (const auto& p : r.prunable()) std::printf("  layer %d head %d\n", p.layer(), p.head());
  return 0;
}

}  // namespace kvserve
