// Paged attention's per-block pieces: scores of one block's K slice, the weighted sum of its V
// slice, the softmax between them. Included by attention.cc inside its kernel-level namespace (each
// level compiles them with its own instruction set), as vec_math.h is.
#pragma once

namespace {


// K/V slices requested ahead of the one in use (paged_attention).
constexpr int kSlicesAhead = 4;
constexpr int kLanes = 16;  // one AVX-512 register of floats (two AVX2 registers)

// 16 cache values as floats. For half precision, the hardware converter where there is one
// (GCC does not vectorise _Float16 -> float conversions in the loops by itself).
inline void load_lanes(const float* p, float* out) { std::memcpy(out, p, kLanes * sizeof(float)); }
// A q8_0 cache's int8 values, read as they are (their scales are applied per run of dimensions,
// attention_q8.h); the conversion is exact, so kernels give the same bits as on their floats.
inline void load_lanes(const int8_t* p, float* out) {
  for (int i = 0; i < kLanes; ++i) out[i] = static_cast<float>(p[i]);
}
inline void load_lanes(const _Float16* p, float* out) {
#if KVSERVE_HAS_AVX512
  _mm512_storeu_ps(out, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
#elif KVSERVE_HAS_F16C
  _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  _mm256_storeu_ps(out + 8, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8))));
#else
  for (int i = 0; i < kLanes; ++i) out[i] = static_cast<float>(p[i]);
#endif
}

#if KVSERVE_HAS_AVX512
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const _Float16* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 load16(const int8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

#if KVSERVE_HAS_AVX512  // BW, VL: masked 16-bit loads
// The lanes of m, zeros elsewhere; lanes outside m are not read.
inline __m512 load16_masked(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load16_masked(const _Float16* p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}
inline __m512 load16_masked(const int8_t* p, __mmask16 m) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, p)));
}
#endif

// Asks for the cache lines of one block's slice ([bytes] from p) ahead of its use: a sequence's
// blocks lie anywhere in the cache, so the hardware prefetcher cannot guess the next one.
inline void prefetch_slice(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t i = 0; i < bytes; i += 64) _mm_prefetch(c + i, _MM_HINT_T0);
}

#endif

// The AVX2 levels' kernels: 8 floats a register.
#define KVS_ATTN_AVX2 (!KVSERVE_HAS_AVX512 && KVSERVE_HAS_F16C)
#if KVS_ATTN_AVX2
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const _Float16* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256 load8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
#endif

// a · b + c, fused where the level has FMA units (the vector kernels' lanes), so that the
// positions a kernel leaves to scalar code get the bits its vector lanes would give.
inline float fmadd_lane(float a, float b, float c) {
#if KVSERVE_HAS_F16C  // every level with F16C has FMA
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

// q[d0, d1) · K[d0, d1), s] as the score kernels form it in a vector lane: dimension d in chain
// (d - d0) % C, the chains summed pairwise. Positions a kernel leaves to scalar code get the bits
// its vector lanes would give. q: [head_dim]; kb: [head_dim, block_size].
template <int C, class KvT>
inline float chained_dot_lane(const float* q, const KvT* kb, int d0, int d1, int s, int block_size) {
  static_assert(C == 2 || C == 4);
  float a[C] = {};
  for (int d = d0; d < d1; ++d)
    a[(d - d0) % C] = fmadd_lane(q[d], static_cast<float>(kb[static_cast<int64_t>(d) * block_size + s]), a[(d - d0) % C]);
  if constexpr (C == 4)
    return (a[0] + a[1]) + (a[2] + a[3]);
  else
    return a[0] + a[1];
}

// One query's score at position s as the AVX2 score kernels (and block_scores_multi's AVX-512
// ones) form it: even and odd dimensions in two chains, their sum times scale.
template <class KvT>
inline float score_lane(const float* q, const KvT* kb, int s, int head_dim, int block_size, float scale) {
  return chained_dot_lane<2>(q, kb, 0, head_dim, s, block_size) * scale;
}

// sc[0..n) = scale · (q · K[:, s]) for the first n positions of one block.
// qg: [head_dim]; kb: [head_dim, block_size]; sc: [n].
template <class KvT>
inline void block_scores(const float* qg, const KvT* kb, int n, int head_dim, int block_size, float scale, float* sc) {
  int s0 = 0;
#if KVSERVE_HAS_AVX512
  // Four accumulators over interleaved dimensions: one chain of head_dim dependent FMAs would
  // wait on the FMA latency at every step.
  for (; s0 + kLanes <= n; s0 += kLanes) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int d = 0;
    for (; d + 4 <= head_dim; d += 4) {
      const KvT* k = kb + static_cast<int64_t>(d) * block_size + s0;
      a0 = _mm512_fmadd_ps(_mm512_set1_ps(qg[d]), load16(k), a0);
      a1 = _mm512_fmadd_ps(_mm512_set1_ps(qg[d + 1]), load16(k + block_size), a1);
      a2 = _mm512_fmadd_ps(_mm512_set1_ps(qg[d + 2]), load16(k + 2 * block_size), a2);
      a3 = _mm512_fmadd_ps(_mm512_set1_ps(qg[d + 3]), load16(k + 3 * block_size), a3);
    }
    for (; d < head_dim; ++d)
      a0 = _mm512_fmadd_ps(_mm512_set1_ps(qg[d]), load16(kb + static_cast<int64_t>(d) * block_size + s0), a0);
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
    _mm512_storeu_ps(sc + s0, _mm512_mul_ps(sum, _mm512_set1_ps(scale)));
  }
#if KVSERVE_HAS_AVX512  // BW, VL: masked 16-bit loads
  // A partly filled last block (nearly every decode token has one): the same sum with masked
  // loads, which read nothing past position n, rather than a strided scalar loop per position.
  if (s0 < n && s0 + kLanes <= block_size) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - s0)) - 1);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    for (int d = 0; d + 1 < head_dim; d += 2) {
      const KvT* k = kb + static_cast<int64_t>(d) * block_size + s0;
      a0 = _mm512_fmadd_ps(_mm512_set1_ps(qg[d]), load16_masked(k, m), a0);
      a1 = _mm512_fmadd_ps(_mm512_set1_ps(qg[d + 1]), load16_masked(k + block_size, m), a1);
    }
    if (head_dim % 2)
      a0 = _mm512_fmadd_ps(_mm512_set1_ps(qg[head_dim - 1]),
                           load16_masked(kb + static_cast<int64_t>(head_dim - 1) * block_size + s0, m), a0);
    _mm512_mask_storeu_ps(sc + s0, m, _mm512_mul_ps(_mm512_add_ps(a0, a1), _mm512_set1_ps(scale)));
    s0 = n;
  }
#endif
#elif KVS_ATTN_AVX2
  // 16 positions at a time over even and odd dimensions: four FMA chains.
  const __m256 vs = _mm256_set1_ps(scale);
  for (; s0 + 16 <= n; s0 += 16) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int d = 0;
    for (; d + 2 <= head_dim; d += 2) {
      const KvT* k = kb + static_cast<int64_t>(d) * block_size + s0;
      const __m256 q0 = _mm256_set1_ps(qg[d]), q1 = _mm256_set1_ps(qg[d + 1]);
      a0 = _mm256_fmadd_ps(q0, load8(k), a0);
      a1 = _mm256_fmadd_ps(q0, load8(k + 8), a1);
      a2 = _mm256_fmadd_ps(q1, load8(k + block_size), a2);
      a3 = _mm256_fmadd_ps(q1, load8(k + block_size + 8), a3);
    }
    if (d < head_dim) {
      const KvT* k = kb + static_cast<int64_t>(d) * block_size + s0;
      a0 = _mm256_fmadd_ps(_mm256_set1_ps(qg[d]), load8(k), a0);
      a1 = _mm256_fmadd_ps(_mm256_set1_ps(qg[d]), load8(k + 8), a1);
    }
    _mm256_storeu_ps(sc + s0, _mm256_mul_ps(_mm256_add_ps(a0, a2), vs));
    _mm256_storeu_ps(sc + s0 + 8, _mm256_mul_ps(_mm256_add_ps(a1, a3), vs));
  }
  for (; s0 + 8 <= n; s0 += 8) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    int d = 0;
    for (; d + 2 <= head_dim; d += 2) {
      const KvT* k = kb + static_cast<int64_t>(d) * block_size + s0;
      a0 = _mm256_fmadd_ps(_mm256_set1_ps(qg[d]), load8(k), a0);
      a1 = _mm256_fmadd_ps(_mm256_set1_ps(qg[d + 1]), load8(k + block_size), a1);
    }
    if (d < head_dim) a0 = _mm256_fmadd_ps(_mm256_set1_ps(qg[d]), load8(kb + static_cast<int64_t>(d) * block_size + s0), a0);
    _mm256_storeu_ps(sc + s0, _mm256_mul_ps(_mm256_add_ps(a0, a1), vs));
  }
#else
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
#endif
  for (int s = s0; s < n; ++s) sc[s] = score_lane(qg, kb, s, head_dim, block_size, scale);
}

// o += Σ_s w[s] · V[s, :] over the first n positions of one block, head_dim values of each V row
// (rows stride apart: a q8_0 slice is summed a run of dimensions at a time).
// w: [n]; vb: [block_size, stride]; o: [head_dim].
template <class KvT>
inline void block_weighted_sum(const float* w, const KvT* vb, int n, int head_dim, int stride, float* o) {
  int d0 = 0;
#if KVSERVE_HAS_AVX512
  // 64 output dimensions at a time: four independent accumulators per position.
  for (; d0 + 4 * kLanes <= head_dim; d0 += 4 * kLanes) {
    __m512 a0 = _mm512_loadu_ps(o + d0), a1 = _mm512_loadu_ps(o + d0 + 16), a2 = _mm512_loadu_ps(o + d0 + 32),
           a3 = _mm512_loadu_ps(o + d0 + 48);
    for (int s = 0; s < n; ++s) {
      const KvT* v = vb + static_cast<int64_t>(s) * stride + d0;
      const __m512 ws = _mm512_set1_ps(w[s]);
      a0 = _mm512_fmadd_ps(ws, load16(v), a0);
      a1 = _mm512_fmadd_ps(ws, load16(v + 16), a1);
      a2 = _mm512_fmadd_ps(ws, load16(v + 32), a2);
      a3 = _mm512_fmadd_ps(ws, load16(v + 48), a3);
    }
    _mm512_storeu_ps(o + d0, a0);
    _mm512_storeu_ps(o + d0 + 16, a1);
    _mm512_storeu_ps(o + d0 + 32, a2);
    _mm512_storeu_ps(o + d0 + 48, a3);
  }
  // 32 or 16 (a q8_0 run of dimensions): even and odd positions in their own accumulators, so
  // that four (two) FMA chains run side by side.
  for (; d0 + 2 * kLanes <= head_dim; d0 += 2 * kLanes) {
    __m512 a0 = _mm512_loadu_ps(o + d0), a1 = _mm512_loadu_ps(o + d0 + 16), a2 = _mm512_setzero_ps(), a3 = a2;
    int s = 0;
    for (; s + 2 <= n; s += 2) {
      const KvT* v = vb + static_cast<int64_t>(s) * stride + d0;
      const __m512 w0 = _mm512_set1_ps(w[s]), w1 = _mm512_set1_ps(w[s + 1]);
      a0 = _mm512_fmadd_ps(w0, load16(v), a0);
      a1 = _mm512_fmadd_ps(w0, load16(v + 16), a1);
      a2 = _mm512_fmadd_ps(w1, load16(v + stride), a2);
      a3 = _mm512_fmadd_ps(w1, load16(v + stride + 16), a3);
    }
    if (s < n) {
      const KvT* v = vb + static_cast<int64_t>(s) * stride + d0;
      a0 = _mm512_fmadd_ps(_mm512_set1_ps(w[s]), load16(v), a0);
      a1 = _mm512_fmadd_ps(_mm512_set1_ps(w[s]), load16(v + 16), a1);
    }
    _mm512_storeu_ps(o + d0, _mm512_add_ps(a0, a2));
    _mm512_storeu_ps(o + d0 + 16, _mm512_add_ps(a1, a3));
  }
  for (; d0 + kLanes <= head_dim; d0 += kLanes) {
    __m512 a0 = _mm512_loadu_ps(o + d0), a1 = _mm512_setzero_ps();
    int s = 0;
    for (; s + 2 <= n; s += 2) {
      const KvT* v = vb + static_cast<int64_t>(s) * stride + d0;
      a0 = _mm512_fmadd_ps(_mm512_set1_ps(w[s]), load16(v), a0);
      a1 = _mm512_fmadd_ps(_mm512_set1_ps(w[s + 1]), load16(v + stride), a1);
    }
    if (s < n) a0 = _mm512_fmadd_ps(_mm512_set1_ps(w[s]), load16(vb + static_cast<int64_t>(s) * stride + d0), a0);
    _mm512_storeu_ps(o + d0, _mm512_add_ps(a0, a1));
  }
#elif KVS_ATTN_AVX2
  // 32 output dimensions at a time: four accumulators per position, then 8 at a time.
  for (; d0 + 32 <= head_dim; d0 += 32) {
    __m256 a0 = _mm256_loadu_ps(o + d0), a1 = _mm256_loadu_ps(o + d0 + 8), a2 = _mm256_loadu_ps(o + d0 + 16),
           a3 = _mm256_loadu_ps(o + d0 + 24);
    for (int s = 0; s < n; ++s) {
      const KvT* v = vb + static_cast<int64_t>(s) * stride + d0;
      const __m256 ws = _mm256_set1_ps(w[s]);
      a0 = _mm256_fmadd_ps(ws, load8(v), a0);
      a1 = _mm256_fmadd_ps(ws, load8(v + 8), a1);
      a2 = _mm256_fmadd_ps(ws, load8(v + 16), a2);
      a3 = _mm256_fmadd_ps(ws, load8(v + 24), a3);
    }
    _mm256_storeu_ps(o + d0, a0);
    _mm256_storeu_ps(o + d0 + 8, a1);
    _mm256_storeu_ps(o + d0 + 16, a2);
    _mm256_storeu_ps(o + d0 + 24, a3);
  }
  for (; d0 + 8 <= head_dim; d0 += 8) {
    __m256 a = _mm256_loadu_ps(o + d0);
    for (int s = 0; s < n; ++s) a = _mm256_fmadd_ps(_mm256_set1_ps(w[s]), load8(vb + static_cast<int64_t>(s) * stride + d0), a);
    _mm256_storeu_ps(o + d0, a);
  }
#endif
  // 16 output dimensions at a time, accumulated in a register across the block.
  for (; d0 + kLanes <= head_dim; d0 += kLanes) {
    float acc[kLanes];
    for (int k = 0; k < kLanes; ++k) acc[k] = o[d0 + k];
    for (int s = 0; s < n; ++s) {
      const float ws = w[s];
      float vr[kLanes];
      load_lanes(vb + static_cast<int64_t>(s) * stride + d0, vr);
#pragma omp simd
      for (int k = 0; k < kLanes; ++k) acc[k] += ws * vr[k];
    }
    for (int k = 0; k < kLanes; ++k) o[d0 + k] = acc[k];
  }
  for (int s = 0; s < n; ++s)
    for (int d = d0; d < head_dim; ++d) o[d] += w[s] * static_cast<float>(vb[static_cast<int64_t>(s) * stride + d]);
}

// o[d] += Σ_s w[s] · K[d, s] for d < v_dim over the first n positions of one block: the values
// of a latent cache, which are the first v_dim entries of each (transposed) K row.
// w: [n]; kb: [head_dim, block_size]; o: [v_dim].
template <class KvT>
inline void block_weighted_sum_t(const float* w, const KvT* kb, int n, int v_dim, int block_size, float* o) {
  for (int d = 0; d < v_dim; ++d) {
    const KvT* k = kb + static_cast<int64_t>(d) * block_size;
    int s = 0;
    float sum = 0.0f;
#if KVSERVE_HAS_AVX512
    __m512 acc = _mm512_setzero_ps();
    for (; s + kLanes <= n; s += kLanes) acc = _mm512_fmadd_ps(_mm512_loadu_ps(w + s), load16(k + s), acc);
    sum = _mm512_reduce_add_ps(acc);
#else
    float acc[kLanes] = {};
    for (; s + kLanes <= n; s += kLanes) {
      float kv[kLanes];
      load_lanes(k + s, kv);
#pragma omp simd
      for (int i = 0; i < kLanes; ++i) acc[i] += w[s + i] * kv[i];
    }
    for (int i = 0; i < kLanes; ++i) sum += acc[i];
#endif
    for (; s < n; ++s) sum += w[s] * static_cast<float>(k[s]);
    o[d] += sum;
  }
}

// The most query vectors one call of the multi-query kernels below takes (their accumulators
// fill the register file at 8).
constexpr int kMaxQueries = 8;

// sc[m][0..n) = scale · (q[m] · K[:, s]) for M query vectors (the rows of a prompt tile and their
// GQA group) against one block's K slice: each K value is loaded and converted once for all M.
// qs: M pointers to [head_dim]; kb: [head_dim, block_size]; scs: M pointers to [n].
template <int M, class KvT>
inline void block_scores_multi(const float* const* qs, const KvT* kb, int n, int head_dim, int block_size,
                               float scale, float* const* scs) {
#if KVSERVE_HAS_AVX512
  // Two accumulators per query over even and odd dimensions: 2M independent FMA chains.
  for (int s0 = 0; s0 < n; s0 += kLanes) {
    const bool full = s0 + kLanes <= n;
    const __mmask16 mask = full ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - s0)) - 1);
    __m512 a[M][2];
    for (int m = 0; m < M; ++m) a[m][0] = a[m][1] = _mm512_setzero_ps();
    int d = 0;
    for (; d + 2 <= head_dim; d += 2) {
      const KvT* k = kb + static_cast<int64_t>(d) * block_size + s0;
      const __m512 k0 = full ? load16(k) : load16_masked(k, mask);
      const __m512 k1 = full ? load16(k + block_size) : load16_masked(k + block_size, mask);
      for (int m = 0; m < M; ++m) {
        a[m][0] = _mm512_fmadd_ps(_mm512_set1_ps(qs[m][d]), k0, a[m][0]);
        a[m][1] = _mm512_fmadd_ps(_mm512_set1_ps(qs[m][d + 1]), k1, a[m][1]);
      }
    }
    if (d < head_dim) {
      const KvT* k = kb + static_cast<int64_t>(d) * block_size + s0;
      const __m512 k0 = full ? load16(k) : load16_masked(k, mask);
      for (int m = 0; m < M; ++m) a[m][0] = _mm512_fmadd_ps(_mm512_set1_ps(qs[m][d]), k0, a[m][0]);
    }
    const __m512 vs = _mm512_set1_ps(scale);
    for (int m = 0; m < M; ++m)
      _mm512_mask_storeu_ps(scs[m] + s0, mask, _mm512_mul_ps(_mm512_add_ps(a[m][0], a[m][1]), vs));
  }
#elif KVS_ATTN_AVX2
  // 8 positions at a time, queries four at a time (their accumulators and the K loads fill the
  // 16 registers), each over even and odd dimensions.
  const __m256 vs = _mm256_set1_ps(scale);
  int s0 = 0;
  for (; s0 + 8 <= n; s0 += 8)
    for (int m0 = 0; m0 < M; m0 += 4) {
      const int mq = std::min(4, M - m0);
      __m256 a[4][2];
      for (int m = 0; m < 4; ++m) a[m][0] = a[m][1] = _mm256_setzero_ps();
      int d = 0;
      for (; d + 2 <= head_dim; d += 2) {
        const KvT* k = kb + static_cast<int64_t>(d) * block_size + s0;
        const __m256 k0 = load8(k), k1 = load8(k + block_size);
        for (int m = 0; m < 4; ++m) {
          if (m >= mq) break;
          a[m][0] = _mm256_fmadd_ps(_mm256_set1_ps(qs[m0 + m][d]), k0, a[m][0]);
          a[m][1] = _mm256_fmadd_ps(_mm256_set1_ps(qs[m0 + m][d + 1]), k1, a[m][1]);
        }
      }
      if (d < head_dim) {
        const __m256 k0 = load8(kb + static_cast<int64_t>(d) * block_size + s0);
        for (int m = 0; m < mq; ++m) a[m][0] = _mm256_fmadd_ps(_mm256_set1_ps(qs[m0 + m][d]), k0, a[m][0]);
      }
      for (int m = 0; m < mq; ++m) _mm256_storeu_ps(scs[m0 + m] + s0, _mm256_mul_ps(_mm256_add_ps(a[m][0], a[m][1]), vs));
    }
  // The last < 8 positions lane by lane as the vectors form them: a row's scores do not depend
  // on how many positions its tile reads.
  for (; s0 < n; ++s0)
    for (int m = 0; m < M; ++m) scs[m][s0] = score_lane(qs[m], kb, s0, head_dim, block_size, scale);
#else
  for (int m = 0; m < M; ++m) block_scores(qs[m], kb, n, head_dim, block_size, scale, scs[m]);
#endif
}

// o[m] += Σ_s w[m][s] · V[s, :] over the first n positions of one block for M weight rows: each V
// value is loaded and converted once for all M. kScaled: each position's V row is first multiplied
// by vscale[s] (a q8_0 run's scales, once for all M), else vscale is unused. ws: M pointers to
// [n]; vb: [block_size, stride] (head_dim of each row summed); os: M pointers to [head_dim];
// vscale: [n].
template <int M, bool kScaled = false, class KvT>
inline void block_weighted_sum_multi(const float* const* ws, const KvT* vb, int n, int head_dim, int stride,
                                     float* const* os, const float* vscale = nullptr) {
  // V[s, d] as the kernels below weigh it.
  [[maybe_unused]] auto value = [&](int s, int d) {
    const float v = static_cast<float>(vb[static_cast<int64_t>(s) * stride + d]);
    return kScaled ? v * vscale[s] : v;
  };
#if KVSERVE_HAS_AVX512
  int d0 = 0;
  auto scaled = [&](__m512 v, int s) { return kScaled ? _mm512_mul_ps(v, _mm512_set1_ps(vscale[s])) : v; };
  // 32 output dimensions at a time: 2M accumulators, two V loads per position.
  for (; d0 + 2 * kLanes <= head_dim; d0 += 2 * kLanes) {
    __m512 a[M][2];
    for (int m = 0; m < M; ++m) a[m][0] = _mm512_loadu_ps(os[m] + d0), a[m][1] = _mm512_loadu_ps(os[m] + d0 + kLanes);
    for (int s = 0; s < n; ++s) {
      const KvT* v = vb + static_cast<int64_t>(s) * stride + d0;
      const __m512 v0 = scaled(load16(v), s), v1 = scaled(load16(v + kLanes), s);
      for (int m = 0; m < M; ++m) {
        const __m512 w = _mm512_set1_ps(ws[m][s]);
        a[m][0] = _mm512_fmadd_ps(w, v0, a[m][0]);
        a[m][1] = _mm512_fmadd_ps(w, v1, a[m][1]);
      }
    }
    for (int m = 0; m < M; ++m) _mm512_storeu_ps(os[m] + d0, a[m][0]), _mm512_storeu_ps(os[m] + d0 + kLanes, a[m][1]);
  }
  for (; d0 + kLanes <= head_dim; d0 += kLanes) {
    __m512 a[M];
    for (int m = 0; m < M; ++m) a[m] = _mm512_loadu_ps(os[m] + d0);
    for (int s = 0; s < n; ++s) {
      const __m512 v0 = scaled(load16(vb + static_cast<int64_t>(s) * stride + d0), s);
      for (int m = 0; m < M; ++m) a[m] = _mm512_fmadd_ps(_mm512_set1_ps(ws[m][s]), v0, a[m]);
    }
    for (int m = 0; m < M; ++m) _mm512_storeu_ps(os[m] + d0, a[m]);
  }
  for (int m = 0; m < M; ++m)
    for (int s = 0; s < n; ++s)
      for (int d = d0; d < head_dim; ++d) os[m][d] += ws[m][s] * value(s, d);
#elif KVS_ATTN_AVX2
  // 8 output dimensions at a time: M accumulators, one V load per position.
  int d0 = 0;
  for (; d0 + 8 <= head_dim; d0 += 8) {
    __m256 a[M];
    for (int m = 0; m < M; ++m) a[m] = _mm256_loadu_ps(os[m] + d0);
    for (int s = 0; s < n; ++s) {
      __m256 v = load8(vb + static_cast<int64_t>(s) * stride + d0);
      if constexpr (kScaled) v = _mm256_mul_ps(v, _mm256_set1_ps(vscale[s]));
      for (int m = 0; m < M; ++m) a[m] = _mm256_fmadd_ps(_mm256_set1_ps(ws[m][s]), v, a[m]);
    }
    for (int m = 0; m < M; ++m) _mm256_storeu_ps(os[m] + d0, a[m]);
  }
  for (int m = 0; m < M; ++m)
    for (int s = 0; s < n; ++s)
      for (int d = d0; d < head_dim; ++d) os[m][d] += ws[m][s] * value(s, d);
#else
  if constexpr (kScaled) {
    for (int m = 0; m < M; ++m)
      for (int s = 0; s < n; ++s)
        for (int d = 0; d < head_dim; ++d) os[m][d] += ws[m][s] * value(s, d);
  } else {
    for (int m = 0; m < M; ++m) block_weighted_sum(ws[m], vb, n, head_dim, stride, os[m]);
  }
#endif
}

// f.template operator()<M>() for M = min(count, kMaxQueries): a run-time count of queries as the
// kernels' compile-time one.
template <class F>
inline void with_query_count(int count, F&& f) {
  switch (std::min(count, kMaxQueries)) {
    case 1: f.template operator()<1>(); break;
    case 2: f.template operator()<2>(); break;
    case 3: f.template operator()<3>(); break;
    case 4: f.template operator()<4>(); break;
    case 5: f.template operator()<5>(); break;
    case 6: f.template operator()<6>(); break;
    case 7: f.template operator()<7>(); break;
    default: f.template operator()<8>(); break;
  }
}

// The multi-query kernels for any count of queries (one call per kMaxQueries of them); a single
// query takes the one-query kernels, whose four accumulators per query keep the FMA units busy.
template <class KvT>
inline void block_scores_queries(const float* const* qs, int count, const KvT* kb, int n, int head_dim,
                                 int block_size, float scale, float* const* scs) {
  for (; count > 0; count -= kMaxQueries, qs += kMaxQueries, scs += kMaxQueries)
    with_query_count(count, [&]<int M>() {
      if constexpr (M == 1)
        block_scores(qs[0], kb, n, head_dim, block_size, scale, scs[0]);
      else
        block_scores_multi<M>(qs, kb, n, head_dim, block_size, scale, scs);
    });
}
template <class KvT>
inline void block_weighted_sum_queries(const float* const* ws, int count, const KvT* vb, int n, int head_dim,
                                       int stride, float* const* os) {
  for (; count > 0; count -= kMaxQueries, ws += kMaxQueries, os += kMaxQueries)
    with_query_count(count, [&]<int M>() {
      if constexpr (M == 1)
        block_weighted_sum(ws[0], vb, n, head_dim, stride, os[0]);
      else
        block_weighted_sum_multi<M>(ws, vb, n, head_dim, stride, os);
    });
}

// sc[0..n) <- exp(sc[0..n) - m), m the largest of them and sink; returns m and the sum of the
// exponentials, exp(sink - m) included (sink -inf: none). n >= 1.
struct ExpSum {
  float max = 0.0f, sum = 0.0f;
};
inline ExpSum exp_shifted(float* sc, int n, float sink = -INFINITY) {
  float mx = sc[0];
  float sum = 0.0f;
  int p = 0;
#if KVSERVE_HAS_AVX512
  __m512 vmx = _mm512_set1_ps(sc[0]);
  for (; p + kLanes <= n; p += kLanes) vmx = _mm512_max_ps(vmx, _mm512_loadu_ps(sc + p));
  mx = _mm512_reduce_max_ps(vmx);
  for (int i = p; i < n; ++i) mx = std::max(mx, sc[i]);
  mx = std::max(mx, sink);
  __m512 vsum = _mm512_setzero_ps();
  const __m512 vmax = _mm512_set1_ps(mx);
  for (p = 0; p + kLanes <= n; p += kLanes) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(sc + p), vmax));
    _mm512_storeu_ps(sc + p, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  sum = _mm512_reduce_add_ps(vsum);
#elif KVS_ATTN_AVX2
  __m256 vmx = _mm256_set1_ps(sc[0]);
  for (; p + 8 <= n; p += 8) vmx = _mm256_max_ps(vmx, _mm256_loadu_ps(sc + p));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmx);
  mx = *std::max_element(lanes, lanes + 8);
  for (int i = p; i < n; ++i) mx = std::max(mx, sc[i]);
  mx = std::max(mx, sink);
  __m256 vsum = _mm256_setzero_ps();
  const __m256 vmax = _mm256_set1_ps(mx);
  for (p = 0; p + 8 <= n; p += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(sc + p), vmax));
    _mm256_storeu_ps(sc + p, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  _mm256_store_ps(lanes, vsum);
  for (float v : lanes) sum += v;
#else
  mx = std::max(*std::max_element(sc, sc + n), sink);
#endif
  for (; p < n; ++p) {
    sc[p] = std::exp(sc[p] - mx);
    sum += sc[p];
  }
  if (sink > -INFINITY) sum += std::exp(sink - mx);
  return {mx, sum};
}

// sc[0..n) <- softmax(sc[0..n)), the denominator also holding exp(sink) (-inf: no sink).
inline void softmax_inplace(float* sc, int n, float sink = -INFINITY) {
  const float inv = 1.0f / exp_shifted(sc, n, sink).sum;
  for (int i = 0; i < n; ++i) sc[i] *= inv;
}

}  // namespace
