#include "kernels/attention.h"

// GCC 12 warns inside its own AVX-512 header (_mm512_undefined_ps is self-initialised).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace kvserve {
namespace {
constexpr int kLanes = 16;  // one AVX-512 register of floats (two AVX2 registers)

// 16 cache values as floats. For half precision, the hardware converter where there is one
// (GCC does not vectorise _Float16 -> float conversions in the loops by itself).
inline void load_lanes(const float* p, float* out) { std::memcpy(out, p, kLanes * sizeof(float)); }
inline void load_lanes(const _Float16* p, float* out) {
#if defined(__AVX512F__)
  _mm512_storeu_ps(out, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
#elif defined(__F16C__)
  _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  _mm256_storeu_ps(out + 8, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8))));
#else
  for (int i = 0; i < kLanes; ++i) out[i] = static_cast<float>(p[i]);
#endif
}

}  // namespace

template <class KvT>
void write_kv(const float* k, const float* v, int64_t rows, int64_t row_stride, const int64_t* slots,
              int n_kv, int head_dim, int block_size, KvT* k_cache, KvT* v_cache) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t block = slots[r] / block_size, off = slots[r] % block_size;
    for (int h = 0; h < n_kv; ++h) {
      const int64_t base = (block * n_kv + h) * block_size * head_dim;
      const float* kr = k + r * row_stride + h * head_dim;
      const float* vr = v + r * row_stride + h * head_dim;
      for (int d = 0; d < head_dim; ++d) k_cache[base + int64_t{d} * block_size + off] = static_cast<KvT>(kr[d]);
      for (int d = 0; d < head_dim; ++d) v_cache[base + off * head_dim + d] = static_cast<KvT>(vr[d]);
    }
  }
}

template <class KvT>
void paged_attention(const float* q, int64_t rows, int64_t q_stride, const KvT* k_cache,
                     const KvT* v_cache, const int32_t* block_tables, int32_t max_blocks,
                     const int32_t* token_seq, const int32_t* ctx_lens, int n_head, int n_kv,
                     int head_dim, int block_size, float scale, float* out,
                     float* const* capture, const int64_t* capture_head_stride) {
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
          const KvT* kb = k_cache + (block * n_kv + kvh) * block_size * head_dim;  // [head_dim, block_size]
          const int n = std::min(block_size, ctx - p0);
          for (int g = 0; g < group; ++g) {
            const float* qg = qh + g * head_dim;
            float* sc = scores.data() + static_cast<size_t>(g) * ctx + p0;
            int s0 = 0;
            // 16 positions at a time with the accumulators in one vector register.
            for (; s0 + kLanes <= n; s0 += kLanes) {
              float acc[kLanes] = {};
              for (int d = 0; d < head_dim; ++d) {
                const float qd = qg[d];
                float kd[kLanes];
                load_lanes(kb + static_cast<int64_t>(d) * block_size + s0, kd);
#pragma omp simd
                for (int s = 0; s < kLanes; ++s) acc[s] += qd * kd[s];
              }
              for (int s = 0; s < kLanes; ++s) sc[s0 + s] = acc[s] * scale;
            }
            for (int s = s0; s < n; ++s) {
              float dot = 0.0f;
              for (int d = 0; d < head_dim; ++d) dot += qg[d] * static_cast<float>(kb[static_cast<int64_t>(d) * block_size + s]);
              sc[s] = dot * scale;
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
          if (capture && capture[t])
            std::copy(sc, sc + ctx, capture[t] + (static_cast<int64_t>(kvh) * group + g) * capture_head_stride[t]);
          float* o = out + t * out_stride + (static_cast<int64_t>(kvh) * group + g) * head_dim;
          std::fill(o, o + head_dim, 0.0f);
        }
        for (int p0 = 0; p0 < ctx; p0 += block_size) {
          const int64_t block = table[p0 / block_size];
          const KvT* vb = v_cache + (block * n_kv + kvh) * block_size * head_dim;  // [block_size, head_dim]
          const int n = std::min(block_size, ctx - p0);
          for (int g = 0; g < group; ++g) {
            const float* w = scores.data() + static_cast<size_t>(g) * ctx + p0;
            float* o = out + t * out_stride + (static_cast<int64_t>(kvh) * group + g) * head_dim;
            int d0 = 0;
            // 16 output dimensions at a time, accumulated in a register across the block.
            for (; d0 + kLanes <= head_dim; d0 += kLanes) {
              float acc[kLanes];
              for (int k = 0; k < kLanes; ++k) acc[k] = o[d0 + k];
              for (int s = 0; s < n; ++s) {
                const float ws = w[s];
                float vr[kLanes];
                load_lanes(vb + static_cast<int64_t>(s) * head_dim + d0, vr);
#pragma omp simd
                for (int k = 0; k < kLanes; ++k) acc[k] += ws * vr[k];
              }
              for (int k = 0; k < kLanes; ++k) o[d0 + k] = acc[k];
            }
            for (int s = 0; s < n; ++s)
              for (int d = d0; d < head_dim; ++d) o[d] += w[s] * static_cast<float>(vb[static_cast<int64_t>(s) * head_dim + d]);
          }
        }
      }
    }
  }
}

template void write_kv<float>(const float*, const float*, int64_t, int64_t, const int64_t*, int, int, int, float*,
                              float*);
template void write_kv<_Float16>(const float*, const float*, int64_t, int64_t, const int64_t*, int, int, int,
                                 _Float16*, _Float16*);
template void paged_attention<float>(const float*, int64_t, int64_t, const float*, const float*, const int32_t*,
                                     int32_t, const int32_t*, const int32_t*, int, int, int, int, float, float*,
                                     float* const*, const int64_t*);
template void paged_attention<_Float16>(const float*, int64_t, int64_t, const _Float16*, const _Float16*,
                                        const int32_t*, int32_t, const int32_t*, const int32_t*, int, int, int, int,
                                        float, float*, float* const*, const int64_t*);

}  // namespace kvserve
