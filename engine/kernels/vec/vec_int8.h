// The vector layer under the integer kernels: what a kernel needs of a CPU's vectors, one header
// per instruction set, so that a kernel written on it runs at every level that has a header and
// a new level is a header plus a table entry (docs/architecture.md). Included inside a kernel
// level's target region; KVSERVE_HAS_VEC_INT8 (kernels/kernel_level.h) says whether this
// level has one.
//
// Each header defines, in namespace kvserve::<level>::vec:
//   kBytes, kBlocks        bytes of an integer vector; 32-value blocks it holds (kBytes / 32)
//   I, F                   an integer vector (kBytes bytes) and a float vector (kBytes / 4 lanes)
//   load, zero, fzero      I from memory (unaligned), all-zero I and F
//   dot<kWide>(acc, u, s)  acc + the sum of each 4 products u·s into its int32 lane (u unsigned
//                          bytes, s signed ones in [-127, 127]; kWide: u may exceed 127), exactly
//   sub, shl<k>            int32 lanes: a - b, a << k
//   to_float, fma, sum     int32 lanes to float; a·b + c; the sum of F's lanes
//   Factors, scales, mins  kBlocks consecutive blocks' F16 scales (or minimums) as floats
//   spread(w, xd)          w[i]·xd[i], on the 8 lanes of block i
//   round_block32(x, q)    x [32] rounded as round_activations rounds it into q [32]; its scale
//   block_lanes(q, lanes)  q [32]'s sums of each 4 levels into lanes [8]; returns their sum
//   levels(b)              kBlocks blocks of a 32-value type (int8/block32.h) as unsigned levels
//                          in value order: the level plus the type's offset, or the level alone
//                          for the types with a minimum
#pragma once

#if KVSERVE_HAS_AVX512
#include "kernels/vec/int8_avx512.h"
#elif KVSERVE_HAS_VEC_INT8
#include "kernels/vec/int8_avx2.h"
#endif
