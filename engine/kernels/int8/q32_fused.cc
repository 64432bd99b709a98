// The fused integer kernel of the 32-value block types for one to four activation rows: the
// weights read straight from the file's layout, each unpacked once for all rows, nothing staged
// in memory between reading a weight and multiplying it; and, at the levels without AVX-512,
// the batch kernel (q32_gemm) for five rows and more. Written on the vector layer (kernels/vec/vec_int8.h), so it runs at every
// level that has one: AVX-512 with VNNI, AVX2 with or without AVX-VNNI.
#include "kernels/int8/int8_matmul.h"

#include "kernels/intrinsics.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "codecs/tensor_types.h"
#include "kernels/small_batch_matmul.h"

KVSERVE_KERNEL_TARGET_BEGIN
#include "codecs/quant_decode.h"

KVSERVE_VNNI_TARGET_BEGIN
#include "kernels/vec/vec_int8.h"
#include "kernels/int8/block32.h"
#include "kernels/int8/fused_rows.h"

namespace kvserve::KVSERVE_KERNEL_NS {

#if KVSERVE_HAS_VEC_INT8
namespace {

using int8::Ahead;
using int8::Row32;

// R rows of W (row_bytes apart) times M rounded rows x[0..M): out[m * kFusedGroupRows + g]. A step takes
// vec::kBlocks blocks of each row: the integer dot of each 4 levels, less the levels' offset
// times the activations' lane sum, to float, times the product of the two block scales. For
// the types with a minimum (Q4_1, Q5_1) there is no offset, and each block's minimum m adds m
// times the activations' sum. Each weight is unpacked once for all M rows.
template <class T, int M, int R>
void dot_blocks(const uint8_t* w, int64_t row_bytes, const Row32* x, int64_t n_in, const Ahead& ahead, float* out) {
  using Block = typename T::Block;
  constexpr int kShift = std::countr_zero(static_cast<uint32_t>(T::offset));  // offset = 2^kShift
  constexpr int kB = vec::kBlocks;
  vec::F acc[M][R];
  for (int m = 0; m < M; ++m)
    for (int g = 0; g < R; ++g) acc[m][g] = vec::fzero();
  for (int64_t c = 0; c < n_in / (32 * kB); ++c) {
    ahead.at(c);
    for (int g = 0; g < R; ++g) {
      const Block* b = reinterpret_cast<const Block*>(w + g * row_bytes) + kB * c;
      const vec::I q = vec::levels(b);
      const vec::Factors ws = vec::scales(b);
      for (int m = 0; m < M; ++m) {
        const vec::I lanes = vec::load(x[m].lanes + 8 * kB * c);
        vec::I dot = vec::dot<T::wide>(vec::zero(), q, vec::load(x[m].q + 32 * kB * c));
        if constexpr (!T::has_min) dot = vec::sub(dot, vec::shl<kShift>(lanes));  // offset x lane sum
        acc[m][g] = vec::fma(vec::to_float(dot), vec::spread(ws, x[m].d + kB * c), acc[m][g]);
        if constexpr (T::has_min)
          acc[m][g] = vec::fma(vec::to_float(lanes), vec::spread(vec::mins(b), x[m].d + kB * c), acc[m][g]);
      }
    }
  }
  for (int m = 0; m < M; ++m)
    for (int g = 0; g < R; ++g) out[m * int8::kFusedGroupRows + g] = vec::sum(acc[m][g]);
}
constexpr int kRows = int8::kFusedGroupRows, kActivationRows = int8::kFusedPair;

using DotFn = void (*)(const uint8_t*, int64_t, const Row32*, int64_t, const Ahead&, float*);
struct TypeDots {
  DotFn fns[kActivationRows][kRows];  // fns[m - 1][r - 1] takes m activation rows and r weight rows
};
template <class T>
constexpr TypeDots kDots{{{dot_blocks<T, 1, 1>, dot_blocks<T, 1, 2>, dot_blocks<T, 1, 3>, dot_blocks<T, 1, 4>},
                          {dot_blocks<T, 2, 1>, dot_blocks<T, 2, 2>, dot_blocks<T, 2, 3>, dot_blocks<T, 2, 4>}}};

#if !KVSERVE_HAS_AVX512
// Five rows and more at the levels without AVX-512 (whose panel GEMM is int8/q32_gemm.cc): each
// group of kRows weight rows' blocks unpacked once into the thread's buffer, as signed levels
// and float factors, then every activation row against them two at a time; the fused kernel
// unpacks them again for every pair. Signed levels need no offset taken off, and Q8_0's and
// IQ4_NL's need no split into nibbles (vec::signed_dot).
struct alignas(64) Held32 {
  vec::I s;           // signed levels, value order
  float d = 0, m = 0;  // scale; minimum (Q4_1, Q5_1)
};

template <class T>
inline void hold32(const typename T::Block* b, Held32& out) {
  out.s = vec::sub8(vec::levels(b), T::offset);
  out.d = vec::scales(b);
  if constexpr (T::has_min) out.m = vec::mins(b);
}

// M activation rows times a group's kRows weight rows (held: [blocks][kRows]): out[m * kRows + g].
// Each lane's integer sum is dot_blocks' (the offset taken off before, not after), and each
// output takes its float operations in its order, so a row's product is the same in any batch.
template <class T, int M>
void held_tile32(const Held32* held, const Row32* x, int64_t blocks, float* out) {
  vec::F acc[M][kRows];
  for (int m = 0; m < M; ++m)
    for (int g = 0; g < kRows; ++g) acc[m][g] = vec::fzero();
  for (int64_t c = 0; c < blocks; ++c) {
    const Held32* h = held + c * kRows;
    vec::I xq[M];
    for (int m = 0; m < M; ++m) xq[m] = vec::load(x[m].q + 32 * c);
    for (int g = 0; g < kRows; ++g)
      for (int m = 0; m < M; ++m) {
        const vec::I dot = vec::signed_dot(vec::zero(), h[g].s, xq[m]);
        acc[m][g] = vec::fma(vec::to_float(dot), vec::splat(h[g].d * x[m].d[c]), acc[m][g]);
        if constexpr (T::has_min)
          acc[m][g] = vec::fma(vec::to_float(vec::load(x[m].lanes + 8 * c)), vec::splat(h[g].m * x[m].d[c]), acc[m][g]);
      }
  }
  for (int m = 0; m < M; ++m)
    for (int g = 0; g < kRows; ++g) out[m * kRows + g] = vec::sum(acc[m][g]);
}

template <class T>
void held_gemm32(const QuantMatmulArgs& a, const Row32* x) {
  using Block = typename T::Block;
  const int64_t blocks = a.n_in / 32;
  thread_local std::vector<Held32> held;  // the thread's group
  int8::held_rows(
      a,
      [&](int64_t j0, int rows) {
        held.resize(static_cast<size_t>(blocks * kRows));
        for (int g = 0; g < kRows; ++g) {
          const Block* b = reinterpret_cast<const Block*>(a.w + (j0 + g) * a.row_bytes);
          for (int64_t c = 0; c < blocks; ++c) {
            Held32& h = held[static_cast<size_t>(c * kRows + g)];
            if (g < rows) {
              hold32<T>(b + c, h);
            } else {
              h.s = vec::zero();
              h.d = h.m = 0.0f;
            }
          }
        }
      },
      [&](int64_t r0, int mr, float* out) {
        if (mr == 2)
          held_tile32<T, 2>(held.data(), x + r0, blocks, out);
        else
          held_tile32<T, 1>(held.data(), x + r0, blocks, out);
      });
}
#endif

}  // namespace

template <class T>
void q32_fused(const QuantMatmulArgs& a) {
  const TypeDots& dots = kDots<T>;
  Row32 x[kSmallBatchRows];
  const int64_t stride = int8::row32_bytes(a.n_in);
#pragma omp parallel for schedule(static) if (a.m > kFusedMaxRows)
  for (int64_t r = 0; r < a.m; ++r)
    x[r] = int8::round_row32(a.x + r * a.n_in, a.n_in, static_cast<uint8_t*>(a.scratch) + r * stride);
  int8::fused_rows(a, a.n_in / (32 * vec::kBlocks), [&](const uint8_t* w, int rows, int64_t r0, int mr, const Ahead& ahead, float* out) {
    dots.fns[mr - 1][rows - 1](w, a.row_bytes, x + r0, a.n_in, ahead, out);
  });
}

#define KVSERVE_INSTANTIATE(T) template void q32_fused<int8_types::T>(const QuantMatmulArgs&);
KVSERVE_INT8_TYPES32(KVSERVE_INSTANTIATE)
#undef KVSERVE_INSTANTIATE

#if !KVSERVE_HAS_AVX512
template <class T>
void q32_gemm(const QuantMatmulArgs& a) {
  Row32 x[kSmallBatchRows];
  const int64_t stride = int8::row32_bytes(a.n_in);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < a.m; ++r)
    x[r] = int8::round_row32(a.x + r * a.n_in, a.n_in, static_cast<uint8_t*>(a.scratch) + r * stride);
  held_gemm32<T>(a, x);
}
#define KVSERVE_INSTANTIATE(T) template void q32_gemm<int8_types::T>(const QuantMatmulArgs&);
KVSERVE_INT8_TYPES32(KVSERVE_INSTANTIATE)
#undef KVSERVE_INSTANTIATE
#endif
#endif  // levels without the vector layer: the float path always

}  // namespace kvserve::KVSERVE_KERNEL_NS

KVSERVE_VNNI_TARGET_END
KVSERVE_KERNEL_TARGET_END
