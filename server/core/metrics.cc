#include "core/metrics.h"

#include <chrono>
#include <cstdio>

namespace kvserve {
namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

void metric(std::string& out, const char* type, const std::string& name, const std::string& help, double value) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + num(value) + "\n";
}

// The Gateway API Inference Extension's model-server protocol: the series its endpoint picker
// scrapes, under the vLLM names it reads by default, with vLLM's types and meanings.
void model_server_protocol(const EngineStats& s, const ModelInfo& m, std::string& out) {
  metric(out, "gauge", "vllm:num_requests_waiting", "Requests in the queue, not yet running (interactive and background).",
         s.waiting + s.waiting_background);
  metric(out, "gauge", "vllm:num_requests_running", "Requests in the running batch.", s.running);
  metric(out, "gauge", "vllm:kv_cache_usage_perc", "KV-cache usage as a fraction of its blocks (1 = full).", s.kv_usage);
  metric(out, "gauge", "vllm:gpu_cache_usage_perc", "KV-cache usage as a fraction (vLLM's older name; the cache is in RAM).",
         s.kv_usage);
  out += "# HELP vllm:cache_config_info The KV cache's configuration in labels.\n# TYPE vllm:cache_config_info gauge\n"
         "vllm:cache_config_info{block_size=\"" + std::to_string(m.block_size) + "\",num_gpu_blocks=\"" +
         std::to_string(m.num_blocks) + "\",num_cpu_blocks=\"0\",enable_prefix_caching=\"" +
         (s.prefix_caching ? "True" : "False") + "\"} 1\n";
  metric(out, "counter", "vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
         static_cast<double>(s.prompt_tokens_admitted));
  metric(out, "counter", "vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.",
         static_cast<double>(s.prompt_tokens_from_cache));
  metric(out, "counter", "vllm:prompt_tokens_total", "Prompt tokens computed.", static_cast<double>(s.prompt_tokens_total));
  metric(out, "counter", "vllm:generation_tokens_total", "Tokens generated.", static_cast<double>(s.generation_tokens_total));
  metric(out, "counter", "vllm:num_preemptions_total", "Sequences preempted.", static_cast<double>(s.preemptions_total));
  metric(out, "counter", "vllm:spec_decode_num_drafts_total", "Speculative verifications (proposals checked).",
         static_cast<double>(s.spec_drafts_total));
  metric(out, "counter", "vllm:spec_decode_num_draft_tokens_total", "Speculative tokens proposed.",
         static_cast<double>(s.spec_draft_tokens_total));
  metric(out, "counter", "vllm:spec_decode_num_accepted_tokens_total", "Speculative tokens accepted.",
         static_cast<double>(s.spec_accepted_tokens_total));
  // LoRA adapters: none are served. The endpoint picker (v1.5 on) reads this series for every
  // vLLM-type server and counts one without it as unhealthy; its value is when it was written.
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  out += "# HELP vllm:lora_requests_info LoRA adapters running and waiting (none are served here).\n"
         "# TYPE vllm:lora_requests_info gauge\n"
         "vllm:lora_requests_info{max_lora=\"0\",running_lora_adapters=\"\",waiting_lora_adapters=\"\"} " +
         num(now) + "\n";
}

}  // namespace

void Histogram::observe(double v) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(const std::string& name, const std::string& help, std::string& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + num(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

ServerMetrics::ServerMetrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0}),
      itl_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5}),
      e2e_({0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0}) {}

void ServerMetrics::observe_completion(const Completion& c) {
  if (c.completion_tokens > 0) ttft_.observe(c.time_to_first_token_s);
  e2e_.observe(c.total_time_s);
  std::lock_guard<std::mutex> lock(mu_);
  ++finished_[finish_reason_name(c.reason)];
}

std::string ServerMetrics::render(const EngineStats& s, const ModelInfo& m) const {
  std::string out;
  metric(out, "gauge", "kvserve:kv_cache_bytes_per_token", "KV cache bytes one token takes, every layer.",
         static_cast<double>(m.kv_bytes_per_token));
  if (m.mla.on())
    metric(out, "gauge", "kvserve:kv_cache_multi_head_bytes_per_token",
           "Latent attention: the bytes per token if each head's K and V were cached instead of the latent.",
           static_cast<double>(m.kv_bytes_per_token_multi_head));
  metric(out, "gauge", "kvserve:num_requests_running", "Requests in the running batch.", s.running);
  metric(out, "gauge", "kvserve:num_requests_waiting", "Requests waiting to be admitted.", s.waiting);
  metric(out, "gauge", "kvserve:num_requests_waiting_background",
         "Inspection sub-requests waiting (background priority).", s.waiting_background);
  metric(out, "gauge", "kvserve:kv_cache_usage_perc", "Fraction of KV blocks in use (1 = full).", s.kv_usage);
  metric(out, "counter", "kvserve:num_preemptions_total", "Sequences preempted (KV dropped, recomputed later).",
         static_cast<double>(s.preemptions_total));
  metric(out, "counter", "kvserve:prompt_tokens_total", "Prompt tokens computed.", static_cast<double>(s.prompt_tokens_total));
  metric(out, "counter", "kvserve:generation_tokens_total", "Tokens generated.",
         static_cast<double>(s.generation_tokens_total));
  metric(out, "counter", "kvserve:engine_busy_seconds_total",
         "Seconds the engine loop spent in steps (its growth over wall time: how busy the engine is kept).",
         s.busy_seconds_total);
  metric(out, "counter", "kvserve:engine_forward_seconds_total", "Seconds of those in the model's forward passes.",
         s.forward_seconds_total);
  metric(out, "gauge", "kvserve:prefix_cache_hit_rate", "Prompt tokens reused from the prefix cache / admitted.",
         s.prefix_cache_hit_rate);
  metric(out, "gauge", "kvserve:prefix_cache_blocks", "KV blocks registered in the prefix cache.", s.cached_blocks);
  metric(out, "gauge", "kvserve:kv_cache_blocks_total", "KV blocks in the cache.", s.blocks_total);
  metric(out, "counter", "kvserve:spec_decode_draft_tokens_total", "Speculative tokens proposed (speculative.method).",
         static_cast<double>(s.spec_draft_tokens_total));
  metric(out, "counter", "kvserve:spec_decode_accepted_tokens_total", "Speculative tokens accepted.",
         static_cast<double>(s.spec_accepted_tokens_total));
  metric(out, "gauge", "kvserve:spec_decode_acceptance_rate", "Accepted / proposed speculative tokens so far (0 if none).",
         s.spec_draft_tokens_total ? static_cast<double>(s.spec_accepted_tokens_total) / s.spec_draft_tokens_total : 0.0);
  model_server_protocol(s, m, out);
  {
    std::lock_guard<std::mutex> lock(mu_);
    out += "# HELP kvserve:request_success_total Finished requests by finish reason.\n"
           "# TYPE kvserve:request_success_total counter\n";
    for (const auto& [reason, n] : finished_)
      out += "kvserve:request_success_total{finished_reason=\"" + reason + "\"} " + std::to_string(n) + "\n";
  }
  ttft_.render("kvserve:time_to_first_token_seconds", "Time from submit to the first generated token.", out);
  itl_.render("kvserve:inter_token_latency_seconds", "Time between consecutive generated tokens.", out);
  e2e_.render("kvserve:e2e_request_latency_seconds", "Time from submit to the final event.", out);
  return out;
}

void StreamMetrics::observe(const Event& ev) {
  if (!ev.token_ids.empty()) {
    const auto now = std::chrono::steady_clock::now();
    if (last_token_ != std::chrono::steady_clock::time_point{})
      metrics_.observe_inter_token(std::chrono::duration<double>(now - last_token_).count());
    last_token_ = now;
  }
  if (ev.completion) metrics_.observe_completion(*ev.completion);
}

}  // namespace kvserve
