// Paged attention's q8_0 pieces: rounding a token's K and V rows on write, and the scores and
// weighted sums of a block's slice straight from its int8 values. Included by attention.cc inside
// its kernel-level namespace, after attention_blocks.h, as that one is.
//
// A q8_0 row (all KV heads of a token side by side) has one F16 scale per 32 values; within a
// block the scales lie [groups, block_size], a group's scales of consecutive positions together,
// so 16 positions' scales are one load. A KV head's dimensions fall into runs under one group
// each (two runs of 32 for 64 dimensions; runs of 16 where a head starts mid-group).
#pragma once

namespace {

// IEEE half <-> float for the q8_0 scales, exact (F16C where the level has it).
inline float half_bits_to_float(uint16_t h) {
#if KVSERVE_HAS_F16C
  return _cvtsh_ss(h);
#else
  return static_cast<float>(std::bit_cast<_Float16>(h));
#endif
}
inline uint16_t float_to_half_bits(float f) { return std::bit_cast<uint16_t>(static_cast<_Float16>(f)); }

// One row of 32 values to int8 with a scale (d = max|x| / 127), q8_0's rule. x: [32]; q: [32].
inline uint16_t quantize32(const float* x, int8_t* q) {
  float amax = 0.0f;
  for (int i = 0; i < kKvQ8Group; ++i) amax = std::max(amax, std::fabs(x[i]));
  const uint16_t dh = float_to_half_bits(amax / 127.0f);
  const float d = half_bits_to_float(dh), id = d > 0.0f ? 1.0f / d : 0.0f;
  for (int i = 0; i < kKvQ8Group; ++i)
    q[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * id), -127.0f, 127.0f));
  return dh;
}

// The end of the run of KV head kvh's dimensions that starts at d0 (under one scale group).
inline int q8_run_end(int kvh, int head_dim, int d0) {
  const int c = kvh * head_dim + d0;
  return std::min(head_dim, d0 + (c / kKvQ8Group + 1) * kKvQ8Group - c);
}

// f(d0, d1, g) for each run [d0, d1) of KV head kvh's dimensions under scale group g.
template <class F>
inline void for_each_q8_run(int kvh, int head_dim, F&& f) {
  for (int d0 = 0, d1 = 0; d0 < head_dim; d0 = d1) {
    d1 = q8_run_end(kvh, head_dim, d0);
    f(d0, d1, (kvh * head_dim + d0) / kKvQ8Group);
  }
}

// out[0..n) = mul · scales[0..n) as floats. scales: [n] F16 bits.
inline void q8_scales(const uint16_t* scales, int n, float mul, float* out) {
  int s = 0;
#if KVSERVE_HAS_F16C
  for (; s + 8 <= n; s += 8)
    _mm256_storeu_ps(out + s, _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + s))),
                                            _mm256_set1_ps(mul)));
#endif
  for (; s < n; ++s) out[s] = half_bits_to_float(scales[s]) * mul;
}

// How many FMA chains the q8_0 score kernels run per query and run of dimensions: four for a
// lone query (a decode row of multi-head attention, which would otherwise wait on the FMA
// latency), two where several share each K load.
template <int M>
constexpr int kQ8Chains = M == 1 ? 4 : 2;

// One query's score at position s of a q8_0 K slice, as the vector kernels below form it in a
// lane: per run, its chained dot product (chained_dot_lane) times the run's scale, added up over
// the runs. q: [head_dim]; kb: [head_dim, block_size];
// sr: [runs, block_size].
template <int C, class T>
inline float q8_score_lane(const float* q, const T* kb, int kvh, int s, int head_dim, int block_size,
                           const float* sr) {
  float tot = 0.0f;
  int r = 0;
  for_each_q8_run(kvh, head_dim, [&](int d0, int d1, int) {
    const float sum = chained_dot_lane<C>(q, kb, d0, d1, s, block_size);
    const float sv = sr[static_cast<int64_t>(r) * block_size + s];
    tot = r == 0 ? sv * sum : fmadd_lane(sv, sum, tot);
    ++r;
  });
  return tot;
}

// sc[m][0..n) = q[m] · K[:, s] under the slice's scales for M queries (each K value loaded and
// converted once for all): per run of dimensions under one scale, each query's dot products in
// kQ8Chains<M> chains, summed, times the run's scales of the positions, added up in registers.
// For M >= 2 a query's bits depend neither on M nor on n (positions past the vector width go
// lane by lane, q8_score_lane), so a GQA row gets the same scores alone, among others, or in a
// prompt's tile. T: int8_t, the cache, or float, an exact copy of it (Q8Slices): the same bits.
// qs: M pointers to [head_dim]; kb: [head_dim, block_size]; sr: [runs, block_size], the runs'
// scales (times the attention scale) of each position; scs: M pointers to [n].
template <int M, class T>
inline void q8_scores_multi(const float* const* qs, const T* kb, int kvh, int n, int head_dim, int block_size,
                            const float* sr, float* const* scs) {
  constexpr int C = kQ8Chains<M>;
  int s0 = 0;
#if KVSERVE_HAS_AVX512
  // 16 positions at a time, the last ones masked (full vectors and the masked one are separate
  // loops: one loop with both kept its accumulators on the stack).
  auto positions = [&]<bool kFull>(__mmask16 mask) {
    auto load = [&](const T* k) {
      if constexpr (kFull)
        return load16(k);
      else
        return load16_masked(k, mask);
    };
    __m512 tot[M];
    int r = 0;
    for (int d0 = 0, d1 = 0; d0 < head_dim; d0 = d1, ++r) {
      d1 = q8_run_end(kvh, head_dim, d0);
      __m512 a[M][C];
      for (int m = 0; m < M; ++m)
        for (int c = 0; c < C; ++c) a[m][c] = _mm512_setzero_ps();
      int d = d0;
      for (; d + C <= d1; d += C)
        for (int c = 0; c < C; ++c) {
          const __m512 k = load(kb + static_cast<int64_t>(d + c) * block_size + s0);
          for (int m = 0; m < M; ++m) a[m][c] = _mm512_fmadd_ps(_mm512_set1_ps(qs[m][d + c]), k, a[m][c]);
        }
      for (int c = 0; d + c < d1; ++c) {
        const __m512 k = load(kb + static_cast<int64_t>(d + c) * block_size + s0);
        for (int m = 0; m < M; ++m) a[m][c] = _mm512_fmadd_ps(_mm512_set1_ps(qs[m][d + c]), k, a[m][c]);
      }
      const __m512 sv = _mm512_maskz_loadu_ps(mask, sr + static_cast<int64_t>(r) * block_size + s0);
      for (int m = 0; m < M; ++m) {
        const __m512 sum = C == 4 ? _mm512_add_ps(_mm512_add_ps(a[m][0], a[m][1]), _mm512_add_ps(a[m][2 % C], a[m][3 % C]))
                                  : _mm512_add_ps(a[m][0], a[m][1 % C]);
        tot[m] = r == 0 ? _mm512_mul_ps(sv, sum) : _mm512_fmadd_ps(sv, sum, tot[m]);
      }
    }
    for (int m = 0; m < M; ++m) _mm512_mask_storeu_ps(scs[m] + s0, mask, tot[m]);
  };
  for (; s0 + kLanes <= n; s0 += kLanes) positions.template operator()<true>(static_cast<__mmask16>(0xffff));
  if (s0 < n) positions.template operator()<false>(static_cast<__mmask16>((1u << (n - s0)) - 1));
  s0 = n;
#elif KVS_ATTN_AVX2
  // 8 positions at a time, queries four at a time (their accumulators, sums and the K loads fill
  // the 16 registers).
  for (; s0 + 8 <= n; s0 += 8)
    for (int m0 = 0; m0 < M; m0 += 4) {
      constexpr int kQ = M < 4 ? M : 4;
      const int mq = std::min(kQ, M - m0);
      __m256 tot[kQ];
      int r = 0;
      for (int d0 = 0, d1 = 0; d0 < head_dim; d0 = d1, ++r) {
        d1 = q8_run_end(kvh, head_dim, d0);
        __m256 a[kQ][C];
        for (int m = 0; m < kQ; ++m)
          for (int c = 0; c < C; ++c) a[m][c] = _mm256_setzero_ps();
        int d = d0;
        for (; d + C <= d1; d += C)
          for (int c = 0; c < C; ++c) {
            const __m256 k = load8(kb + static_cast<int64_t>(d + c) * block_size + s0);
            for (int m = 0; m < kQ; ++m) {
              if (m >= mq) break;
              a[m][c] = _mm256_fmadd_ps(_mm256_set1_ps(qs[m0 + m][d + c]), k, a[m][c]);
            }
          }
        for (int c = 0; d + c < d1; ++c) {
          const __m256 k = load8(kb + static_cast<int64_t>(d + c) * block_size + s0);
          for (int m = 0; m < mq; ++m) a[m][c] = _mm256_fmadd_ps(_mm256_set1_ps(qs[m0 + m][d + c]), k, a[m][c]);
        }
        const __m256 sv = _mm256_loadu_ps(sr + static_cast<int64_t>(r) * block_size + s0);
        for (int m = 0; m < mq; ++m) {
          const __m256 sum = C == 4 ? _mm256_add_ps(_mm256_add_ps(a[m][0], a[m][1]), _mm256_add_ps(a[m][2 % C], a[m][3 % C]))
                                    : _mm256_add_ps(a[m][0], a[m][1 % C]);
          tot[m] = r == 0 ? _mm256_mul_ps(sv, sum) : _mm256_fmadd_ps(sv, sum, tot[m]);
        }
      }
      for (int m = 0; m < mq; ++m) _mm256_storeu_ps(scs[m0 + m] + s0, tot[m]);
    }
#endif
  for (; s0 < n; ++s0)
    for (int m = 0; m < M; ++m) scs[m][s0] = q8_score_lane<C>(qs[m], kb, kvh, s0, head_dim, block_size, sr);
}

// The same for any count of queries (kMaxQueries a call), the runs' scales converted first.
// ks: the block's scales [groups, block_size]; scale: the attention scale, applied to each run's
// scales; scratch: any, grown here.
template <class T>
inline void q8_block_scores_queries(const float* const* qs, int count, const T* kb, const uint16_t* ks, int kvh,
                                    int n, int head_dim, int block_size, float scale, float* const* scs,
                                    std::vector<float>& scratch) {
  const size_t runs = static_cast<size_t>(head_dim) / kKvQ8Group + 2;
  if (scratch.size() < runs * block_size) scratch.resize(runs * block_size);
  int r = 0;
  for_each_q8_run(kvh, head_dim, [&](int, int, int g) {
    q8_scales(ks + static_cast<int64_t>(g) * block_size, n, scale, scratch.data() + static_cast<size_t>(r++) * block_size);
  });
  for (; count > 0; count -= kMaxQueries, qs += kMaxQueries, scs += kMaxQueries)
    with_query_count(count, [&]<int M>() {
      q8_scores_multi<M>(qs, kb, kvh, n, head_dim, block_size, scratch.data(), scs);
    });
}

// o[m] += Σ_s w[m][s] · V[s, :] for count weight rows against one block's q8_0 V slice, a run of
// dimensions under one scale at a time. Several rows: each position's run of V times its scale,
// once for all, then weighed (block_weighted_sum_multi); a lone row (multi-head attention's
// decode): its weights times the scales, then the plain kernel, with no multiply per value. The
// split depends only on the count of rows a call takes, the same for a GQA row alone or in a
// tile. T as above. ws: count pointers to [n]; vb: [block_size, head_dim]; vs: the block's scales
// [groups, block_size]; os: count pointers to [head_dim]; scratch: any, grown here.
template <class T>
inline void q8_block_weighted_sum_queries(const float* const* ws, int count, const T* vb, const uint16_t* vs,
                                          int kvh, int n, int head_dim, int block_size, float* const* os,
                                          std::vector<float>& scratch) {
  if (scratch.size() < static_cast<size_t>(2) * block_size) scratch.resize(static_cast<size_t>(2) * block_size);
  float* const sr = scratch.data();  // the run's scales, [n]
  for (int m0 = 0; m0 < count; m0 += kMaxQueries) {
    const int mq = std::min(kMaxQueries, count - m0);
    for_each_q8_run(kvh, head_dim, [&](int d0, int d1, int g) {
      q8_scales(vs + static_cast<int64_t>(g) * block_size, n, 1.0f, sr);
      float* orun[kMaxQueries];
      for (int m = 0; m < mq; ++m) orun[m] = os[m0 + m] + d0;
      if (mq == 1) {
        float* w = scratch.data() + block_size;
        const float* src = ws[m0];
#pragma omp simd
        for (int s = 0; s < n; ++s) w[s] = src[s] * sr[s];
        block_weighted_sum(w, vb + d0, n, d1 - d0, head_dim, orun[0]);
        return;
      }
      with_query_count(mq, [&]<int M>() {
        if constexpr (M >= 2) block_weighted_sum_multi<M, true>(ws + m0, vb + d0, n, d1 - d0, head_dim, orun, sr);
      });
    });
  }
}

// o[d] += Σ_s w[s] · K[d, s] for d < v_dim against one block's q8_0 K slice: a latent cache's
// values, the first v_dim entries of each K row, a run of dimensions at a time as above.
// w: [n]; kb: [head_dim, block_size] (T as above); ks: the block's scales [groups, block_size];
// o: [v_dim]; scratch: any, grown here.
template <class T>
inline void q8_block_weighted_sum_t(const float* w, const T* kb, const uint16_t* ks, int kvh, int n, int v_dim,
                                    int head_dim, int block_size, float* o, std::vector<float>& scratch) {
  if (scratch.size() < static_cast<size_t>(2) * block_size) scratch.resize(static_cast<size_t>(2) * block_size);
  float* const sr = scratch.data();
  float* const wr = scratch.data() + block_size;
  for_each_q8_run(kvh, head_dim, [&](int d0, int d1, int g) {
    if (d0 >= v_dim) return;
    q8_scales(ks + static_cast<int64_t>(g) * block_size, n, 1.0f, sr);
#pragma omp simd
    for (int s = 0; s < n; ++s) wr[s] = w[s] * sr[s];
    block_weighted_sum_t(wr, kb + static_cast<int64_t>(d0) * block_size, n, std::min(d1, v_dim) - d0, block_size,
                         o + d0);
  });
}

// q8_0: one (sequence, KV head)'s K and V slices as exact float copies of their int8 values,
// block by block, kept across a thread's work items within one call. The rows of a prompt chunk
// read the same blocks (its tiles, or a latent cache's rows one by one): each block is then
// converted once per thread, not once per tile. Up to kKeptFloats floats each of K and V; blocks
// past that are converted per use into one spare entry.
class Q8Slices {
 public:
  static constexpr int kKeptFloats = 1 << 18;
  // A new call: nothing kept. slice: values of one block's K (or V) slice.
  void start(int slice) {
    slice_ = slice;
    cap_ = std::max(1, kKeptFloats / slice);
    k_.resize(static_cast<size_t>(cap_ + 1) * slice);
    v_.resize(k_.size());
    k_got_.assign(cap_ + 1, 0);
    v_got_.assign(cap_ + 1, 0);
    table_ = nullptr;
    used_ = 0;
  }
  // The work item's sequence (its block-table row) and KV head; another one forgets the blocks.
  void select(const int32_t* table, int kvh) {
    if (table == table_ && kvh == kvh_) return;
    table_ = table, kvh_ = kvh;
    std::fill_n(k_got_.begin(), used_, 0);  // entries past used_ were never set since start()
    std::fill_n(v_got_.begin(), used_, 0);
    used_ = 0;
  }
  // Block i's slice (src: [slice] in the cache) as floats.
  const float* k(int i, const int8_t* src) { return get(k_, k_got_, i, src); }
  const float* v(int i, const int8_t* src) { return get(v_, v_got_, i, src); }

 private:
  const float* get(std::vector<float>& buf, std::vector<char>& got, int i, const int8_t* src) {
    const int e = std::min(i, cap_);
    float* p = buf.data() + static_cast<size_t>(e) * slice_;
    if (e == cap_ || !got[e]) {
      int j = 0;
#if KVSERVE_HAS_AVX512
      for (; j + kLanes <= slice_; j += kLanes) _mm512_storeu_ps(p + j, load16(src + j));
#endif
      for (; j < slice_; ++j) p[j] = static_cast<float>(src[j]);
      if (e < cap_) got[e] = 1, used_ = std::max(used_, e + 1);
    }
    return p;
  }
  const int32_t* table_ = nullptr;
  int kvh_ = -1, slice_ = 0, cap_ = 0, used_ = 0;
  std::vector<float> k_, v_;
  std::vector<char> k_got_, v_got_;  // whether each entry holds its block
};

}  // namespace
