// The fused integer kernel of the 32-value block types for one to four activation rows (and,
// at levels without a panel GEMM, for every height): the weights read straight from the file's
// layout, each unpacked once for all rows, nothing staged in memory between reading a weight and
// multiplying it. Written on the vector layer (kernels/vec/vec_int8.h), so it runs at every
// level that has one: AVX-512 with VNNI, AVX2 with or without AVX-VNNI.
#include "kernels/int8/int8_matmul.h"

#include "kernels/intrinsics.h"

#include <bit>
#include <cstring>

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
#endif  // levels without the vector layer: the float path always

}  // namespace kvserve::KVSERVE_KERNEL_NS

KVSERVE_VNNI_TARGET_END
KVSERVE_KERNEL_TARGET_END
