// The K types' integer products on panels of 16 weight rows whose levels are transposed so that
// each 32-bit lane holds 4 levels of one weight row, the sub-block scales, minimums and
// super-block factors lane i for row i. Each activation row broadcasts 4 of its levels at a
// time: one vpdpbusd does 64 multiply-adds for 16 outputs, nothing is reduced across lanes, and
// the 16 outputs of a row leave in one store. Sums per sub-block are scaled in integers
// (vpmulld) and meet a float once per super-block, as in the fused kernel
// (kernels/int8/k_fused.cc). One tile() reads either source: panels unpacked per call from
// the file's layout (kgemm_*, 5-64 rows), or the packed panels a matrix is held in (kpanels,
// any height; pack_kpanels writes them at load, in pairs: KLayout).
#include "kernels/int8/int8_matmul.h"

#include "kernels/intrinsics.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "codecs/tensor_types.h"
#include "kernels/small_batch_matmul.h"

KVSERVE_KERNEL_TARGET_BEGIN
#include "codecs/quant_decode.h"

#if KVSERVE_HAS_AVX512
KVSERVE_VNNI_TARGET_BEGIN
#include "kernels/int8/block32_avx512.h"
#include "kernels/int8/k_rows_avx512.h"
#include "kernels/int8/panel_avx512.h"

namespace kvserve::KVSERVE_KERNEL_NS::krows {
namespace {

using levels::load32;
using levels::load64;
using namespace panel;

template <Kind kKind>
constexpr int kSubBlocks = sixteen_value_scales(kKind) ? 16 : 8;  // per super-block, each with a scale

// One panel unpacked (a thread's buffers, kept across calls).
struct Panel {
  std::vector<IntVec> w;         // [n_in / 4]: lane i = 4 levels of row i, in the activations' order
  std::vector<IntVec> scale;     // [super-blocks x kSubBlocks]: int32 scale of each row's sub-block
  std::vector<IntVec> pair;      // [super-blocks x kSubBlocks / 2]: int16 pairs, Q4_K/Q5_K of minimums, Q6_K of scales
  std::vector<FloatVec> d, dmin;  // [super-blocks]

  // Sized for rows of n_in values of a type with `sub` sub-blocks a super-block.
  void size_for(int64_t n_in, int sub) {
    const auto blocks = static_cast<size_t>(n_in / 256);
    w.resize(static_cast<size_t>(n_in / 4));
    scale.resize(blocks * sub);
    pair.resize(blocks * sub / 2);
    d.resize(blocks);
    dmin.resize(blocks);
  }
};

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
          prefetch_l2(next + i * row_bytes + k * kBytes + off);
    const uint8_t* base = w + k * kBytes;
    for (int c = 0; c < 4; ++c) {
      __m512i r[kPanel];
      for (int i = 0; i < kPanel; ++i) r[i] = i < rows ? levels_of<kKind>(base + i * row_bytes, c) : zero;
      transpose16(r);
      for (int i = 0; i < kPanel; ++i) p.w[64 * k + 16 * c + i].v = r[i];
    }
    IntVec* sc = &p.scale[kSub * k];
    IntVec* pr = &p.pair[kSub / 2 * k];
    if constexpr (sixteen_value_scales(kKind)) {
      __m512i words[4], s[16], q[8];
      if constexpr (kKind == Kind::kQ2K) {
        for (int i = 0; i < 4; ++i) words[i] = gather(base, static_cast<int>(offsetof(quant::BlockQ2_K, scales)) + 4 * i);
        k2_scales(words, s, q);
        const __m512i dd = gather(base, static_cast<int>(offsetof(quant::BlockQ2_K, d)));  // d, dmin
        p.d[k].v = half_lo(dd);
        p.dmin[k].v = half_hi(dd);
      } else {
        using Block = std::conditional_t<kKind == Kind::kQ6K, quant::BlockQ6_K, quant::BlockQ3_K>;
        const int so = static_cast<int>(offsetof(Block, scales));
        if constexpr (kKind == Kind::kQ6K)
          for (int i = 0; i < 4; ++i) words[i] = gather(base, so + 4 * i);
        else
          k3_scale_words(gather(base, so), gather(base, so + 4), gather(base, so + 8), words);
        k6_scales(words, s, q);
        // d is the block's last two bytes: read the word ending there.
        p.d[k].v = half_hi(gather(base, static_cast<int>(offsetof(Block, d)) - 2));
      }
      for (int j = 0; j < 16; ++j) sc[j].v = s[j];
      for (int j = 0; j < 8; ++j) pr[j].v = q[j];
    } else {
      // The 12 scale bytes as quant_levels' k4_scale_words unpacks them, one lane per row.
      const int so = static_cast<int>(kKind == Kind::kQ5K ? offsetof(quant::BlockQ5_K, scales) : offsetof(quant::BlockQ4_K, scales));
      const __m512i a0 = gather(base, so), a1 = gather(base, so + 4), a2 = gather(base, so + 8);
      __m512i s[8], q[4];
      k4_scales(a0, a1, a2, s, q);
      for (int j = 0; j < 8; ++j) sc[j].v = s[j];
      for (int j = 0; j < 4; ++j) pr[j].v = q[j];
      const __m512i dd = gather(base, 0);  // d, dmin
      p.d[k].v = half_lo(dd);
      p.dmin[k].v = half_hi(dd);
    }
  }
}

// A panel unpacked by unpack_panel, for tile().
template <Kind kKind>
struct UnpackedSource {
  static constexpr int kSub = kSubBlocks<kKind>;
  const Panel& p;
  void begin(int64_t) {}
  void steps(int64_t k, int step, __m512i& w0, __m512i& w1) const {
    w0 = p.w[64 * k + step].v;
    w1 = p.w[64 * k + step + 1].v;
  }
  static __m512i odd(__m512i dot) { return dot; }
  void levels(int64_t k, int step, __m512i& w0, __m512i& w1) const { steps(k, step, w0, w1); }
  __m512i scale(int64_t k, int sub) const { return p.scale[kSub * k + sub].v; }
  __m512i pair(int64_t k, int j) const { return p.pair[kSub / 2 * k + j].v; }
  __m512 d(int64_t k) const { return p.d[k].v; }
  __m512 dmin(int64_t k) const { return p.dmin[k].v; }
};

// R activation rows times P panels (Source: UnpackedSource or PackedSource) over every
// super-block: out[p * R + r] lane i = output of row i of panel p. Packed panels are read two
// at a time (a pair's record, KLayout), so that a row's weights come as one stream.
// next: bytes to request into L2 meanwhile, a slice a pair of steps (the next group of panels).
template <Kind kKind, int R, int P, class Source>
void tile(Source* src, const KRow* x, int64_t blocks, __m512* out, const uint8_t* next = nullptr, int64_t next_bytes = 0) {
  constexpr int kSub = kSubBlocks<kKind>, kSteps = 64 / kSub;  // 4-level steps per sub-block
  __m512 acc[P][R];
  for (int p = 0; p < P; ++p)
    for (int r = 0; r < R; ++r) acc[p][r] = _mm512_setzero_ps();
  LineRequests requests(next, next_bytes, 32 * blocks);
  for (int64_t k = 0; k < blocks; ++k) {
    for (int p = 0; p < P; ++p) src[p].begin(k);
    __m512i isum[P][R], side[P][R];
    for (int p = 0; p < P; ++p)
      for (int r = 0; r < R; ++r) isum[p][r] = side[p][r] = _mm512_setzero_si512();
    for (int s = 0; s < kSub; ++s) {
      __m512i dot[P][R], dot1[P][R];
      for (int p = 0; p < P; ++p)
        for (int r = 0; r < R; ++r) dot[p][r] = dot1[p][r] = _mm512_setzero_si512();
      // With R x P >= 8 chains the latency is hidden by one chain an output, both steps' levels
      // as they are (a second set would leave too few registers for the accumulators: spills);
      // fewer rows take two (dot_pair), the odd steps' as the source leaves them (Source::odd
      // makes that the levels' sum). Unrolled, so that a step's place in its group
      // (Source::steps: step & 3) is a constant.
      constexpr bool kOneChain = R * P >= 8;
#pragma GCC unroll 8
      for (int t = 0; t < kSteps; t += 2) {
        const int step = s * kSteps + t;
        if (next) requests.next();  // the next group's bytes
        if constexpr (kOneChain)
          dot_one<R, P>(x, 256 * k + 4 * step, [&](int p, __m512i& w0, __m512i& w1) { src[p].levels(k, step, w0, w1); },
                        dot);
        else
          dot_pair<R, P>(x, 256 * k + 4 * step, [&](int p, __m512i& w0, __m512i& w1) { src[p].steps(k, step, w0, w1); },
                         dot, dot1);
      }
      if constexpr (!kOneChain)
        for (int p = 0; p < P; ++p)
          for (int r = 0; r < R; ++r) dot[p][r] = _mm512_add_epi32(dot[p][r], Source::odd(dot1[p][r]));
      for (int p = 0; p < P; ++p) {
        // Position s of the activations' order holds sub-block kK4Order[s] for Q4_K/Q5_K.
        const __m512i scale = src[p].scale(k, sixteen_value_scales(kKind) ? s : kK4Order[s]);
        for (int r = 0; r < R; ++r) isum[p][r] = _mm512_add_epi32(isum[p][r], _mm512_mullo_epi32(dot[p][r], scale));
      }
    }
    // Q4_K/Q5_K: Σ minimum·sums32; Q2_K: Σ minimum·sums16; Q6_K, Q3_K: Σ scale·sums16 (the
    // levels' offset of 32 or 4).
    for (int j = 0; j < kSub / 2; ++j)
      for (int r = 0; r < R; ++r) {
        const int16_t* sums = sixteen_value_scales(kKind) ? x[r].sums16 + 16 * k : x[r].sums32 + 8 * k;
        const __m512i xs = broadcast4(sums + 2 * j);
        for (int p = 0; p < P; ++p) side[p][r] = _mm512_dpwssd_epi32(side[p][r], src[p].pair(k, j), xs);
      }
    for (int p = 0; p < P; ++p) {
      const __m512 d = src[p].d(k);
      for (int r = 0; r < R; ++r) {
        const __m512 dx = _mm512_set1_ps(x[r].d[k]);
        if constexpr (offset_bits(kKind) > 0) {
          acc[p][r] = _mm512_fmadd_ps(
              _mm512_cvtepi32_ps(_mm512_sub_epi32(isum[p][r], _mm512_slli_epi32(side[p][r], offset_bits(kKind)))),
              _mm512_mul_ps(d, dx), acc[p][r]);
        } else {
          acc[p][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[p][r]), _mm512_mul_ps(d, dx), acc[p][r]);
          acc[p][r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(side[p][r]), _mm512_mul_ps(src[p].dmin(k), dx), acc[p][r]);
        }
      }
    }
  }
  for (int p = 0; p < P; ++p)
    for (int r = 0; r < R; ++r) out[p * R + r] = acc[p][r];
}

// Rows [r0, r0 + kTile) of x times P panels (src[0..P)) into y's columns [j0, j0 + 16 P) (live:
// which of each panel's 16); two panels load each activation broadcast once for both.
// next (next_bytes): requested into L2 meanwhile, as tile() does.
template <Kind kKind, int P, class Source>
void panel_rows(Source* src, const QuantMatmulArgs& a, const KRow* x, int64_t blocks, int64_t r0, int64_t j0,
                const __mmask16* live, const uint8_t* next = nullptr, int64_t next_bytes = 0) {
  __m512 out[P * kTile];
  const int64_t rows = std::min<int64_t>(kTile, a.m - r0);
  switch (rows) {
    case 1: tile<kKind, 1, P>(src, x + r0, blocks, out, next, next_bytes); break;
    case 2: tile<kKind, 2, P>(src, x + r0, blocks, out, next, next_bytes); break;
    case 3: tile<kKind, 3, P>(src, x + r0, blocks, out, next, next_bytes); break;
    default: tile<kKind, 4, P>(src, x + r0, blocks, out, next, next_bytes); break;
  }
  for (int q = 0; q < P; ++q)
    for (int64_t r = 0; r < rows; ++r) {
      float* y = a.y + (r0 + r) * a.ldy + j0 + q * kPanel;
      const __m512 v = out[q * rows + r];
      _mm512_mask_storeu_ps(y, live[q], a.accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(live[q], y), v) : v);
    }
}
template <Kind kKind, class Source>
void tile_rows(Source& src, const QuantMatmulArgs& a, const KRow* x, int64_t blocks, int64_t r0, int64_t j0, __mmask16 live) {
  panel_rows<kKind, 1>(&src, a, x, blocks, r0, j0, &live);
}
constexpr __mmask16 kFullPanels[2] = {0xFFFF, 0xFFFF};

template <Kind kKind>
void kgemm(const QuantMatmulArgs& a, const KRow* x) {
  constexpr int kSub = kSubBlocks<kKind>;
  const int64_t panels = (a.n_out + kPanel - 1) / kPanel, blocks = a.n_in / 256;
#pragma omp parallel
  {
    thread_local Panel held[2];
    for (Panel& p : held) p.size_for(a.n_in, kSub);
    // Panels two at a time (the last alone where their number is odd).
#pragma omp for schedule(static)
    for (int64_t pp = 0; pp < (panels + 1) / 2; ++pp) {
      const int64_t j0 = 2 * pp * kPanel;
      const int np = 2 * pp + 1 < panels ? 2 : 1;
      __mmask16 live[2];
      for (int q = 0; q < np; ++q) {
        const int64_t jq = j0 + q * kPanel;
        const int rows = static_cast<int>(std::min<int64_t>(kPanel, a.n_out - jq));
        const int next_rows = static_cast<int>(std::clamp<int64_t>(a.n_out - jq - kPanel, 0, kPanel));
        unpack_panel<kKind>(a.w + jq * a.row_bytes, a.row_bytes, rows, blocks,
                            next_rows > 0 ? a.w + (jq + kPanel) * a.row_bytes : nullptr, next_rows, held[q]);
        live[q] = static_cast<__mmask16>((1u << rows) - 1);
      }
      UnpackedSource<kKind> src[2] = {{held[0]}, {held[1]}};
      for (int64_t r0 = 0; r0 < a.m; r0 += kTile)
        if (np == 2)
          panel_rows<kKind, 2>(src, a, x, blocks, r0, j0, live);
        else
          tile_rows<kKind>(src[0], a, x, blocks, r0, j0, live[0]);
    }
  }
}

// Where packed Q6_K puts step j's two high bits in its sub-block's byte: each step's field
// sits in the other nibble from its low bits (steps 2u in the levels' low nibbles, 2u + 1 in
// the high), so that one select of nibbles brings a step's six bits into one byte.
constexpr int kQ6Field[4] = {4, 0, 6, 2};

// The K types held as packed panels (pack_kpanels): each 16 rows' bytes rewritten once at load,
// in place and to the same size, in the order tile() reads them. Per super-block of a panel of
// 16 rows:
//   words   Q4_K/Q5_K the 12 scale bytes as three words (lane i = row i) and the (d, dmin)
//           word; Q6_K the 16 scale bytes as four words; Q3_K its 12 as three; Q2_K its 16 as
//           four and the (d, dmin) word;
//   d       Q6_K, Q3_K: the 16 rows' F16 d;
//   levels  32 vectors, vector u holding step 2u (lane i = 4 levels of row i, as unpack_panel
//           orders them) in the low nibbles and step 2u + 1 in the high; Q2_K/Q3_K: 16
//           vectors, bits 2j, 2j + 1 of each byte of vector u that byte's level (Q3_K: its low
//           two bits) in step 4u + j;
//   high    Q5_K (Q3_K): 64 words of 64 bits, bit 4i + j of word t the fifth (third) bit of
//           level j of row i in step t; Q6_K: per sub-block one vector whose bits
//           kQ6Field[j], kQ6Field[j] + 1 of each byte are bits 4-5 of that byte's level in the
//           sub-block's step j.
// Panels go in pairs (the last alone where their number is odd), and a pair's bytes are in the
// order a product over both reads them: per super-block one record, both panels' words, both
// d, then the levels and high lines alternating between the two panels. A thread's run of
// pairs is then one stream through memory; out of the cache that measured 40-48 GB/s on two
// threads against 30-33 for the planes of the layout before (each part of a panel in a plane
// of its own: 8 streams for four panels) (docs/performance.md). A pair's record is a multiple
// of 64 bytes for every K type, so every vector in it stays aligned.
template <Kind kKind>
struct KLayout {
  static constexpr bool kTwoBit = kKind == Kind::kQ3K || kKind == Kind::kQ2K;
  static constexpr int64_t kLevels = kTwoBit ? 1024 : 2048;  // bytes of each part a super-block
  static constexpr int64_t kHigh = kKind == Kind::kQ5K || kKind == Kind::kQ3K ? 512 : kKind == Kind::kQ6K ? 1024 : 0;
  static constexpr int64_t kWords = kKind == Kind::kQ3K ? 192 : kKind == Kind::kQ2K ? 320 : 256;
  static constexpr int64_t kD = kKind == Kind::kQ6K || kKind == Kind::kQ3K ? 32 : 0;
  static constexpr int64_t kRecord = kWords + kD + kLevels + kHigh;  // one panel's bytes a super-block
  int64_t np = 1;  // panels sharing the records: 2, or 1 for the last where their number is odd
  int64_t q = 0;   // this panel's place in them
  KLayout() = default;
  // Panel `panel` of `panels`.
  KLayout(int64_t panel, int64_t panels) : np(pair_size(panel / 2, panels)), q(panel % 2) {}
  // Where this panel's parts of super-block k start, in bytes from its pair's first; the
  // levels' and high's lines are stride() apart.
  int64_t record(int64_t k) const { return np * kRecord * k; }
  int64_t words(int64_t k) const { return record(k) + kWords * q; }
  int64_t d(int64_t k) const { return record(k) + np * kWords + kD * q; }
  int64_t levels(int64_t k) const { return record(k) + np * (kWords + kD) + 64 * q; }
  int64_t high(int64_t k) const { return record(k) + np * (kWords + kD + kLevels) + 64 * q; }
  int64_t stride() const { return 64 * np; }
};

// One panel's parts, read from the file's layout before any of its bytes are overwritten.
struct ReadPanel {
  Panel p;
  std::vector<IntVec> words;
  std::vector<uint16_t> d;
};

// w: a panel in the file's layout, into r.
template <Kind kKind>
void read_kpanel(const uint8_t* w, int64_t row_bytes, int64_t blocks, ReadPanel& r) {
  constexpr int64_t kBytes = kBlockBytes<kKind>;
  unpack_panel<kKind>(w, row_bytes, kPanel, blocks, nullptr, 0, r.p);
  constexpr int kW = static_cast<int>(KLayout<kKind>::kWords / 64);  // vectors of words a super-block
  r.words.resize(static_cast<size_t>(kW * blocks));
  r.d.resize(static_cast<size_t>(16 * blocks));
  const __m512i at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                        _mm512_set1_epi32(static_cast<int>(row_bytes)));
  for (int64_t k = 0; k < blocks; ++k) {
    const uint8_t* base = w + k * kBytes;
    auto gather = [&](int offset) { return _mm512_i32gather_epi32(_mm512_add_epi32(at, _mm512_set1_epi32(offset)), base, 1); };
    IntVec* words = &r.words[kW * k];
    if constexpr (offset_bits(kKind) > 0) {  // Q6_K, Q3_K: the scale bytes as they are, then d
      using Block = std::conditional_t<kKind == Kind::kQ6K, quant::BlockQ6_K, quant::BlockQ3_K>;
      for (int q = 0; q < kW; ++q) words[q].v = gather(static_cast<int>(offsetof(Block, scales)) + 4 * q);
      for (int i = 0; i < kPanel; ++i) std::memcpy(&r.d[16 * k + i], base + i * row_bytes + offsetof(Block, d), 2);
    } else if constexpr (kKind == Kind::kQ2K) {
      for (int q = 0; q < 4; ++q) words[q].v = gather(static_cast<int>(offsetof(quant::BlockQ2_K, scales)) + 4 * q);
      words[4].v = gather(static_cast<int>(offsetof(quant::BlockQ2_K, d)));  // d, dmin
    } else {
      const int so = static_cast<int>(kKind == Kind::kQ5K ? offsetof(quant::BlockQ5_K, scales) : offsetof(quant::BlockQ4_K, scales));
      for (int q = 0; q < 3; ++q) words[q].v = gather(so + 4 * q);
      words[3].v = gather(0);  // d, dmin
    }
  }
}

// r written as panel lay.q of the pair whose bytes start at w.
template <Kind kKind>
void write_kpanel(uint8_t* w, const KLayout<kKind>& lay, int64_t blocks, const ReadPanel& r) {
  constexpr int kW = static_cast<int>(KLayout<kKind>::kWords / 64);
  const int64_t stride = lay.stride();
  const __m512i nib = _mm512_set1_epi8(0x0F), two = _mm512_set1_epi8(0x03);
  for (int64_t k = 0; k < blocks; ++k) {
    const IntVec* st = &r.p.w[64 * k];
    uint8_t* lv = w + lay.levels(k);
    uint8_t* hi = w + lay.high(k);
    if constexpr (KLayout<kKind>::kTwoBit) {
      for (int u = 0; u < 16; ++u) {
        __m512i v = _mm512_setzero_si512();
        for (int j = 0; j < 4; ++j) v = _mm512_or_si512(v, _mm512_slli_epi16(_mm512_and_si512(st[4 * u + j].v, two), 2 * j));
        _mm512_storeu_si512(lv + stride * u, v);
      }
    } else {
      for (int u = 0; u < 32; ++u)
        _mm512_storeu_si512(lv + stride * u, _mm512_or_si512(_mm512_and_si512(st[2 * u].v, nib),
                                                           _mm512_slli_epi16(_mm512_and_si512(st[2 * u + 1].v, nib), 4)));
    }
    if constexpr (kKind == Kind::kQ5K || kKind == Kind::kQ3K)
      for (int t = 0; t < 64; ++t) {
        const uint64_t bits = _mm512_test_epi8_mask(st[t].v, _mm512_set1_epi8(kKind == Kind::kQ5K ? 0x10 : 0x04));
        std::memcpy(hi + stride * (t / 8) + 8 * (t % 8), &bits, 8);
      }
    if constexpr (KLayout<kKind>::kD > 0) std::memcpy(w + lay.d(k), &r.d[16 * k], 32);
    if constexpr (kKind == Kind::kQ6K)
      for (int s = 0; s < 16; ++s) {
        __m512i h = _mm512_setzero_si512();
        for (int j = 0; j < 4; ++j)
          h = _mm512_or_si512(h, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(st[4 * s + j].v, 4), two), kQ6Field[j]));
        _mm512_storeu_si512(hi + stride * s, h);
      }
    for (int q = 0; q < kW; ++q) _mm512_storeu_si512(w + lay.words(k) + 64 * q, r.words[kW * k + q].v);
  }
}

// Each byte of x through the GF(2) affine map m (vgf2p8affineqb, constant 0): output bit i is
// the parity of x and byte 7 - i of m's 64-bit lane. As inline assembly, so that no other code
// is compiled for GFNI: only packed Q6_K panels run it, on CPUs that have it (plan_packs, kernels/matmul_plan.cc).
inline __m512i gf_bits(__m512i x, __m512i m) {
  __m512i r;
  asm("vgf2p8affineqb $0, %2, %1, %0" : "=v"(r) : "v"(x), "v"(m));
  return r;
}
// The map taking a byte's bits `low` + 0..3 to bits 0-3 and its bits field, field + 1 to 4-5
// (bits 6-7 zero), for gf_bits.
constexpr uint64_t six_bits_map(int low, int field) {
  uint64_t m = 0;
  for (int i = 0; i < 6; ++i) m |= (uint64_t{1} << (i < 4 ? low + i : field + i - 4)) << (8 * (7 - i));
  return m;
}
// Bytes of a where c's bits are set, of b elsewhere.
inline __m512i select_bits(__m512i c, __m512i a, __m512i b) { return _mm512_ternarylogic_epi32(a, b, c, 0xE4); }

// A packed panel, for tile(): its scales unpacked per super-block, its levels as they are read.
// kNp: the panels sharing its records (2 in a pair, 1 for a lone last panel), a constant so
// that a step's line is a shift from the super-block's, not a multiply in the hot loop.
template <Kind kKind, int kNp = 2>
struct PackedSource {
  static constexpr int kSub = kSubBlocks<kKind>;
  const uint8_t* p = nullptr;  // the panel's pair
  KLayout<kKind> lay;
  static constexpr int64_t stride_ = 64 * kNp;  // between the panel's lines of levels and of high
  __m512i sc[kSub], pr[kSub / 2];
  __m512 d_, dmin_;
  const uint8_t* levels_ = nullptr;  // super-block k's levels and high (begin)
  const uint8_t* high_ = nullptr;
  bool ahead = true;  // request lines ahead in each part (false: the tile's bytes were requested before it)

  PackedSource() = default;
  // Panel `index` of the `panels` of the matrix at w.
  PackedSource(const uint8_t* w, int64_t panel_bytes, int64_t index, int64_t panels)
      : p(w + index / 2 * 2 * panel_bytes), lay(index, panels) {}

  // Every line read asks for the line kPanelAhead further on (the pair's one stream) into L2.
  void begin(int64_t k) {
    using L = KLayout<kKind>;
    levels_ = p + lay.levels(k);
    high_ = p + lay.high(k);
    const uint8_t* wd = p + lay.words(k);
    if (ahead)
      for (int q = 0; q < L::kWords / 64; ++q) prefetch_l2(wd + 64 * q + kPanelAhead);
    if constexpr (offset_bits(kKind) > 0) {  // Q6_K, Q3_K: d in its own plane
      __m512i words[4] = {load64(wd), load64(wd + 64), load64(wd + 128), _mm512_setzero_si512()};
      if constexpr (kKind == Kind::kQ6K)
        words[3] = load64(wd + 192);
      else
        k3_scale_words(words[0], words[1], words[2], words);
      k6_scales(words, sc, pr);
      const uint8_t* dp = p + lay.d(k);
      if (ahead) prefetch_l2(dp + kPanelAhead);
      d_ = _mm512_cvtph_ps(load32(dp));
    } else {  // the (d, dmin) word after the scales
      if constexpr (kKind == Kind::kQ2K) {
        const __m512i words[4] = {load64(wd), load64(wd + 64), load64(wd + 128), load64(wd + 192)};
        k2_scales(words, sc, pr);
      } else {
        k4_scales(load64(wd), load64(wd + 64), load64(wd + 128), sc, pr);
      }
      const __m512i dd = load64(wd + L::kWords - 64);
      d_ = half_lo(dd);
      dmin_ = half_hi(dd);
    }
  }
  // Q4_K's odd steps are multiplied as 16 times their levels (the high nibbles in place, one
  // instruction fewer a pair of steps); their sums are exact multiples of 16.
  static __m512i odd(__m512i dot) {
    if constexpr (kKind == Kind::kQ4K) return _mm512_srai_epi32(dot, 4);
    return dot;
  }
  void steps(int64_t, int step, __m512i& w0, __m512i& w1) const {
    const __m512i nib = _mm512_set1_epi8(0x0F);
    using L = KLayout<kKind>;
    if constexpr (L::kTwoBit) {
      // Steps 4u + j, j = 0, 1 or 2, 3: bit pairs 2j, 2j + 1 of each byte; Q3_K adds 4 where
      // the third bit is set.
      const uint8_t* at = levels_ + stride_ * (step >> 2);
      if (ahead && (step & 3) == 0) prefetch_l2(at + kPanelAhead);
      const __m512i v = load64(at), three = _mm512_set1_epi8(3);
      const int j = step & 3;
      w0 = _mm512_and_si512(_mm512_srli_epi16(v, 2 * j), three);
      w1 = _mm512_and_si512(_mm512_srli_epi16(v, 2 * j + 2), three);
      if constexpr (kKind == Kind::kQ3K) add_top_bit(step, 4, w0, w1);
      return;
    }
    const uint8_t* at = levels_ + stride_ * (step >> 1);
    if (ahead) prefetch_l2(at + kPanelAhead);
    const __m512i v = load64(at);
    if constexpr (kKind == Kind::kQ4K) {
      w0 = _mm512_and_si512(v, nib);
      w1 = _mm512_andnot_si512(nib, v);
      return;
    }
    if constexpr (kKind == Kind::kQ6K) {
      // Steps 4s + j, j = 0, 1 or 2, 3: each step's low nibble and its field (kQ6Field) in the
      // other nibble selected into one byte, then moved into place: step 0 is already there
      // but for bits 6-7, the others take one GF(2) affine map (gf_bits).
      const uint8_t* hp = high_ + stride_ * (step >> 2);
      if (ahead && (step & 3) == 0) prefetch_l2(hp + kPanelAhead);
      const __m512i h = load64(hp);
      const int j = step & 3;
      const __m512i low = select_bits(nib, v, h), high = select_bits(nib, h, v);  // v's low nibble, v's high
      if (j == 0)
        w0 = _mm512_and_si512(low, _mm512_set1_epi8(0x3F));
      else
        w0 = gf_bits(low, _mm512_set1_epi64(static_cast<int64_t>(six_bits_map(0, kQ6Field[j]))));
      w1 = gf_bits(high, _mm512_set1_epi64(static_cast<int64_t>(six_bits_map(4, kQ6Field[j + 1]))));
      return;
    }
    w0 = _mm512_and_si512(v, nib);
    w1 = _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);
    if constexpr (kKind == Kind::kQ5K) add_top_bit(step, 0x10, w0, w1);
  }
  // Q5_K's fifth and Q3_K's third bits (value `bit`) of steps step, step + 1 from the high
  // plane's masks, added to their levels.
  void add_top_bit(int step, char bit, __m512i& w0, __m512i& w1) const {
    uint64_t m0, m1;
    const uint8_t* hp = high_ + stride_ * (step >> 3) + 8 * (step & 7);
    if (ahead && (step & 7) == 0) prefetch_l2(hp + kPanelAhead);
    std::memcpy(&m0, hp, 8);
    std::memcpy(&m1, hp + 8, 8);
    w0 = _mm512_mask_add_epi8(w0, m0, w0, _mm512_set1_epi8(bit));
    w1 = _mm512_mask_add_epi8(w1, m1, w1, _mm512_set1_epi8(bit));
  }
  // The levels of steps step, step + 1 themselves (as unpack_panel leaves them).
  void levels(int64_t k, int step, __m512i& w0, __m512i& w1) const {
    steps(k, step, w0, w1);
    if constexpr (kKind == Kind::kQ4K) w1 = _mm512_srli_epi16(w1, 4);  // each byte's low nibble is clear
  }
  __m512i scale(int64_t, int sub) const { return sc[sub]; }
  __m512i pair(int64_t, int j) const { return pr[j]; }
  __m512 d(int64_t) const { return d_; }
  __m512 dmin(int64_t) const { return dmin_; }
};

// Whether a product of m rows reads the packed panels as they are, each tile of rows decoding a
// pair's levels again out of L1, or first expands each panel into the thread's buffers. The
// expansion costs about as much as the tiles at 16 rows; above that it pays where the expanded
// pair stays in L1 (under 2048 inputs). Q4_K's levels take two instructions a line to decode,
// so at 2048 inputs and more it stays direct up to the small-batch limit; the other types'
// decoding is dearer and pays for the expansion from about 20 rows (docs/performance.md).
template <Kind kKind>
bool read_direct(int64_t m, int64_t n_in) {
  return m <= 16 || (kKind == Kind::kQ4K && n_in >= 2048);
}

template <Kind kKind>
void kpanels_product(const QuantMatmulArgs& a, const KRow* x) {
  const int64_t blocks = a.n_in / 256, panel_bytes = kPanel * a.row_bytes, panels = a.n_out / kPanel;
  if (read_direct<kKind>(a.m, a.n_in)) {
    pair_runs(panels, a.then, a.then_bytes, [&](int64_t pp, const uint8_t* then, int64_t then_bytes) {
      const int64_t pi = 2 * pp;
      if (pair_size(pp, panels) == 2) {
        PackedSource<kKind> src[2] = {PackedSource<kKind>(a.w, panel_bytes, pi, panels),
                                      PackedSource<kKind>(a.w, panel_bytes, pi + 1, panels)};
        // The first tile requests the pair's lines ahead; later tiles find them in the cache.
        for (int64_t r0 = 0; r0 < a.m; r0 += kTile) {
          src[0].ahead = src[1].ahead = r0 == 0;
          panel_rows<kKind, 2>(src, a, x, blocks, r0, pi * kPanel, kFullPanels, r0 == 0 ? then : nullptr, then_bytes);
        }
      } else {
        PackedSource<kKind, 1> src(a.w, panel_bytes, pi, panels);
        for (int64_t r0 = 0; r0 < a.m; r0 += kTile) {
          src.ahead = r0 == 0;
          panel_rows<kKind, 1>(&src, a, x, blocks, r0, pi * kPanel, kFullPanels, r0 == 0 ? then : nullptr, then_bytes);
        }
      }
    });
    return;
  }
  // More rows: each panel's levels and scales expanded once into the thread's buffers, then
  // every row tile reads them there (as the file-layout GEMM does).
  constexpr int kSub = kSubBlocks<kKind>;
#pragma omp parallel
  {
    thread_local Panel held[2];
    for (Panel& p : held) p.size_for(a.n_in, kSub);
#pragma omp for schedule(static)
    for (int64_t pp = 0; pp < pair_count(panels); ++pp) {
      const int64_t pi = 2 * pp;
      const int np = pair_size(pp, panels);
      auto expand = [&]<int kNp>(Panel& p, int64_t index) {
        PackedSource<kKind, kNp> src(a.w, panel_bytes, index, panels);
        for (int64_t k = 0; k < blocks; ++k) {
          src.begin(k);
          for (int step = 0; step < 64; step += 2) src.levels(k, step, p.w[64 * k + step].v, p.w[64 * k + step + 1].v);
          for (int j = 0; j < kSub; ++j) p.scale[kSub * k + j].v = src.sc[j];
          for (int j = 0; j < kSub / 2; ++j) p.pair[kSub / 2 * k + j].v = src.pr[j];
          p.d[k].v = src.d_;
          if constexpr (offset_bits(kKind) == 0) p.dmin[k].v = src.dmin_;
        }
      };
      for (int q = 0; q < np; ++q)
        if (np == 2)
          expand.template operator()<2>(held[q], pi + q);
        else
          expand.template operator()<1>(held[q], pi + q);
      UnpackedSource<kKind> unpacked[2] = {{held[0]}, {held[1]}};
      for (int64_t r0 = 0; r0 < a.m; r0 += kTile)
        if (np == 2)
          panel_rows<kKind, 2>(unpacked, a, x, blocks, r0, pi * kPanel, kFullPanels);
        else
          tile_rows<kKind>(unpacked[0], a, x, blocks, r0, pi * kPanel, 0xFFFF);
    }
  }
}

template <Kind kKind>
void pack_kpanels_of(uint8_t* w, int64_t rows, int64_t row_bytes, int64_t n_in) {
  const int64_t panels = rows / kPanel, blocks = n_in / 256, panel_bytes = kPanel * row_bytes;
#pragma omp parallel
  {
    ReadPanel held[2];
    for (ReadPanel& r : held) r.p.size_for(n_in, kSubBlocks<kKind>);
#pragma omp for schedule(static)
    for (int64_t pp = 0; pp < pair_count(panels); ++pp) {
      uint8_t* pair = w + 2 * pp * panel_bytes;
      const int np = pair_size(pp, panels);
      // Both panels read before either is written: their records share the pair's bytes.
      for (int q = 0; q < np; ++q) read_kpanel<kKind>(pair + q * panel_bytes, row_bytes, blocks, held[q]);
      for (int q = 0; q < np; ++q) write_kpanel<kKind>(pair, KLayout<kKind>(2 * pp + q, panels), blocks, held[q]);
    }
  }
}

}  // namespace

}  // namespace kvserve::KVSERVE_KERNEL_NS::krows

namespace kvserve::KVSERVE_KERNEL_NS {

template <krows::Kind K>
void k_gemm(const QuantMatmulArgs& a) {
  krows::KRow x[kSmallBatchRows];
  krows::round_rows_k(a, K, x);
  krows::kgemm<K>(a, x);
}

template <krows::Kind K>
void k_packed(const QuantMatmulArgs& a) {
  krows::KRow x[kSmallBatchRows];
  krows::round_rows_k(a, K, x);
  krows::kpanels_product<K>(a, x);
}

template <krows::Kind K>
void k_pack(uint8_t* w, int64_t rows, int64_t row_bytes, int64_t n_in) {
  krows::pack_kpanels_of<K>(w, rows, row_bytes, n_in);
}

#define KVSERVE_INSTANTIATE(K)                                                          \
  template void k_gemm<krows::Kind::K>(const QuantMatmulArgs&);                          \
  template void k_packed<krows::Kind::K>(const QuantMatmulArgs&);                        \
  template void k_pack<krows::Kind::K>(uint8_t*, int64_t, int64_t, int64_t);
KVSERVE_INT8_K_KINDS(KVSERVE_INSTANTIATE)
#undef KVSERVE_INSTANTIATE

}  // namespace kvserve::KVSERVE_KERNEL_NS

KVSERVE_VNNI_TARGET_END
#endif
KVSERVE_KERNEL_TARGET_END
