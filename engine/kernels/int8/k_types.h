// The K types (Q2_K..Q6_K) as the integer kernels of every level see them: which one, its block
// size, how its scales are laid out and the offset its levels are stored with. Included inside
// a kernel level's target region or anywhere (no vector code).
#pragma once

#include <cstdint>

#include "codecs/quant_blocks.h"

namespace kvserve::KVSERVE_KERNEL_NS::krows {

enum class Kind { kQ4K, kQ5K, kQ6K, kQ3K, kQ2K };

template <Kind kKind>
constexpr int64_t kBlockBytes = kKind == Kind::kQ6K   ? sizeof(quant::BlockQ6_K)
                                : kKind == Kind::kQ5K ? sizeof(quant::BlockQ5_K)
                                : kKind == Kind::kQ3K ? sizeof(quant::BlockQ3_K)
                                : kKind == Kind::kQ2K ? sizeof(quant::BlockQ2_K)
                                                      : sizeof(quant::BlockQ4_K);
// Q2_K, Q3_K and Q6_K scale each 16 values; Q4_K and Q5_K each 32 (the AVX-512 kernels keep
// their activations' sub-blocks interleaved: int8/k_rows_avx512.h's kK4Order).
constexpr bool sixteen_value_scales(Kind k) { return k == Kind::kQ6K || k == Kind::kQ3K || k == Kind::kQ2K; }
// Q6_K and Q3_K: signed scales, levels stored offset by 2^offset_bits (32 and 4), taken off
// through the activations' sums of 16; the others: unsigned scales and a minimum per sub-block.
constexpr int offset_bits(Kind k) { return k == Kind::kQ6K ? 5 : k == Kind::kQ3K ? 2 : 0; }

}  // namespace kvserve::KVSERVE_KERNEL_NS::krows

// X(K) for each kind: the kernel files instantiate their templates with it, and the level's
// table (kernels/matmul_types.cc) points each type's row at them.
#define KVSERVE_INT8_K_KINDS(X) X(kQ4K) X(kQ5K) X(kQ6K) X(kQ3K) X(kQ2K)
