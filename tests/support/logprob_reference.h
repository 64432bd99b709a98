// Test helper: teacher-forced log-probabilities of a token list through a Model, and their
// comparison with llama.cpp's in ../shared/models/reference-logprobs.json.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "kernels/kernel_table.h"
#include "kv_cache/block_allocator.h"
#include "kv_cache/block_table.h"
#include "model/model.h"
#include "test_support.h"

namespace kvserve {
namespace {

using nlohmann::json;

// reference-logprobs.json (llama.cpp b4747) with the models of reference-logprobs-b10472.json
// (the newer families, llama.cpp b10472) added under their own keys.
inline const json& references() {
  static const json j = [] {
    std::ifstream in(testing::shared_model("reference-logprobs.json"));
    json all = in ? json::parse(in) : json();
    std::ifstream newer(testing::shared_model("reference-logprobs-b10472.json"));
    if (newer && !all.is_null()) {
      const json more = json::parse(newer);
      for (const auto& [key, value] : more["models"].items()) all["models"][key] = value;
    }
    return all;
  }();
  return j;
}

// One sequence through a model with its own cache: forward(tokens, start, end, all) runs tokens
// start..end-1 (their K/V go to the cache) and returns the logits of every row (all) or the last.
class SoloSequence {
 public:
  SoloSequence(Model& model, int64_t max_tokens, int32_t element_bytes)
      : model_(model), kv_(shape(model, element_bytes), kBlock, blocks(max_tokens)), alloc_(blocks(max_tokens)),
        table_(kBlock) {}
  const float* forward(const std::vector<int32_t>& tokens, int64_t start, int64_t end, bool all) {
    EXPECT_TRUE(table_.grow_to(end, alloc_));
    BatchInputs in;
    in.max_blocks = static_cast<int32_t>(table_.blocks().size());
    in.block_tables.assign(table_.blocks().begin(), table_.blocks().end());
    for (int64_t p = start; p < end; ++p) {
      in.tokens.push_back(tokens[p]);
      in.positions.push_back(static_cast<int32_t>(p));
      in.token_seq.push_back(0);
      in.slots.push_back(table_.slot(p));
      if (all || p == end - 1) in.logit_rows.push_back(static_cast<int32_t>(p - start));
    }
    return model_.forward(in, kv_);
  }

 private:
  static constexpr int32_t kBlock = 16;
  static int32_t blocks(int64_t tokens) { return static_cast<int32_t>(tokens / kBlock + 2); }
  static KvShape shape(const Model& m, int32_t element_bytes) {
    KvShape s = m.kv_shape();
    s.element_bytes = element_bytes;
    return s;
  }
  Model& model_;
  KvStorage kv_;
  BlockAllocator alloc_;
  BlockTable table_;
};

// log p(tokens[i] | tokens[<i]) for i = 1..n-1; the first `prefill` tokens in one step.
// element_bytes: the KV cache's (4 f32, as the references used; 2 f16; 1 q8_0).
inline std::vector<double> teacher_forced(Model& model, const std::vector<int32_t>& tokens, int64_t prefill,
                                          int32_t element_bytes = 4) {
  SoloSequence seq(model, static_cast<int64_t>(tokens.size()), element_bytes);
  std::vector<double> out;
  const int32_t V = model.hparams().n_vocab;
  for (int64_t start = 0; start + 1 < static_cast<int64_t>(tokens.size());) {
    const int64_t n = start == 0 ? prefill : 1;
    const float* logits = seq.forward(tokens, start, start + n, true);
    for (int64_t r = 0; r < n; ++r) {
      const float* row = logits + r * V;
      double mx = row[0];
      for (int32_t v = 1; v < V; ++v) mx = std::max<double>(mx, row[v]);
      double sum = 0.0;
      for (int32_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
      out.push_back(double(row[tokens[start + r + 1]]) - mx - std::log(sum));
    }
    start += n;
  }
  return out;
}

// Greedy continuation: the prompt in one step, then one token a step; stops after n tokens or
// at eos_id. element_bytes: the KV cache's.
inline std::vector<int32_t> greedy(Model& model, std::vector<int32_t> tokens, int n, int32_t eos_id,
                                   int32_t element_bytes = 4) {
  SoloSequence seq(model, static_cast<int64_t>(tokens.size()) + n, element_bytes);
  std::vector<int32_t> out;
  const int32_t V = model.hparams().n_vocab;
  for (int64_t start = 0; static_cast<int>(out.size()) < n;) {
    const int64_t end = static_cast<int64_t>(tokens.size());
    const float* row = seq.forward(tokens, start, end, false);
    const int32_t next = static_cast<int32_t>(std::max_element(row, row + V) - row);
    out.push_back(next);
    if (next == eos_id) break;
    tokens.push_back(next);
    start = end;
  }
  return out;
}

struct Compare {
  double mean_abs = 0, mean_ours = 0, mean_ref = 0, max_abs = 0;
};

// Our log-probabilities of the reference text on model_path against llama.cpp's on reference_key.
inline Compare compare_path(const std::string& model_path, const std::string& reference_key, KernelLevel level,
                     bool int8_activations = true) {
  const json& ref = references()["models"][reference_key]["visible1"];
  const std::vector<int32_t> tokens = ref["token_ids"].get<std::vector<int32_t>>();
  const std::vector<double> want = ref["logprobs"].get<std::vector<double>>();
  GgufFile f(model_path);
  ModelLoadOptions opt;
  opt.kernels = &kernel_table(level);
  opt.weights.int8_activations = int8_activations;
  auto model = load_model(f, opt);
  const std::vector<double> got = teacher_forced(*model, tokens, static_cast<int64_t>(tokens.size()) / 2);
  EXPECT_EQ(got.size(), want.size());
  Compare c;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    c.mean_abs += std::fabs(got[i] - want[i]);
    c.max_abs = std::max(c.max_abs, std::fabs(got[i] - want[i]));
    c.mean_ours += got[i];
    c.mean_ref += want[i];
  }
  c.mean_abs /= static_cast<double>(got.size());
  c.mean_ours /= static_cast<double>(got.size());
  c.mean_ref /= static_cast<double>(got.size());
  return c;
}

inline Compare compare(const std::string& model_key, const std::string& reference_key, KernelLevel level,
                bool int8_activations = true) {
  return compare_path(testing::shared_model(model_key), reference_key, level, int8_activations);
}

}  // namespace
}  // namespace kvserve
