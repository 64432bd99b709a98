#include "kernels/quant_matmul.h"

#include "kernels/intrinsics.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "codecs/tensor_types.h"
#include "kernels/matmul_plan.h"
#include "kernels/int8/int8_matmul.h"
#include "kernels/small_batch_matmul.h"

KVSERVE_KERNEL_TARGET_BEGIN
#include "codecs/quant_decode.h"  // this level's copies of the decoders

namespace kvserve::KVSERVE_KERNEL_NS {
namespace {

constexpr int kG = 4;          // output rows decoded together
constexpr int64_t kKc = 256;   // values of each row per chunk: kG rows of it, and the chunk of every x row, stay in L1
constexpr int64_t kPrefetchGroups = 2;
#if KVSERVE_HAS_AVX512
constexpr int kW = 16;         // floats per vector
constexpr int kMaxR = 6;       // x rows per pass: kG·6 accumulators of 32 registers
#elif KVSERVE_KERNEL_LEVEL_ID == 1
constexpr int kW = 8;
constexpr int kMaxR = 2;       // kG·2 accumulators of 16 registers
#else
constexpr int kW = 8;
constexpr int kMaxR = 4;
#endif

// part[r][g][kW] += the products of R rows of x with the kG decoded rows over [0, kc): vector
// partial sums, reduced once per call of quant_matmul. wbuf: [kG, kKc]; x: [R, ldx]
// (already offset to the chunk); part: [R, kG, kW].
template <int R>
void chunk_fma(const float* wbuf, int64_t kc, const float* x, int64_t ldx, float* part) {
  const int64_t kv = kc / kW * kW;
#if KVSERVE_HAS_AVX512 || KVSERVE_KERNEL_LEVEL_ID == 1
#if KVSERVE_HAS_AVX512
  using V = __m512;
#define KVS_LOAD(p) _mm512_loadu_ps(p)
#define KVS_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define KVS_STORE(p, v) _mm512_storeu_ps(p, v)
#else
  using V = __m256;
#define KVS_LOAD(p) _mm256_loadu_ps(p)
#define KVS_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define KVS_STORE(p, v) _mm256_storeu_ps(p, v)
#endif
  V acc[R][kG];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int g = 0; g < kG; ++g) acc[r][g] = KVS_LOAD(part + (r * kG + g) * kW);
  for (int64_t k = 0; k < kv; k += kW) {
    V w[kG];
#pragma GCC unroll 8
    for (int g = 0; g < kG; ++g) w[g] = KVS_LOAD(wbuf + g * kKc + k);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const V xv = KVS_LOAD(x + r * ldx + k);
#pragma GCC unroll 8
      for (int g = 0; g < kG; ++g) acc[r][g] = KVS_FMA(xv, w[g], acc[r][g]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int g = 0; g < kG; ++g) KVS_STORE(part + (r * kG + g) * kW, acc[r][g]);
#undef KVS_LOAD
#undef KVS_FMA
#undef KVS_STORE
#else
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int g = 0; g < kG; ++g) {
      float* p = part + (r * kG + g) * kW;
      for (int64_t k = 0; k < kv; k += kW)
        for (int l = 0; l < kW; ++l) p[l] += x[r * ldx + k + l] * wbuf[g * kKc + k + l];
    }
#endif
  // Rows of F32/F16/BF16 weights need not be a multiple of the vector width.
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int g = 0; g < kG; ++g)
      for (int64_t k = kv; k < kc; ++k) part[(r * kG + g) * kW] += x[r * ldx + k] * wbuf[g * kKc + k];
}

// The sum of a vector's lanes: p: [kW].
inline float lane_sum(const float* p) {
#if KVSERVE_HAS_AVX512
  return _mm512_reduce_add_ps(_mm512_loadu_ps(p));
#elif KVSERVE_KERNEL_LEVEL_ID == 1
  const __m256 v = _mm256_loadu_ps(p);
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
#else
  float s = 0.0f;
  for (int l = 0; l < kW; ++l) s += p[l];
  return s;
#endif
}

using ChunkFn = void (*)(const float*, int64_t, const float*, int64_t, float*);
template <int... Rs>
constexpr auto make_chunk_fns(std::integer_sequence<int, Rs...>) {
  return std::array<ChunkFn, sizeof...(Rs)>{chunk_fma<Rs + 1>...};
}
constexpr auto kChunkFns = make_chunk_fns(std::make_integer_sequence<int, kMaxR>{});

#if KVSERVE_HAS_AVX512
// F16 weights times M <= 4 activation rows straight from memory: each 16 halves widened by
// vcvtph2ps and multiplied in float, four weight rows at a time (four streams, each requested
// kF16Ahead bytes ahead into L2), nothing staged: the decode-in-L1 path's store and reload of
// every chunk cost more than the memory here. w rows: [n_out, n_in] halves; as quant_matmul.
constexpr int64_t kF16Ahead = 4096;
template <int M>
void f16_rows(const QuantMatmulArgs& a) {
  const int64_t groups = (a.n_out + kG - 1) / kG, kv = a.n_in / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (a.n_in - kv)) - 1);
#pragma omp parallel for schedule(dynamic, 8)  // as the packed panels' (kernels/int8/k_gemm.cc)
  for (int64_t grp = 0; grp < groups; ++grp) {
    const int64_t j0 = grp * kG;
    const int rows = static_cast<int>(std::min<int64_t>(kG, a.n_out - j0));
    const uint8_t* w[kG];
    for (int g = 0; g < kG; ++g) w[g] = a.w + (j0 + std::min(g, rows - 1)) * a.row_bytes;
    __m512 acc[M][kG];
    for (int m = 0; m < M; ++m)
      for (int g = 0; g < kG; ++g) acc[m][g] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kv; k += 16) {
      for (int g = 0; g < kG; ++g) {
        if (k % 32 == 0) _mm_prefetch(reinterpret_cast<const char*>(w[g] + 2 * k + kF16Ahead), _MM_HINT_T1);
        const __m512 wv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[g] + 2 * k)));
        for (int m = 0; m < M; ++m) acc[m][g] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(a.x + m * a.n_in + k), acc[m][g]);
      }
    }
    if (tail)
      for (int g = 0; g < kG; ++g) {
        const __m512 wv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail, w[g] + 2 * kv));
        for (int m = 0; m < M; ++m)
          acc[m][g] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(tail, a.x + m * a.n_in + kv), acc[m][g]);
      }
    for (int m = 0; m < M; ++m)
      for (int g = 0; g < rows; ++g) {
        const float s = _mm512_reduce_add_ps(acc[m][g]);
        float& out = a.y[m * a.ldy + j0 + g];
        out = a.accumulate ? out + s : s;
      }
  }
}
#endif

}  // namespace

void quant_matmul(const QuantMatmulArgs& a) {
  if (a.m == 0 || a.n_out == 0) return;
  const MatmulTypeRow& row = *matmul_type_row(a.type);
  const MatmulPath path =
      plan_matmul(row, matmul_cpu(), {.n_in = a.n_in, .m = a.m, .panels = a.panels, .int8_activations = a.int8_activations});
  if (is_int8_path(path) && a.m > kSmallBatchRows) {  // the integer kernels' scratch holds that many rows
    for (int64_t r0 = 0; r0 < a.m; r0 += kSmallBatchRows) {
      QuantMatmulArgs part = a;
      part.x = a.x + r0 * a.n_in, part.y = a.y + r0 * a.ldy, part.m = std::min(kSmallBatchRows, a.m - r0);
      if (path == MatmulPath::kKLanes)
        row.int8_kernels.lanes(part);  // the prompt's kernel for every part (planned again, a part is a decode height)
      else
        quant_matmul(part);
    }
    return;
  }
  switch (path) {
    case MatmulPath::kF16Packed: f16_panels_matmul(a); return;
    case MatmulPath::kQ32Fused: case MatmulPath::kKFused: row.int8_kernels.fused(a); return;
    case MatmulPath::kQ32Gemm: case MatmulPath::kKGemm: row.int8_kernels.gemm(a); return;
    case MatmulPath::kQ32Packed: case MatmulPath::kKPacked: row.int8_kernels.packed(a); return;
    case MatmulPath::kKLanes: row.int8_kernels.lanes(a); return;
#if KVSERVE_HAS_AVX512
    case MatmulPath::kF16Rows:
      switch (a.m) {
        case 1: f16_rows<1>(a); break;
        case 2: f16_rows<2>(a); break;
        case 3: f16_rows<3>(a); break;
        default: f16_rows<4>(a); break;
      }
      return;
#endif
    default: break;  // kDecodeL1; kDecodedGemm when called directly (the weights decode panels for it)
  }
  const auto decode = row.decode;
  const TensorTypeTraits& traits = tensor_type(static_cast<TensorType>(a.type));
  const int64_t groups = (a.n_out + kG - 1) / kG;
#pragma omp parallel for schedule(static)
  for (int64_t grp = 0; grp < groups; ++grp) {
    alignas(64) float wbuf[kG * kKc];
    alignas(64) float part[kSmallBatchRows * kG * kW];
    const int64_t j0 = grp * kG;
    const int rows_here = static_cast<int>(std::min<int64_t>(kG, a.n_out - j0));
    if (rows_here < kG) std::fill(wbuf, wbuf + kG * kKc, 0.0f);
    for (int64_t b0 = 0; b0 < a.m; b0 += kSmallBatchRows) {
      const int64_t rows = std::min(kSmallBatchRows, a.m - b0);
      std::fill(part, part + rows * kG * kW, 0.0f);
      for (int64_t k0 = 0; k0 < a.n_in; k0 += kKc) {
        const int64_t kc = std::min(kKc, a.n_in - k0);
        const int64_t byte0 = k0 / traits.block_size * traits.bytes_per_block;
        // The same chunk of the group kPrefetchGroups ahead, requested now: without it each thread's
        // memory stream stalls while it decodes and multiplies.
        if (grp + kPrefetchGroups < groups) {
          const int64_t chunk_bytes = kc / traits.block_size * traits.bytes_per_block;
          const int64_t ahead = std::min<int64_t>(kG, a.n_out - (grp + kPrefetchGroups) * kG);
          for (int64_t g = 0; g < ahead; ++g) {
            const uint8_t* row = a.w + ((grp + kPrefetchGroups) * kG + g) * a.row_bytes + byte0;
            for (int64_t off = 0; off < chunk_bytes; off += 64)
              __builtin_prefetch(row + off, 0, 2);
          }
        }
        for (int g = 0; g < rows_here; ++g) decode(a.w + (j0 + g) * a.row_bytes + byte0, wbuf + g * kKc, kc);
        for (int64_t r0 = 0; r0 < rows; r0 += kMaxR) {
          const int r = static_cast<int>(std::min<int64_t>(kMaxR, rows - r0));
          kChunkFns[r - 1](wbuf, kc, a.x + (b0 + r0) * a.n_in + k0, a.n_in, part + r0 * kG * kW);
        }
      }
      for (int64_t r = 0; r < rows; ++r)
        for (int g = 0; g < rows_here; ++g) {
          const float s = lane_sum(part + (r * kG + g) * kW);
          float& out = a.y[(b0 + r) * a.ldy + j0 + g];
          out = a.accumulate ? out + s : s;
        }
    }
  }
}

void pack_panels(uint32_t type, uint8_t* w, int64_t rows, int64_t row_bytes, int64_t n_in) {
  const MatmulTypeRow& row = *matmul_type_row(type);
  if (row.family == MatmulFamily::kFloat)
    pack_f16_panels(w, rows, n_in);
  else
    row.int8_kernels.pack(w, rows, row_bytes, n_in);
}

void dequantize_panels(uint32_t type, const uint8_t* w, int64_t rows, int64_t n_in, float* out) {
  // Only float panels are ever decoded: block panels are multiplied by the integer kernels alone.
  if (matmul_type_row(type)->family == MatmulFamily::kFloat) dequantize_f16_panels(w, rows, n_in, out);
}

void dequantize_rows(uint32_t type, const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t n_in, float* out) {
  const auto decode = matmul_type_row(type)->decode;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) decode(w + r * row_bytes, out + r * n_in, n_in);
}

}  // namespace kvserve::KVSERVE_KERNEL_NS
KVSERVE_KERNEL_TARGET_END
