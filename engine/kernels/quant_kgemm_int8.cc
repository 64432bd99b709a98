// The K types' integer GEMM for 5-64 activation rows (batched decode). Per panel of 16 weight
// rows, the levels are unpacked once and transposed so that each 32-bit lane holds 4 levels of
// one weight row, and the sub-block scales, minimums and super-block factors are gathered so
// that lane i belongs to row i. Each activation row then broadcasts 4 of its levels at a time:
// one vpdpbusd does 64 multiply-adds for 16 outputs, nothing is reduced across lanes, and the 16
// outputs of a row leave in one store. Sums per sub-block are scaled in integers (vpmulld) and
// meet a float once per super-block, as in the fused kernel (kernels/quant_kdot_int8.cc).
#include "kernels/quant_dot_int8.h"

#include "kernels/intrinsics.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "gguf/tensor_types.h"

KVSERVE_KERNEL_TARGET_BEGIN
#include "kernels/quant_decode.h"

#if KVSERVE_HAS_AVX512
KVSERVE_VNNI_TARGET_BEGIN
#include "kernels/quant_levels_avx512.h"
#include "kernels/quant_k_rows_avx512.h"
#include "kernels/quant_panel_avx512.h"

namespace kvserve::KVSERVE_KERNEL_NS::krows {
namespace {

using levels::load32;
using levels::load64;
using namespace panel;

template <Kind kKind>
constexpr int kSubBlocks = kKind == Kind::kQ6K ? 16 : 8;  // per super-block, each with a scale

// One panel unpacked (a thread's buffers, kept across calls).
struct Panel {
  std::vector<IntVec> w;         // [n_in / 4]: lane i = 4 levels of row i, in the activations' order
  std::vector<IntVec> scale;     // [super-blocks x kSubBlocks]: int32 scale of each row's sub-block
  std::vector<IntVec> pair;      // [super-blocks x kSubBlocks / 2]: int16 pairs, Q4_K/Q5_K of minimums, Q6_K of scales
  std::vector<FloatVec> d, dmin;  // [super-blocks]
};

inline __m512i byte_of(__m512i words, int b) { return _mm512_and_si512(_mm512_srli_epi32(words, 8 * b), _mm512_set1_epi32(0xFF)); }

// Rows [0, rows) of the panel at w (row_bytes apart; the rest zero) into p; the next panel's
// bytes (next, null for none) requested into L2 meanwhile.
template <Kind kKind>
void unpack_panel(const uint8_t* w, int64_t row_bytes, int rows, int64_t blocks, const uint8_t* next, int next_rows,
                  Panel& p) {
  constexpr int64_t kBytes = kBlockBytes<kKind>;
  constexpr int kSub = kSubBlocks<kKind>;
  const __mmask16 live = static_cast<__mmask16>((1u << rows) - 1);
  const __m512i at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                        _mm512_set1_epi32(static_cast<int>(row_bytes)));
  const __m512i zero = _mm512_setzero_si512();
  auto gather = [&](const uint8_t* base, int offset) {
    return _mm512_mask_i32gather_epi32(zero, live, _mm512_add_epi32(at, _mm512_set1_epi32(offset)), base, 1);
  };
  for (int64_t k = 0; k < blocks; ++k) {
    if (next)
      for (int i = 0; i < next_rows; ++i)
        for (int64_t off = 0; off < kBytes; off += 64)
          _mm_prefetch(reinterpret_cast<const char*>(next + i * row_bytes + k * kBytes + off), _MM_HINT_T1);
    const uint8_t* base = w + k * kBytes;
    for (int c = 0; c < 4; ++c) {
      __m512i r[kPanel];
      for (int i = 0; i < kPanel; ++i) r[i] = i < rows ? levels_of<kKind>(base + i * row_bytes, c) : zero;
      transpose16(r);
      for (int i = 0; i < kPanel; ++i) p.w[64 * k + 16 * c + i].v = r[i];
    }
    IntVec* sc = &p.scale[kSub * k];
    IntVec* pr = &p.pair[kSub / 2 * k];
    if constexpr (kKind == Kind::kQ6K) {
      for (int q = 0; q < 4; ++q) {
        const __m512i words = gather(base, static_cast<int>(offsetof(quant::BlockQ6_K, scales)) + 4 * q);
        for (int b = 0; b < 4; ++b) sc[4 * q + b].v = _mm512_srai_epi32(_mm512_slli_epi32(words, 24 - 8 * b), 24);
      }
      for (int j = 0; j < 8; ++j)
        pr[j].v = _mm512_or_si512(_mm512_and_si512(sc[2 * j].v, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(sc[2 * j + 1].v, 16));
      // d is the block's last two bytes: read the word ending there.
      const __m512i dw = gather(base, static_cast<int>(offsetof(quant::BlockQ6_K, d)) - 2);
      p.d[k].v = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dw, 16)));
    } else {
      // The 12 scale bytes as quant_levels' k4_scale_words unpacks them, one lane per row.
      const int so = static_cast<int>(kKind == Kind::kQ5K ? offsetof(quant::BlockQ5_K, scales) : offsetof(quant::BlockQ4_K, scales));
      const __m512i a0 = gather(base, so), a1 = gather(base, so + 4), a2 = gather(base, so + 8);
      const __m512i m6 = _mm512_set1_epi32(0x3f3f3f3f), m4 = _mm512_set1_epi32(0x0f0f0f0f), m2 = _mm512_set1_epi32(0x03030303);
      const __m512i s_lo = _mm512_and_si512(a0, m6);
      const __m512i s_hi = _mm512_or_si512(_mm512_and_si512(a2, m4), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a0, 6), m2), 4));
      const __m512i m_lo = _mm512_and_si512(a1, m6);
      const __m512i m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a2, 4), m4),
                                           _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a1, 6), m2), 4));
      for (int b = 0; b < 4; ++b) sc[b].v = byte_of(s_lo, b), sc[4 + b].v = byte_of(s_hi, b);
      for (int j = 0; j < 2; ++j) {
        pr[j].v = _mm512_or_si512(byte_of(m_lo, 2 * j), _mm512_slli_epi32(byte_of(m_lo, 2 * j + 1), 16));
        pr[2 + j].v = _mm512_or_si512(byte_of(m_hi, 2 * j), _mm512_slli_epi32(byte_of(m_hi, 2 * j + 1), 16));
      }
      const __m512i dd = gather(base, 0);  // d, dmin
      p.d[k].v = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
      p.dmin[k].v = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
    }
  }
}

// R activation rows times the panel over every super-block: out[r] lane i = output of row i.
template <Kind kKind, int R>
void tile(const Panel& p, const KRow* x, int64_t blocks, __m512* out) {
  constexpr int kSub = kSubBlocks<kKind>, kSteps = 64 / kSub;  // 4-level steps per sub-block
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t k = 0; k < blocks; ++k) {
    __m512i isum[R], side[R];
    for (int r = 0; r < R; ++r) isum[r] = side[r] = _mm512_setzero_si512();
    for (int s = 0; s < kSub; ++s) {
      __m512i dot[R];
      for (int r = 0; r < R; ++r) dot[r] = _mm512_setzero_si512();
      for (int t = 0; t < kSteps; ++t) {
        const int step = s * kSteps + t;
        const __m512i wv = p.w[64 * k + step].v;
        for (int r = 0; r < R; ++r) dot[r] = _mm512_dpbusd_epi32(dot[r], wv, broadcast4(x[r].q + 256 * k + 4 * step));
      }
      // Position s of the activations' order holds sub-block kK4Order[s] for Q4_K/Q5_K.
      const __m512i scale = p.scale[kSub * k + (kKind == Kind::kQ6K ? s : kK4Order[s])].v;
      for (int r = 0; r < R; ++r) isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(dot[r], scale));
    }
    // Q4_K/Q5_K: Σ minimum·sums32; Q6_K: Σ scale·sums16 (the levels' offset of 32).
    for (int j = 0; j < kSub / 2; ++j) {
      const __m512i pr = p.pair[kSub / 2 * k + j].v;
      for (int r = 0; r < R; ++r) {
        const int16_t* sums = kKind == Kind::kQ6K ? x[r].sums16 + 16 * k : x[r].sums32 + 8 * k;
        side[r] = _mm512_dpwssd_epi32(side[r], pr, broadcast4(sums + 2 * j));
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m512 dx = _mm512_set1_ps(x[r].d[k]);
      if constexpr (kKind == Kind::kQ6K) {
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(isum[r], _mm512_slli_epi32(side[r], 5))),
                                 _mm512_mul_ps(p.d[k].v, dx), acc[r]);
      } else {
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r]), _mm512_mul_ps(p.d[k].v, dx), acc[r]);
        acc[r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(side[r]), _mm512_mul_ps(p.dmin[k].v, dx), acc[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) out[r] = acc[r];
}

template <Kind kKind>
void kgemm(const QuantMatmulArgs& a, const KRow* x) {
  constexpr int kSub = kSubBlocks<kKind>;
  const int64_t panels = (a.n_out + kPanel - 1) / kPanel, blocks = a.n_in / 256;
#pragma omp parallel
  {
    thread_local Panel p;
    p.w.resize(static_cast<size_t>(a.n_in / 4));
    p.scale.resize(static_cast<size_t>(blocks * kSub));
    p.pair.resize(static_cast<size_t>(blocks * kSub / 2));
    p.d.resize(static_cast<size_t>(blocks));
    p.dmin.resize(static_cast<size_t>(blocks));
#pragma omp for schedule(static)
    for (int64_t pi = 0; pi < panels; ++pi) {
      const int64_t j0 = pi * kPanel;
      const int rows = static_cast<int>(std::min<int64_t>(kPanel, a.n_out - j0));
      const int next_rows = static_cast<int>(std::clamp<int64_t>(a.n_out - j0 - kPanel, 0, kPanel));
      unpack_panel<kKind>(a.w + j0 * a.row_bytes, a.row_bytes, rows, blocks,
                          next_rows > 0 ? a.w + (j0 + kPanel) * a.row_bytes : nullptr, next_rows, p);
      const __mmask16 live = static_cast<__mmask16>((1u << rows) - 1);
      for (int64_t r0 = 0; r0 < a.m; r0 += kTile) {
        __m512 out[kTile];
        switch (std::min<int64_t>(kTile, a.m - r0)) {
          case 1: tile<kKind, 1>(p, x + r0, blocks, out); break;
          case 2: tile<kKind, 2>(p, x + r0, blocks, out); break;
          case 3: tile<kKind, 3>(p, x + r0, blocks, out); break;
          default: tile<kKind, 4>(p, x + r0, blocks, out); break;
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

void kgemm_q4_k(const QuantMatmulArgs& a, const KRow* x) { kgemm<Kind::kQ4K>(a, x); }
void kgemm_q5_k(const QuantMatmulArgs& a, const KRow* x) { kgemm<Kind::kQ5K>(a, x); }
void kgemm_q6_k(const QuantMatmulArgs& a, const KRow* x) { kgemm<Kind::kQ6K>(a, x); }

}  // namespace kvserve::KVSERVE_KERNEL_NS::krows

KVSERVE_VNNI_TARGET_END
#endif
KVSERVE_KERNEL_TARGET_END
