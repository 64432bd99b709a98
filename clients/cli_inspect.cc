#include "cli_inspect.h"

#include <cstdio>
#include <fstream>

#include "attention_report.h"
#include "cli_status.h"

namespace kvserve {
int cli_inspect(v1::Inference::Stub& stub, grpc::ClientContext& ctx, const std::string& prompt,
                const std::string& html_path) {
  v1::InspectAttentionRequest req;
  req.set_prompt(prompt);
  req.set_include_matrices(!html_path.empty());
  v1::InspectAttentionResponse r;
  grpc::Status st = stub.InspectAttention(&ctx, req, &r);
  if (!st.ok()) return cli_fail(st, "");
  std::printf("%d tokens, %d layers x %d heads (induction probe: %d random tokens, twice)\n", r.token_ids_size(),
              r.n_layers(), r.n_heads(), r.induction_period());
  std::printf("%5s %4s  %-14s %6s %6s %6s %7s %9s\n", "layer", "head", "label", "prev", "sink", "local", "entropy",
              "induction");
  for (const auto& h : r.heads())
    std::printf("%5d %4d  %-14s %6.3f %6.3f %6.3f %7.3f %9.3f\n", h.layer(), h.head(), h.label().c_str(),
                h.previous_token_score(), h.sink_score(), h.local_score(), h.entropy(), h.induction_score());
  if (!html_path.empty()) {
    std::ofstream out(html_path, std::ios::binary);
    out << attention_report_html(r, "kvserve attention: " + prompt.substr(0, 80));
    if (!out) {
      std::fprintf(stderr, "kvserve-cli: cannot write %s\n", html_path.c_str());
      return 2;
    }
    std::printf("report: %s\n", html_path.c_str());
  }
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
