// The integer path of the K types (Q2_K..Q6_K): activations rounded to 8 bits per super-block
// of 256 (one float scale, as llama.cpp's Q8_K); for one to four rows (here, fused:
// the weights read straight from memory), each 64 levels times 64 activations by vpmaddubsw and
// times the integer sub-block scales by vpdpwssd, so that a super-block's products stay in
// integers and meet a float once; more rows take the panel GEMM of kernels/int8/k_gemm.cc.
#include "kernels/int8/int8_matmul.h"

#include "kernels/intrinsics.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "codecs/tensor_types.h"
#include "kernels/small_batch_matmul.h"

KVSERVE_KERNEL_TARGET_BEGIN
#include "codecs/quant_decode.h"

KVSERVE_VNNI_TARGET_BEGIN
#include "kernels/int8/block32_avx512.h"
#include "kernels/int8/k_rows_avx512.h"
#include "kernels/int8/fused_rows.h"

namespace kvserve::KVSERVE_KERNEL_NS {

#if KVSERVE_HAS_AVX512
namespace {

using levels::load32;
using levels::load64;
using krows::Kind;
using krows::KRow;
using krows::kK4Order;

// Word indices that spread 8 (or 16) int16 scales over a 64-level chunk's 32 int16 lanes.
inline __m512i spread2(int a, int b) {  // lanes 0-15 scale a, 16-31 scale b
  return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(a)), _mm256_set1_epi16(static_cast<int16_t>(b)), 1);
}
inline __m512i spread4(int c) {  // Q6_K chunk c: 8 lanes each of scales 4c..4c+3
  const __m256i lo = _mm256_setr_m128i(_mm_set1_epi16(static_cast<int16_t>(4 * c)), _mm_set1_epi16(static_cast<int16_t>(4 * c + 1)));
  const __m256i hi = _mm256_setr_m128i(_mm_set1_epi16(static_cast<int16_t>(4 * c + 2)), _mm_set1_epi16(static_cast<int16_t>(4 * c + 3)));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// One super-block of one weight row, unpacked: per chunk of 64 its levels (unsigned, in the
// activations' order) and its int16 scale per lane pair; the factors of the float parts.
struct alignas(64) KBlock {
  __m512i q[4];
  __m512i s[4];
  __m128i mins;  // Q4_K/Q5_K: the 8 sub-block minimums (int16), natural order
  __m256i sc16;  // Q6_K, Q3_K: the 16 scales (int16), for the levels' offset; Q2_K: its 16 minimums
  float d, dmin;
};

template <Kind kKind>
inline void unpack(const uint8_t* block, KBlock& out) {
  for (int c = 0; c < 4; ++c) out.q[c] = krows::levels_of<kKind>(block, c);
  if constexpr (kKind == Kind::kQ3K) {
    const auto* b = reinterpret_cast<const quant::BlockQ3_K*>(block);
    // The 16 six-bit scales as quant::q3_k_scales unpacks them, four bytes at a time.
    uint32_t a[3];
    std::memcpy(a, b->scales, 12);
    constexpr uint32_t m4 = 0x0f0f0f0f, m2 = 0x03030303;
    const __m128i words = _mm_setr_epi32(static_cast<int>((a[0] & m4) | ((a[2] & m2) << 4)),
                                         static_cast<int>((a[1] & m4) | (((a[2] >> 2) & m2) << 4)),
                                         static_cast<int>(((a[0] >> 4) & m4) | (((a[2] >> 4) & m2) << 4)),
                                         static_cast<int>(((a[1] >> 4) & m4) | (((a[2] >> 6) & m2) << 4)));
    out.sc16 = _mm256_cvtepi8_epi16(_mm_sub_epi8(words, _mm_set1_epi8(32)));
    const __m512i sc = _mm512_castsi256_si512(out.sc16);
    for (int c = 0; c < 4; ++c) out.s[c] = _mm512_permutexvar_epi16(spread4(c), sc);
    out.d = quant::half_to_float(b->d);
  } else if constexpr (kKind == Kind::kQ2K) {
    const auto* b = reinterpret_cast<const quant::BlockQ2_K*>(block);
    const __m256i bytes = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales)));
    const __m512i sc = _mm512_castsi256_si512(_mm256_and_si256(bytes, _mm256_set1_epi16(0x0F)));
    out.sc16 = _mm256_srli_epi16(bytes, 4);
    for (int c = 0; c < 4; ++c) out.s[c] = _mm512_permutexvar_epi16(spread4(c), sc);
    out.d = quant::half_to_float(b->d);
    out.dmin = quant::half_to_float(b->dmin);
  } else if constexpr (kKind == Kind::kQ6K) {
    const auto* b = reinterpret_cast<const quant::BlockQ6_K*>(block);
    out.sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales)));
    const __m512i sc = _mm512_castsi256_si512(out.sc16);
    for (int c = 0; c < 4; ++c) out.s[c] = _mm512_permutexvar_epi16(spread4(c), sc);
    out.d = quant::half_to_float(b->d);
  } else {
    using Block = std::conditional_t<kKind == Kind::kQ5K, quant::BlockQ5_K, quant::BlockQ4_K>;
    const auto* b = reinterpret_cast<const Block*>(block);
    uint32_t sw[4];
    levels::k4_scale_words(b->scales, sw);
    const __m512i sc = _mm512_castsi128_si512(
        _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, static_cast<int>(sw[1]), static_cast<int>(sw[0]))));
    out.mins = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, static_cast<int>(sw[3]), static_cast<int>(sw[2])));
    for (int c = 0; c < 4; ++c) out.s[c] = _mm512_permutexvar_epi16(spread2(kK4Order[2 * c], kK4Order[2 * c + 1]), sc);
    out.d = quant::half_to_float(b->d);
    out.dmin = quant::half_to_float(b->dmin);
  }
}

// acc (16 lanes) += d_w·d_x · (Σ levels·activations·scales [- 32 (Q6_K) or 4 (Q3_K) ·
// Σ scales·sums16]); acc_min (4 lanes) += dmin·d_x · Σ mins·sums32 (Q4_K/Q5_K) or sums16 (Q2_K).
template <Kind kKind>
inline void block_dot(const KBlock& w, const KRow& x, int64_t k, __m512& acc, __m128& acc_min) {
  const int8_t* xq = x.q + 256 * k;
  __m512i dot = _mm512_setzero_si512();
  for (int c = 0; c < 4; ++c) dot = _mm512_dpwssd_epi32(dot, _mm512_maddubs_epi16(w.q[c], load64(xq + 64 * c)), w.s[c]);
  const float dx = x.d[k];
  if constexpr (krows::offset_bits(kKind) > 0) {
    const __m256i off = _mm256_madd_epi16(w.sc16, load32(x.sums16 + 16 * k));  // Σ scale·sum16, 8 lanes
    dot = _mm512_sub_epi32(dot, _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_slli_epi32(off, krows::offset_bits(kKind)), 0));
  } else if constexpr (kKind == Kind::kQ2K) {
    const __m256i m8 = _mm256_madd_epi16(w.sc16, load32(x.sums16 + 16 * k));  // Σ min·sum16, 8 lanes
    const __m128i m = _mm_add_epi32(_mm256_castsi256_si128(m8), _mm256_extracti128_si256(m8, 1));
    acc_min = _mm_fmadd_ps(_mm_cvtepi32_ps(m), _mm_set1_ps(w.dmin * dx), acc_min);
  } else {
    const __m128i m = _mm_madd_epi16(w.mins, _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.sums32 + 8 * k)));
    acc_min = _mm_fmadd_ps(_mm_cvtepi32_ps(m), _mm_set1_ps(w.dmin * dx), acc_min);
  }
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_set1_ps(w.d * dx), acc);
}

inline float reduce4(__m128 v) {
  const __m128 s = _mm_add_ps(v, _mm_movehl_ps(v, v));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

constexpr int kRows = int8::kFusedGroupRows;

// The fused path: up to kFusedPair activation rows times a group of `rows` weight rows over the
// whole row (int8/fused_rows.h walks the matrix), each super-block unpacked once for the rows;
// the group ahead requested a super-block's share at a time.
template <Kind kKind, int M>
void fused_group(const uint8_t* w, int64_t row_bytes, int rows, const KRow* x, int64_t n_in, const int8::Ahead& ahead, float* out) {
  __m512 acc[M][kRows];
  __m128 acc_min[M][kRows];
  for (int m = 0; m < M; ++m)
    for (int g = 0; g < kRows; ++g) acc[m][g] = _mm512_setzero_ps(), acc_min[m][g] = _mm_setzero_ps();
  for (int64_t k = 0; k < n_in / 256; ++k) {
    ahead.at(k);
    for (int g = 0; g < rows; ++g) {
      KBlock b;
      unpack<kKind>(w + g * row_bytes + k * krows::kBlockBytes<kKind>, b);
      for (int m = 0; m < M; ++m) block_dot<kKind>(b, x[m], k, acc[m][g], acc_min[m][g]);
    }
  }
  for (int m = 0; m < M; ++m)
    for (int g = 0; g < rows; ++g) out[m * kRows + g] = _mm512_reduce_add_ps(acc[m][g]) - reduce4(acc_min[m][g]);
}

template <Kind kKind>
void fused(const QuantMatmulArgs& a, const KRow* x) {
  int8::fused_rows(a, a.n_in / 256, [&](const uint8_t* w, int rows, int64_t r0, int mr, const int8::Ahead& ahead, float* out) {
    if (mr == 2)
      fused_group<kKind, 2>(w, a.row_bytes, rows, x + r0, a.n_in, ahead, out);
    else
      fused_group<kKind, 1>(w, a.row_bytes, rows, x + r0, a.n_in, ahead, out);
  });
}

}  // namespace

template <krows::Kind K>
void k_fused(const QuantMatmulArgs& a) {
  KRow x[kSmallBatchRows];
  krows::round_rows_k(a, K, x);
  fused<K>(a, x);
}
#define KVSERVE_INSTANTIATE(K) template void k_fused<krows::Kind::K>(const QuantMatmulArgs&);
KVSERVE_INT8_K_KINDS(KVSERVE_INSTANTIATE)
#undef KVSERVE_INSTANTIATE

#endif  // levels without AVX-512: int8/k_fused_vec.cc

}  // namespace kvserve::KVSERVE_KERNEL_NS

KVSERVE_VNNI_TARGET_END
KVSERVE_KERNEL_TARGET_END
