// The 32-value block types on the integer path (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, MXFP4) as their
// kernels are instantiated for them: facts only, no vector code, so the level's matmul table
// (kernels/matmul_types.cc) can name each type's kernels at every level.
#pragma once

#include <cstdint>
#include <type_traits>

#include "codecs/quant_blocks.h"

namespace kvserve::int8_types {

// A type's block, the offset added to its levels to make them unsigned (vec::levels), whether
// the block has a minimum after its scale (value = d·q + m; then the offset is 0), the bits a
// packed panel keeps of each level (8, 5 or 4), and for the types whose 4-bit codes index a
// table of 16 levels (IQ4_NL, MXFP4) that table: their codes are kept as they are and looked up
// as they are read (`lookup`).
template <typename B, int32_t kOffset, bool kHasMin, int kBits, const int8_t* kTable = nullptr>
struct Type32 {
  using Block = B;
  static constexpr int32_t offset = kOffset;
  static constexpr bool has_min = kHasMin;
  static constexpr int bits = kBits;
  static constexpr bool lookup = kTable != nullptr;
  static constexpr const int8_t* table = kTable;
  // Levels above 127 (vec::dot's kWide).
  static constexpr bool wide = kOffset >= 128;
  // The block scale is an E8M0 power of two (MXFP4's `e`), not an F16 `d`.
  static constexpr bool e8m0_scale = std::is_same_v<B, quant::BlockMXFP4>;
};
using TypeQ8_0 = Type32<quant::BlockQ8_0, 128, false, 8>;
using TypeQ4_0 = Type32<quant::BlockQ4_0, 8, false, 4>;
using TypeQ5_0 = Type32<quant::BlockQ5_0, 16, false, 5>;
using TypeQ4_1 = Type32<quant::BlockQ4_1, 0, true, 4>;
using TypeQ5_1 = Type32<quant::BlockQ5_1, 0, true, 5>;
using TypeIQ4_NL = Type32<quant::BlockIQ4_NL, 128, false, 4, quant::kIq4nlLevels>;
// MXFP4's doubled levels are within ±12: offset 16 keeps them below 128 (the narrow dot on AVX2
// without VNNI), and its E8M0 scale is the half that undoes the doubling.
using TypeMXFP4 = Type32<quant::BlockMXFP4, 16, false, 4, quant::kMxfp4Levels>;

}  // namespace kvserve::int8_types

// X(T) for each type above: the kernel files instantiate their templates with it, and the
// level's table points each type's row at them. The packed panels hold F16 scales, so MXFP4
// (E8M0 scales, and expert matrices held as mapped) has the fused kernel and the GEMM only.
#define KVSERVE_INT8_TYPES32_PACKED(X) X(TypeQ8_0) X(TypeQ4_0) X(TypeQ5_0) X(TypeQ4_1) X(TypeQ5_1) X(TypeIQ4_NL)
#define KVSERVE_INT8_TYPES32(X) KVSERVE_INT8_TYPES32_PACKED(X) X(TypeMXFP4)
