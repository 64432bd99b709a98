// kvserve-bench-quant: the weight-matrix kernels alone, per stored type, against the memory read
// bandwidth measured in the same run: decode-sized products (1 and 16 rows) over matrices
// totalling more than the caches, as a decode step streams a model's layers.
#include <CLI/CLI.hpp>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "gguf/tensor_types.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"
#include "weights/dnnl_matrix.h"
#include "tools/machine_limits.h"
#include "weights/quant_matrix.h"

namespace {

using kvserve::TensorType;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Weight-matrix kernels per stored type against the measured read bandwidth"};
  int64_t n_out = 4096, n_in = 4096;
  int total_mib = 256, reps = 5;
  std::string kernels = "auto";
  std::vector<int> rows_list{1, 16};
  std::vector<std::string> type_names;
  app.add_option("--rows", n_out, "outputs of each matrix")->capture_default_str();
  app.add_option("--cols", n_in, "inputs of each matrix (a multiple of 256)")->capture_default_str();
  app.add_option("--total-mib", total_mib, "F32-equivalent MiB of matrices cycled through")->capture_default_str();
  app.add_option("--batch", rows_list, "activation rows per product")->delimiter(',');
  app.add_option("--types", type_names, "tensor types to run (default: F32 F16 Q8_0 Q6_K Q5_K Q4_K Q4_0 Q3_K Q2_K)")
      ->delimiter(',');
  app.add_option("--kernels", kernels, "kernel set: auto, avx512, avx2, scalar")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const auto level = kernels == "auto" ? kvserve::best_supported_level() : kvserve::parse_level(kernels);
  if (!level || !kvserve::cpu_supports(*level)) {
    std::fprintf(stderr, "kvserve-bench-quant: this CPU cannot run --kernels %s\n", kernels.c_str());
    return 2;
  }
  kvserve::ComputeContext ctx(kvserve::kernel_table(*level));
  const double bw = kvserve::measure_bandwidth();
  std::printf("memory bandwidth %.1f GB/s (triad, as kvserve-bench-engine); %s kernels; matrices %lld x %lld\n", bw / 1e9, kvserve::level_name(*level),
              static_cast<long long>(n_out), static_cast<long long>(n_in));
  std::printf("%-6s %-6s %5s %10s %10s %8s\n", "type", "path", "rows", "MB/matrix", "GB/s", "% of bw");
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> U(-1.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(n_out * n_in));
  for (float& v : w) v = U(rng) * 0.05f;
  std::vector<TensorType> types{TensorType::kF32,  TensorType::kF16,  TensorType::kQ8_0,
                                 TensorType::kQ6_K, TensorType::kQ5_K, TensorType::kQ4_K,
                                 TensorType::kQ4_0, TensorType::kIQ4_NL, TensorType::kQ3_K, TensorType::kQ2_K};
  if (!type_names.empty()) {
    types.clear();
    for (const std::string& name : type_names) {
      const kvserve::TensorTypeTraits* found = nullptr;
      for (uint32_t id = 0; id < 64 && !found; ++id)
        if (const auto* t = kvserve::find_tensor_type(id); t && name == t->name && t->from_float) found = t;
      if (!found) {
        std::fprintf(stderr, "kvserve-bench-quant: unknown or unwritable type %s\n", name.c_str());
        return 2;
      }
      types.push_back(found->type);
    }
  }
  for (TensorType t : types) {
    const auto& tr = kvserve::tensor_type(t);
    const int64_t row_bytes = kvserve::tensor_bytes(t, n_in);
    const int count = std::max<int>(2, static_cast<int>(int64_t{total_mib} * 1048576 / (n_out * n_in * 4)));
    std::vector<std::vector<uint8_t>> store(count, std::vector<uint8_t>(static_cast<size_t>(row_bytes * n_out)));
    for (auto& s : store) tr.from_float(w.data(), s.data(), n_out * n_in);
    for (bool int8 : {false, true}) {
      if (int8 && !ctx.kernels->int8_path_applies(static_cast<uint32_t>(t), n_in)) continue;
      std::vector<std::unique_ptr<kvserve::WeightMatrix>> mats;
      for (auto& s : store) {
        if (t == TensorType::kF32 && !int8)
          mats.push_back(std::make_unique<kvserve::DnnlMatrix>(ctx, reinterpret_cast<const float*>(s.data()), n_out, n_in));
        else
          mats.push_back(std::make_unique<kvserve::QuantMatrix>(
              ctx, std::vector<kvserve::HeldRows>{{t, s.data(), n_out, row_bytes}}, n_in, int8));
      }
      for (int m : rows_list) {
        std::vector<float> x(static_cast<size_t>(m * n_in)), y(static_cast<size_t>(m * n_out));
        for (float& v : x) v = U(rng);
        for (auto& mat : mats) mat->prepare(m, false);
        double best = 1e30;
        for (int r = 0; r < reps; ++r) {
          const auto t0 = std::chrono::steady_clock::now();
          for (auto& mat : mats) mat->forward(x.data(), m, y.data());
          best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        const double bytes = static_cast<double>(mats[0]->bytes()) * count;
        const char* path = t == TensorType::kF32 && !int8 ? "onednn" : int8 ? "int8" : "float";
        std::printf("%-6s %-6s %5d %10.1f %10.1f %7.0f%%\n", tr.name, path, m, mats[0]->bytes() / 1e6, bytes / best / 1e9,
                    100.0 * bytes / best / bw);
      }
    }
  }
  return 0;
}
