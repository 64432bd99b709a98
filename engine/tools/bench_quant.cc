// kvserve-bench-quant: the weight-matrix kernels alone, per stored type, against the memory read
// bandwidth and the int8 multiply-add peak measured in the same run: decode-sized products (1
// and 16 rows by default; batches as --batch says) over matrices totalling more than the
// caches, as a decode step streams a model's layers.
#include <CLI/CLI.hpp>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "codecs/tensor_types.h"
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
  app.add_option("--total-mib", total_mib,
                 "MiB of matrices, as stored, cycled through (several times the last-level cache: a product's bytes "
                 "come from memory, as a decode step's do)")
      ->capture_default_str();
  app.add_option("--batch", rows_list, "activation rows per product")->delimiter(',');
  app.add_option("--types", type_names, "tensor types to run (default: F32 F16 Q8_0 Q6_K Q5_K Q4_K Q4_0 Q3_K Q2_K)")
      ->delimiter(',');
  app.add_option("--reps", reps, "passes over the matrices per figure (the best is kept)")->capture_default_str();
  app.add_option("--kernels", kernels, "kernel set: auto, avx512, avx2_vnni, avx2, scalar")->capture_default_str();
  bool integer_only = false;
  app.add_flag("--integer-only", integer_only, "only the integer paths (for profiling them)");
  CLI11_PARSE(app, argc, argv);
  const auto level = kernels == "auto" ? kvserve::best_supported_level() : kvserve::parse_level(kernels);
  if (!level || !kvserve::cpu_supports(*level)) {
    std::fprintf(stderr, "kvserve-bench-quant: this CPU cannot run --kernels %s\n", kernels.c_str());
    return 2;
  }
  kvserve::ComputeContext ctx(kvserve::kernel_table(*level));
  const double triad = kvserve::measure_bandwidth();
  const kvserve::ReadBandwidth read = kvserve::measure_read_bandwidth();
  const double bw = read.sustained;
  const double int8_peak = kvserve::measure_int8_peak();
  std::printf("memory read bandwidth %.1f GB/s sustained (best pass %.1f; triad %.1f; as kvserve-bench-engine); %s "
              "kernels; int8 peak %.0f GOPS; matrices %lld x %lld\n",
              bw / 1e9, read.best / 1e9, triad / 1e9, kvserve::level_name(*level), int8_peak / 1e9,
              static_cast<long long>(n_out), static_cast<long long>(n_in));
  std::printf("%-6s %-6s %5s %10s %10s %8s %8s %9s\n", "type", "path", "rows", "MB/matrix", "GB/s", "% of read", "GOPS",
              "% of int8");
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
    // Counted in stored bytes: counted as F32, 4-bit matrices totalled a few tens of MiB, which a
    // large last-level cache holds, and their figures were the cache's.
    const int count = std::max<int>(2, static_cast<int>(int64_t{total_mib} * 1048576 / (row_bytes * n_out)));
    const auto type = static_cast<uint32_t>(t);
    std::vector<uint8_t> encoded(static_cast<size_t>(row_bytes * n_out));
    tr.from_float(w.data(), encoded.data(), n_out * n_in);
    // Paths: 0 float, 1 integer on the file's rows, 2 integer on packed panels (as the loader
    // holds such matrices); the bytes in the weights' own huge-page arena.
    // F16's panels take its float kernels.
    for (int path = 0; path < 3; ++path) {
      const bool int8 = path > 0 && t != TensorType::kF16;
      if (path == 1 && !int8) continue;
      if (integer_only && !int8) continue;
      if (int8 && !kvserve::plan_int8(*ctx.kernels, type, n_in)) continue;
      if (path == 2 && !kvserve::plan_packs(*ctx.kernels, type, n_in, n_out, int8)) continue;
      std::vector<std::unique_ptr<kvserve::WeightMatrix>> mats;
      for (int i = 0; i < count; ++i) {
        uint8_t* s = ctx.arena.allocate(static_cast<size_t>(row_bytes * n_out));
        std::memcpy(s, encoded.data(), encoded.size());
        kvserve::HeldRows held{t, s, n_out, row_bytes};
        if (path == 2) {
          ctx.kernels->pack_panels(type, s, n_out, row_bytes, n_in);
          held.panels = true;
        }
        if (t == TensorType::kF32 && !int8)
          mats.push_back(std::make_unique<kvserve::DnnlMatrix>(ctx, reinterpret_cast<const float*>(s), n_out, n_in));
        else
          mats.push_back(std::make_unique<kvserve::QuantMatrix>(ctx, std::vector<kvserve::HeldRows>{held}, n_in, int8));
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
        const char* name = t == TensorType::kF32 && !int8 ? "onednn" : path == 2 ? "panels" : int8 ? "int8" : "float";
        // Multiply-adds counted as two operations, as the peak counts them.
        const double ops = 2.0 * static_cast<double>(m) * static_cast<double>(n_out * n_in) * count / best;
        std::printf("%-6s %-6s %5d %10.1f %10.1f %7.0f%% %8.0f %8.0f%%\n", tr.name, name, m, mats[0]->bytes() / 1e6,
                    bytes / best / 1e9, 100.0 * bytes / best / bw, ops / 1e9, int8_peak > 0 ? 100.0 * ops / int8_peak : 0.0);
      }
    }
  }
  return 0;
}
