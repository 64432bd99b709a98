#include "kernels/attention.h"

#include "kernels/intrinsics.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>


KVSERVE_KERNEL_TARGET_BEGIN
namespace kvserve::KVSERVE_KERNEL_NS {
#include "kernels/vec_math.h"

namespace {

// K/V slices requested ahead of the one in use (paged_attention).
constexpr int kSlicesAhead = 4;
constexpr int kLanes = 16;  // one AVX-512 register of floats (two AVX2 registers)

// 16 cache values as floats. For half precision, the hardware converter where there is one
// (GCC does not vectorise _Float16 -> float conversions in the loops by itself).
inline void load_lanes(const float* p, float* out) { std::memcpy(out, p, kLanes * sizeof(float)); }
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

#if KVSERVE_HAS_AVX512  // BW, VL: masked 16-bit loads
// The lanes of m, zeros elsewhere; lanes outside m are not read.
inline __m512 load16_masked(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load16_masked(const _Float16* p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}
#endif

// Asks for the cache lines of one block's slice ([bytes] from p) ahead of its use: a sequence's
// blocks lie anywhere in the cache, so the hardware prefetcher cannot guess the next one.
inline void prefetch_slice(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t i = 0; i < bytes; i += 64) _mm_prefetch(c + i, _MM_HINT_T0);
}

#endif

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
  for (int s = s0; s < n; ++s) {
    float dot = 0.0f;
    for (int d = 0; d < head_dim; ++d) dot += qg[d] * static_cast<float>(kb[static_cast<int64_t>(d) * block_size + s]);
    sc[s] = dot * scale;
  }
}

// o += Σ_s w[s] · V[s, :] over the first n positions of one block.
// w: [n]; vb: [block_size, head_dim]; o: [head_dim].
template <class KvT>
inline void block_weighted_sum(const float* w, const KvT* vb, int n, int head_dim, float* o) {
  int d0 = 0;
#if KVSERVE_HAS_AVX512
  // 64 output dimensions at a time: four independent accumulators per position.
  for (; d0 + 4 * kLanes <= head_dim; d0 += 4 * kLanes) {
    __m512 a0 = _mm512_loadu_ps(o + d0), a1 = _mm512_loadu_ps(o + d0 + 16), a2 = _mm512_loadu_ps(o + d0 + 32),
           a3 = _mm512_loadu_ps(o + d0 + 48);
    for (int s = 0; s < n; ++s) {
      const KvT* v = vb + static_cast<int64_t>(s) * head_dim + d0;
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
#endif
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

// sc[0..n) <- softmax(sc[0..n)), the denominator also holding exp(sink) (-inf: no sink).
inline void softmax_inplace(float* sc, int n, float sink = -INFINITY) {
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
#else
  mx = std::max(*std::max_element(sc, sc + n), sink);
#endif
  for (; p < n; ++p) {
    sc[p] = std::exp(sc[p] - mx);
    sum += sc[p];
  }
  if (sink > -INFINITY) sum += std::exp(sink - mx);
  const float inv = 1.0f / sum;
  for (int i = 0; i < n; ++i) sc[i] *= inv;
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
      const float* vr = v_cache ? v + r * row_stride + h * head_dim : nullptr;
      for (int d = 0; d < head_dim; ++d) k_cache[base + int64_t{d} * block_size + off] = static_cast<KvT>(kr[d]);
      if (v_cache)
        for (int d = 0; d < head_dim; ++d) v_cache[base + off * head_dim + d] = static_cast<KvT>(vr[d]);
    }
  }
}

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

#if KVSERVE_HAS_AVX512
// 16 int8 values as floats. q: [16].
inline __m512 int8_lanes(const int8_t* q) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q))));
}
#endif

// The q8_0 K slice of one (block, KV head) as floats in the float cache's layout, its first n
// positions. kq: [head_dim, block_size]; ks: the block's scales [block_size, groups]; kf: as kq.
// Each run of dimensions under one scale is converted 16 values at a time on AVX-512 (GCC makes
// 8-lane code of the plain loop there, 2.4x slower in prefill), by the plain loop elsewhere.
inline void dequantize_k_slice(const int8_t* kq, const uint16_t* ks, int kvh, int n, int head_dim, int block_size,
                               int groups, float* kf) {
  float scale[1024];  // one group's scales at the n positions (cache.block_size <= 1024, config.cc)
  for (int d0 = 0; d0 < head_dim;) {
    const int c = kvh * head_dim + d0, g = c / kKvQ8Group, d1 = std::min(head_dim, d0 + (g + 1) * kKvQ8Group - c);
    for (int s = 0; s < n; ++s) scale[s] = half_bits_to_float(ks[s * groups + g]);
    for (int d = d0; d < d1; ++d) {
      const int8_t* q = kq + int64_t{d} * block_size;
      float* f = kf + int64_t{d} * block_size;
      int s = 0;
#if KVSERVE_HAS_AVX512
      for (; s + kLanes <= n; s += kLanes)
        _mm512_storeu_ps(f + s, _mm512_mul_ps(int8_lanes(q + s), _mm512_loadu_ps(scale + s)));
#endif
      for (; s < n; ++s) f[s] = static_cast<float>(q[s]) * scale[s];
    }
    d0 = d1;
  }
}

// The same for V. vq, vf: [block_size, head_dim]; vs: the block's scales [block_size, groups].
inline void dequantize_v_slice(const int8_t* vq, const uint16_t* vs, int kvh, int n, int head_dim, int groups,
                               float* vf) {
  for (int s = 0; s < n; ++s)
    for (int d0 = 0; d0 < head_dim;) {
      const int c = kvh * head_dim + d0, g = c / kKvQ8Group, d1 = std::min(head_dim, d0 + (g + 1) * kKvQ8Group - c);
      const float scale = half_bits_to_float(vs[s * groups + g]);
      const int8_t* q = vq + int64_t{s} * head_dim;
      float* f = vf + int64_t{s} * head_dim;
      int d = d0;
#if KVSERVE_HAS_AVX512
      for (const __m512 sv = _mm512_set1_ps(scale); d + kLanes <= d1; d += kLanes)
        _mm512_storeu_ps(f + d, _mm512_mul_ps(int8_lanes(q + d), sv));
#endif
      for (; d < d1; ++d) f[d] = static_cast<float>(q[d]) * scale;
      d0 = d1;
    }
}
}  // namespace

void write_kv_q8(const float* k, const float* v, int64_t rows, int64_t row_stride, const int64_t* slots,
                 const int32_t* positions, const float* k_anchor, const float* v_anchor, int n_kv, int head_dim,
                 int block_size, int8_t* k_cache, int8_t* v_cache, uint16_t* k_scales, uint16_t* v_scales) {
  const int groups = n_kv * head_dim / kKvQ8Group;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t block = slots[r] / block_size, off = slots[r] % block_size;
    const float* v_off = positions[r] == 0 ? v_anchor : nullptr;
    for (int g = 0; g < groups; ++g) {
      int8_t kq[kKvQ8Group], vq[kKvQ8Group];
      float kx[kKvQ8Group], vx[kKvQ8Group];
      for (int i = 0; i < kKvQ8Group; ++i) {
        const int c = g * kKvQ8Group + i;
        kx[i] = k[r * row_stride + c] - (k_anchor ? k_anchor[c] : 0.0f);
        vx[i] = v_cache ? v[r * row_stride + c] - (v_off ? v_off[c] : 0.0f) : 0.0f;
      }
      k_scales[(block * block_size + off) * groups + g] = quantize32(kx, kq);
      if (v_cache) v_scales[(block * block_size + off) * groups + g] = quantize32(vx, vq);
      // Value i of the group is dimension d of KV head h in the row.
      for (int i = 0; i < kKvQ8Group; ++i) {
        const int h = (g * kKvQ8Group + i) / head_dim, d = (g * kKvQ8Group + i) % head_dim;
        const int64_t base = (block * n_kv + h) * block_size * head_dim;
        k_cache[base + int64_t{d} * block_size + off] = kq[i];
        if (v_cache) v_cache[base + off * head_dim + d] = vq[i];
      }
    }
  }
}

namespace {
// q8_0: one (sequence, KV head)'s K and V slices as floats, block by block, kept across a
// thread's work items within one call. The rows of a prompt chunk read the same blocks, each one
// position further: each block is then decoded once per thread, not once per row. Up to
// kKeptFloats floats each of K and V; blocks past that are decoded per item into one spare entry.
class Q8Slices {
 public:
  static constexpr int kKeptFloats = 1 << 18;
  // A new call: nothing kept. slice: floats of one block's K (or V) slice.
  void start(int slice) {
    slice_ = slice;
    cap_ = std::max(1, kKeptFloats / slice);
    k_.resize(static_cast<size_t>(cap_ + 1) * slice);
    v_.resize(k_.size());
    k_n_.assign(cap_ + 1, 0);
    v_n_.assign(cap_ + 1, 0);
    table_ = nullptr;
    used_ = 0;
  }
  // The work item's sequence (its block-table row) and KV head; another one forgets the blocks.
  void select(const int32_t* table, int kvh) {
    if (table == table_ && kvh == kvh_) return;
    table_ = table, kvh_ = kvh;
    std::fill_n(k_n_.begin(), used_, 0);  // entries past used_ were never set since start()
    std::fill_n(v_n_.begin(), used_, 0);
    used_ = 0;
  }
  // Block i's first n positions as floats; fill(dst) decodes them where they are not kept yet.
  template <class Fill>
  const float* k(int i, int n, Fill fill) { return get(k_, k_n_, i, n, fill); }
  template <class Fill>
  const float* v(int i, int n, Fill fill) { return get(v_, v_n_, i, n, fill); }

 private:
  template <class Fill>
  const float* get(std::vector<float>& buf, std::vector<int>& got, int i, int n, Fill fill) {
    const int e = std::min(i, cap_);
    float* p = buf.data() + static_cast<size_t>(e) * slice_;
    if (e == cap_ || got[e] < n) {
      fill(p);
      if (e < cap_) got[e] = n, used_ = std::max(used_, e + 1);
    }
    return p;
  }
  const int32_t* table_ = nullptr;
  int kvh_ = -1, slice_ = 0, cap_ = 0, used_ = 0;
  std::vector<float> k_, v_;
  std::vector<int> k_n_, v_n_;  // positions of each kept block decoded so far
};
}  // namespace

template <class KvT>
void paged_attention(const PagedAttentionArgs<KvT>& a) {
  const float* q = a.q;
  const int64_t rows = a.rows, q_stride = a.q_stride;
  const KvT *k_cache = a.k_cache, *v_cache = a.v_cache;
  const int32_t *block_tables = a.block_tables, *token_seq = a.token_seq, *ctx_lens = a.ctx_lens;
  const int32_t max_blocks = a.max_blocks;
  const int n_head = a.n_head, n_kv = a.n_kv, head_dim = a.head_dim, block_size = a.block_size;
  const float scale = a.scale;
  float* out = a.out;
  float* const* capture = a.capture;
  const int64_t* capture_head_stride = a.capture_head_stride;
  const int group = n_head / n_kv;
  // A latent cache (v_dim > 0): values are K's first v_dim entries, read from K's slices.
  const bool v_in_k = a.v_dim > 0;
  const int vd = v_in_k ? a.v_dim : head_dim;
  const int64_t out_stride = static_cast<int64_t>(n_head) * vd;
  [[maybe_unused]] const int64_t slice_bytes = static_cast<int64_t>(block_size) * head_dim * sizeof(KvT);
  // One work item per (token, run of KV heads): the group of query heads sharing a KV head reads
  // each K and V row once. A block holds its KV heads' slices side by side, so an item that takes
  // several heads block by block reads one contiguous run per block, which the hardware
  // prefetchers follow (scattered 2 KB slices left decode attention latency-bound). Runs are as
  // long as still gives each thread two items. The latent cache keeps one head an item, and so
  // does q8_0 where a sequence has several rows (a prompt chunk), whose decoded slices are kept
  // per head for its rows (Q8Slices); with one row a sequence each slice is decoded once anyway.
  const int threads = omp_get_max_threads();
  bool rows_share_sequences = false;  // a sequence's rows are consecutive
  for (int64_t t = 1; t < rows && !rows_share_sequences; ++t) rows_share_sequences = token_seq[t] == token_seq[t - 1];
  const bool one_head = v_in_k || (std::is_same_v<KvT, int8_t> && rows_share_sequences);
  [[maybe_unused]] const bool keep_q8 = one_head;  // q8_0: slices kept in Q8Slices, else decoded per use
  const int64_t want_items = 2 * static_cast<int64_t>(threads);
  const int run = one_head || rows >= want_items
                      ? (one_head ? 1 : n_kv)
                      : std::max<int>(1, static_cast<int>(n_kv * rows / want_items));
  const int runs = (n_kv + run - 1) / run;
#pragma omp parallel
  {
    // [heads of the run · group, ctx]: one per thread, kept across calls (the pool's threads live
    // on), so a step allocates nothing once the longest context has been seen.
    thread_local std::vector<float> scores;
    thread_local Q8Slices q8;
    thread_local std::vector<float> q8_slice;  // one decoded slice, where nothing is kept
    [[maybe_unused]] const int groups = n_kv * head_dim / kKvQ8Group;
    if constexpr (std::is_same_v<KvT, int8_t>) {
      q8.start(block_size * head_dim);
      q8_slice.resize(static_cast<size_t>(block_size) * head_dim);
    }
    // KV heads outer: a thread's consecutive items are mostly one sequence's rows for one run.
#pragma omp for schedule(dynamic, 1) collapse(2)
    for (int r = 0; r < runs; ++r) {
      for (int64_t t = 0; t < rows; ++t) {
        const int h0 = r * run, h1 = std::min(n_kv, h0 + run), nh = h1 - h0;
        const int ctx = ctx_lens[t];
        // Positions start..ctx-1 are seen; scores are kept from the start of start's block (base),
        // those before start set to zero after the softmax.
        const int start = a.window > 0 ? std::max(0, ctx - a.window) : 0;
        const int base = start / block_size * block_size, span = ctx - base, skip = start - base;
        const int32_t* table = block_tables + static_cast<int64_t>(token_seq[t]) * max_blocks;
        if (scores.size() < static_cast<size_t>(nh) * group * span) scores.resize(static_cast<size_t>(nh) * group * span);
        // Query head g of KV head kvh, its scores and its output.
        auto q_of = [&](int kvh, int g) { return q + t * q_stride + (static_cast<int64_t>(kvh) * group + g) * head_dim; };
        auto sc_of = [&](int kvh, int g) { return scores.data() + (static_cast<size_t>(kvh - h0) * group + g) * span; };
        auto out_of = [&](int kvh, int g) { return out + t * out_stride + (static_cast<int64_t>(kvh) * group + g) * vd; };
        if constexpr (std::is_same_v<KvT, int8_t>)
          if (keep_q8) q8.select(table, h0);
        // q8_0: block i's slice decoded by fill, kept or not.
        [[maybe_unused]] auto q8_get = [&](bool is_k, int i, int n, auto fill) -> const float* {
          if (!keep_q8) {
            fill(q8_slice.data());
            return q8_slice.data();
          }
          return is_k ? q8.k(i, n, fill) : q8.v(i, n, fill);
        };

        // A block's run of slices is requested kAhead blocks ahead: one block's work is shorter
        // than a trip to memory, and the blocks lie anywhere. K's are followed by V's first,
        // read after the softmax.
        [[maybe_unused]] const int first = base / block_size, blocks = (ctx - 1) / block_size + 1 - first;
        [[maybe_unused]] const int ahead = std::max(1, kSlicesAhead / nh);
        [[maybe_unused]] auto request = [&]([[maybe_unused]] int i) {  // run i: K of block first + i, then V
#if KVSERVE_HAS_AVX512
          if (i < blocks)
            prefetch_slice(k_cache + (table[first + i] * n_kv + h0) * block_size * head_dim, nh * slice_bytes);
          else if (i < 2 * blocks && !v_in_k)
            prefetch_slice(v_cache + (table[first + i - blocks] * n_kv + h0) * block_size * head_dim, nh * slice_bytes);
#endif
        };
        for (int i = 1; i < ahead; ++i) request(i);
        for (int p0 = base; p0 < ctx; p0 += block_size) {
          const int64_t block = table[p0 / block_size];
          const int n = std::min(block_size, ctx - p0);
          request((p0 - base) / block_size + ahead);
          for (int kvh = h0; kvh < h1; ++kvh) {
            const KvT* kb = k_cache + (block * n_kv + kvh) * block_size * head_dim;  // [head_dim, block_size]
            if constexpr (std::is_same_v<KvT, int8_t>) {
              const float* kf = q8_get(true, p0 / block_size, n, [&](float* dst) {
                dequantize_k_slice(kb, a.k_scales + block * block_size * groups, kvh, n, head_dim, block_size, groups,
                                   dst);
              });
              for (int g = 0; g < group; ++g)
                block_scores(q_of(kvh, g), kf, n, head_dim, block_size, scale, sc_of(kvh, g) + (p0 - base));
            } else {
              for (int g = 0; g < group; ++g)
                block_scores(q_of(kvh, g), kb, n, head_dim, block_size, scale, sc_of(kvh, g) + (p0 - base));
            }
          }
        }
        for (int kvh = h0; kvh < h1; ++kvh)
          for (int g = 0; g < group; ++g) {
            float* sc = sc_of(kvh, g);
            if constexpr (std::is_same_v<KvT, int8_t>) {
              if (a.k_anchor) {  // q·(K' + anchor) = q·K' + q·anchor, the same for every position
                const float* qg = q_of(kvh, g);
                const float* an = a.k_anchor + static_cast<int64_t>(kvh) * head_dim;
                float c = 0.0f;
                for (int d = 0; d < head_dim; ++d) c += qg[d] * an[d];
                c *= scale;
                for (int i = skip; i < span; ++i) sc[i] += c;
              }
            }
            if (a.soft_cap > 0.0f) {
              const float inv = 1.0f / a.soft_cap;
              for (int i = skip; i < span; ++i) sc[i] = a.soft_cap * std::tanh(sc[i] * inv);
            }
            softmax_inplace(sc + skip, ctx - start, a.sinks ? a.sinks[kvh * group + g] : -INFINITY);
            std::fill(sc, sc + skip, 0.0f);
            if (capture && capture[t]) {
              float* c = capture[t] + (static_cast<int64_t>(kvh) * group + g) * capture_head_stride[t];
              std::fill(c, c + base, 0.0f);
              std::copy(sc, sc + span, c + base);
            }
            float* o = out_of(kvh, g);
            std::fill(o, o + vd, 0.0f);
          }
        if (v_in_k) {  // one head an item (one_head)
          const int kvh = h0;
          for (int p0 = base; p0 < ctx; p0 += block_size) {
            const int64_t block = table[p0 / block_size];
            const KvT* kb = k_cache + (block * n_kv + kvh) * block_size * head_dim;  // [head_dim, block_size]
            const int n = std::min(block_size, ctx - p0);
            auto weigh = [&](const auto* slice) {
              for (int g = 0; g < group; ++g)
                block_weighted_sum_t(sc_of(kvh, g) + (p0 - base), slice, n, vd, block_size, out_of(kvh, g));
            };
            if constexpr (std::is_same_v<KvT, int8_t>)
              weigh(q8.k(p0 / block_size, n, [&](float* dst) {
                dequantize_k_slice(kb, a.k_scales + block * block_size * groups, kvh, n, head_dim, block_size, groups,
                                   dst);
              }));
            else
              weigh(kb);
          }
          if constexpr (std::is_same_v<KvT, int8_t>) {
            if (a.k_anchor)  // every row's values came from K - anchor: add Σw · anchor back
              for (int g = 0; g < group; ++g) {
                const float* sc = sc_of(kvh, g);
                float wsum = 0.0f;
                for (int i = skip; i < span; ++i) wsum += sc[i];
                const float* an = a.k_anchor + static_cast<int64_t>(kvh) * head_dim;
                float* o = out_of(kvh, g);
                for (int d = 0; d < vd; ++d) o[d] += wsum * an[d];
              }
          }
          continue;
        }
        for (int p0 = base; p0 < ctx; p0 += block_size) {
          const int64_t block = table[p0 / block_size];
          const int n = std::min(block_size, ctx - p0);
          request(blocks + (p0 - base) / block_size + ahead);
          for (int kvh = h0; kvh < h1; ++kvh) {
            const KvT* vb = v_cache + (block * n_kv + kvh) * block_size * head_dim;  // [block_size, head_dim]
            if constexpr (std::is_same_v<KvT, int8_t>) {
              const float* vf = q8_get(false, p0 / block_size, n, [&](float* dst) {
                dequantize_v_slice(vb, a.v_scales + block * block_size * groups, kvh, n, head_dim, groups, dst);
              });
              for (int g = 0; g < group; ++g) block_weighted_sum(sc_of(kvh, g) + (p0 - base), vf, n, head_dim, out_of(kvh, g));
              if (p0 == 0 && a.v_anchor)  // position 0's V is its row plus the anchor
                for (int g = 0; g < group; ++g) {
                  const float w = sc_of(kvh, g)[0];
                  const float* an = a.v_anchor + static_cast<int64_t>(kvh) * head_dim;
                  float* o = out_of(kvh, g);
                  for (int d = 0; d < head_dim; ++d) o[d] += w * an[d];
                }
            } else {
              for (int g = 0; g < group; ++g) block_weighted_sum(sc_of(kvh, g) + (p0 - base), vb, n, head_dim, out_of(kvh, g));
            }
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
template void paged_attention<float>(const PagedAttentionArgs<float>&);
template void paged_attention<_Float16>(const PagedAttentionArgs<_Float16>&);
template void paged_attention<int8_t>(const PagedAttentionArgs<int8_t>&);

}  // namespace kvserve::KVSERVE_KERNEL_NS
KVSERVE_KERNEL_TARGET_END
