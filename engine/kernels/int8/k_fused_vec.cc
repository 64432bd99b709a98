// The K types' (Q2_K..Q6_K) fused integer kernel on the vector layer (kernels/vec/vec_int8.h),
// for the levels without AVX-512 (whose own kernels are int8/k_fused.cc and int8/k_gemm.cc):
// activations rounded per super-block of 256 (one float scale, as llama.cpp's Q8_K) and kept
// in natural order; the weights read straight from the file's layout, a group of four rows at a
// time, each super-block unpacked once for every activation row. Per vector of levels, the
// products summed in pairs (vpmaddubsw) times the integer sub-block scales (vpmaddwd, or
// vpdpwssd with AVX-VNNI), so a super-block's products stay in integers and meet a float once;
// the levels' offset (Q6_K, Q3_K) comes off in integers, the minimums (Q4_K, Q5_K, Q2_K) in
// float. Five rows and more take k_gemm below: each group of four weight rows unpacked once
// into the thread's buffer, every activation row multiplied with it there.
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

#include "kernels/int8/k_types.h"
#include "kernels/vec/vec_int8.h"
#include "kernels/int8/fused_rows.h"

namespace kvserve::KVSERVE_KERNEL_NS {

#if KVSERVE_HAS_VEC_INT8 && !KVSERVE_HAS_AVX512
namespace {

using krows::Kind;

constexpr int kChunks = 256 / vec::kBytes;  // vectors of levels per super-block

// One activation row rounded per super-block, natural order.
struct Row {
  const int8_t* q;       // [n_in]
  const float* d;        // [n_in / 256]
  const int16_t* sums;   // [n_in / 16] sums of each 16 levels (|sum| <= 16 * 127)
};

inline int64_t row_stride(int64_t n_in) { return (n_in + n_in / 256 * 4 + n_in / 16 * 2 + 63) / 64 * 64; }

inline Row round_row(const float* x, int64_t n_in, uint8_t* scratch) {
  auto* q = reinterpret_cast<int8_t*>(scratch);
  auto* d = reinterpret_cast<float*>(scratch + n_in);
  auto* sums = reinterpret_cast<int16_t*>(d + n_in / 256);
  for (int64_t k = 0; k < n_in / 256; ++k) {
    const float* xb = x + 256 * k;
    const float dk = vec::amax(xb, 256) / 127.0f, id = dk > 0.0f ? 1.0f / dk : 0.0f;
    d[k] = dk;
    for (int i = 0; i < 8; ++i) vec::quantize32(xb + 32 * i, id, q + 256 * k + 32 * i);
    for (int i = 0; i < 16; ++i) {
      int32_t s = 0;
      for (int l = 0; l < 16; ++l) s += q[256 * k + 16 * i + l];
      sums[16 * k + i] = static_cast<int16_t>(s);
    }
  }
  return {q, d, sums};
}

constexpr int kScales(Kind k) { return krows::sixteen_value_scales(k) ? 16 : 8; }

// One super-block of one weight row, unpacked.
template <Kind kKind>
struct Block {
  vec::I q[kChunks];        // levels, natural order
  vec::I s[kChunks];        // int16 scale of each level pair
  int16_t sc[16];           // the sub-block scales (Q6_K, Q3_K: signed)
  int16_t mins[16];         // Q4_K, Q5_K, Q2_K: the sub-block minimums
  float d, dmin;
};

template <Kind kKind>
inline void unpack(const uint8_t* block, Block<kKind>& out) {
  for (int c = 0; c < kChunks; ++c) out.q[c] = vec::k_levels<kKind>(block, c);
  if constexpr (kKind == Kind::kQ4K || kKind == Kind::kQ5K) {
    using B = std::conditional_t<kKind == Kind::kQ5K, quant::BlockQ5_K, quant::BlockQ4_K>;
    const auto* b = reinterpret_cast<const B*>(block);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      quant::k_scale_min(j, b->scales, &sc, &m);
      out.sc[j] = sc, out.mins[j] = m;
    }
    out.d = quant::half_to_float(b->d), out.dmin = quant::half_to_float(b->dmin);
  } else if constexpr (kKind == Kind::kQ6K) {
    const auto* b = reinterpret_cast<const quant::BlockQ6_K*>(block);
    for (int j = 0; j < 16; ++j) out.sc[j] = b->scales[j];
    out.d = quant::half_to_float(b->d);
  } else if constexpr (kKind == Kind::kQ3K) {
    const auto* b = reinterpret_cast<const quant::BlockQ3_K*>(block);
    int8_t sc[16];
    quant::q3_k_scales(b->scales, sc);
    for (int j = 0; j < 16; ++j) out.sc[j] = sc[j];
    out.d = quant::half_to_float(b->d);
  } else {
    const auto* b = reinterpret_cast<const quant::BlockQ2_K*>(block);
    for (int j = 0; j < 16; ++j) out.sc[j] = b->scales[j] & 0xF, out.mins[j] = b->scales[j] >> 4;
    out.d = quant::half_to_float(b->d), out.dmin = quant::half_to_float(b->dmin);
  }
  constexpr int kPer = 256 / kScales(kKind);  // values a scale
  constexpr int kPerChunk = vec::kBytes / kPer;
  for (int c = 0; c < kChunks; ++c) out.s[c] = vec::scales16<kPer>(out.sc + kPerChunk * c);
}

// acc += d_w·d_x · (Σ levels·activations·scales [- 2^offset_bits · Σ scales·sums16]);
// mins += dmin·d_x · Σ mins·(sums of the sub-block).
template <Kind kKind>
inline void block_dot(const Block<kKind>& w, const Row& x, int64_t k, vec::F& acc, float& mins) {
  const int8_t* xq = x.q + 256 * k;
  const int16_t* s16 = x.sums + 16 * k;
  vec::I dot = vec::zero();
  for (int c = 0; c < kChunks; ++c) dot = vec::dot16(dot, vec::maddubs(w.q[c], vec::load(xq + vec::kBytes * c)), w.s[c]);
  const float dx = x.d[k];
  if constexpr (krows::offset_bits(kKind) > 0) {
    int32_t off = 0;
    for (int j = 0; j < 16; ++j) off += w.sc[j] * s16[j];
    dot = vec::sub(dot, vec::lane0(off * (1 << krows::offset_bits(kKind))));
  } else {
    int32_t m = 0;
    if constexpr (kKind == Kind::kQ2K)
      for (int j = 0; j < 16; ++j) m += w.mins[j] * s16[j];
    else
      for (int j = 0; j < 8; ++j) m += w.mins[j] * (s16[2 * j] + s16[2 * j + 1]);
    mins += w.dmin * dx * static_cast<float>(m);
  }
  acc = vec::fma(vec::to_float(dot), vec::splat(w.d * dx), acc);
}

constexpr int kRows = int8::kFusedGroupRows;

// Up to kFusedPair activation rows times `rows` weight rows over the whole row (int8/fused_rows.h
// walks the matrix); the group ahead requested a super-block's share at a time.
template <Kind kKind, int M>
void group(const uint8_t* w, int64_t row_bytes, int rows, const Row* x, int64_t n_in, const int8::Ahead& ahead, float* out) {
  vec::F acc[M][kRows];
  float mins[M][kRows] = {};
  for (int m = 0; m < M; ++m)
    for (int g = 0; g < kRows; ++g) acc[m][g] = vec::fzero();
  for (int64_t k = 0; k < n_in / 256; ++k) {
    ahead.at(k);
    for (int g = 0; g < rows; ++g) {
      Block<kKind> b;
      unpack<kKind>(w + g * row_bytes + k * krows::kBlockBytes<kKind>, b);
      for (int m = 0; m < M; ++m) block_dot<kKind>(b, x[m], k, acc[m][g], mins[m][g]);
    }
  }
  for (int m = 0; m < M; ++m)
    for (int g = 0; g < rows; ++g) out[m * kRows + g] = vec::sum(acc[m][g]) - mins[m][g];
}

template <Kind kKind>
void fused(const QuantMatmulArgs& a, const Row* x) {
  int8::fused_rows(a, a.n_in / 256, [&](const uint8_t* w, int rows, int64_t r0, int mr, const int8::Ahead& ahead, float* out) {
    if (mr == 2)
      group<kKind, 2>(w, a.row_bytes, rows, x + r0, a.n_in, ahead, out);
    else
      group<kKind, 1>(w, a.row_bytes, rows, x + r0, a.n_in, ahead, out);
  });
}

// One super-block of one weight row as the batch kernel holds it: the fused kernel's unpacked
// block and the weights of the activations' sums of 16 (Q4_K, Q5_K: each sub-block's minimum
// twice; Q2_K: its minimums; Q6_K, Q3_K: its scales, which take the levels' offset off).
template <Kind kKind>
struct alignas(64) Held {
  Block<kKind> b;
  vec::I side;
};

template <Kind kKind>
inline void hold(const uint8_t* block, Held<kKind>& out) {
  unpack<kKind>(block, out.b);
  alignas(32) int16_t side[16];
  for (int i = 0; i < 16; ++i) {
    if constexpr (kKind == Kind::kQ4K || kKind == Kind::kQ5K) side[i] = out.b.mins[i / 2];
    else if constexpr (kKind == Kind::kQ2K) side[i] = out.b.mins[i];
    else side[i] = out.b.sc[i];
  }
  out.side = vec::load(side);
}

// M activation rows times a group's kRows weight rows (held: [blocks][kRows]) over the whole
// row: out[m * kRows + g]. Per vector of levels the four rows' levels meet each activation
// row's vector once loaded. Each output takes block_dot's operations in its order (the side
// sums are integers, summed in vectors), so a row's product is the same in any batch.
template <Kind kKind, int M>
void held_tile(const Held<kKind>* held, const Row* x, int64_t blocks, float* out) {
  vec::F acc[M][kRows];
  float mins[M][kRows] = {};
  for (int m = 0; m < M; ++m)
    for (int g = 0; g < kRows; ++g) acc[m][g] = vec::fzero();
  for (int64_t k = 0; k < blocks; ++k) {
    const Held<kKind>* h = held + k * kRows;
    vec::I dot[M][kRows];
    for (int m = 0; m < M; ++m)
      for (int g = 0; g < kRows; ++g) dot[m][g] = vec::zero();
    // Not unrolled: unrolled, GCC hoists the weights' loads and spills the accumulators.
#pragma GCC unroll 1
    for (int c = 0; c < kChunks; ++c) {
      vec::I xv[M];
      for (int m = 0; m < M; ++m) xv[m] = vec::load(x[m].q + 256 * k + vec::kBytes * c);
      for (int g = 0; g < kRows; ++g) {
        const vec::I q = h[g].b.q[c], s = h[g].b.s[c];
        for (int m = 0; m < M; ++m) dot[m][g] = vec::dot16(dot[m][g], vec::maddubs(q, xv[m]), s);
      }
    }
    for (int m = 0; m < M; ++m) {
      const vec::I sums = vec::load(x[m].sums + 16 * k);
      const float dx = x[m].d[k];
      for (int g = 0; g < kRows; ++g) {
        const int32_t side = vec::hsum(vec::dot16(vec::zero(), h[g].side, sums));
        if constexpr (krows::offset_bits(kKind) > 0) {
          dot[m][g] = vec::sub(dot[m][g], vec::lane0(side * (1 << krows::offset_bits(kKind))));
        } else {
          mins[m][g] += h[g].b.dmin * dx * static_cast<float>(side);
        }
        acc[m][g] = vec::fma(vec::to_float(dot[m][g]), vec::splat(h[g].b.d * dx), acc[m][g]);
      }
    }
  }
  for (int m = 0; m < M; ++m)
    for (int g = 0; g < kRows; ++g) out[m * kRows + g] = vec::sum(acc[m][g]) - mins[m][g];
}

// Each group's super-blocks held once (rows past the matrix's end as zero blocks), then every
// activation row against them (int8/fused_rows.h's held_rows).
template <Kind kKind>
void held_gemm(const QuantMatmulArgs& a, const Row* x) {
  const int64_t blocks = a.n_in / 256;
  thread_local std::vector<Held<kKind>> held;  // the thread's group
  int8::held_rows(
      a,
      [&](int64_t j0, int rows) {
        held.resize(static_cast<size_t>(blocks * kRows));
        for (int64_t k = 0; k < blocks; ++k)
          for (int g = 0; g < kRows; ++g) {
            Held<kKind>& h = held[static_cast<size_t>(k * kRows + g)];
            if (g < rows)
              hold<kKind>(a.w + (j0 + g) * a.row_bytes + k * krows::kBlockBytes<kKind>, h);
            else
              std::memset(static_cast<void*>(&h), 0, sizeof h);
          }
      },
      [&](int64_t r0, int mr, float* out) {
        if (mr == 2)
          held_tile<kKind, 2>(held.data(), x + r0, blocks, out);
        else
          held_tile<kKind, 1>(held.data(), x + r0, blocks, out);
      });
}

// Prompt heights (k_lanes): eight weight rows a vector, 32-bit lane i holding 4 levels of row
// i, as llama.cpp's repacked AVX2 kernels hold them; each activation row broadcasts 4 of its
// levels at a time, so one vpmaddubsw does 32 multiply-adds for 8 outputs. Its int16 pair sums
// add up over the steps that cannot overflow them (kSumSteps), then meet the rows' sub-block
// scales in one vpmaddwd; the sums side and the factors are per lane too, and nothing is reduced
// across lanes. Faster than the batch kernel above, but its sums take another order: prompts only.
constexpr int kLaneRows = 8;
template <Kind kKind>
constexpr int kSumSteps = kKind == Kind::kQ4K ? 8 : kKind == Kind::kQ6K ? 2 : 4;  // 16·max level·127 < 2^15
template <Kind kKind>
constexpr int kSumGroups = 64 / kSumSteps<kKind>;

// One super-block of a group of eight weight rows.
template <Kind kKind>
struct alignas(64) LaneBlock {
  vec::I w[64];                     // step t: lane i = levels 4t..4t+3 of row i
  vec::I scale[kSumGroups<kKind>];  // lane i = row i's scale of the group's sub-block, in both int16 halves
  vec::I side[8];                   // pair p: lane i = row i's side weights 2p, 2p+1 (Held::side)
  float d[kLaneRows], dmin[kLaneRows];
};

template <Kind kKind>
void hold_lanes(const uint8_t* w, int64_t row_bytes, int rows, int64_t k, LaneBlock<kKind>& out) {
  Held<kKind> h[kLaneRows];
  for (int i = 0; i < kLaneRows; ++i) {
    if (i < rows)
      hold<kKind>(w + i * row_bytes + k * krows::kBlockBytes<kKind>, h[i]);
    else
      std::memset(static_cast<void*>(&h[i]), 0, sizeof h[i]);
  }
  for (int c = 0; c < kChunks; ++c) {
    vec::I r[kLaneRows];
    for (int i = 0; i < kLaneRows; ++i) r[i] = h[i].b.q[c];
    vec::transpose8(r);
    for (int t = 0; t < kLaneRows; ++t) out.w[8 * c + t] = r[t];
  }
  alignas(32) int16_t lanes[16];
  constexpr int kPerScale = 256 / kScales(kKind);  // values a sub-block
  for (int g = 0; g < kSumGroups<kKind>; ++g) {
    const int sub = g * kSumSteps<kKind> * 4 / kPerScale;
    for (int i = 0; i < kLaneRows; ++i) lanes[2 * i] = lanes[2 * i + 1] = h[i].b.sc[sub];
    out.scale[g] = vec::load(lanes);
  }
  for (int p = 0; p < 8; ++p) {
    for (int i = 0; i < kLaneRows; ++i) {
      alignas(32) int16_t side[16];
      std::memcpy(side, &h[i].side, sizeof side);
      lanes[2 * i] = side[2 * p], lanes[2 * i + 1] = side[2 * p + 1];
    }
    out.side[p] = vec::load(lanes);
  }
  for (int i = 0; i < kLaneRows; ++i) out.d[i] = h[i].b.d, out.dmin[i] = h[i].b.dmin;
}

// M activation rows times a group's eight weight rows (held: [blocks]): out[m * kLaneRows + i].
template <Kind kKind, int M>
void lanes_tile(const LaneBlock<kKind>* held, const Row* x, int64_t blocks, float* out) {
  constexpr int kS = kSumSteps<kKind>;
  vec::F acc[M];
  for (int m = 0; m < M; ++m) acc[m] = vec::fzero();
  for (int64_t k = 0; k < blocks; ++k) {
    const LaneBlock<kKind>& L = held[k];
    vec::I isum[M];
    for (int m = 0; m < M; ++m) isum[m] = vec::zero();
    for (int g = 0; g < kSumGroups<kKind>; ++g) {
      vec::I s16[M];
      for (int m = 0; m < M; ++m) s16[m] = vec::zero();
      for (int t = g * kS; t < (g + 1) * kS; ++t) {
        const vec::I w = L.w[t];
        for (int m = 0; m < M; ++m) s16[m] = vec::add16(s16[m], vec::maddubs(w, vec::broadcast4(x[m].q + 256 * k + 4 * t)));
      }
      for (int m = 0; m < M; ++m) isum[m] = vec::dot16(isum[m], s16[m], L.scale[g]);
    }
    const vec::F d = vec::fload(L.d);
    for (int m = 0; m < M; ++m) {
      vec::I side = vec::zero();
      for (int p = 0; p < 8; ++p) side = vec::dot16(side, L.side[p], vec::broadcast4(x[m].sums + 16 * k + 2 * p));
      const vec::F dx = vec::splat(x[m].d[k]);
      if constexpr (krows::offset_bits(kKind) > 0) {
        acc[m] = vec::fma(vec::to_float(vec::sub(isum[m], vec::shl<krows::offset_bits(kKind)>(side))), vec::fmul(d, dx), acc[m]);
      } else {
        acc[m] = vec::fma(vec::to_float(isum[m]), vec::fmul(d, dx), acc[m]);
        acc[m] = vec::fma(vec::to_float(side), vec::fmul(vec::fload(L.dmin), vec::splat(-x[m].d[k])), acc[m]);
      }
    }
  }
  for (int m = 0; m < M; ++m) vec::fstore(out + m * kLaneRows, acc[m]);
}

template <Kind kKind>
void lanes_gemm(const QuantMatmulArgs& a, const Row* x) {
  const int64_t blocks = a.n_in / 256, groups = (a.n_out + kLaneRows - 1) / kLaneRows;
  constexpr int kM = 4;  // activation rows a tile: 3 accumulators each, 12 of the 16 registers
  thread_local std::vector<LaneBlock<kKind>> held;
#pragma omp parallel for schedule(static)
  for (int64_t grp = 0; grp < groups; ++grp) {
    const int64_t j0 = grp * kLaneRows;
    const int rows = static_cast<int>(std::min<int64_t>(kLaneRows, a.n_out - j0));
    held.resize(static_cast<size_t>(blocks));
    for (int64_t k = 0; k < blocks; ++k) hold_lanes<kKind>(a.w + j0 * a.row_bytes, a.row_bytes, rows, k, held[static_cast<size_t>(k)]);
    for (int64_t r0 = 0; r0 < a.m; r0 += kM) {
      float out[kM * kLaneRows];
      const int mr = static_cast<int>(std::min<int64_t>(kM, a.m - r0));
      switch (mr) {
        case 1: lanes_tile<kKind, 1>(held.data(), x + r0, blocks, out); break;
        case 2: lanes_tile<kKind, 2>(held.data(), x + r0, blocks, out); break;
        case 3: lanes_tile<kKind, 3>(held.data(), x + r0, blocks, out); break;
        default: lanes_tile<kKind, kM>(held.data(), x + r0, blocks, out); break;
      }
      for (int m = 0; m < mr; ++m) {
        float* y = a.y + (r0 + m) * a.ldy + j0;
        for (int i = 0; i < rows; ++i) y[i] = a.accumulate ? y[i] + out[m * kLaneRows + i] : out[m * kLaneRows + i];
      }
    }
  }
}

}  // namespace

namespace {
// a.x's rows rounded into a.scratch (in parallel from `parallel_from` rows), then kernel(a, x).
template <class Kernel>
void with_rounded_rows(const QuantMatmulArgs& a, int64_t parallel_from, Kernel&& kernel) {
  Row x[kSmallBatchRows];
  const int64_t stride = row_stride(a.n_in);
#pragma omp parallel for schedule(static) if (a.m >= parallel_from)
  for (int64_t r = 0; r < a.m; ++r) x[r] = round_row(a.x + r * a.n_in, a.n_in, static_cast<uint8_t*>(a.scratch) + r * stride);
  kernel(a, x);
}
}  // namespace

template <krows::Kind K>
void k_fused(const QuantMatmulArgs& a) {
  with_rounded_rows(a, kFusedMaxRows + 1, fused<K>);
}
template <krows::Kind K>
void k_gemm(const QuantMatmulArgs& a) {
  with_rounded_rows(a, 0, held_gemm<K>);
}
template <krows::Kind K>
void k_lanes(const QuantMatmulArgs& a) {
  with_rounded_rows(a, 0, lanes_gemm<K>);
}
#define KVSERVE_INSTANTIATE(K)                                      \
  template void k_fused<krows::Kind::K>(const QuantMatmulArgs&); \
  template void k_gemm<krows::Kind::K>(const QuantMatmulArgs&);  \
  template void k_lanes<krows::Kind::K>(const QuantMatmulArgs&);
KVSERVE_INT8_K_KINDS(KVSERVE_INSTANTIATE)
#undef KVSERVE_INSTANTIATE
#endif  // AVX-512 levels: int8/k_fused.cc; levels without the vector layer: the float path always

}  // namespace kvserve::KVSERVE_KERNEL_NS

KVSERVE_KERNEL_TARGET_END
