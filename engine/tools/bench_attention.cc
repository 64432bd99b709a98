// kvserve-bench-attention: paged decode attention alone, against the plain read bandwidth over
// the K/V bytes it reads. Each call is one decode row per sequence (as a batched decode step's
// attention for one layer) over caches of --ctx positions, in blocks laid out in a shuffled
// order as a long-running pool hands them out; the calls cycle through --total-mib of caches (far
// more than the last-level cache), so that every K/V byte comes from memory as in a decode step,
// where the weights between two layers push the last layer's cache lines out.
#include <CLI/CLI.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "common/huge_buffer.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"
#include "tools/machine_limits.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Shape {
  int n_head = 12, n_kv = 12, head_dim = 64, block_size = 16, ctx = 640, seqs = 1;
  bool in_order = false;  // each sequence's blocks one after another, as a fresh pool hands them out
};

// One layer's cache: every sequence's blocks, scattered; on huge pages, as KvStorage maps its own.
template <class KvT>
struct LayerCache {
  kvserve::HugeBuffer k, v, k_scales, v_scales;  // scales: q8_0 only
};

template <class KvT>
KvT value_of(float x) {
  if constexpr (std::is_same_v<KvT, int8_t>)
    return static_cast<int8_t>(std::clamp(x * 127.0f, -127.0f, 127.0f));
  else
    return static_cast<KvT>(x);
}

struct Result {
  double seconds = 0;  // the best pass over every layer's cache
  double bytes = 0;    // the K/V bytes (and q8_0 scales) a pass must read
  int calls = 0;       // layers: calls a pass
};

template <class KvT>
Result run(const kvserve::KernelTable& kernels, const Shape& s, int64_t total_bytes, int reps) {
  const int blocks_per_seq = (s.ctx + s.block_size - 1) / s.block_size;
  const int64_t num_blocks = int64_t{blocks_per_seq} * s.seqs;
  const int64_t slice = int64_t{s.block_size} * s.head_dim;  // one KV head's values in a block
  const int64_t block_values = slice * s.n_kv;
  const int groups = s.n_kv * s.head_dim / kvserve::kKvQ8Group;
  const bool q8 = std::is_same_v<KvT, int8_t>;
  const double layer_bytes = 2.0 * num_blocks * block_values * sizeof(KvT) +
                             (q8 ? 2.0 * num_blocks * s.block_size * groups * sizeof(uint16_t) : 0.0);
  const int layers = std::max<int>(2, static_cast<int>(static_cast<double>(total_bytes) / layer_bytes));
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> U(-1.0f, 1.0f);
  std::vector<LayerCache<KvT>> caches(layers);
  const size_t values = static_cast<size_t>(num_blocks * block_values);
  const size_t scales = static_cast<size_t>(num_blocks * s.block_size * groups);
  for (LayerCache<KvT>& c : caches) {
    c.k = kvserve::HugeBuffer(values * sizeof(KvT));
    c.v = kvserve::HugeBuffer(values * sizeof(KvT));
    for (size_t i = 0; i < values; ++i) {
      static_cast<KvT*>(c.k.data())[i] = value_of<KvT>(U(rng));
      static_cast<KvT*>(c.v.data())[i] = value_of<KvT>(U(rng));
    }
    if (q8) {
      c.k_scales = kvserve::HugeBuffer(scales * sizeof(uint16_t));
      c.v_scales = kvserve::HugeBuffer(scales * sizeof(uint16_t));
      std::fill_n(static_cast<uint16_t*>(c.k_scales.data()), scales, uint16_t{0x2000});  // a small half-precision scale
      std::fill_n(static_cast<uint16_t*>(c.v_scales.data()), scales, uint16_t{0x2000});
    }
  }
  // Each sequence's blocks, as a pool that has run a while hands them out: anywhere (unless in_order).
  std::vector<int32_t> tables(num_blocks);
  std::iota(tables.begin(), tables.end(), 0);
  if (!s.in_order) std::shuffle(tables.begin(), tables.end(), rng);
  std::vector<float> q(static_cast<size_t>(s.seqs) * s.n_head * s.head_dim);
  for (float& x : q) x = U(rng);
  std::vector<float> out(q.size());
  // q8_0: the anchors the engine always passes (write_kv_q8's offsets, added back here).
  std::vector<float> anchor(2 * static_cast<size_t>(s.n_kv) * s.head_dim);
  for (float& x : anchor) x = U(rng);
  std::vector<int32_t> token_seq(s.seqs), ctx_lens(s.seqs, s.ctx);
  std::iota(token_seq.begin(), token_seq.end(), 0);
  double best = 1e30;
  for (int r = 0; r < reps + 1; ++r) {  // the first pass warms the pages and the thread team
    const auto start = Clock::now();
    for (LayerCache<KvT>& c : caches) {
      kvserve::PagedAttentionArgs<KvT> a;
      a.q = q.data();
      a.rows = s.seqs;
      a.q_stride = int64_t{s.n_head} * s.head_dim;
      a.k_cache = static_cast<const KvT*>(c.k.data());
      a.v_cache = static_cast<const KvT*>(c.v.data());
      a.block_tables = tables.data();
      a.max_blocks = blocks_per_seq;
      a.token_seq = token_seq.data();
      a.ctx_lens = ctx_lens.data();
      a.n_head = s.n_head;
      a.n_kv = s.n_kv;
      a.head_dim = s.head_dim;
      a.block_size = s.block_size;
      a.scale = 0.125f;
      a.out = out.data();
      if constexpr (std::is_same_v<KvT, int8_t>) {
        a.k_scales = static_cast<const uint16_t*>(c.k_scales.data());
        a.v_scales = static_cast<const uint16_t*>(c.v_scales.data());
        a.k_anchor = anchor.data();
        a.v_anchor = anchor.data() + static_cast<size_t>(s.n_kv) * s.head_dim;
      }
      kernels.paged_attention(a);
    }
    const double t = std::chrono::duration<double>(Clock::now() - start).count();
    if (r > 0) best = std::min(best, t);
  }
  // The bytes a pass must read: each sequence's ctx positions (not the unused tail of its last block).
  const double per_pos = 2.0 * s.n_kv * s.head_dim * sizeof(KvT) + (q8 ? 2.0 * groups * sizeof(uint16_t) : 0.0);
  return {best, per_pos * s.ctx * s.seqs * layers, layers};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Paged decode attention against the read bandwidth over the K/V bytes it reads"};
  Shape s;
  int total_mib = 512, reps = 5;
  std::string kernels = "auto";
  std::vector<std::string> dtypes{"f16"};
  std::vector<int> ctxs{640};
  app.add_option("--heads", s.n_head, "query heads")->capture_default_str();
  app.add_option("--kv-heads", s.n_kv, "KV heads")->capture_default_str();
  app.add_option("--head-dim", s.head_dim, "head dimension")->capture_default_str();
  app.add_option("--block-size", s.block_size, "positions per KV block")->capture_default_str();
  app.add_option("--ctx", ctxs, "positions each sequence sees (several: one figure each)")->delimiter(',');
  app.add_flag("--in-order", s.in_order, "each sequence's blocks in order, one after another (default: shuffled)");
  app.add_option("--seqs", s.seqs, "sequences, one decode row each")->capture_default_str();
  app.add_option("--kv-dtype", dtypes, "cache element types: f32, f16, q8_0")->delimiter(',');
  app.add_option("--total-mib", total_mib, "MiB of caches cycled through (several times the last-level cache)")
      ->capture_default_str();
  app.add_option("--reps", reps, "passes over the caches per figure (the best is kept)")->capture_default_str();
  app.add_option("--kernels", kernels, "kernel set: auto, avx512, avx2_vnni, avx2, scalar")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (s.n_kv <= 0 || s.n_head % s.n_kv != 0 || s.head_dim <= 0 || s.block_size <= 0 || s.seqs <= 0 ||
      s.n_kv * s.head_dim % kvserve::kKvQ8Group != 0) {
    std::fprintf(stderr, "kvserve-bench-attention: --heads must be a multiple of --kv-heads, and kv-heads x head-dim of 32\n");
    return 2;
  }
  const auto level = kernels == "auto" ? kvserve::best_supported_level() : kvserve::parse_level(kernels);
  if (!level || !kvserve::cpu_supports(*level)) {
    std::fprintf(stderr, "kvserve-bench-attention: this CPU cannot run --kernels %s\n", kernels.c_str());
    return 2;
  }
  const kvserve::KernelTable& table = kvserve::kernel_table(*level);
  const double plain = kvserve::measure_plain_read_bandwidth();
  std::printf("plain read %.1f GB/s; %s kernels, %d threads; %d heads / %d KV heads x %d, blocks of %d, %d sequence(s)\n",
              plain / 1e9, kvserve::level_name(*level), omp_get_max_threads(), s.n_head, s.n_kv, s.head_dim,
              s.block_size, s.seqs);
  std::printf("%-6s %6s %12s %10s %10s\n", "kv", "ctx", "us/call", "GB/s", "% of read");
  const int64_t total = int64_t{total_mib} << 20;
  for (const std::string& dt : dtypes)
    for (int ctx : ctxs) {
      s.ctx = ctx;
      Result r;
      if (dt == "f32") {
        r = run<float>(table, s, total, reps);
      } else if (dt == "f16") {
        r = run<_Float16>(table, s, total, reps);
      } else if (dt == "q8_0") {
        r = run<int8_t>(table, s, total, reps);
      } else {
        std::fprintf(stderr, "kvserve-bench-attention: --kv-dtype %s: not f32, f16 or q8_0\n", dt.c_str());
        return 2;
      }
      const double gbs = r.bytes / r.seconds / 1e9;
      std::printf("%-6s %6d %12.2f %10.1f %9.1f%%\n", dt.c_str(), ctx, 1e6 * r.seconds / r.calls, gbs,
                  100.0 * gbs * 1e9 / plain);
    }
  return 0;
}
