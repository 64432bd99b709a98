// Which kernel level a kernel source is being compiled for. engine/CMakeLists.txt builds each
// kernel source once per level with KVSERVE_KERNEL_LEVEL_ID set; the source puts its code in
// namespace kvserve::KVSERVE_KERNEL_NS between KVSERVE_KERNEL_TARGET_BEGIN and _END, after
// every standard header, so that only our kernels are compiled for the level's instructions
// (a standard template compiled for AVX-512 in one file and picked by the linker for all would
// break the binary on older CPUs). GCC's target pragma does not define __AVX512F__ and the
// like, so the kernels test KVSERVE_HAS_* instead.
#pragma once

#if !defined(KVSERVE_KERNEL_LEVEL_ID)
// Not a kernel build: the declarations in the kernel headers are not visible.
#elif KVSERVE_KERNEL_LEVEL_ID == 0
#define KVSERVE_KERNEL_NS scalar
#define KVSERVE_KERNEL_LEVEL kScalar
#define KVSERVE_HAS_F16C 0
#define KVSERVE_HAS_AVX512 0
#define KVSERVE_HAS_AVX_VNNI 0
#define KVSERVE_HAS_VEC_INT8 0  // kernels/vec/vec_int8.h
#define KVSERVE_KERNEL_TARGET_BEGIN
#define KVSERVE_KERNEL_TARGET_END
#define KVSERVE_VNNI_TARGET_BEGIN
#define KVSERVE_VNNI_TARGET_END
#elif KVSERVE_KERNEL_LEVEL_ID == 1
#define KVSERVE_KERNEL_NS avx2
#define KVSERVE_KERNEL_LEVEL kAvx2
#define KVSERVE_HAS_F16C 1
#define KVSERVE_HAS_AVX512 0
#define KVSERVE_HAS_AVX_VNNI 0
#define KVSERVE_HAS_VEC_INT8 1  // kernels/vec/vec_int8.h
#define KVSERVE_KERNEL_TARGET_BEGIN \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt\")")
#define KVSERVE_KERNEL_TARGET_END _Pragma("GCC pop_options")
#define KVSERVE_VNNI_TARGET_BEGIN
#define KVSERVE_VNNI_TARGET_END
#elif KVSERVE_KERNEL_LEVEL_ID == 2
#define KVSERVE_KERNEL_NS avx512
#define KVSERVE_KERNEL_LEVEL kAvx512
#define KVSERVE_HAS_F16C 1
#define KVSERVE_HAS_AVX512 1  // F, BW, CD, DQ, VL
#define KVSERVE_HAS_AVX_VNNI 0
#define KVSERVE_HAS_VEC_INT8 1  // kernels/vec/vec_int8.h
#define KVSERVE_KERNEL_TARGET_BEGIN \
  _Pragma("GCC push_options")      \
      _Pragma("GCC target(\"avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,avx512f,avx512bw,avx512cd,avx512dq,avx512vl\")")
#define KVSERVE_KERNEL_TARGET_END _Pragma("GCC pop_options")
// Inside the level's region, AVX-512 VNNI for the integer kernels, which check the CPU for it
// at run time (kernels/quant_dot_int8.cc).
#define KVSERVE_VNNI_TARGET_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"avx512vnni\")")
#define KVSERVE_VNNI_TARGET_END _Pragma("GCC pop_options")
#elif KVSERVE_KERNEL_LEVEL_ID == 3
// AVX2 with the 256-bit VNNI instructions (Alder Lake and later client parts, Sapphire Rapids,
// Zen 5): the AVX2 level's kernels with vpdpbusd in place of vpmaddubsw + vpmaddwd.
#define KVSERVE_KERNEL_NS avx2_vnni
#define KVSERVE_KERNEL_LEVEL kAvx2Vnni
#define KVSERVE_HAS_F16C 1
#define KVSERVE_HAS_AVX512 0
#define KVSERVE_HAS_AVX_VNNI 1
#define KVSERVE_HAS_VEC_INT8 1  // kernels/vec/vec_int8.h
#define KVSERVE_KERNEL_TARGET_BEGIN \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,avxvnni\")")
#define KVSERVE_KERNEL_TARGET_END _Pragma("GCC pop_options")
#define KVSERVE_VNNI_TARGET_BEGIN
#define KVSERVE_VNNI_TARGET_END
#else
#error "unknown KVSERVE_KERNEL_LEVEL_ID"
#endif
