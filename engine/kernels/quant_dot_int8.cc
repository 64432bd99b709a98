#include "kernels/quant_dot_int8.h"

// GCC 12 warns inside its own AVX-512 header (_mm512_undefined_ps is self-initialised).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cstring>

#include "gguf/tensor_types.h"
#include "kernels/small_batch_matmul.h"

// The casts from 128/256-bit vectors use GCC's self-initialised "undefined" vectors, which its
// own warnings then flag where they are inlined.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

KVSERVE_KERNEL_TARGET_BEGIN
#include "kernels/quant_decode.h"

#if KVSERVE_HAS_AVX512
_Pragma("GCC push_options") _Pragma("GCC target(\"avx512vnni\")")
#endif
#include "kernels/quant_levels_avx512.h"

namespace kvserve::KVSERVE_KERNEL_NS {

#if KVSERVE_HAS_AVX512
namespace {

constexpr int kG = 4;          // weight rows prepared together
constexpr int kR = 2;          // activation rows per pass: kG·kR accumulators
constexpr int kSlab = 8;       // 64-value chunks prepared at a time (kG of them fit L1 easily)
constexpr int64_t kPrefetchGroups = 2;

// 64 weight values ready for vpdpbusd: their levels as unsigned bytes, and per 32-bit lane (4
// values) the factor of the integer dot product and the factor of the activations' lane sum
// (the levels' offset or the block's minimum).
struct alignas(64) Prepared {
  __m512i q;
  __m512 dot_scale;
  __m512 sum_scale;
};

inline __m512 halves(float a, float b) { return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1); }

// Chunk c (values 64c..64c+63) of one row, per type.
void prep_q8_0_chunk(const uint8_t* row, int64_t c, Prepared& p) {
  const auto* b = reinterpret_cast<const quant::BlockQ8_0*>(row) + 2 * c;
  p.q = levels::q8_0_pair(b);
  p.dot_scale = halves(quant::half_to_float(b[0].d), quant::half_to_float(b[1].d));
  p.sum_scale = _mm512_mul_ps(p.dot_scale, _mm512_set1_ps(-128.0f));
}

void prep_q4_0_chunk(const uint8_t* row, int64_t c, Prepared& p) {
  const auto* b = reinterpret_cast<const quant::BlockQ4_0*>(row) + 2 * c;
  p.q = levels::q4_0_pair(b);
  p.dot_scale = halves(quant::half_to_float(b[0].d), quant::half_to_float(b[1].d));
  p.sum_scale = _mm512_mul_ps(p.dot_scale, _mm512_set1_ps(-8.0f));
}

void prep_iq4_nl_chunk(const uint8_t* row, int64_t c, Prepared& p) {
  const auto* b = reinterpret_cast<const quant::BlockIQ4_NL*>(row) + 2 * c;
  p.q = levels::iq4_nl_pair(b);
  p.dot_scale = halves(quant::half_to_float(b[0].d), quant::half_to_float(b[1].d));
  p.sum_scale = _mm512_mul_ps(p.dot_scale, _mm512_set1_ps(-128.0f));
}

// Chunks c0..c0+n-1 of one row into out[0..n).
using PrepFn = void (*)(const uint8_t* row, int64_t c0, int n, Prepared* out);
template <void (*Chunk)(const uint8_t*, int64_t, Prepared&)>
void prep_each(const uint8_t* row, int64_t c0, int n, Prepared* out) {
  for (int i = 0; i < n; ++i) Chunk(row, c0 + i, out[i]);
}

PrepFn prep_for(uint32_t type) {
  switch (static_cast<TensorType>(type)) {
    case TensorType::kQ8_0: return prep_each<prep_q8_0_chunk>;
    case TensorType::kQ4_0: return prep_each<prep_q4_0_chunk>;
    case TensorType::kIQ4_NL: return prep_each<prep_iq4_nl_chunk>;
    default: return nullptr;
  }
}

bool cpu_has_vnni() {
  static const bool has = __builtin_cpu_supports("avx512vnni");
  return has;
}

// The activations of every row, rounded: xq [m, n_in] int8, lane sums xs [m, n_in / 4] and lane
// scales xd [m, n_in / 4] (the scale of the block each lane's 4 values belong to).
void round_rows(const float* x, int64_t m, int64_t n_in, int8_t* xq, float* xs, float* xd) {
#pragma omp parallel for schedule(static) if (m > 1)
  for (int64_t r = 0; r < m; ++r)
    for (int64_t b = 0; b < n_in / 32; ++b) {
      int8_t* qb = xq + r * n_in + 32 * b;
      const float d = levels::round_block32(x + r * n_in + 32 * b, qb);
      const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb));
      const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), bytes);
      _mm256_storeu_ps(xs + (r * n_in + 32 * b) / 4, _mm256_cvtepi32_ps(sums));
      _mm256_storeu_ps(xd + (r * n_in + 32 * b) / 4, _mm256_set1_ps(d));
    }
}

// part[r][g] (16 lanes each) += the products of R activation rows with the kG prepared rows
// over `chunks` chunks. w: [kG, kSlab]; xq/xs/xd offset to the slab's first value.
template <int R>
void slab_dot(const Prepared* w, int chunks, const int8_t* xq, const float* xs, const float* xd, int64_t n_in,
              float* part) {
  __m512 acc[R][kG];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int g = 0; g < kG; ++g) acc[r][g] = _mm512_loadu_ps(part + (r * kG + g) * 16);
  for (int c = 0; c < chunks; ++c) {
    __m512i xv[R];
    __m512 sv[R], dv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      xv[r] = _mm512_loadu_si512(xq + r * n_in + 64 * c);
      sv[r] = _mm512_loadu_ps(xs + (r * n_in + 64 * c) / 4);
      dv[r] = _mm512_loadu_ps(xd + (r * n_in + 64 * c) / 4);
    }
#pragma GCC unroll 8
    for (int g = 0; g < kG; ++g) {
      const Prepared& p = w[g * kSlab + c];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), p.q, xv[r]);
        const __m512 t = _mm512_fmadd_ps(sv[r], p.sum_scale, _mm512_mul_ps(_mm512_cvtepi32_ps(dot), p.dot_scale));
        acc[r][g] = _mm512_fmadd_ps(t, dv[r], acc[r][g]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int g = 0; g < kG; ++g) _mm512_storeu_ps(part + (r * kG + g) * 16, acc[r][g]);
}

}  // namespace

bool int8_path_applies(uint32_t type, int64_t n_in) {
  return cpu_has_vnni() && (prep_for(type) || kquant_int8_applies(type)) && n_in % 64 == 0;
}

bool int8_gemm_applies(uint32_t type, int64_t n_in) { return int8_path_applies(type, n_in) && kquant_int8_applies(type); }

void quant_matmul_int8(const QuantMatmulArgs& a) {
  if (kquant_int8_applies(a.type)) {
    quant_matmul_kquant_int8(a);
    return;
  }
  if (a.m <= kMatvecMaxRows && int8_matvec_applies(a.type, a.n_in)) {
    quant_matvec_int8(a);
    return;
  }
  const PrepFn prep = prep_for(a.type);
  const TensorTypeTraits& traits = tensor_type(static_cast<TensorType>(a.type));
  auto* xq = static_cast<int8_t*>(a.scratch);
  auto* xs = reinterpret_cast<float*>(xq + (a.m * a.n_in + 63) / 64 * 64);
  float* xd = xs + a.m * a.n_in / 4;
  round_rows(a.x, a.m, a.n_in, xq, xs, xd);
  const int64_t chunks = a.n_in / 64, groups = (a.n_out + kG - 1) / kG;
#pragma omp parallel for schedule(static)
  for (int64_t grp = 0; grp < groups; ++grp) {
    Prepared w[kG * kSlab];
    alignas(64) float part[kSmallBatchRows * kG * 16];
    const int64_t j0 = grp * kG;
    const int rows_here = static_cast<int>(std::min<int64_t>(kG, a.n_out - j0));
    if (rows_here < kG) std::memset(static_cast<void*>(w), 0, sizeof(w));
    for (int64_t b0 = 0; b0 < a.m; b0 += kSmallBatchRows) {
      const int64_t rows = std::min(kSmallBatchRows, a.m - b0);
      std::fill(part, part + rows * kG * 16, 0.0f);
      for (int64_t c0 = 0; c0 < chunks; c0 += kSlab) {
        const int n = static_cast<int>(std::min<int64_t>(kSlab, chunks - c0));
        // The same slab of the group kPrefetchGroups ahead, requested now, so the memory stream
        // runs while this group is prepared and multiplied.
        if (grp + kPrefetchGroups < groups) {
          const int64_t ahead = std::min<int64_t>(kG, a.n_out - (grp + kPrefetchGroups) * kG);
          const int64_t begin = 64 * c0 / traits.block_size * traits.bytes_per_block;
          const int64_t end = 64 * (c0 + n) / traits.block_size * traits.bytes_per_block;
          for (int64_t g = 0; g < ahead; ++g) {
            const uint8_t* row = a.w + ((grp + kPrefetchGroups) * kG + g) * a.row_bytes;
            for (int64_t off = begin; off < end; off += 64) _mm_prefetch(reinterpret_cast<const char*>(row + off), _MM_HINT_T0);
          }
        }
        for (int g = 0; g < rows_here; ++g) prep(a.w + (j0 + g) * a.row_bytes, c0, n, w + g * kSlab);
        for (int64_t r0 = 0; r0 < rows; r0 += kR) {
          const int64_t off = (b0 + r0) * a.n_in + 64 * c0;
          if (rows - r0 >= 2)
            slab_dot<2>(w, n, xq + off, xs + off / 4, xd + off / 4, a.n_in, part + r0 * kG * 16);
          else
            slab_dot<1>(w, n, xq + off, xs + off / 4, xd + off / 4, a.n_in, part + r0 * kG * 16);
        }
      }
      for (int64_t r = 0; r < rows; ++r)
        for (int g = 0; g < rows_here; ++g) {
          const float s = _mm512_reduce_add_ps(_mm512_loadu_ps(part + (r * kG + g) * 16));
          float& out = a.y[(b0 + r) * a.ldy + j0 + g];
          out = a.accumulate ? out + s : s;
        }
    }
  }
}

#else   // levels without AVX-512: the float path always
bool int8_path_applies(uint32_t, int64_t) { return false; }
bool int8_gemm_applies(uint32_t, int64_t) { return false; }
void quant_matmul_int8(const QuantMatmulArgs&) {}
#endif

}  // namespace kvserve::KVSERVE_KERNEL_NS

#if KVSERVE_HAS_AVX512
_Pragma("GCC pop_options")
#endif
KVSERVE_KERNEL_TARGET_END
