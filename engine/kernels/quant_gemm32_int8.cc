// The integer GEMM of the 32-value block types (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL) for 5 or
// more activation rows: activations rounded per block of 32 (round_activations), weights a panel
// of 16 rows at a time with their levels transposed (kernels/quant_panel_avx512.h). Per block,
// eight vpdpbusd sum 32 products for 16 outputs of a row, the levels' offset times the block's
// activation sum comes off in integers, one multiply-add by the two block scales moves it to
// float, and for Q4_1/Q5_1 one more adds the block minimum times the activations' sum.
#include "kernels/quant_dot_int8.h"

// GCC 12 warns inside its own AVX-512 header (_mm512_undefined_ps is self-initialised).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <vector>

#include "gguf/tensor_types.h"
#include "kernels/small_batch_matmul.h"

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

KVSERVE_KERNEL_TARGET_BEGIN
#include "kernels/quant_decode.h"

#if KVSERVE_HAS_AVX512
_Pragma("GCC push_options") _Pragma("GCC target(\"avx512vnni\")")
#include "kernels/quant_levels_avx512.h"
#include "kernels/quant_panel_avx512.h"

namespace kvserve::KVSERVE_KERNEL_NS {
namespace {

using namespace panel;

// One activation row rounded per block of 32.
struct Row32 {
  const int8_t* q;      // [n_in]
  const float* d;       // [n_in / 32] block scales
  const int32_t* off;   // [n_in / 32] the weight type's level offset x the block's level sum
  const float* dsum;    // [n_in / 32] block scale x the block's level sum (the minimums' factor)
};

int64_t row_stride(int64_t n_in) { return (n_in + n_in / 32 * 12 + 63) / 64 * 64; }

Row32 round_row(const float* x, int64_t n_in, int32_t offset, uint8_t* scratch) {
  auto* q = reinterpret_cast<int8_t*>(scratch);
  auto* d = reinterpret_cast<float*>(scratch + n_in);
  auto* off = reinterpret_cast<int32_t*>(d + n_in / 32);
  float* dsum = reinterpret_cast<float*>(off + n_in / 32);
  for (int64_t b = 0; b < n_in / 32; ++b) {
    d[b] = levels::round_block32(x + 32 * b, q + 32 * b);
    const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1),
                                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * b)));
    const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
    const __m128i s2 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
    const int32_t sum = _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, _MM_SHUFFLE(2, 3, 0, 1))));
    off[b] = offset * sum;
    dsum[b] = d[b] * static_cast<float>(sum);
  }
  return {q, d, off, dsum};
}

// Each type: its block, the unsigned levels of two blocks (64 values, natural order), their
// offset, and whether the block has a minimum (value = d·q + m) after its scale.
template <typename B, int32_t kOffset, bool kHasMin>
struct Type32 {
  using Block = B;
  static constexpr int32_t offset = kOffset;
  static constexpr bool has_min = kHasMin;
};
struct TypeQ8_0 : Type32<quant::BlockQ8_0, 128, false> {
  static __m512i levels(const Block* b) { return levels::q8_0_pair(b); }
};
struct TypeQ4_0 : Type32<quant::BlockQ4_0, 8, false> {
  static __m512i levels(const Block* b) { return levels::q4_0_pair(b); }
};
struct TypeQ5_0 : Type32<quant::BlockQ5_0, 16, false> {
  static __m512i levels(const Block* b) { return levels::q5_0_pair(b); }
};
struct TypeQ4_1 : Type32<quant::BlockQ4_1, 0, true> {
  static __m512i levels(const Block* b) { return levels::q4_1_pair(b); }
};
struct TypeQ5_1 : Type32<quant::BlockQ5_1, 0, true> {
  static __m512i levels(const Block* b) { return levels::q5_1_pair(b); }
};
struct TypeIQ4_NL : Type32<quant::BlockIQ4_NL, 128, false> {
  static __m512i levels(const Block* b) { return levels::iq4_nl_pair(b); }
};

struct Panel32 {
  std::vector<IntVec> w;       // [n_in / 4]: lane i = 4 levels of row i
  std::vector<FloatVec> d, m;  // [n_in / 32]: lane i = row i's block scale (and minimum)
};

template <class T>
void unpack_panel(const uint8_t* w, int64_t row_bytes, int rows, int64_t n_in, const uint8_t* next, int next_rows,
                  Panel32& p) {
  using Block = typename T::Block;
  const __mmask16 live = static_cast<__mmask16>((1u << rows) - 1);
  const __m512i at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                        _mm512_set1_epi32(static_cast<int>(row_bytes)));
  for (int64_t c = 0; c < n_in / 64; ++c) {  // two blocks at a time
    const int64_t byte0 = 2 * c * static_cast<int64_t>(sizeof(Block));
    if (next)
      for (int i = 0; i < next_rows; ++i)
        for (int64_t off = 0; off < 2 * static_cast<int64_t>(sizeof(Block)); off += 64)
          _mm_prefetch(reinterpret_cast<const char*>(next + i * row_bytes + byte0 + off), _MM_HINT_T1);
    __m512i r[kPanel];
    for (int i = 0; i < kPanel; ++i)
      r[i] = i < rows ? T::levels(reinterpret_cast<const Block*>(w + i * row_bytes + byte0)) : _mm512_setzero_si512();
    transpose16(r);
    for (int i = 0; i < kPanel; ++i) p.w[16 * c + i].v = r[i];
    for (int h = 0; h < 2; ++h) {
      // The block's F16 scale is its first two bytes: the low half of the word there; a
      // minimum, the high half.
      const __m512i words = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, at,
                                                        w + byte0 + h * static_cast<int64_t>(sizeof(Block)), 1);
      p.d[2 * c + h].v = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words));
      if constexpr (T::has_min) p.m[2 * c + h].v = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(words, 16)));
    }
  }
}

template <class T, int R>
void tile(const Panel32& p, const Row32* x, int64_t n_in, __m512* out) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_in / 32; ++b) {
    __m512i dot[R];
    for (int r = 0; r < R; ++r) dot[r] = _mm512_setzero_si512();
    for (int t = 0; t < 8; ++t) {
      const __m512i wv = p.w[8 * b + t].v;
      for (int r = 0; r < R; ++r) dot[r] = _mm512_dpbusd_epi32(dot[r], wv, broadcast4(x[r].q + 32 * b + 4 * t));
    }
    for (int r = 0; r < R; ++r) {
      const __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(dot[r], _mm512_set1_epi32(x[r].off[b])));
      acc[r] = _mm512_fmadd_ps(v, _mm512_mul_ps(p.d[b].v, _mm512_set1_ps(x[r].d[b])), acc[r]);
      if constexpr (T::has_min) acc[r] = _mm512_fmadd_ps(p.m[b].v, _mm512_set1_ps(x[r].dsum[b]), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = acc[r];
}

template <class T>
void gemm(const QuantMatmulArgs& a) {
  Row32 x[kSmallBatchRows];
  const int64_t stride = row_stride(a.n_in);
#pragma omp parallel for schedule(static) if (a.m > 4)
  for (int64_t r = 0; r < a.m; ++r)
    x[r] = round_row(a.x + r * a.n_in, a.n_in, T::offset, static_cast<uint8_t*>(a.scratch) + r * stride);
  const int64_t panels = (a.n_out + kPanel - 1) / kPanel;
#pragma omp parallel
  {
    thread_local Panel32 p;
    p.w.resize(static_cast<size_t>(a.n_in / 4));
    p.d.resize(static_cast<size_t>(a.n_in / 32));
    if (T::has_min) p.m.resize(static_cast<size_t>(a.n_in / 32));
#pragma omp for schedule(static)
    for (int64_t pi = 0; pi < panels; ++pi) {
      const int64_t j0 = pi * kPanel;
      const int rows = static_cast<int>(std::min<int64_t>(kPanel, a.n_out - j0));
      const int next_rows = static_cast<int>(std::clamp<int64_t>(a.n_out - j0 - kPanel, 0, kPanel));
      unpack_panel<T>(a.w + j0 * a.row_bytes, a.row_bytes, rows, a.n_in,
                      next_rows > 0 ? a.w + (j0 + kPanel) * a.row_bytes : nullptr, next_rows, p);
      const __mmask16 live = static_cast<__mmask16>((1u << rows) - 1);
      for (int64_t r0 = 0; r0 < a.m; r0 += kTile) {
        __m512 out[kTile];
        switch (std::min<int64_t>(kTile, a.m - r0)) {
          case 1: tile<T, 1>(p, x + r0, a.n_in, out); break;
          case 2: tile<T, 2>(p, x + r0, a.n_in, out); break;
          case 3: tile<T, 3>(p, x + r0, a.n_in, out); break;
          default: tile<T, 4>(p, x + r0, a.n_in, out); break;
        }
        for (int64_t r = 0; r < std::min<int64_t>(kTile, a.m - r0); ++r) {
          float* y = a.y + (r0 + r) * a.ldy + j0;
          const __m512 v = a.accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(live, y), out[r]) : out[r];
          _mm512_mask_storeu_ps(y, live, v);
        }
      }
    }
  }
}

}  // namespace

bool gemm32_int8_applies(uint32_t type) {
  const auto t = static_cast<TensorType>(type);
  return t == TensorType::kQ8_0 || t == TensorType::kQ4_0 || t == TensorType::kQ5_0 || t == TensorType::kQ4_1 ||
         t == TensorType::kQ5_1 || t == TensorType::kIQ4_NL;
}

void quant_gemm32_int8(const QuantMatmulArgs& a) {
  switch (static_cast<TensorType>(a.type)) {
    case TensorType::kQ8_0: gemm<TypeQ8_0>(a); break;
    case TensorType::kQ4_0: gemm<TypeQ4_0>(a); break;
    case TensorType::kQ5_0: gemm<TypeQ5_0>(a); break;
    case TensorType::kQ4_1: gemm<TypeQ4_1>(a); break;
    case TensorType::kQ5_1: gemm<TypeQ5_1>(a); break;
    default: gemm<TypeIQ4_NL>(a); break;
  }
}

}  // namespace kvserve::KVSERVE_KERNEL_NS

_Pragma("GCC pop_options")
#else   // levels without AVX-512: the float path always
namespace kvserve::KVSERVE_KERNEL_NS {
bool gemm32_int8_applies(uint32_t) { return false; }
void quant_gemm32_int8(const QuantMatmulArgs&) {}
}  // namespace kvserve::KVSERVE_KERNEL_NS
#endif
KVSERVE_KERNEL_TARGET_END
