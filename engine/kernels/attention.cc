#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace kvserve {

void write_kv(const float* k, const float* v, int64_t rows, int64_t row_stride, const int64_t* slots,
              int n_kv, int head_dim, int block_size, float* k_cache, float* v_cache) {
  const size_t bytes = head_dim * sizeof(float);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t block = slots[r] / block_size, off = slots[r] % block_size;
    for (int h = 0; h < n_kv; ++h) {
      const int64_t dst = ((block * n_kv + h) * block_size + off) * head_dim;
      std::memcpy(k_cache + dst, k + r * row_stride + h * head_dim, bytes);
      std::memcpy(v_cache + dst, v + r * row_stride + h * head_dim, bytes);
    }
  }
}

void paged_attention(const float* q, int64_t rows, int64_t q_stride, const float* k_cache,
                     const float* v_cache, const int32_t* block_tables, int32_t max_blocks,
                     const int32_t* token_seq, const int32_t* ctx_lens, int n_head, int n_kv,
                     int head_dim, int block_size, float scale, float* out) {
  const int group = n_head / n_kv;
  const int64_t out_stride = static_cast<int64_t>(n_head) * head_dim;
  // One work item per (token, KV head): the group of query heads sharing that KV head reads
  // each K and V row once.
#pragma omp parallel
  {
    std::vector<float> scores;  // [group, ctx]; one per thread, reused across work items
#pragma omp for schedule(dynamic, 1) collapse(2)
    for (int64_t t = 0; t < rows; ++t) {
      for (int kvh = 0; kvh < n_kv; ++kvh) {
        const int ctx = ctx_lens[t];
        const int32_t* table = block_tables + static_cast<int64_t>(token_seq[t]) * max_blocks;
        if (scores.size() < static_cast<size_t>(group) * ctx) scores.resize(static_cast<size_t>(group) * ctx);
        const float* qh = q + t * q_stride + static_cast<int64_t>(kvh) * group * head_dim;

        for (int p0 = 0; p0 < ctx; p0 += block_size) {
          const int64_t block = table[p0 / block_size];
          const float* kb = k_cache + (block * n_kv + kvh) * block_size * head_dim;
          const int n = std::min(block_size, ctx - p0);
          for (int s = 0; s < n; ++s) {
            const float* kr = kb + static_cast<int64_t>(s) * head_dim;
            for (int g = 0; g < group; ++g) {
              const float* qg = qh + g * head_dim;
              float dot = 0.0f;
              for (int d = 0; d < head_dim; ++d) dot += qg[d] * kr[d];
              scores[static_cast<size_t>(g) * ctx + p0 + s] = dot * scale;
            }
          }
        }
        for (int g = 0; g < group; ++g) {
          float* sc = scores.data() + static_cast<size_t>(g) * ctx;
          float mx = *std::max_element(sc, sc + ctx);
          float sum = 0.0f;
          for (int p = 0; p < ctx; ++p) {
            sc[p] = std::exp(sc[p] - mx);
            sum += sc[p];
          }
          const float inv = 1.0f / sum;
          for (int p = 0; p < ctx; ++p) sc[p] *= inv;
          float* o = out + t * out_stride + (static_cast<int64_t>(kvh) * group + g) * head_dim;
          std::fill(o, o + head_dim, 0.0f);
        }
        for (int p0 = 0; p0 < ctx; p0 += block_size) {
          const int64_t block = table[p0 / block_size];
          const float* vb = v_cache + (block * n_kv + kvh) * block_size * head_dim;
          const int n = std::min(block_size, ctx - p0);
          for (int s = 0; s < n; ++s) {
            const float* vr = vb + static_cast<int64_t>(s) * head_dim;
            for (int g = 0; g < group; ++g) {
              const float w = scores[static_cast<size_t>(g) * ctx + p0 + s];
              float* o = out + t * out_stride + (static_cast<int64_t>(kvh) * group + g) * head_dim;
              for (int d = 0; d < head_dim; ++d) o[d] += w * vr[d];
            }
          }
        }
      }
    }
  }
}

}  // namespace kvserve
